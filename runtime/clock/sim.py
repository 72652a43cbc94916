"""The simulator's clock seen from a participant: time is what the lockstep master says it is.

``now()`` is the simulated time of the last wake (0 until the first tick); ``sleep_until`` hands control to the
master and returns when simulated time has reached the wake time, however long or short that takes in wall
time. A reset (the master's epoch changes) is announced: logged, counted, and passed to ``on_reset`` callbacks.
"""
from __future__ import annotations

import logging
from typing import Callable

from hil.bridge.lockstep import LocalParticipant, LockstepError, RemoteParticipant

from .base import Clock, ClockError

log = logging.getLogger(__name__)


class LockstepClock(Clock):
    kind = "sim"

    def __init__(self, participant: LocalParticipant | RemoteParticipant, name: str):
        self.participant, self.name = participant, name
        self._now = 0.0
        self._epoch = getattr(participant, "epoch", 0)
        self.resets = 0
        self.on_reset: list[Callable[[float, float], None]] = []

    def now(self) -> float:
        return self._now

    def resume_at(self, t_s: float) -> None:
        """Read ``t_s`` from now on, before the first sleep: the time of a restored state (trial/state/), which the
        master's world also restarts from."""
        self._now = t_s

    def wait_cost(self, wall_s: float) -> float:
        return 0.0  # the master waits for this participant: simulated time stands still until it sleeps

    def sleep_until(self, t_s: float) -> float:
        try:
            if isinstance(self.participant, RemoteParticipant):
                now, epoch = self.participant.sleep_until(t_s)
            else:
                now = self.participant.sleep_until(t_s)
                epoch = self.participant.core.epoch
        except LockstepError as exc:
            raise ClockError(str(exc)) from None
        if epoch != self._epoch:
            self._announce_reset(now)
            self._epoch = epoch
        self._now = now
        return now

    def _announce_reset(self, now: float) -> None:
        self.resets += 1
        log.warning("clock %r: the simulator reset its time (%.3f s -> %.3f s)", self.name, self._now, now)
        for callback in self.on_reset:
            callback(self._now, now)

    def close(self) -> None:
        if not self.closed:
            leave = getattr(self.participant, "leave", None) or getattr(self.participant, "close")
            leave()
        super().close()
