"""The sweep's table: one row per trial (its axis values, seed, status, error, times, folder, every metric
flattened, success), written as CSV and as JSON lines.

JSON lines rather than Parquet: it needs no pyarrow (tens of MB for a table of a few thousand rows), keeps the
types CSV loses (null, true/false, lists such as a start pose), is appended and read line by line, and every
table tool reads it (``pandas.read_json(path, lines=True)``, polars, DuckDB's ``read_json_auto``).

Rows come in the sweep's order (conditions as the file gives them, then seeds), never in the order trials
finished, and nothing in a row depends on where or when it ran except ``wall_s``: the same sweep gives the same
table.

**Success** is decided here, from the row, so it can change without running anything again: a trial succeeds
when it ran to its end (status ok) and meets every criterion of the sweep's ``success:`` list, judged exactly as
one trial's verdict is (trial/verdict.py: the criteria's syntax, the default ``goal.reached`` for trials with a
goal and ``collisions.robot_initiated == 0``).
"""
from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import verdict
from ..verdict import Criterion, flatten_metrics, metric_columns  # noqa: F401 - the table's columns, re-exported
from .spec import PARAMS, Job, Sweep, format_value

BASE_COLUMNS = ("trial", "condition")
RESULT_COLUMNS = ("seed", "status", "success", "not_met", "failure", "error", "stopped", "sim_s", "wall_s",
                  "goal_reached_at_s", "folder")


def parse_criteria(sweep: Sweep, columns: Iterable[str] | None = None) -> tuple[Criterion, ...]:
    """The sweep's success criteria (trial/verdict.py: the same as a trial's), checked against the columns
    (default: a trial's), at the file:line of ``success:``."""
    return verdict.parse_criteria(sweep.success, sweep.source, sweep.success_line, columns)


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
    missed = verdict.not_met(criteria, row, verdict.has_goal(record.get("metrics")))
    row["success"] = row["status"] == "ok" and not missed
    row["not_met"] = "; ".join(missed) or None  # why a trial that ran to its end is not a success
    row["failure"] = None if row["success"] else _failure_cause(record.get("metrics"))
    return row


def _failure_cause(metrics: Mapping[str, Any] | None) -> str | None:
    """The first cause of the trial's own ``failure`` (trial/report/failure.py), as its metrics.json says."""
    failure = (metrics or {}).get("failure")
    return str(failure["cause"]) if isinstance(failure, Mapping) and failure.get("cause") else None


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
