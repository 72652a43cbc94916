"""A virtual bus device on a pty for a lockstep participant in another process, with a known idle state.

On the simulator's clock a bus transaction takes no simulated time: the world must not step between a host's
instruction and the device's answer. A host in this process gets that for free (its calls go straight into the
device); a host in another process writes to a pty and the device reads it whenever its thread runs. So before the
clock master lets simulated time move on behalf of that host, :meth:`QuietPty.wait_quiet` waits (wall time) until
the device has read every byte the host wrote and written every reply that is due. ``hil run --native`` calls it
before each of the native program's sleeps (runtime/native/relay.py).

Replies that emulated wire timing holds back are due at a later world time; :meth:`flush_due` writes them once the
world has got there (the relay calls it after every wake).
"""
from __future__ import annotations

import os
import select
import threading
import time

from .bus_device import VirtualBusDevice
from .serve import LINE_IDLE_S, PtyEndpoint

POLL_S = 0.05


def _readable(fd: int) -> bool:
    """Bytes wait on ``fd``. A zero-timeout poll, not FIONREAD: a pty hands bytes to the other side from a kernel
    work queue, and poll waits for that hand-over to finish while FIONREAD misses bytes still in flight."""
    return bool(select.select([fd], [], [], 0)[0])


class QuietPty:
    """Serve ``device`` on a new pty (:attr:`path`) from a thread until :meth:`close`."""

    def __init__(self, device: VirtualBusDevice):
        self.device = device
        self.endpoint = PtyEndpoint()
        self.path = self.endpoint.path
        self._cond = threading.Condition()
        self._busy = False
        self._write_lock = threading.Lock()  # one writer at a time, so replies leave in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"quiet-pty {self.path}", daemon=True)
        self._thread.start()

    # --- the serving thread --------------------------------------------------------------------------------------
    def _serve(self) -> None:
        fd = self.endpoint.master_fd
        last_rx = time.monotonic()
        while not self._stop.is_set():
            readable = select.select([fd], [], [], POLL_S)[0]
            with self._cond:
                self._busy = True  # before reading: the bytes are never out of the pty and not yet in the device
            try:
                if readable:
                    data = self._read(fd)
                    if data:
                        last_rx = time.monotonic()
                        self.device.receive(data)
                elif self.device.partial_bytes and time.monotonic() - last_rx >= LINE_IDLE_S:
                    self.device.line_idle()  # a torn instruction: the line's silence is wall time, as on a wire
                self._flush()
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    @staticmethod
    def _read(fd: int) -> bytes:
        try:
            return os.read(fd, 65536)
        except (BlockingIOError, OSError):  # nothing after all, or EIO while no client has the pty open
            return b""

    def _flush(self) -> None:
        with self._write_lock:
            out = self.device.take_output(self.device.clock())
            while out and not self._stop.is_set():
                try:
                    out = out[os.write(self.endpoint.master_fd, out):]
                except BlockingIOError:  # the host does not read: wait for room
                    select.select([], [self.endpoint.master_fd], [], POLL_S)

    # --- what the clock relay asks ---------------------------------------------------------------------------------
    def quiet(self) -> bool:
        """Every byte the host wrote has been read and executed, and no reply is due but unwritten."""
        release = self.device.next_release_s()
        return (not self._busy and not _readable(self.endpoint.master_fd)
                and (release is None or release > self.device.clock()))

    def wait_quiet(self, timeout_s: float = 1.0) -> bool:
        """Block until :meth:`quiet` (True) or ``timeout_s`` of wall time passed (False: a host that writes and never
        reads can fill the pty; time then moves on rather than hang)."""
        with self._cond:
            return self._cond.wait_for(self.quiet, timeout_s)

    def flush_due(self) -> None:
        """Write the replies that have become due now that the world's time moved (emulated wire timing)."""
        self._flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.endpoint.close()
