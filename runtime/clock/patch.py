"""Map the time functions of code not written for the runtime onto the configured clock (reference 001 does
this with LD_PRELOAD on gettimeofday/usleep; Python lets us swap the time module's functions).

Inside ``with patched(clock):`` time.time, time.monotonic, time.perf_counter (and their _ns forms) read the
clock, and time.sleep sleeps on it. The runtime's own timeouts captured the original functions at import
(runtime.clock.base.WALL and friends), so the bus keeps its wall-time timeouts. time.time keeps an epoch-like
value: the wall time when the patch began plus the clock's time.

Threads that were already running when the patch began (a live viewer's server and drawing threads, a relay of a
child's output) keep the wall clock: they serve the process, not the controller, and a server's event loop on
simulated time (or a sleep of theirs on the controller's clock) would stall. The thread that entered the patch
and every thread started after it follow the clock.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .base import Clock

NAMES = ("time", "monotonic", "perf_counter", "sleep", "time_ns", "monotonic_ns", "perf_counter_ns")


@contextmanager
def patched(clock: Clock) -> Iterator[Clock]:
    saved = {name: getattr(time, name) for name in NAMES}
    epoch = saved["time"]() - clock.now()
    here = threading.get_ident()
    wall_threads = frozenset(t.ident for t in threading.enumerate() if t.ident is not None and t.ident != here)
    on_clock = {
        "time": lambda: epoch + clock.now(), "monotonic": clock.now, "perf_counter": clock.now, "sleep": clock.sleep,
        "time_ns": lambda: int((epoch + clock.now()) * 1e9), "monotonic_ns": lambda: int(clock.now() * 1e9),
        "perf_counter_ns": lambda: int(clock.now() * 1e9)}
    for name, function in on_clock.items():
        setattr(time, name, _per_thread(function, saved[name], wall_threads))
    try:
        yield clock
    finally:
        for name, function in saved.items():
            setattr(time, name, function)


def _per_thread(on_clock, wall, wall_threads: frozenset):
    def dispatch(*args):
        return (wall if threading.get_ident() in wall_threads else on_clock)(*args)

    return dispatch
