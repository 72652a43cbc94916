"""The real clock: monotonic wall time since the clock was made."""
from __future__ import annotations

from .base import WALL, WALL_SLEEP, Clock

SPIN_S = 0.0005  # the last half millisecond is spun: sleep() overshoots by ~0.1 ms on Linux


class RealClock(Clock):
    kind = "real"

    def __init__(self) -> None:
        self._start = WALL()

    def now(self) -> float:
        return WALL() - self._start

    def sleep_until(self, t_s: float) -> float:
        while (remaining := t_s - self.now()) > SPIN_S:
            WALL_SLEEP(remaining - SPIN_S)
        while self.now() < t_s:
            pass
        return self.now()
