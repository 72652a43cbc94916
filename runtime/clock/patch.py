"""Map the time functions of code not written for the runtime onto the configured clock (reference 001 does
this with LD_PRELOAD on gettimeofday/usleep; Python lets us swap the time module's functions).

Inside ``with patched(clock):`` time.time, time.monotonic, time.perf_counter (and their _ns forms) read the
clock, and time.sleep sleeps on it. The runtime's own timeouts captured the original functions at import
(runtime.clock.base.WALL and friends), so the bus keeps its wall-time timeouts. time.time keeps an epoch-like
value: the wall time when the patch began plus the clock's time.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from .base import Clock

NAMES = ("time", "monotonic", "perf_counter", "sleep", "time_ns", "monotonic_ns", "perf_counter_ns")


@contextmanager
def patched(clock: Clock) -> Iterator[Clock]:
    saved = {name: getattr(time, name) for name in NAMES}
    epoch = saved["time"]() - clock.now()
    time.time = lambda: epoch + clock.now()
    time.monotonic = clock.now
    time.perf_counter = clock.now
    time.sleep = clock.sleep
    time.time_ns = lambda: int((epoch + clock.now()) * 1e9)
    time.monotonic_ns = lambda: int(clock.now() * 1e9)
    time.perf_counter_ns = lambda: int(clock.now() * 1e9)
    try:
        yield clock
    finally:
        for name, function in saved.items():
            setattr(time, name, function)
