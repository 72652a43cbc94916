"""What a trial gives back: its folder, how it ended, and the metrics with attribute access.

``result.metrics.goal.reached`` and ``result.metrics["goal"]["reached"]`` are the same value: the metrics are the
parsed metrics.json (docs/METRICS.md), read-only, so a test or a sweep reads them as naturally as a person reads
the file.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, FAILED, INTERRUPTED = "ok", "failed", "interrupted"


class Metrics(Mapping):
    """A read-only view of a metrics dict whose keys are also attributes (nested mappings too)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]):
        object.__setattr__(self, "_data", dict(data))

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self._data[name])
        except KeyError:
            known = ", ".join(sorted(self._data))
            raise AttributeError(f"no metric {name!r}; there are: {known}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("metrics are read-only")

    def __repr__(self) -> str:
        return f"Metrics({self._data!r})"

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)


def _wrap(value: Any) -> Any:
    return Metrics(value) if isinstance(value, Mapping) and not isinstance(value, Metrics) else value


class TrialFailed(AssertionError):
    """A trial whose controller (or world, or crowd) failed: the message names the trial folder and the error."""


@dataclass
class TrialResult:
    """One trial's outcome. ``status`` is OK (ran to its end: duration, goal, or the controller returned),
    FAILED (the controller raised, or the world or crowd failed: ``error`` and ``traceback`` say how) or
    INTERRUPTED (Ctrl-C); ``stopped`` says what ended it (returned, duration, goal, script_end, interrupted, failed)."""

    label: str
    folder: Path | None
    status: str
    stopped: str
    sim_s: float
    wall_s: float
    ticks: int
    metrics: Metrics | None = None
    error: str | None = None
    traceback: str | None = None
    goal_reached_at_s: float | None = None
    run_text: str = ""  # the run's summary (ticks, clock, bus statistics), as `hil run` prints it
    notes: list[str] = field(default_factory=list)
    report_error: str | None = None  # why metrics.json / topdown.png could not be built (a full disk), if so
    states_lost: str | None = None  # the saved states the disk had no room for (trial/state/saver.py), if any

    @property
    def ok(self) -> bool:
        """It ran to its end (whether it passed is :attr:`passed`)."""
        return self.status == OK

    @property
    def verdict(self) -> Metrics | None:
        """metrics.json's verdict (trial/verdict.py): ``passed``, the ``failed`` criteria, every ``criteria``
        judged; None when nothing was recorded (no folder) or the report failed."""
        return self.metrics.get("verdict") if self.metrics is not None else None

    @property
    def passed(self) -> bool:
        """It ran to its end and met its success criteria (the default: the goal reached when it has one, no
        robot-initiated collision). A trial run without a folder has no metrics: it passes when it ran to its end."""
        verdict = self.verdict
        return self.ok if verdict is None else bool(verdict["passed"])

    def __repr__(self) -> str:
        return f"<TrialResult {self.summary_line()}>"

    def summary_line(self) -> str:
        """One line: passed or failed (the criteria not met named), how it ended, and the metrics a developer looks
        at first."""
        verdict = self.verdict
        word = self.status if verdict is None or self.status != OK else "passed" if verdict["passed"] else "failed"
        how = f" ({self.stopped})" if self.stopped != self.status else ""  # "failed", not "failed (failed)"
        head = f"{self.label}: {word}{how} after {self.sim_s:.1f} s"
        if self.error:
            head += f": {self.error}"
        elif verdict is not None and not verdict["passed"]:
            head += f", not met: {' and '.join(verdict['failed'])}"
        tail = (f"; {self.states_lost}" if self.states_lost else "") + (f"; folder {self.folder}" if self.folder
                                                                           else "")
        m = self.metrics
        if m is None:
            return head + tail
        goal = m.get("goal") or {}
        if goal.get("xy") is None:
            goal_text = "no goal"
        elif goal.get("reached"):
            goal_text = f"goal reached at {m['time_to_goal_s']:.1f} s"
        else:
            goal_text = "goal NOT reached"
        intrusions = m.get("intrusions") or {}
        zones = "/".join(str(intrusions[z]["entries"]) for z in ("intimate", "personal", "social") if z in intrusions)
        collisions = m.get("collisions") or {}
        robot_hits, person_hits = collisions.get("robot_initiated", 0), collisions.get("person_initiated", 0)
        distance = m.get("min_distance_m")
        parts = [goal_text, f"min distance {distance:.2f} m" if distance is not None else "nobody near",
                 f"intrusions i/p/s {zones}" if zones else "",
                 f"collisions {robot_hits} by the robot, {person_hits} by people"]
        return f"{head}; " + ", ".join(p for p in parts if p) + tail

    def raise_for_status(self) -> TrialResult:
        """Raise :class:`TrialFailed` (naming the folder and the error) unless the trial ran to its end."""
        if self.status != OK:
            where = f" (trial folder {self.folder})" if self.folder else ""
            detail = f"\n{self.traceback}" if self.traceback else ""
            raise TrialFailed(f"trial {self.label} {self.status}{where}: {self.error or self.stopped}{detail}")
        return self
