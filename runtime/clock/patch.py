"""Map the time functions and waits of code not written for the runtime onto the configured clock (the
simulator-clock reference does this with LD_PRELOAD on gettimeofday/usleep; Python lets us swap the functions).

Inside ``with patched(clock):`` time.time, time.monotonic, time.perf_counter (and their _ns forms) read the
clock, and time.sleep sleeps on it. The runtime's own timeouts captured the original functions at import
(runtime.clock.base.WALL and friends), so the bus keeps its wall-time timeouts. time.time keeps an epoch-like
value: the wall time when the patch began plus the clock's time.

On the simulator's clock every other wait of the controller's threads follows it too (runtime/clock/waits.py:
the threads are one participant, and time moves when all of them wait), through the patches of
runtime/clock/wait_patches.py: threading's locks, conditions, events, semaphores, joins, queue's timeouts,
selectors and select.select (so asyncio's loop), datetime.now/utcnow/today.

Threads that were already running when the patch began (a live viewer's server and drawing threads, a relay of a
child's output) keep the wall clock: they serve the process, not the controller, and a server's event loop on
simulated time (or a sleep of theirs on the controller's clock) would stall. On the simulator's clock the thread
that entered the patch and every thread it (or one of its threads) starts follow the clock; on the real clock,
every thread started after the patch began.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from typing import Iterator

from .base import Clock
from .waits import ClockWaits

NAMES = ("time", "monotonic", "perf_counter", "sleep", "time_ns", "monotonic_ns", "perf_counter_ns")


class PatchEnded(BaseException):
    """A thread the controller left behind was still waiting on the clock when the run ended."""


class WaitingClock(Clock):
    """The robot's clock seen by the controller while the waits are patched: ``robot.loop`` sleeps as one of the
    controller's waits (so a helper thread still running holds the time), everyone else sleeps as before."""

    def __init__(self, inner: Clock, waits: ClockWaits):
        self.inner, self.waits, self.kind = inner, waits, inner.kind

    def now(self) -> float:
        return self.inner.now()

    def sleep_until(self, t_s: float) -> float:
        return self.waits.sleep_until(t_s) if self.waits.on_clock() else self.inner.sleep_until(t_s)

    def wait_cost(self, wall_s: float) -> float:
        return self.inner.wait_cost(wall_s)

    def close(self) -> None:
        self.inner.close()


@contextmanager
def patched(clock: Clock) -> Iterator[Clock]:
    """Yields the clock the controller should sleep on: ``clock`` itself, or on the simulator's clock a
    :class:`WaitingClock` over it."""
    saved = {name: getattr(time, name) for name in NAMES}
    epoch = saved["time"]() - clock.now()
    with ExitStack() as stack:
        waits = _start_waits(clock, stack)
        if waits is not None:
            follows, sleep = waits.on_clock, waits.sleep
        else:
            here = threading.get_ident()
            wall_threads = frozenset(t.ident for t in threading.enumerate() if t.ident not in (None, here))
            follows, sleep = (lambda: threading.get_ident() not in wall_threads), clock.sleep
        on_clock = {
            "time": lambda: epoch + clock.now(), "monotonic": clock.now, "perf_counter": clock.now, "sleep": sleep,
            "time_ns": lambda: int((epoch + clock.now()) * 1e9), "monotonic_ns": lambda: int(clock.now() * 1e9),
            "perf_counter_ns": lambda: int(clock.now() * 1e9)}
        for name, function in on_clock.items():
            setattr(time, name, per_thread(function, saved[name], follows))
        try:
            yield clock if waits is None else WaitingClock(clock, waits)
        finally:
            for name, function in saved.items():
                setattr(time, name, function)


def _start_waits(clock: Clock, stack: ExitStack) -> ClockWaits | None:
    """On the simulator's clock: the controller's waits, patched (undone when ``stack`` closes)."""
    if getattr(clock, "kind", "") != "sim":
        return None
    from .wait_patches import patch_waits

    waits = ClockWaits(clock)
    waits.adopt(threading.get_ident(), threading.current_thread())
    stack.callback(waits.close, PatchEnded("the run ended while this thread waited on the simulator's clock"))
    stack.enter_context(patch_waits(waits))
    return waits


def per_thread(on_clock: Callable, wall: Callable, follows: Callable[[], bool]) -> Callable:
    """``on_clock`` for the threads that follow the clock, ``wall`` (the original) for the others."""
    def dispatch(*args, **kwargs):
        return (on_clock if follows() else wall)(*args, **kwargs)

    return dispatch
