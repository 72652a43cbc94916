"""What a live consumer of a trial's log is to ``Trial.run``: a recorder tap and an after-cycle hook.

The live Foxglove server (trial/foxglove_live) and the ROS 2 bridge's link (trial/ros_link) both follow a running
trial this way: ``Trial.run(out, taps=x.taps, hooks=x.hooks)``. The recorder calls ``bind`` with itself before
the first message (TrialRecorder.add_tap), then the tap with every message; ``after_cycle(robot)`` runs after
each bus cycle. :meth:`write` puts the consumer's own events into the log (nothing when the trial records
nothing, or once the log is closed).
"""
from __future__ import annotations

from typing import Any


class LiveTap:
    """Base of a live consumer: subclasses define ``__call__(topic, t_s, data, info)`` and ``after_cycle``."""

    rec: Any = None

    @property
    def taps(self) -> tuple:
        return (self,)

    @property
    def hooks(self) -> tuple:
        return (self.after_cycle,)

    def bind(self, recorder: Any) -> None:
        """The recorder of the trial (TrialRecorder.add_tap): this consumer's events are written there."""
        self.rec = recorder

    def after_cycle(self, robot: Any) -> None:
        raise NotImplementedError

    def write(self, topic: str, t_s: float, payload: dict[str, Any]) -> None:
        """A message in the trial's log (nothing when not recording, or after the log closed)."""
        if self.rec is not None:
            try:
                self.rec.write(topic, t_s, payload)
            except ValueError:  # the log is closed: the trial has ended
                pass
