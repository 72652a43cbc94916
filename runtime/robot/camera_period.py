"""Which frame period of a camera's rate the robot's clock is in: a device camera (uvc.py, realsense.py) is read
at most once a period, as a rendered camera renders at most once a period, so a read within the same period
returns the frame already had."""
from __future__ import annotations

from collections.abc import Callable


class FramePeriods:
    """Periods of ``rate_hz`` on ``clock``, counted from the first :meth:`now` (the first read of the camera)."""

    def __init__(self, rate_hz: float, clock: Callable[[], float]):
        self.rate_hz, self.clock = rate_hz, clock
        self._t0: float | None = None

    def now(self) -> tuple[float, int]:
        """(the clock's time, the index of the period it is in)."""
        now = self.clock()
        if self._t0 is None:
            self._t0 = now
        return now, int((now - self._t0) * self.rate_hz + 1e-9)
