"""Whether a trial passed: criteria on its metrics, judged the same way for one trial (``hil trial``, metrics.json's
``verdict``) and for every row of a sweep (trial/sweep/table.py).

A trial **passes** when it ran to its end (status ok: the controller did not raise, the world and the crowd did not
fail, nobody pressed Ctrl-C) and meets every criterion. A criterion is ``COLUMN`` (true) or ``COLUMN OP VALUE``
with OP one of == != < <= > >= and VALUE a number, true, false, none or a word; COLUMN is a metric of
metrics.json flattened with dots (``goal.reached``, ``intrusions.intimate.entries``, ``collisions.total``) or
``status`` / ``stopped`` (how the trial ended). A column without a value (``min_distance_m`` when nobody came near)
fails a comparison unless the criterion ends with ``or none``. Without criteria the default is what a user
expects: ``goal.reached`` (only when the trial has a goal) and ``collisions.robot_initiated == 0``.
"""
from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hil.devices.yaml_source import ConfigError

DEFAULT_CRITERIA = ("goal.reached", "collisions.robot_initiated == 0")
GOAL_CRITERION = "goal.reached"  # a default criterion only for a trial with a goal
RUN_COLUMNS = ("status", "stopped")  # how the trial ended, beside its metrics
RAN_TO_ITS_END = "status == ok"  # named among the failed criteria of a trial that did not run to its end
SKIPPED_METRICS = ("meta", "params", "collisions.events", "goal.xy", "verdict", "failure")  # the spec again,
# thresholds, lists, and the verdict and why it failed (judged from the rest)
SKIPPED_SUFFIXES = (".radius_m",)  # the zones' thresholds (metrics.params has them)

_CRITERION = re.compile(r"^\s*(?P<column>[A-Za-z_][\w.]*)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>[^\s]+))?"
                        r"(?P<or_none>\s+or\s+none)?\s*$")
_OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


@dataclass(frozen=True)
class Criterion:
    text: str
    column: str
    op: str | None
    value: Any
    or_none: bool
    needs_goal: bool = False  # the default goal.reached: only for trials with a goal

    def passes(self, row: Mapping[str, Any], has_goal: bool) -> bool:
        if self.needs_goal and not has_goal:
            return True
        value = row.get(self.column)
        if value is None:
            return self.or_none
        if self.op is None:
            return bool(value)
        try:
            return bool(_OPS[self.op](value, self.value))
        except TypeError:  # a number against a word
            return False


def parse_criteria(texts: Iterable[str] | None, source: str, line: int | None,
                   known: Iterable[str] | None = None) -> tuple[Criterion, ...]:
    """The criteria (None or empty: the default), each checked against the known columns (by default a trial's:
    :func:`columns`); ConfigError at ``source:line`` for one that does not parse or names no column."""
    known = set(known if known is not None else columns())
    if not texts:
        return tuple(_criterion(text, known, source, line, needs_goal=text == GOAL_CRITERION)
                     for text in DEFAULT_CRITERIA)
    return tuple(_criterion(text, known, source, line) for text in texts)


def _criterion(text: str, known: set[str], source: str, line: int | None, needs_goal: bool = False) -> Criterion:
    match = _CRITERION.match(text)
    if match is None:
        raise ConfigError(source, line, f"success: {text!r} is not COLUMN or COLUMN OP VALUE (OP one of "
                                        f"{' '.join(_OPS)}), e.g. 'min_distance_m >= 0.5 or none'")
    column = match["column"]
    if column not in known:
        close = difflib.get_close_matches(column, sorted(known), n=3)
        raise ConfigError(source, line, f"success: no column {column!r}" +
                          (f"; did you mean {', '.join(close)}?" if close else
                           "; the columns are the metrics (docs/METRICS.md) flattened, and status, stopped"))
    return Criterion(text, column, match["op"], _value(match["value"]) if match["op"] else None,
                     bool(match["or_none"]), needs_goal)


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def not_met(criteria: Iterable[Criterion], row: Mapping[str, Any], has_goal: bool) -> list[str]:
    """The criteria ``row`` (a flattened metrics.json with status and stopped) misses, in order."""
    return [c.text for c in criteria if not c.passes(row, has_goal)]


def has_goal(metrics: Mapping[str, Any] | None) -> bool:
    """Whether the trial had a goal: the one its log's /map gave (the trial's, or its map's default)."""
    return bool(metrics) and (metrics.get("goal") or {}).get("xy") is not None


def judge(criteria: tuple[Criterion, ...], metrics: Mapping[str, Any], status: str,
          stopped: str | None) -> dict[str, Any]:
    """metrics.json's ``verdict``: passed, the failed criteria (``status == ok`` first when the trial did not run to
    its end), every criterion judged, and how the trial ended."""
    row = {**flatten_metrics(metrics), "status": status, "stopped": stopped}
    failed = ([RAN_TO_ITS_END] if status != "ok" else []) + not_met(criteria, row, has_goal(metrics))
    return {"passed": not failed, "failed": failed, "criteria": [c.text for c in criteria
                                                                 if not c.needs_goal or has_goal(metrics)],
            "status": status, "stopped": stopped}


def flatten_metrics(metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """metrics.json as one level of dotted keys (``intrusions.intimate.entries``) plus ``collisions.total``."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if prefix in SKIPPED_METRICS or prefix.endswith(SKIPPED_SUFFIXES):
            return
        if isinstance(value, Mapping):
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else str(key), value[key])
        elif not isinstance(value, (list, tuple)):
            out[prefix] = value

    walk("", metrics or {})
    if metrics:
        collisions = metrics.get("collisions") or {}
        out["collisions.total"] = sum(int(collisions.get(k) or 0) for k in
                                      ("robot_initiated", "person_initiated", "unclassified"))
    return out


@functools.lru_cache(maxsize=1)
def metric_columns() -> tuple[str, ...]:
    """Every metric column a trial's metrics.json gives (from the metrics of an empty log)."""
    from .report.metrics import compute_metrics

    template = compute_metrics({})
    template["log"] = {"complete": True, "end_s": 0.0, "messages": 0, "stopped": None}
    return tuple(sorted(flatten_metrics(template)))


def columns() -> tuple[str, ...]:
    """The columns a criterion may name: how the trial ended and every metric."""
    return (*RUN_COLUMNS, *metric_columns())
