"""``run_sweep``: check the sweep, skip what is done, run the rest on Dask, write the table, the summary, the
plots and report.html.

    from hil.trial.sweep import run_sweep
    outcome = run_sweep("config/sweeps/guide.yaml", "sweeps/guide", workers=2)
    print(outcome.summary_text)

The output folder holds ``results.csv`` and ``results.jsonl`` (a row per trial), ``summary.csv`` (a row per
condition), ``plots/*.png``, ``report.html``, ``trials/CONDITION/seed=N/`` (each trial's own folder: trial.mcap,
metrics.json, topdown.png, output.txt, done.json) and ``logs/`` (the trial processes' own output).
"""
from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..report.failure import cause_counts
from .progress import Progress, format_duration
from .spec import Sweep, load_sweep
from .store import read_done, remove_stale_attempts
from .summary import by_axis, by_condition, format_summary, worst
from .table import columns_of, make_row, metric_columns, parse_criteria, write_csv, write_jsonl

RESULTS_CSV, RESULTS_JSONL, SUMMARY_CSV, REPORT_HTML, PLOTS = ("results.csv", "results.jsonl", "summary.csv",
                                                               "report.html", "plots")


@dataclass
class SweepOutcome:
    sweep: Sweep
    out: Path
    rows: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    worst: list[dict[str, Any]]
    ran: int  # trials run now
    skipped: int  # trials found done
    interrupted: bool = False
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.rows) == len(self.sweep.jobs)

    @property
    def summary_text(self) -> str:
        return format_summary(self.summaries)


def run_sweep(sweep: Sweep | str | Path, out: str | Path | None = None, *, workers: int | None = None,
              scheduler: str | None = None, timeout_s: float | None = None, grace_s: float | None = None,
              retry_failed: bool = False, stream: TextIO | None = None, tty: bool | None = None,
              observer: Callable[[dict[str, Any]], None] | None = None,
              foxglove: tuple[str, int] | None = None, foxglove_worker: int = 0) -> SweepOutcome:
    """Run a sweep (a file or a loaded :class:`Sweep`) into ``out`` (default ``sweeps/NAME``). A bad sweep
    raises ConfigError (file:line) before anything starts. Trials already done there with the same hash are
    skipped (``retry_failed``: those that failed or timed out run again). Ctrl-C writes the table of what is
    done (``outcome.interrupted``); the same call later goes on from there. ``foxglove`` (host, port): the trials
    that worker ``foxglove_worker`` runs are served live to Foxglove there, one after another."""
    from .engine import SweepInterrupted, run_jobs

    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep, timeout_s=timeout_s)
    elif timeout_s is not None:
        from dataclasses import replace

        sweep = replace(sweep, timeout_s=float(timeout_s))
    metrics = metric_columns()
    criteria = parse_criteria(sweep)  # on a trial's columns: the same criteria judge each trial (trial/verdict.py)
    out = Path(out) if out is not None else Path("sweeps") / sweep.name
    out.mkdir(parents=True, exist_ok=True)
    records: dict[int, dict[str, Any]] = {}
    for job in sweep.jobs:
        done = read_done(out / job.folder, job.hash)
        if done is not None and not (retry_failed and done.get("status") != "ok"):
            records[job.index] = done
    skipped = len(records)
    to_run = [job for job in sweep.jobs if job.index not in records]
    progress = Progress(sweep.name, len(sweep.jobs), skipped, stream=stream, tty=tty)
    progress.begin()
    interrupted = False
    try:
        ran = run_jobs(to_run, out, timeout_s=sweep.timeout_s, progress=progress, workers=workers,
                       scheduler=scheduler, grace_s=grace_s, rerun=retry_failed, observer=observer,
                       foxglove=foxglove, foxglove_worker=foxglove_worker)
    except SweepInterrupted as stop:
        ran = stop.records
        interrupted = True
    records.update(ran)
    if not interrupted or scheduler is None:  # a remote cluster may still be running cancelled trials
        remove_stale_attempts(out / "trials")
    rows = [make_row(job, records[job.index], sweep.axes, criteria) for job in sweep.jobs if job.index in records]
    outcome = SweepOutcome(sweep, out, rows, by_condition(rows), worst(rows, sweep.worst), len(ran), skipped,
                           interrupted)
    _write(outcome, metrics, [c.text for c in criteria])
    elapsed = format_duration(progress.clock() - progress.started_at) if progress.started_at is not None else "?"
    progress.end(f"sweep {sweep.name}: {len(rows)} of {len(sweep.jobs)} trials in {out} ({outcome.ran} run, "
                 f"{skipped} done before, {elapsed})" + ("; interrupted: run it again to go on" if interrupted else ""))
    return outcome


def _write(outcome: SweepOutcome, metrics: list[str], criteria: list[str]) -> None:
    from .html import write_report
    from .plots import write_plots

    out, sweep, rows = outcome.out, outcome.sweep, outcome.rows
    columns = columns_of(rows, sweep.axes, metrics)
    files = {"csv": out / RESULTS_CSV, "jsonl": out / RESULTS_JSONL, "summary": out / SUMMARY_CSV,
             "report": out / REPORT_HTML}
    write_csv(rows, columns, files["csv"])
    write_jsonl(rows, columns, files["jsonl"])
    _write_summary(outcome.summaries, files["summary"])
    (out / "sweep.json").write_text(json.dumps({"source": sweep.source, "name": sweep.name, "axes": sweep.axes,
                                                "seeds": sweep.seeds, "timeout_s": sweep.timeout_s,
                                                "success": criteria, "trials": len(sweep.jobs)}, indent=1) + "\n",
                                    encoding="utf-8")
    if rows:
        figures = write_plots(rows, outcome.summaries, by_axis(rows, sweep.axes), out / PLOTS, sweep.name)
        files.update({f.stem: f for f in figures})
        write_report(files["report"], title=sweep.name, source=sweep.source, rows=rows, summaries=outcome.summaries,
                     worst=outcome.worst, figures=figures, criteria=criteria,
                     tables=[RESULTS_CSV, RESULTS_JSONL, SUMMARY_CSV], out=out)
    outcome.files = files


def _write_summary(summaries: list[dict[str, Any]], path: Path) -> None:
    """One row per condition; the failures' causes as a column each (``failures.odometry_drift``: how many trials
    of that condition failed for it, 0 when none did), the causes any condition had, in their fixed order."""
    causes = list(cause_counts([{"cause": c} for s in summaries for c in s.get("failures") or {}]))
    flat = [{**{k: v for k, v in s.items() if k != "failures"},
             **{f"failures.{c}": (s.get("failures") or {}).get(c, 0) for c in causes}} for s in summaries]
    columns = list(dict.fromkeys(k for s in flat for k in s))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for s in flat:
            writer.writerow(["" if s.get(c) is None else s.get(c) for c in columns])
