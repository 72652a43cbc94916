"""``hil report DIR``: metrics.json and topdown.png rebuilt from DIR/trial.mcap alone.

The log is the record of a trial; the metrics and the picture are views of it. Rebuilding them from the log
means a metric can be fixed or added later and old trials re-scored, and that a crashed trial (no footer) still
gets its report: the report says how far the log goes.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..record.log import read_log
from ..record.recorder import LOG_NAME
from .failure import BLOCK_WINDOW_S, classify_failure
from .metrics import compute_metrics, rounded, write_metrics
from .topdown import write_topdown

METRICS_NAME = "metrics.json"
ERROR_CHARS = 500  # a failed run's error kept in the verdict: its first line, at most this long
TOPDOWN_NAME = "topdown.png"


def build_report(trial_dir: str | os.PathLike[str], *, status: str | None = None,
                 stopped: str | None = None, error: str | None = None) -> dict[str, Any]:
    """Read DIR/trial.mcap, write DIR/metrics.json and DIR/topdown.png; return the metrics written.

    metrics.json is ``compute_metrics`` of the log plus a ``log`` section: whether the log was complete, how many
    messages it held, and why reading stopped when it was cut short; and the ``verdict`` (trial/verdict.py) by the
    trial's ``success`` criteria (from the log's /trial/meta) and how it ended (``status``, ``stopped``: the
    run's; None, as ``hil report`` rebuilds it: what the metrics.json there said, else ok). ``error``: what ended
    a failed run (its first line, kept in the verdict: the failure's cause tells the controller's error from the
    world's by it).
    """
    trial_dir = Path(trial_dir)
    if status is None:
        status, stopped, error = _previous_ending(trial_dir / METRICS_NAME)
    log = read_log(trial_dir / LOG_NAME)
    metrics = compute_metrics(log.messages)
    metrics["log"] = {"complete": log.complete, "messages": log.count(), "stopped": log.stopped,
                      "end_s": round(max((m[-1].t for m in log.messages.values() if m), default=0.0), 4),
                      "repaired": log.repaired}  # hil log repair: the trial was cut short, the file is whole
    meta = log.messages.get("/trial/meta") or ()
    resumed = meta[0].data.get("resumed_from") if meta and isinstance(meta[0].data, dict) else None
    if resumed:  # a trial started from a saved state (trial/state): its metrics count from there
        metrics["resumed_from"] = {**resumed, "counted_from_s": resumed["t"]}
    metrics["verdict"] = _verdict(meta, metrics, status, stopped, str(trial_dir / LOG_NAME))
    if error and status != "ok":
        metrics["verdict"]["error"] = error.splitlines()[0][:ERROR_CHARS]
    failure = classify_failure(log.messages, metrics)
    if failure is not None:  # why it failed (trial/report/failure.py): only a trial that did not pass has one
        metrics["failure"] = rounded(failure)
    _write_whole(trial_dir / METRICS_NAME, lambda path: write_metrics(metrics, path))
    _write_whole(trial_dir / TOPDOWN_NAME, lambda path: write_topdown(log.messages, path, metrics))
    return metrics


def _verdict(meta: Any, metrics: dict[str, Any], status: str, stopped: str | None, source: str) -> dict[str, Any]:
    from ..verdict import judge, parse_criteria

    data = meta[0].data if meta and isinstance(meta[0].data, dict) else {}
    texts = (data.get("trial") or {}).get("success") or ()
    return judge(parse_criteria(texts, source, None), metrics, status, stopped)


def _previous_ending(path: Path) -> tuple[str, str | None, str | None]:
    """How the trial ended (status, stopped, error), as the metrics.json being rebuilt says (a trial's run wrote
    it); ok when it does not."""
    import json

    try:
        verdict = json.loads(path.read_text(encoding="utf-8")).get("verdict") or {}
    except (OSError, ValueError, AttributeError):
        verdict = {}
    status = verdict.get("status") if isinstance(verdict, dict) else None
    error = verdict.get("error") if isinstance(verdict, dict) and isinstance(verdict.get("error"), str) else None
    return (status, verdict.get("stopped"), error) if isinstance(status, str) else ("ok", None, None)


class ReportWriteError(ValueError):
    """A report file could not be written (a full disk): names it and the disk; no half-written file is left."""


def _write_whole(path: Path, write) -> None:
    """``write(part)`` into a scratch file beside ``path``, then moved over it: a full disk leaves the old file
    (or none), never half of a new one."""
    from ..record.logfile import describe_full

    part = path.with_name(f".{path.name}.part")
    try:
        write(part)
        os.replace(part, path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise ReportWriteError(f"{path}: cannot write it: {describe_full(path, exc)} ({exc.strerror})") from None


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}{unit}"
    return f"{value}{unit}"


def format_metrics(metrics: dict[str, Any]) -> str:
    """The metrics as a short human-readable table (the file has everything)."""
    c = metrics["collisions"]
    to_goal = _fmt(metrics["time_to_goal_s"], " s") if metrics["goal"]["reached"] else \
        "not reached" if metrics["goal"]["xy"] is not None else "no goal in the log"
    lines = [
        f"time to goal        {to_goal}",
        f"duration            {_fmt(metrics['duration_s'], ' s')}",
        f"path length         {_fmt(metrics['path_length_m'], ' m')}",
        f"time not moving     {_fmt(metrics['time_not_moving_s'], ' s')}",
        f"people seen         {metrics['samples']['people_seen']}",
        f"min distance        {_fmt(metrics['min_distance_m'], ' m')} (centre to centre)",
        (f"min clearance       {_fmt(metrics['min_clearance_m'], ' m')} (between nominal body discs; below 0 the "
         f"discs overlap, which is not a collision)"),
        f"mean distance       {_fmt(metrics['mean_distance_m'], ' m')} (to the nearest person)",
    ]
    for name, zone in metrics["intrusions"].items():
        lines.append(f"{name + ' space':<19} {zone['entries']} entries, {zone['person_seconds']:.2f} person-s "
                     f"(< {zone['radius_m']} m)")
    touched = "the physics engine's contacts" if c["source"] == "contacts" else "discs within the contact margin"
    lines.append(f"collisions          {c['robot_initiated']} robot-initiated, {c['person_initiated']} "
                 f"person-initiated (what touched: {touched})")
    for name, sensor in (metrics.get("sensors") or {}).items():
        invalid = sensor.get("invalid")
        if invalid:
            causes = ", ".join(f"{cause} {n}" for cause, n in invalid.items() if cause != "total")
            lines.append(f"{name + ' invalid':<19} {invalid['total']} readings ({causes})")
    script = metrics.get("script") or {}
    if script.get("errors"):
        lines.append(f"{SCRIPT_ERROR:<19} {script['first_error']} (the script stopped there)")
    log = metrics.get("log")
    if log is not None and not log["complete"]:
        lines.append(f"log                 cut short at {log['end_s']} s: {log['stopped']}")
    elif log is not None and log.get("repaired"):
        lines.append(f"log                 cut short at {log['end_s']} s ({log['repaired'].get('stopped')}); "
                     "repaired: complete and indexed")
    verdict = metrics.get("verdict")
    if verdict is not None:
        judged = ", ".join(verdict["criteria"]) or "ran to its end"
        lines.append(f"verdict             passed ({judged})" if verdict["passed"] else
                     f"verdict             failed, not met: {' and '.join(verdict['failed'])}")
    lines += format_failure(metrics.get("failure"))
    return "\n".join(lines)


def format_failure(failure: dict[str, Any] | None) -> list[str]:
    """The ``failure`` lines: the first cause, then every cause with its time and the evidence that decided it."""
    if not failure:
        return []
    lines = [f"{FAILURE:<19} {failure['cause']}"]
    for cause in failure["causes"]:
        lines.append(f"  {cause['t']:7.2f} s  {cause['label']}: {describe_cause(cause)}")
    return lines


def describe_cause(cause: dict[str, Any]) -> str:
    """One cause's evidence in a few words (docs/METRICS.md, "Why a trial failed", lists it all)."""
    e = cause.get("evidence") or {}
    name = cause["cause"]
    if name in ("person_not_sensed", "sensed_no_stop", "person_initiated"):
        ring = e.get("ring") or {}
        seen = ", ".join(f"{what} {n}" for what, n in (ring.get("observations") or {}).items()) or "nothing"
        said = (f"ring echoed from them at {_fmt(ring.get('distance_m'), ' m')} (sensor {ring.get('sensor')}, "
                f"{_fmt(ring.get('first_sensed_t'), ' s')})" if ring.get("sensed") else
                f"ring in the {ring.get('window_s', [0, 0])[1] - ring.get('window_s', [0, 0])[0]:.0f} s before: {seen}")
        cameras = "".join(f"; {name} showed them in {c['frames_with_person']} of {c['frames']} frames"
                          for name, c in sorted((e.get("cameras") or {}).items()))
        return (f"person {e.get('person')}, robot approaching at {_fmt(e.get('robot_approach_mps'), ' m/s')}, "
                f"person at {_fmt(e.get('person_approach_mps'), ' m/s')}; {said}{cameras}")
    if name == "part_lost":
        return ", ".join(f"part {p['part_id']} {p['kind']} at {_fmt(p['t'], ' s')}" +
                         (f", back at {_fmt(p['back_t'], ' s')}" if p.get("back_t") is not None else ", never back")
                         for p in e.get("parts") or ())
    if name in ("controller_error", "world_error", "interrupted") or "status" in e:
        stopped = e.get("stopped")
        text = f"the run ended {e.get('status')}" + (f" ({stopped})" if stopped and stopped != e.get("status") else "")
        return text + (f": {e['error']}" if e.get("error") else "")
    if name == "criterion":
        return f"not met: {e.get('criterion')}"
    text = f"{_fmt(e.get('distance_to_goal_m'), ' m')} from the goal, {_fmt(e.get('progress_m'), ' m')} closer in " \
           f"the last {BLOCK_WINDOW_S:.0f} s"
    if e.get("drift_m") is not None:
        text += f"; odometry {_fmt(e.get('drift_m'), ' m')} off the true position"
    if e.get("still_s"):
        text += f"; still for the last {_fmt(e['still_s'], ' s')}"
    near = e.get("nearest_person")
    if near and near["distance_m"] <= 2.0:
        text += f"; person {near['person']} {_fmt(near['distance_m'], ' m')} away"
    obstacle = e.get("obstacle")
    if obstacle:
        what = f"person {obstacle['person']}" if obstacle["kind"] == "person" else "a wall"
        where = "toward the goal" if obstacle.get("toward") == "goal" else "straight ahead"
        text += f"; {what} {_fmt(obstacle['distance_m'], ' m')} away {where}"
    return text


FAILURE = "failure"  # the label of format_metrics' failure line (shown red, as the script error is)
SCRIPT_ERROR = "script error"  # the line's label in format_metrics (shown red on the page and on a terminal)
ALARMS = (SCRIPT_ERROR, FAILURE)  # the lines shown red
RED, PLAIN = "\033[31m", "\033[0m"


def in_red(text: str, tty: bool) -> str:
    """format_metrics' text with its script error line red on a terminal (as the page shows it)."""
    if not tty:
        return text
    return "\n".join(f"{RED}{line}{PLAIN}" if line.startswith(ALARMS) else line for line in text.splitlines())


def cli(args: argparse.Namespace) -> int:
    trial_dir = Path(args.dir)
    if not (trial_dir / LOG_NAME).is_file():
        print(f"hil: error: {trial_dir / LOG_NAME}: no trial log there", file=sys.stderr)
        return 2
    if not getattr(args, "no_repair", False):
        _repair_if_cut_short(trial_dir / LOG_NAME)
    metrics = build_report(trial_dir)
    print(in_red(format_metrics(metrics), sys.stdout.isatty()))
    print(f"wrote {trial_dir / METRICS_NAME} and {trial_dir / TOPDOWN_NAME}")
    return 0


def _repair_if_cut_short(path: Path) -> None:
    """A log without its footer (a killed trial) is repaired first, and the user told what was done; one that
    cannot be repaired is reported as it is (our reader reads it as far as it goes)."""
    from ..record.repair import RepairError, repair_log

    if read_log(path).complete:
        return
    try:
        print(repair_log(path).text())
    except RepairError as exc:
        print(f"hil: note: the log is cut short and was not repaired: {exc}", file=sys.stderr)
