"""The one time source of the runtime (the simulator-clock reference): real or simulated, chosen by configuration.

Everything in the runtime that needs time asks a :class:`Clock`. Code that was not written for it can be mapped
onto it with :mod:`runtime.clock.patch`. The runtime's own timeouts (bus transactions, sockets) always use wall
time (``WALL``), captured here before any patch could replace ``time.perf_counter``.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod

WALL = time.perf_counter  # the original function object: a later patch of the time module does not reach it
WALL_SLEEP = time.sleep


class ClockError(RuntimeError):
    """The clock cannot go on: a participant stalled, the master vanished, or the clock was closed."""


class Clock(ABC):
    """now() in seconds since the clock started; sleep and sleep_until block until that time has come."""

    kind: str = ""
    closed: bool = False

    @abstractmethod
    def now(self) -> float: ...

    @abstractmethod
    def sleep_until(self, t_s: float) -> float:
        """Block until ``now() >= t_s``; return now()."""

    def sleep(self, dt_s: float) -> float:
        return self.sleep_until(self.now() + max(0.0, dt_s))

    def wait_cost(self, wall_s: float) -> float:
        """How much of this clock's time a wait of ``wall_s`` wall seconds outside :meth:`sleep_until` (a bus
        reply timeout) takes: all of it on a clock that follows the wall, nothing on one that only moves when its
        participants sleep (runtime/robot/presence.py budgets its pings by this)."""
        return wall_s

    def close(self) -> None:
        """Leave the clock (a lockstep participant says goodbye, so the master stops waiting for it)."""
        self.closed = True

    def __enter__(self) -> "Clock":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
