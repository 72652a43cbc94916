"""The lockstep clock (the simulator-clock reference, DESIGN "Clocks"): the simulator is the master of time.

Every participant (controller, crowd, ...) runs, then asks to sleep until a wake time. When every participant
is asleep, the master advances simulated time to the earliest wake time (its ``advance`` callback steps the
physics on the way) and wakes whoever is due. So a trial runs as fast as the CPU allows and, for the same seed,
always the same way: nobody's wall-clock speed can change what happens in simulated time.

A participant that stays awake longer than ``stall_timeout_s`` of wall time fails the trial: everyone waiting
gets a :class:`LockstepError` naming it (never a hang). A reset (time jumping back) bumps ``epoch``, which every
wake reply carries, so participants can announce it.

:class:`LockstepCore` is the bookkeeping (no threads, no sockets). :class:`LocalParticipant` is a blocking
participant in the same process; :class:`ClockServer` / :class:`RemoteParticipant` carry the protocol over
ZeroMQ (ROUTER / REQ, msgpack envelopes: hello, sleep_until, bye -> welcome, wake, error), plain on loopback or,
given a :class:`bridge.security.Security`, with CURVE encryption and client authentication.
"""
from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from time import perf_counter as wall_clock
from typing import TYPE_CHECKING, Callable

import zmq

from .bind import bind_server, send_within
from .envelope import EnvelopeError, pack, unpack
from .realtime import Counters
from .schema import MAX_TIME_S, ClockRequest, TypedDecoder

if TYPE_CHECKING:
    from .security import Security

log = logging.getLogger(__name__)
DEFAULT_STALL_TIMEOUT_S = 10.0
REQUESTS = ("hello", "sleep_until", "bye", "status")
REPLIES = ("welcome", "wake", "error", "status")
REQUEST_DECODER = TypedDecoder({kind: ClockRequest for kind in REQUESTS})
ADVANCE_SLICE_S = 1.0  # the master advances at most this much per call, so a long sleep never holds the lock long


class LockstepError(RuntimeError):
    """The lockstep run cannot go on; the message names who stalled or what went wrong."""


@dataclass
class _Participant:
    name: str
    wake_s: float | None = None  # None while running
    running_since: float = field(default_factory=wall_clock)


class LockstepCore:
    """Who is asleep until when, and advancing time when everyone is. Not thread-safe: callers hold a lock."""

    def __init__(self, advance: Callable[[float], None], stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
                 start_s: float = 0.0):
        """``advance(t)`` brings the simulation up to ``t`` (a physics world stops at the last whole step at or
        before ``t``: the clock still reads exactly ``t``, so wake times need not be multiples of the step)."""
        self.advance, self.stall_timeout_s = advance, stall_timeout_s
        self.time_s = start_s
        self.participants: dict[str, _Participant] = {}
        self.epoch = 0
        self.failure: str | None = None
        # a viewer's pause (trial/view): while paused, time does not advance and nobody wakes; ``steps_granted``
        # advances are let through (step). Only wall time passes, so a paused trial gives the same log.
        self.paused = False
        self.steps_granted = 0

    def pause(self) -> None:
        """Hold time where it is after the current advance (everyone who posts a sleep waits)."""
        self.paused, self.steps_granted = True, 0

    def resume(self) -> None:
        self.paused, self.steps_granted = False, 0

    def step(self, advances: int = 1) -> None:
        """While paused: let ``advances`` more advances (each to the earliest wake) through, then hold again."""
        self.steps_granted += max(0, int(advances))

    def now(self) -> float:
        return self.time_s

    def join(self, name: str) -> None:
        if name in self.participants:
            raise LockstepError(f"a participant named {name!r} has already joined")
        self.participants[name] = _Participant(name)

    def leave(self, name: str) -> None:
        self.participants.pop(name, None)

    def post(self, name: str, wake_s: float) -> None:
        participant = self._get(name)
        if not isinstance(wake_s, (int, float)) or not math.isfinite(wake_s) or wake_s > MAX_TIME_S:
            raise LockstepError(f"{name!r}: cannot sleep until {wake_s!r}: a wake time is a finite number of "
                                f"seconds up to MAX_TIME_S={MAX_TIME_S:g}")
        participant.wake_s = max(float(wake_s), self.now())

    def run(self) -> list[str]:
        """If everyone sleeps, advance to the earliest wake; return the names now due (they are running again)."""
        if self.failure:
            raise LockstepError(self.failure)
        sleeping = [p for p in self.participants.values() if p.wake_s is not None]
        if not sleeping or len(sleeping) < len(self.participants):
            return []
        target = min(p.wake_s for p in sleeping)
        if self.paused and target > self.time_s:
            if not self.steps_granted:
                return []  # everyone sleeps, so nobody stalls meanwhile
            if target <= self.time_s + ADVANCE_SLICE_S:
                self.steps_granted -= 1
        if target > self.time_s + ADVANCE_SLICE_S:
            # a long sleep: one slice now, the rest on the next calls (``behind``), so whoever holds the lock
            # around run() (the bus device's, under a clock server) lets go between slices
            self.time_s += ADVANCE_SLICE_S
            self.advance(self.time_s)
            return []
        if target > self.time_s:
            self.advance(target)
            self.time_s = target
        due = [p for p in sleeping if p.wake_s <= self.time_s]
        for p in due:
            p.wake_s, p.running_since = None, wall_clock()
        return [p.name for p in due]

    @property
    def behind(self) -> bool:
        """Everyone sleeps and time has not reached the earliest wake yet: call :meth:`run` again."""
        if self.failure or not self.participants:
            return False
        wakes = [p.wake_s for p in self.participants.values()]
        if self.paused and not self.steps_granted:
            return False
        return None not in wakes and min(wakes) > self.time_s

    def check_stall(self) -> None:
        """Fail the run if someone has been awake too long while others wait for it."""
        if self.failure:
            raise LockstepError(self.failure)
        waiting = [p for p in self.participants.values() if p.wake_s is not None]
        if not waiting:
            return
        now = wall_clock()
        stalled = [p for p in self.participants.values()
                   if p.wake_s is None and now - p.running_since > self.stall_timeout_s]
        if stalled:
            names = ", ".join(repr(p.name) for p in stalled)
            self.failure = (f"lockstep: participant {names} stalled for more than {self.stall_timeout_s:g} s of wall "
                            f"time while {', '.join(repr(p.name) for p in waiting)} waited (at sim time "
                            f"{self.now():.3f} s)")
            raise LockstepError(self.failure)

    def reset(self, time_s: float = 0.0) -> None:
        """Time jumped back (the world was reset): the clock reads ``time_s`` and the next wake carries a new
        epoch, which participants announce."""
        self.time_s = time_s
        self.epoch += 1

    def _get(self, name: str) -> _Participant:
        try:
            return self.participants[name]
        except KeyError:
            raise LockstepError(f"{name!r} has not joined the lockstep clock") from None


class LocalParticipant:
    """A participant in the same process; ``sleep_until`` blocks (other local participants run in threads)."""

    def __init__(self, core: LockstepCore, lock: threading.Condition, name: str):
        self.core, self.cond, self.name = core, lock, name
        with self.cond:
            core.join(name)

    def sleep_until(self, t_s: float) -> float:
        core = self.core
        with self.cond:
            core.post(self.name, t_s)
            while True:
                due = core.run()
                if due:
                    self.cond.notify_all()
                if self.name in due or core.participants.get(self.name, _Participant("")).wake_s is None:
                    return core.now()
                if core.behind:
                    continue
                self.cond.wait(timeout=0.05)
                core.check_stall()

    def leave(self) -> None:
        with self.cond:
            self.core.leave(self.name)
            self.core.run()
            self.cond.notify_all()


class ClockServer:
    """The master's side over ZeroMQ: a ROUTER socket served by a thread until :meth:`close`.

    ``lock`` is held while time advances, so the bus device (which takes the same lock for each instruction)
    never sees a world mid-step. With ``security`` only participants holding an authorized key get in, and
    everything on the wire is encrypted; bad keys raise :class:`bridge.security.SecurityError` before binding.
    """

    def __init__(self, core: LockstepCore, endpoint: str, lock: threading.RLock | None = None,
                 security: Security | None = None, status: Callable[[], dict] | None = None):
        """``status`` adds what the server's owner reports to a ``status`` reply (``hil sim``: its fault counts)."""
        self.core, self.endpoint, self._status = core, endpoint, status
        self.lock = lock or threading.RLock()
        self._context = zmq.Context.instance()
        self._socket, self.endpoint = bind_server(zmq.ROUTER, endpoint, security, context=self._context)
        self._pending: dict[str, bytes] = {}  # participant -> ROUTER identity awaiting a reply
        self._identity_of: dict[bytes, str] = {}  # a connection's identity -> the participant it said hello as
        self._stop = threading.Event()
        self.counters = Counters()
        self.rejected: list[str] = []  # reasons of the latest dropped messages (garbage, wrong version, ...)
        self._thread = threading.Thread(target=self._serve, name="lockstep-clock", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(0 if self.core.behind else 50):
                self._receive()
            with self.lock:
                if self.core.behind:
                    self._run()
            self._check_stall()

    def _receive(self) -> None:
        """One message from the ROUTER: [identity, empty, envelope] from a REQ; anything else is dropped (a
        DEALER's 1- or 3-frame message cannot be answered as a request), counted and logged; never raises."""
        frames = self._socket.recv_multipart()
        if len(frames) != 3 or frames[1]:
            self._drop(None, f"a message of {len(frames)} frames; a request is [identity, empty, envelope]")
            return
        try:
            self._handle(frames[0], frames[2])
        except Exception as exc:  # our bug, not the peer's: the clock must keep answering everyone else
            self._drop(frames[0], f"{type(exc).__name__}: {exc}")

    def _drop(self, identity: bytes | None, reason: str) -> None:
        self.counters.drop(f"lockstep clock {self.endpoint}", reason)
        self.rejected = (self.rejected + [reason])[-100:]
        if identity is not None:
            self._reply(identity, "error", {"reason": reason})

    def _handle(self, identity: bytes, data: bytes) -> None:
        try:
            msg = REQUEST_DECODER.decode(data)
            name = msg.payload.name if msg.payload is not None else ""
            if not name:
                raise EnvelopeError(f"{msg.type} without a participant name")
            if msg.type == "status":  # anyone connected may ask; it changes nothing
                self._reply_status(identity)
                return
            bound = self._identity_of.get(identity)
            if msg.type == "hello" and bound is not None:
                raise EnvelopeError(f"hello as {name!r} on a connection that already joined as {bound!r}")
            if msg.type != "hello" and bound != name:
                raise EnvelopeError(f"{msg.type} as {name!r} from a connection that "
                                    + (f"joined as {bound!r}" if bound else "has not said hello"))
        except EnvelopeError as exc:
            self._drop(identity, str(exc))
            return
        with self.lock:
            try:
                if msg.type == "hello":
                    self.core.join(name)
                    self._identity_of[identity] = name
                    self._reply(identity, "welcome", {"epoch": self.core.epoch})
                elif msg.type == "bye":
                    self.core.leave(name)
                    self._identity_of.pop(identity, None)
                    self._pending.pop(name, None)
                    self._reply(identity, "wake", {"epoch": self.core.epoch})
                    self._run()
                else:
                    self.core.post(name, msg.payload.t)
                    self._pending[name] = identity
                    self._run()
            except LockstepError as exc:
                self._reply(identity, "error", {"reason": str(exc)})

    def _reply_status(self, identity: bytes) -> None:
        with self.lock:
            extra = self._status() if self._status is not None else {}
            self._reply(identity, "status", {"participants": sorted(self._identity_of.values()),
                                             "dropped": self.counters.dropped, **extra})

    def _run(self) -> None:
        self._wake(self.core.run())

    def _wake(self, names: list[str]) -> None:
        for name in names:
            identity = self._pending.pop(name, None)
            if identity is not None:
                self._reply(identity, "wake", {"epoch": self.core.epoch})

    def _check_stall(self) -> None:
        with self.lock:
            try:
                self.core.check_stall()
            except LockstepError as exc:
                for name, identity in list(self._pending.items()):
                    self._reply(identity, "error", {"reason": str(exc)})
                    self._pending.pop(name)

    def _reply(self, identity: bytes, kind: str, payload: dict) -> None:
        self._socket.send_multipart([identity, b"", pack(kind, payload, t=self.core.now())])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close(0)


def clock_status(endpoint: str, timeout_s: float = 2.0, security: Security | None = None) -> dict:
    """A clock server's ``status`` (its participants, the messages it dropped and what its owner adds: ``hil sim``
    its fault counts), for tools and tests; asking does not join the run. LockstepError if nothing answers."""
    from .security import request_once

    data, why = request_once(endpoint, pack("status", {"name": "status"}), timeout_s, security)
    if data is None:
        raise LockstepError(f"lockstep: the clock at {endpoint} did not answer status within {timeout_s:g} s "
                            f"({why or 'stalled or gone'})")
    try:
        reply = unpack(data, REPLIES)
    except EnvelopeError as exc:
        raise LockstepError(f"lockstep: bad reply from {endpoint}: {exc}") from None
    if reply.type != "status":
        raise LockstepError(f"lockstep: the clock at {endpoint} answered status with {reply.type}: "
                            f"{reply.payload}")
    return {"t": reply.t, **reply.payload}


class RemoteParticipant:
    """A participant in another process than the master; every call is a REQ/REP round trip (CURVE-encrypted
    with ``security``, whose client key the master must have authorized)."""

    def __init__(self, endpoint: str, name: str, timeout_s: float = 2 * DEFAULT_STALL_TIMEOUT_S,
                 security: Security | None = None):
        self.endpoint, self.name, self.timeout_s = endpoint, name, timeout_s
        from .security import connect_client

        self._socket, self._watch = connect_client(zmq.REQ, endpoint, security)
        try:
            self.epoch = 0
            self.now_s = 0.0
            reply = self._call("hello", {})
        except BaseException:  # no master, or it refused us: leave no socket behind
            self._release()
            raise
        self.epoch, self.now_s = reply.payload.get("epoch", 0), reply.t

    def _call(self, kind: str, payload: dict):
        # a REQ socket whose only connection failed its handshake (a plain client at a CURVE master) has no pipe
        # to send on while it reconnects, and a plain send would block for ever: wait for one within the timeout,
        # and send without blocking (the pipe POLLOUT saw may be gone again when the handshake fails just after)
        if not send_within(self._socket, pack(kind, {"name": self.name, **payload}, t=self.now_s), self.timeout_s):
            why = self._watch.reason() if self._watch is not None else ""
            raise LockstepError(f"lockstep: the clock master at {self.endpoint} did not answer {self.name!r}'s "
                                f"{kind} within {self.timeout_s:g} s (no connection to send on: "
                                f"{why or 'refused, stalled or gone'})")
        if not self._socket.poll(int(self.timeout_s * 1000)):
            why = self._watch.reason() if self._watch is not None else ""
            raise LockstepError(f"lockstep: the clock master at {self.endpoint} did not answer {self.name!r}'s "
                                f"{kind} within {self.timeout_s:g} s ({why or 'stalled or gone'})")
        try:
            reply = unpack(self._socket.recv(), REPLIES)
        except EnvelopeError as exc:
            raise LockstepError(f"lockstep: bad reply from {self.endpoint}: {exc}") from None
        if reply.type == "error":
            raise LockstepError(reply.payload.get("reason", "the clock master refused"))
        return reply

    def sleep_until(self, t_s: float) -> tuple[float, int]:
        """Block until sim time >= t_s; returns (now, epoch)."""
        reply = self._call("sleep_until", {"t": float(t_s)})
        self.now_s, self.epoch = reply.t, reply.payload.get("epoch", self.epoch)
        return self.now_s, self.epoch

    def close(self) -> None:
        try:
            self._call("bye", {})
        except (LockstepError, zmq.ZMQError):  # a master gone mid-request leaves the REQ socket unable to send
            pass
        self._release()

    def _release(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self._socket.close(0)
