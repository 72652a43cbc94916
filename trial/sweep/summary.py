"""How often, under which condition: success rates with confidence intervals, the metrics' spread, the worst
trials.

The interval is Wilson's score interval (95 %): unlike the normal approximation it stays inside [0, 1] and is
honest at the rates a sweep is for (0 of 10, 10 of 10), where p +- 1.96 sqrt(p(1 - p)/n) collapses to a point.
Percentiles interpolate linearly (numpy's default); a metric without a value in a trial (no time to goal when
the goal was not reached, no distance when nobody came near) is left out of that metric's figures and the count
of values says how many there were.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

Z95 = 1.959963984540054
# the metrics summarised per condition: (column, label, the percentiles that matter for it)
SUMMARY_METRICS = (
    ("time_to_goal_s", "time to goal (s)", (50, 90)),
    ("min_distance_m", "min distance to a person (m)", (10, 50)),
    ("intrusions.intimate.entries", "intimate-zone entries", (50, 90)),
    ("intrusions.personal.entries", "personal-zone entries", (50, 90)),
    ("collisions.total", "collisions", (50, 90)),
)
STATUS_ORDER = {"failed": 0, "timeout": 1, "interrupted": 2, "ok": 3}


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for ``successes`` of ``n``; None for n = 0."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_of(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    successes = sum(1 for r in rows if r.get("success"))
    interval = wilson(successes, n)
    return {"n": n, "successes": successes, "success_rate": successes / n if n else None,
            "ci_low": interval[0] if interval else None, "ci_high": interval[1] if interval else None}


def by_condition(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One summary per condition, in the table's order."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["condition"], []).append(row)
    out = []
    for condition, members in groups.items():
        summary: dict[str, Any] = {"condition": condition, **rate_of(members)}
        for status in ("ok", "failed", "timeout"):
            summary[status] = sum(1 for r in members if r.get("status") == status)
        for column, _, percentiles in SUMMARY_METRICS:
            values = [float(r[column]) for r in members if isinstance(r.get(column), (int, float))
                      and not isinstance(r.get(column), bool)]
            summary[f"{column}.count"] = len(values)
            summary[f"{column}.mean"] = round(float(np.mean(values)), 4) if values else None
            for p in percentiles:
                summary[f"{column}.p{p}"] = round(float(np.percentile(values, p)), 4) if values else None
        summary["failures"] = failure_counts(members)
        wall = [float(r["wall_s"]) for r in members if isinstance(r.get("wall_s"), (int, float))]
        summary["wall_s.mean"] = round(float(np.mean(wall)), 2) if wall else None
        out.append(summary)
    return out


def failure_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many trials failed for each first cause (the table's ``failure``; ``unexplained`` for a failed trial whose
    metrics have none: killed before its log said anything, or judged by other criteria than its own)."""
    from ..report.failure import cause_counts

    return cause_counts([{"cause": r.get("failure") or UNEXPLAINED} for r in rows if not r.get("success")])


UNEXPLAINED = "unexplained"


def format_failures(counts: Mapping[str, int]) -> str:
    """``odometry_drift 5, blocked 1``: the causes of a condition's failures, most frequent first."""
    return ", ".join(f"{cause} {n}" for cause, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def by_axis(rows: list[Mapping[str, Any]], axes: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Per axis, per value (in order of appearance): the success rate pooled over every other axis."""
    out: dict[str, list[dict[str, Any]]] = {}
    for axis in axes:
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for row in rows:
            groups.setdefault(_label(row.get(axis)), []).append(row)
        out[axis] = [{"value": value, **rate_of(members)} for value, members in groups.items()]
    return out


def _label(value: Any) -> str:
    from .spec import format_value

    return format_value(value)


def worst(rows: list[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]]:
    """The trials to look at first: failures before successes, then errors and timeouts, then robot-initiated
    collisions, intimate-zone entries, the closest approach, the longest time to goal."""
    def badness(row: Mapping[str, Any]) -> tuple:
        distance = row.get("min_distance_m")
        time_to_goal = row.get("time_to_goal_s")
        return (bool(row.get("success")), STATUS_ORDER.get(str(row.get("status")), 0),
                -int(row.get("collisions.robot_initiated") or 0), -int(row.get("collisions.total") or 0),
                -int(row.get("intrusions.intimate.entries") or 0),
                distance if isinstance(distance, (int, float)) else math.inf,
                -(time_to_goal if isinstance(time_to_goal, (int, float)) else math.inf), row.get("trial", ""))

    return sorted(rows, key=badness)[:count]


def format_summary(summaries: list[Mapping[str, Any]]) -> str:
    """The per-condition summary as a text table (what ``hil sweep`` prints at the end)."""
    head = ["condition", "n", "success [95% CI]", "failed", "timeout", "goal s p50", "min dist p10",
            "intimate mean", "collisions mean", "why they failed"]
    lines = [head]
    for s in summaries:
        rate = "-" if s["success_rate"] is None else \
            f"{100 * s['success_rate']:.0f}% [{100 * s['ci_low']:.0f}-{100 * s['ci_high']:.0f}]"
        lines.append([s["condition"], str(s["n"]), rate, str(s["failed"]), str(s["timeout"]),
                      _num(s.get("time_to_goal_s.p50")), _num(s.get("min_distance_m.p10")),
                      _num(s.get("intrusions.intimate.entries.mean")), _num(s.get("collisions.total.mean")),
                      format_failures(s.get("failures") or {})])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(line, widths))).rstrip() for line in lines)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"
