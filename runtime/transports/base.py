"""What every bus transport offers the host controller: bytes out, bytes in with a timeout, nothing more."""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from select import select as wall_select  # the original: the clock patch's select must not reach the bus
from time import perf_counter as wall_clock  # wall time even under runtime.clock.patch


class TransportError(OSError):
    """The transport itself failed (port gone, connection closed), or its URL is wrong.

    Raised as ``TransportError(errno, message)`` (errno 0 when there is no system error); it reads as the message
    alone, without OSError's ``[Errno N]`` prefix (the message already says what the system said)."""

    def __str__(self) -> str:
        return self.strerror if isinstance(self.strerror, str) else super().__str__()


PEER_PROCESS_LATENCY_S = 0.2  # how late a process on the other end of a pty or a socket may answer (see below)


class Transport(ABC):
    url: str = ""
    baud: int | None = None  # for timeout estimates; None when there is no wire (in-process)
    # Added to the host's reply timeouts. A part on a wire answers within its return delay, so 0 here and the
    # host's own timeout (25 ms) covers the adapter; a pty or a TCP socket has a *process* on the other end (hil
    # sim, a serial-to-network server), which answers when the OS schedules it: on a loaded machine that is tens
    # of milliseconds (measured: p99 24 ms for an idle `hil sim --pty` on 2 shared cores at load 6). A timeout
    # costs nothing when the reply comes, so a process peer gets PEER_PROCESS_LATENCY_S more before a silence.
    peer_latency_s: float = 0.0

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def read(self, max_bytes: int, timeout_s: float) -> bytes:
        """Wait at most ``timeout_s`` for bytes; return those available (up to ``max_bytes``), b"" on timeout."""

    def discard_input(self) -> None:
        """Drop whatever has been received and not read (stale replies after a timeout)."""

    @property
    def idle(self) -> bool:
        """True when the transport knows nothing more will arrive until the next write (in-process only)."""
        return False

    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FdTransport(Transport):
    """Byte I/O straight on a file descriptor with select(): no per-call reconfiguration, no extra copies.

    pyserial opens and configures the port; the hot path then costs one select and one read per chunk.
    """

    def __init__(self, fd: int, url: str):
        self._fd = fd
        self.url = url
        os.set_blocking(fd, False)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except BlockingIOError:
                wall_select([], [self._fd], [], 0.05)
                continue
            except OSError as exc:
                raise TransportError(exc.errno, f"{self.url}: write failed: {exc.strerror}") from None
            view = view[n:]

    def read(self, max_bytes: int, timeout_s: float) -> bytes:
        fd = self._fd
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise TransportError(exc.errno, f"{self.url}: read failed: {exc.strerror}") from None
        deadline = wall_clock() + timeout_s
        while True:
            remaining = deadline - wall_clock()
            if remaining <= 0 or not wall_select([fd], [], [], remaining)[0]:
                return b""
            try:
                data = os.read(fd, max_bytes)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise TransportError(exc.errno, f"{self.url}: read failed: {exc.strerror}") from None
            if not data:
                raise TransportError(0, f"{self.url}: the other end closed the connection")
            return data

    def discard_input(self) -> None:
        while wall_select([self._fd], [], [], 0)[0]:
            try:
                if not os.read(self._fd, 65536):
                    return
            except (BlockingIOError, OSError):
                return
