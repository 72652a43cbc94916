"""A Python controller's threads as one participant of the simulator's clock: every wait they make on the clock
(time.sleep, a lock, a condition, an event, a queue, a selector, a join) is registered here, and simulated time
moves only when every one of them waits, then to the earliest deadline among them (as the native time shim does
for a compiled program, docs/CLOCKS.md).

A wait is an ``attempt() -> bool`` that tries the real thing without blocking (take a lock, select on descriptors
with no timeout) and a ``ready() -> bool`` anyone may call that says whether the attempt would succeed now, without
taking anything. A waiter's tries, the end of its wait and the decision to move time are all made under one lock,
and time never moves while some wait is ready or due, so a wait ends at the simulated time at which another thread
made it ready, and a thread whose wait has ended counts as running before it returns: the same controller gives the
same log run after run, however its threads were scheduled.

The thread that is the last to wait drives the clock itself (no helper thread, no latency for a controller of one
thread). Between tries a waiter blocks on a bell of its own for at most :data:`SLICE_S` of wall time; a lock's
release (so a condition's notify, an event's set, a queue's put), a thread's end and time moving ring every bell,
so a waiter tries again at once; data from outside on a descriptor is seen at the next slice. A thread on the clock
that blocks anywhere else (a socket read with no timeout, a pipe, a C library's own wait) counts as running, so
time stops until it returns; runtime/clock/stall.py names it.
"""
from __future__ import annotations

import _thread
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .base import Clock

SLICE_S = 0.002  # wall time between a waiter's tries when nothing rings its bell (data from outside)
_acquire = _thread.LockType.acquire  # the originals: nothing here may go through a patched lock
_release = _thread.LockType.release
_off = threading.local()  # depth of off_clock() in this thread


@contextmanager
def off_clock() -> Iterator[None]:
    """The runtime's own work in a controller's thread (a bus cycle, its hooks, driving the clock): its waits and
    reads stay on the wall clock, as the runtime's timeouts must."""
    depth = getattr(_off, "depth", 0)
    _off.depth = depth + 1
    try:
        yield
    finally:
        _off.depth = depth


@dataclass
class Wait:
    """One thread's wait on the clock: until ``deadline`` (simulated s; inf: none) or ``ready()``."""

    deadline: float
    ready: Callable[[], bool]
    what: str  # what it waits on, for a stall report: "threading.Event.wait", "select on fds 5, 7"
    bell: object = None  # a raw lock the waiter blocks on between tries; ring() releases it


class ClockWaits:
    """The waits of the threads on one clock (those given to :meth:`adopt`), and the clock moved when all wait."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._lock = _thread.allocate_lock()
        self.threads: dict[int, threading.Thread | None] = {}  # on the clock: ident -> its Thread (None: unknown)
        self.running: set[int] = set()  # on the clock and not in a wait
        self.starting = 0  # threads started by a thread on the clock that have not begun yet
        self.waits: dict[int, Wait] = {}
        self.failure: BaseException | None = None  # the driver's RunComplete / ClockError: every waiter raises it
        self._told: set[int] = set()  # the threads that have been given the failure
        self._driving = False
        self._driver: int | None = None  # the thread asking the clock for time while everyone waits

    # --- which threads are on the clock ------------------------------------------------------------------------
    def adopt(self, ident: int, thread: threading.Thread | None = None) -> None:
        with _Held(self._lock):
            self.threads[ident] = thread
            self.running.add(ident)

    def forget(self, ident: int) -> None:
        with _Held(self._lock):
            self.threads.pop(ident, None)
            self.running.discard(ident)
            self.waits.pop(ident, None)
        self.ring()  # a join may be waiting for it

    def announce_start(self) -> None:
        """A thread on the clock is starting another: time must not move before the new one runs."""
        with _Held(self._lock):
            self.starting += 1

    def begun(self, ident: int, thread: threading.Thread | None, started: bool = True) -> None:
        with _Held(self._lock):
            self.starting -= 1
            if started:
                self.threads[ident] = thread
                self.running.add(ident)

    def on_clock(self) -> bool:
        """Whether the calling thread's waits and time reads follow the clock."""
        return threading.get_ident() in self.threads and not getattr(_off, "depth", 0)

    # --- waiting ----------------------------------------------------------------------------------------------
    def sleep(self, dt_s: float) -> None:
        """time.sleep on the clock."""
        self.sleep_until(self.clock.now() + max(0.0, dt_s))

    def sleep_until(self, t_s: float) -> float:
        """time.sleep and robot.loop: wait for nothing but the time."""
        self.wait(t_s - self.clock.now(), _never, _never, "a sleep")
        return self.clock.now()

    def wait(self, timeout_s: float | None, attempt: Callable[[], bool], ready: Callable[[], bool],
             what: str) -> bool:
        """Wait until ``attempt()`` (which must not block) succeeds (True) or ``timeout_s`` of simulated time has
        passed (False; None: no timeout)."""
        if attempt():
            return True
        if timeout_s is not None and timeout_s <= 0:
            return False
        if self.failure is not None:
            return self._ended()
        me, bell = threading.get_ident(), _thread.allocate_lock()
        _acquire(bell)
        with _Held(self._lock):
            self.running.discard(me)
            self.waits[me] = Wait(math.inf if timeout_s is None else self.clock.now() + timeout_s, ready, what, bell)
        try:
            return self._wait(me, attempt, bell)
        finally:
            with _Held(self._lock):
                self._resume(me)

    def _wait(self, me: int, attempt: Callable[[], bool], bell) -> bool:
        """Each try, the end of the wait and the decision to move time are made under one lock, so time can never
        move between a wait's end and its thread counting as running again."""
        deadline = self.waits[me].deadline
        while True:
            if self.failure is not None:
                return self._ended() or attempt()
            with _Held(self._lock):
                if attempt():
                    self._resume(me)
                    return True
                if self.clock.now() >= deadline:
                    self._resume(me)
                    return False
                target = self._claim_drive()
            if target is not None:
                self._drive(target)
            else:
                _acquire(bell, True, SLICE_S)  # rung by a release, a thread's end, time moving; else try again

    def _resume(self, me: int) -> None:
        self.waits.pop(me, None)
        if me in self.threads:
            self.running.add(me)

    def ring(self) -> None:
        """Something a waiter may wait for happened (a lock released, a thread ended, time moved): every waiter
        tries again now rather than at the end of its slice."""
        if not self.waits:
            return
        with _Held(self._lock):
            for wait in self.waits.values():
                if wait.bell.locked():
                    try:
                        _release(wait.bell)
                    except RuntimeError:  # released by another ring meanwhile
                        pass

    def _claim_drive(self) -> float | None:
        """The time to move the clock to when every thread waits and none is ready or due; else None. Called
        with the lock held."""
        if self.running or self.starting or self._driving or not self.waits:
            return None
        now = self.clock.now()
        waits = list(self.waits.values())
        if any(w.deadline <= now for w in waits) or any(_safe_ready(w) for w in waits):
            return None
        target = min(w.deadline for w in waits)
        if math.isinf(target):
            return None  # everyone waits for ever: only another thread (off the clock) can end it
        self._driving, self._driver = True, threading.get_ident()
        return target

    def _drive(self, target: float) -> None:
        try:
            with off_clock():
                self.clock.sleep_until(target)
        except BaseException as exc:  # RunComplete at the run's end, ClockError: every waiter ends with it
            self.failure = exc
            self._told.add(threading.get_ident())
            raise
        finally:
            with _Held(self._lock):
                self._driving, self._driver = False, None
            self.ring()

    def _ended(self) -> bool:
        """A wait after the run's end: the first in each thread raises the end (RunComplete, ClockError), to unwind
        it; later ones (its finally blocks, asyncio cancelling its tasks) time out at once."""
        me = threading.get_ident()
        if me not in self._told:
            self._told.add(me)
            raise self.failure
        return False

    def close(self, failure: BaseException) -> None:
        """The run is over: waits still going (threads the controller left behind) end with ``failure``."""
        if self.failure is None:
            self.failure = failure
        with _Held(self._lock):
            self.threads.clear()  # from now on every thread is on the wall clock
            self.running.clear()

    def where(self) -> dict[int, str]:
        """What each thread on the clock waits on ("" for one running or blocked outside the clock)."""
        with _Held(self._lock):
            return {ident: self._describe(ident) for ident in self.threads}

    def _describe(self, ident: int) -> str:
        wait = self.waits.get(ident)
        if wait is None:
            return ""
        if math.isinf(wait.deadline):
            return f"{wait.what} with no timeout (no thread of the controller runs to end it)"
        text = f"{wait.what} until {wait.deadline:.3f} s"
        if ident == self._driver:
            text += (": the simulator has not given that time (another participant of its clock holds it; the "
                     "clock's own stall timeout names it)")
        return text


class _Held:
    """``with`` on a raw lock through the original methods (a patched lock's would recurse into the clock)."""

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        _acquire(self.lock)

    def __exit__(self, *exc):
        _release(self.lock)


def _never() -> bool:
    return False


def _safe_ready(wait: Wait) -> bool:
    try:
        return bool(wait.ready())
    except Exception:  # noqa: BLE001 - a descriptor closed meanwhile: let its owner find out by trying
        return True
