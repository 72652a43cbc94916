"""Sweeps: many trials of one controller over axes (seeds, scenarios, crowds and their density, time bands,
start poses, controller parameters) on dask.distributed, and the table, summary and plots that say how often it
fails, and where.

    from hil.trial.sweep import load_sweep, run_sweep
    outcome = run_sweep("config/sweeps/guide.yaml", "sweeps/guide", workers=2)

    spec.py       what a sweep is: a trial plus grid/cases/seeds, expanded into checked jobs (file:line)
    engine.py     the jobs on Dask: a LocalCluster of worker processes or an existing scheduler; retries
    worker.py     the Dask task: one trial in the worker thread's trial process, with a hard wall timeout
    runner.py     the trial process: Trial(spec=...).run(folder), one after another, JSON lines in and out
    store.py      trial folders, done markers, attempts (resume, retries that cannot mix files)
    table.py      a row per trial, metrics flattened, success criteria; CSV and JSON lines
    summary.py    per condition: success rate with Wilson's interval, metric percentiles; the worst trials
    plots.py      matplotlib figures (Agg); html.py: report.html
    progress.py   the progress line on stderr
    run.py        run_sweep: all of the above in order
    cli.py        hil sweep

Names are imported lazily: ``import trial.sweep`` imports neither Dask nor matplotlib.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Sweep", "SweepOutcome", "load_sweep", "run_sweep"]

_WHERE = {"Sweep": "spec", "load_sweep": "spec", "SweepOutcome": "run", "run_sweep": "run"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'hil.trial.sweep' has no attribute {name!r}")
