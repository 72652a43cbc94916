"""Put a virtual bus device on a byte stream: a pseudo-terminal (a real serial path) or a loopback TCP socket.

One loop for both: wait for bytes or for the next reply's release time, feed the device, write what is due.
The loop stops when ``stop`` is set (SIGINT/SIGTERM in ``hil sim``).
"""
from __future__ import annotations

import os
import select
import socket
import threading
import tty
from typing import Callable

from .bus_device import VirtualBusDevice
from .pty_link import pty_link

SPIN_S = 0.0012  # below this, wait by spinning: a select() wakes up too late for emulated wire timing
STEPS_PER_LOOK = 1  # physics steps of a paced world between two looks at the line: a reply waits for one at most
LINE_IDLE_S = 0.005  # a partial instruction followed by this much silence is dropped (hosts write whole frames)


class PtyEndpoint:
    """A pseudo-terminal pair: the device owns the master, clients open :attr:`path` like any serial port."""

    def __init__(self) -> None:
        self.master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)  # no echo, no line discipline: bytes pass unchanged
        tty.setraw(self.master_fd)
        self.path = os.ttyname(self._slave_fd)
        os.set_blocking(self.master_fd, False)

    def close(self) -> None:
        for fd in (self.master_fd, self._slave_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def serve_fd(device: VirtualBusDevice, fd: int, stop: threading.Event,
             on_closed: Callable[[], bool] | None = None) -> None:
    """Serve ``device`` on a non-blocking file descriptor until ``stop`` is set.

    ``on_closed`` is called when the peer closes (EOF or EIO); it returns True to keep waiting (a pty whose
    client went away can be reopened) or False to end the loop.
    """
    clock = device.clock
    last_rx = clock()
    while not stop.is_set():
        release = device.next_release_s()
        timeout = 0.1 if release is None else max(0.0, release - clock())
        if device.tick_period_s:  # a world paced to the clock keeps moving while the host is silent, one step
            behind = device.tick(max_steps=STEPS_PER_LOOK)  # at a time between looks at the line
            timeout = 0.0 if behind else min(timeout, device.tick_period_s)
        if device.partial_bytes:
            timeout = min(timeout, max(0.0, last_rx + LINE_IDLE_S - clock()) + SPIN_S)
        if release is not None and timeout < SPIN_S:
            readable = select.select([fd], [], [], 0)[0]
        else:
            readable = select.select([fd], [], [], min(0.1, max(0.0, timeout - SPIN_S)))[0]
        if not readable and device.partial_bytes and clock() - last_rx >= LINE_IDLE_S:
            device.line_idle()  # the rest of a (corrupted) instruction is not coming
        if readable:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                data = None
            except OSError:  # EIO on a pty master whose slave has no reader
                data = b""
            if data == b"":
                if on_closed is None or not on_closed():
                    return
                stop.wait(0.01)
                continue
            if data:
                last_rx = clock()
                device.receive(data, max_steps=STEPS_PER_LOOK)
        _flush(device, fd, clock)


def _flush(device: VirtualBusDevice, fd: int, clock: Callable[[], float]) -> None:
    out = device.take_output(clock())
    while out:
        try:
            written = os.write(fd, out)
        except BlockingIOError:
            select.select([], [fd], [], 0.01)
            continue
        out = out[written:]


def serve_pty(device: VirtualBusDevice, stop: threading.Event, ready: Callable[[str], None],
              link: str | None = None) -> None:
    """Serve on a new pty; ``link``: a symlink to it kept while serving (firmware_sim/pty_link.py)."""
    endpoint = PtyEndpoint()
    try:
        with pty_link(link, endpoint.path):
            ready(endpoint.path)
            serve_fd(device, endpoint.master_fd, stop, on_closed=lambda: True)
    finally:
        endpoint.close()


def serve_serial(device: VirtualBusDevice, stop: threading.Event, ready: Callable[[str], None], path: str,
                 baud: int) -> None:
    """Serve on a physical serial port (``hil sim --serial /dev/ttyUSB1 --baud 1000000``): the robot's own computer
    drives the virtual body through its real adapter. pyserial opens and configures the port (raw 8N1, exclusive);
    the wire's own timing applies, so no timing is emulated on top."""
    import serial

    with serial.Serial(path, baudrate=baud, timeout=0, exclusive=True) as port:
        os.set_blocking(port.fileno(), False)
        ready(path)
        serve_fd(device, port.fileno(), stop, on_closed=lambda: True)


def serve_tcp(device: VirtualBusDevice, stop: threading.Event, ready: Callable[[str], None], port: int = 0,
              host: str = "127.0.0.1") -> None:
    """Serve one client at a time on TCP (loopback unless ``host`` says otherwise)."""
    with socket.create_server((host, port)) as server:
        server.settimeout(0.1)
        ready(f"socket://{host}:{server.getsockname()[1]}")
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.setblocking(False)
                serve_fd(device, conn.fileno(), stop)
