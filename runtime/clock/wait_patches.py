"""The waits of the standard library put on the simulator's clock (runtime/clock/waits.py) for the threads that
follow it; every other thread keeps the original, and everything is put back when the patch ends.

- ``threading``: a Lock or RLock made by a thread on the clock is a :class:`ClockLock` whose contended acquire
  (blocking, or with a timeout) is a wait on the clock. Condition, Event, Semaphore, Barrier and queue.Queue are
  built on those locks, so their timeouts are simulated seconds; ``threading._time`` and ``queue.time`` (the
  monotonic clock they captured at import) read the clock. ``Thread.start`` counts the new thread as running
  before it begins, so time cannot move under it; ``Thread.join`` is a wait. ``queue.SimpleQueue`` (a C queue
  whose get would block outside the clock, used by ThreadPoolExecutor and so by asyncio's executor) is the
  standard library's pure-Python twin.
- ``selectors`` (every selector class's ``select``, which asyncio's loop waits in) and ``select.select``: data
  already there returns at once, a timeout is simulated seconds, and data that comes first ends the wait at the
  present simulated time. asyncio's loop reads ``time.monotonic`` (patched with the time functions), so
  ``asyncio.sleep`` and every timer follow the clock.
- ``datetime.datetime.now`` and ``utcnow`` (C methods that read the system clock directly) are replaced in the
  type's own dictionary, so a ``from datetime import datetime`` made before the patch is reached too;
  ``date.today`` already calls ``time.time``.

Threads that hil itself starts (code under the package ``hil``) stay on the wall clock even when the controller's
thread starts them: they serve the process, and a server's wait would hold the controller's time.
"""
from __future__ import annotations

import _thread
import ctypes
import datetime as datetime_mod
import gc
import queue
import select
import selectors
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from .waits import ClockWaits

_allocate = _thread.allocate_lock
_rlock = _thread.RLock


class ClockLock:
    """A lock (or, given ``_thread.RLock``, a reentrant lock) whose contended acquire waits on the clock for
    threads that follow it."""

    def __init__(self, waits: ClockWaits, reentrant: bool = False):
        self._waits, self._reentrant = waits, reentrant
        self._lock = _rlock() if reentrant else _allocate()
        if reentrant:  # Condition finds these on its lock and uses them
            self._release_save, self._acquire_restore = self._lock._release_save, self._lock._acquire_restore
            self._is_owned = self._lock._is_owned

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        lock = self._lock
        if not blocking or not self._waits.on_clock():
            return lock.acquire(blocking, timeout)

        what = "threading.RLock.acquire" if self._reentrant else "threading.Lock.acquire"
        return self._waits.wait(None if timeout is None or timeout < 0 else timeout, self._take, self._free, what)

    def _take(self) -> bool:
        return self._lock.acquire(False)

    def _free(self) -> bool:
        if not self._reentrant:
            return not self._lock.locked()
        if self._lock.acquire(False):  # a reentrant lock says whether it is free only by being taken
            self._lock.release()
            return True
        return False

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        self._lock.release()
        self._waits.ring()  # a waiter on it (a condition's notify releases its waiter's lock) tries again now

    def locked(self) -> bool:
        return not self._free() if self._reentrant else self._lock.locked()

    def _at_fork_reinit(self) -> None:
        self._lock._at_fork_reinit()

    def __repr__(self) -> str:
        return f"<ClockLock on the simulator's clock: {self._lock!r}>"


@contextmanager
def patch_waits(waits: ClockWaits) -> Iterator[None]:
    with ExitStack() as stack:
        _patch_threading(waits, stack)
        _patch_queue(waits, stack)
        _patch_selectors(waits, stack)
        _patch_datetime(waits, stack)
        yield


def _set(stack: ExitStack, owner, name: str, value) -> None:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    stack.callback(setattr, owner, name, saved)


def _factory(waits: ClockWaits, on_clock: Callable, wall: Callable) -> Callable:
    def make(*args, **kwargs):
        return on_clock(*args, **kwargs) if waits.on_clock() else wall(*args, **kwargs)

    return make


def _now_reader(waits: ClockWaits, wall: Callable[[], float]) -> Callable[[], float]:
    def now() -> float:
        return waits.clock.now() if waits.on_clock() else wall()

    return now


# --- threading ------------------------------------------------------------------------------------------------
def _patch_threading(waits: ClockWaits, stack: ExitStack) -> None:
    lock = _factory(waits, lambda: ClockLock(waits), threading.Lock)
    _set(stack, threading, "Lock", lock)
    _set(stack, threading, "_allocate_lock", _factory(waits, lambda: ClockLock(waits), threading._allocate_lock))
    _set(stack, threading, "RLock", _factory(waits, lambda: ClockLock(waits, True), threading.RLock))
    _set(stack, threading, "_time", _now_reader(waits, threading._time))
    _patch_thread_class(waits, stack)


def _patch_thread_class(waits: ClockWaits, stack: ExitStack) -> None:
    Thread = threading.Thread
    start, bootstrap, join = Thread.start, Thread._bootstrap_inner, Thread.join

    def clock_start(self) -> None:
        if not waits.on_clock() or _is_hil_thread(self):
            return start(self)
        self._hil_clock = waits
        waits.announce_start()
        try:
            start(self)
        except BaseException:
            waits.begun(0, None, started=False)
            raise

    def clock_bootstrap(self) -> None:
        if getattr(self, "_hil_clock", None) is not waits:
            return bootstrap(self)
        waits.begun(threading.get_ident(), self)
        run = self.run

        def run_on_clock() -> None:
            try:
                run()
            except BaseException as exc:
                if exc is not waits.failure:  # the run's end reached this thread in a wait: no traceback
                    raise
        self.run = run_on_clock
        try:
            bootstrap(self)
        finally:
            waits.forget(threading.get_ident())

    def clock_join(self, timeout: float | None = None) -> None:
        if not waits.on_clock() or self is threading.current_thread() or not self._started.is_set():
            return join(self, timeout)

        def ended() -> bool:
            join(self, 0)
            return not self.is_alive()

        waits.wait(timeout, ended, lambda: not self.is_alive(), f"Thread.join of {self.name!r}")

    _set(stack, Thread, "start", clock_start)
    _set(stack, Thread, "_bootstrap_inner", clock_bootstrap)
    _set(stack, Thread, "join", clock_join)


def _is_hil_thread(thread: threading.Thread) -> bool:
    target = getattr(thread, "_target", None) or type(thread).run
    return (getattr(target, "__module__", None) or "").startswith("hil.")


# --- queue ----------------------------------------------------------------------------------------------------
def _patch_queue(waits: ClockWaits, stack: ExitStack) -> None:
    _set(stack, queue, "time", _now_reader(waits, queue.time))
    _set(stack, queue, "SimpleQueue", _factory(waits, queue._PySimpleQueue, queue.SimpleQueue))


# --- selectors, select ----------------------------------------------------------------------------------------
def _patch_selectors(waits: ClockWaits, stack: ExitStack) -> None:
    for cls in vars(selectors).values():  # each class that defines its own select (EpollSelector does)
        if isinstance(cls, type) and issubclass(cls, selectors.BaseSelector) and "select" in vars(cls) \
                and not getattr(cls.select, "__isabstractmethod__", False):
            _set(stack, cls, "select", _clock_selector_select(waits, vars(cls)["select"]))
    _set(stack, select, "select", _clock_select(waits, select.select))


def _clock_selector_select(waits: ClockWaits, original: Callable) -> Callable:
    def clock_select(self, timeout: float | None = None) -> list:
        if not waits.on_clock():
            return original(self, timeout)
        found: list = []

        def attempt() -> bool:
            found[:] = original(self, 0)
            return bool(found)

        fds = ", ".join(str(fd) for fd in sorted(self.get_map() or ()))
        what = f"{type(self).__name__}.select on fds {fds or '(none)'}"
        return list(found) if waits.wait(timeout, attempt, lambda: bool(original(self, 0)), what) else []

    return clock_select


def _clock_select(waits: ClockWaits, original: Callable) -> Callable:
    def clock_select(rlist, wlist, xlist, timeout: float | None = None):
        if not waits.on_clock():
            return original(rlist, wlist, xlist, timeout)
        found: list = [([], [], [])]

        def attempt() -> bool:
            found[0] = original(rlist, wlist, xlist, 0)
            return any(found[0])

        what = f"select.select on {len(rlist)} readers, {len(wlist)} writers"
        got = waits.wait(timeout, attempt, lambda: any(original(rlist, wlist, xlist, 0)), what)
        return found[0] if got else ([], [], [])

    return clock_select


# --- datetime -------------------------------------------------------------------------------------------------
def _patch_datetime(waits: ClockWaits, stack: ExitStack) -> None:
    kind = datetime_mod.datetime
    slots = gc.get_referents(kind.__dict__)[0]  # the type's own dict: a C type refuses setattr
    now, utcnow = slots["now"], slots["utcnow"]

    def clock_now(cls, tz=None):
        if not waits.on_clock():
            return now.__get__(None, cls)(tz)
        return cls.fromtimestamp(time.time(), tz)

    def clock_utcnow(cls):
        if not waits.on_clock():
            return utcnow.__get__(None, cls)()
        return cls.utcfromtimestamp(time.time())

    def put(now_method, utcnow_method) -> None:
        slots["now"], slots["utcnow"] = now_method, utcnow_method
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(kind))  # drop the method cache's old entries

    put(classmethod(clock_now), classmethod(clock_utcnow))
    stack.callback(put, now, utcnow)
