"""The native program's participant on the lockstep clock: a thread in hil relaying the time shim's requests.

The shim (hiltime.c) sends ``hello``, ``sleep t`` and ``commit t`` over an inherited SOCK_SEQPACKET socket
(runtime/native/protocol.py); this relay turns each sleep into ``clock.sleep_until(t)`` of an ordinary
:class:`runtime.clock.Clock` participant (in-process world or a remote clock endpoint alike) and answers with the
time reached. Before any sleep it lets the buses it serves settle (``quiet``): every byte the program wrote is
executed and every reply written before simulated time moves, so a bus transaction takes no simulated time. When a
thread of the program waits on descriptors, the relay answers ``quiet`` and lets the shim look at them before it
commits. Everything the socket brings is validated: a bad datagram is answered with an error and dropped; an
error of the clock (stall, vanished master) goes back to the program, which prints it and exits; nothing hangs.
"""
from __future__ import annotations

import logging
import select
import socket
import threading
from typing import Callable

from ..clock.base import Clock, ClockError
from . import protocol as proto

log = logging.getLogger(__name__)
END_TOLERANCE_S = 1e-9


class ClockRelay:
    """Relay one native process's clock requests to ``clock`` until the socket closes or :meth:`close`.

    ``quiet()`` is called before each sleep (the served buses settle), ``after_wake()`` after each wake (replies
    held back by emulated wire timing go out). With ``deadline_s`` a sleep past it takes the clock to the
    deadline and is not answered: :attr:`deadline_reached` is set and the launcher stops the program.
    """

    def __init__(self, sock: socket.socket, clock: Clock, program: str, *, quiet: Callable[[], None] | None = None,
                 after_wake: Callable[[], None] | None = None, deadline_s: float | None = None):
        self.sock, self.clock, self.program = sock, clock, program
        self.quiet, self.after_wake, self.deadline_s = quiet, after_wake, deadline_s
        self.pid: int | None = None
        self.sleeps = 0
        self.failure = ""            # the clock's error, as sent to the program
        self.rejected: list[str] = []  # reasons of the datagrams dropped
        self.deadline_reached = threading.Event()
        self.ended = threading.Event()  # the program's end of the socket closed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"clock relay {program}", daemon=True)

    def start(self) -> ClockRelay:
        self._thread.start()
        return self

    # --- serving ---------------------------------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if not select.select([self.sock], [], [], 0.1)[0]:
                    continue
                try:
                    data = self.sock.recv(256)
                except OSError:
                    data = b""
                if not data:
                    return
                self._handle(data)
        except Exception as exc:  # noqa: BLE001 - a bug here must end the program's wait, never leave it hanging
            log.exception("clock relay for %s failed", self.program)
            self.failure = self.failure or f"the clock relay failed: {type(exc).__name__}: {exc}"
            self._reply(proto.ERROR, text=self.failure)
        finally:
            self.ended.set()

    def _handle(self, data: bytes) -> None:
        try:
            request = proto.unpack_request(data)
            self._check_pid(request)
        except proto.ProtocolError as exc:
            self.rejected.append(str(exc))
            log.warning("clock relay for %s: dropped a request: %s", self.program, exc)
            self._reply(proto.ERROR, text=f"bad request: {exc}")
            return
        if request.op == proto.OP_HELLO:
            self._reply(proto.WELCOME, proto.to_ns(self.clock.now()))
            return
        if request.op == proto.OP_SLEEP and self.quiet is not None:
            self.quiet()
        if request.op == proto.OP_SLEEP and request.flags & proto.FLAG_FD_WAITERS:
            self._reply(proto.QUIET, proto.to_ns(self.clock.now()))
            return
        self._sleep(proto.to_s(request.t_ns))

    def _check_pid(self, request: proto.Request) -> None:
        """One process is the participant: the first hello names it (an exec keeps the pid and says hello again)."""
        if self.pid is None and request.op == proto.OP_HELLO:
            self.pid = request.pid
        elif self.pid is None:
            raise proto.ProtocolError(f"{request.name} before hello")
        elif request.pid != self.pid:
            raise proto.ProtocolError(f"{request.name} from pid {request.pid}, but the participant is pid {self.pid}")

    def _sleep(self, t_s: float) -> None:
        try:
            if self.deadline_s is not None and t_s > self.deadline_s + END_TOLERANCE_S:
                self.clock.sleep_until(self.deadline_s)
                self.deadline_reached.set()  # unanswered: the program is stopped at the deadline
                return
            now = self.clock.sleep_until(t_s)
        except ClockError as exc:
            self.failure = str(exc)
            self._reply(proto.ERROR, text=self.failure)
            return
        self.sleeps += 1
        if self.after_wake is not None:
            self.after_wake()
        self._reply(proto.WAKE, proto.to_ns(now), getattr(self.clock, "resets", 0))

    def _reply(self, kind: int, now_ns: int = 0, epoch: int = 0, text: str = "") -> None:
        try:
            self.sock.send(proto.pack_reply(kind, now_ns, epoch, text))
        except OSError:  # the program is gone; its exit is the launcher's news
            pass

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)
        self.sock.close()
