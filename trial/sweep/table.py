"""The sweep's table: one row per trial (its axis values, seed, status, error, times, folder, every metric
flattened, success), written as CSV and as JSON lines.

JSON lines rather than Parquet: it needs no pyarrow (tens of MB for a table of a few thousand rows), keeps the
types CSV loses (null, true/false, lists such as a start pose), is appended and read line by line, and every
table tool reads it (``pandas.read_json(path, lines=True)``, polars, DuckDB's ``read_json_auto``).

Rows come in the sweep's order (conditions as the file gives them, then seeds), never in the order trials
finished, and nothing in a row depends on where or when it ran except ``wall_s``: the same sweep gives the same
table.

**Success** is decided here, from the row, so it can change without running anything again: a trial succeeds
when it ran to its end (status ok) and meets every criterion of the sweep's ``success:`` list, by default
``goal.reached`` (for trials with a goal) and ``collisions.robot_initiated == 0``. A criterion is ``COLUMN``
(true), or ``COLUMN OP VALUE`` with OP one of == != < <= > >= and VALUE a number, true, false, none or a word;
a column without a value (``min_distance_m`` when nobody came near) fails a comparison unless the criterion ends
with ``or none``.
"""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.devices.yaml_source import ConfigError

from .spec import PARAMS, Job, Sweep, format_value

BASE_COLUMNS = ("trial", "condition")
RESULT_COLUMNS = ("seed", "status", "success", "not_met", "error", "stopped", "sim_s", "wall_s", "goal_reached_at_s",
                  "folder")
SKIPPED_METRICS = ("meta", "params", "collisions.events", "goal.xy")  # the spec again, thresholds, lists
SKIPPED_SUFFIXES = (".radius_m",)  # the zones' thresholds (metrics.params has them)
DEFAULT_SUCCESS = ("goal.reached", "collisions.robot_initiated == 0")
NO_GOAL_DEFAULT_SUCCESS = ("collisions.robot_initiated == 0",)


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


def metric_columns() -> list[str]:
    """Every metric column a trial's metrics.json gives (from the metrics of an empty log)."""
    from ..report.metrics import compute_metrics

    template = compute_metrics({})
    template["log"] = {"complete": True, "end_s": 0.0, "messages": 0, "stopped": None}
    return sorted(flatten_metrics(template))


# --- success --------------------------------------------------------------------------------------------------
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


def parse_criteria(sweep: Sweep, columns: Iterable[str]) -> tuple[Criterion, ...]:
    """The sweep's success criteria, checked against the table's columns (file:line of ``success:``)."""
    known = set(columns)
    if not sweep.success:
        return tuple(_criterion(text, known, sweep, needs_goal=text == "goal.reached") for text in DEFAULT_SUCCESS)
    return tuple(_criterion(text, known, sweep) for text in sweep.success)


def _criterion(text: str, known: set[str], sweep: Sweep, needs_goal: bool = False) -> Criterion:
    match = _CRITERION.match(text)
    if match is None:
        raise ConfigError(sweep.source, sweep.success_line, f"success: {text!r} is not COLUMN or COLUMN OP VALUE "
                                                            f"(OP one of {' '.join(_OPS)}), e.g. "
                                                            f"'min_distance_m >= 0.5 or none'")
    column = match["column"]
    if column not in known:
        import difflib

        close = difflib.get_close_matches(column, sorted(known), n=3)
        raise ConfigError(sweep.source, sweep.success_line, f"success: no column {column!r}" +
                          (f"; did you mean {', '.join(close)}?" if close else ""))
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


# --- rows ---------------------------------------------------------------------------------------------------
def make_row(job: Job, record: Mapping[str, Any], axes: tuple[str, ...], criteria: tuple[Criterion, ...]) -> dict:
    condition = dict(job.condition)
    row: dict[str, Any] = {"trial": job.id, "condition": job.condition_label}
    for axis in axes:
        row[axis] = condition[axis] if axis in condition else _spec_value(job, axis)
    row.update({"seed": job.seed, "status": record.get("status"), "success": None, "not_met": None,
                "error": record.get("error"),
                "stopped": record.get("stopped"), "sim_s": record.get("sim_s"),
                "wall_s": _rounded(record.get("wall_s")),
                "goal_reached_at_s": record.get("goal_reached_at_s"), "folder": job.folder})
    row.update(flatten_metrics(record.get("metrics")))
    has_goal = job.spec.goal is not None
    missed = [c.text for c in criteria if not c.passes(row, has_goal)]
    row["success"] = row["status"] == "ok" and not missed
    row["not_met"] = "; ".join(missed) or None  # why a trial that ran to its end is not a success
    return row


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def _spec_value(job: Job, axis: str) -> Any:
    if axis.startswith(f"{PARAMS}."):
        return job.spec.params.get(axis[len(PARAMS) + 1:])
    value = getattr(job.spec, axis)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def columns_of(rows: list[dict[str, Any]], axes: tuple[str, ...], metrics: list[str]) -> list[str]:
    """The table's columns: trial, condition, axes, results, then every metric (the usual ones first, any
    other a row has after them)."""
    head = [*BASE_COLUMNS, *axes, *RESULT_COLUMNS]
    extra = sorted({k for row in rows for k in row} - set(head) - set(metrics))
    return head + list(metrics) + extra


def write_csv(rows: list[dict[str, Any]], columns: list[str], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return format_value(value)
    return str(value)


def write_jsonl(rows: list[dict[str, Any]], columns: list[str], path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps({c: row.get(c) for c in columns}) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
