"""Sweeps on a real dask.distributed LocalCluster of 2 worker processes: the table is the trials run one
by one, a rerun skips what is done, a worker SIGKILLed mid-trial costs nothing, a controller that raises or never
ends is a row, and ``hil sweep`` writes the table, the summary, the plots and report.html.

Real parts: the workers are Dask's own processes, each trial runs in a worker's trial process through the trial
API, the crowd is a ``hil crowd --serve`` child of that process, pybullet is in it, the clock is the lockstep sim
clock. Trials are short (2 simulated seconds) so that the module stays within a minute or two on a loaded
2-core machine.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster

from bench.sweep import CONTROLLER, SPEC
from test_process import _alive, _children
from hil.trial import Trial
from hil.trial.sweep import load_sweep, run_sweep
from hil.trial.sweep.table import flatten_metrics, read_jsonl

EAST = CONTROLLER  # drives east at params.speed; params fragile (raises) and spin (never ticks again)
GRID = SPEC.format(goal="\ngoal: [-17.2, 0]", duration=2)  # the benchmark's 2 x 2 x 2, with a goal
VOLATILE = ("wall_s",)  # the only column that depends on when and where a trial ran


def stable(rows):
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


@pytest.fixture(scope="module")
def cluster():
    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
        local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                             dashboard_address=None, silence_logs=logging.ERROR)
    yield local
    local.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    (folder / "east.py").write_text(EAST)
    (folder / "grid.yaml").write_text(GRID)
    return folder


class Starts:
    """The start events the workers send (trial id, worker pid, trial-process pid)."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)


@pytest.fixture(scope="module")
def first(cluster, project):
    starts = Starts()
    outcome = run_sweep(project / "grid.yaml", project / "first", scheduler=cluster.scheduler_address,
                        observer=starts)
    return outcome, starts


def test_a_2x2x2_sweep_gives_8_rows_equal_to_the_same_trials_run_one_by_one(first, project):
    outcome, starts = first
    rows = read_jsonl(project / "first" / "results.jsonl")
    assert len(rows) == 8 and outcome.complete and outcome.ran == 8
    assert all(r["status"] == "ok" for r in rows), [(r["trial"], r["error"]) for r in rows]
    assert [(r["crowd_scale"], r["params.speed"], r["seed"]) for r in rows] == \
        [(c, s, seed) for c in (0.5, 1.5) for s in (0.2, 0.4) for seed in (0, 1)], "rows in the sweep's order"
    assert len({e["pid"] for e in starts.events}) == 2, "both worker processes ran trials"
    sweep = load_sweep(project / "grid.yaml")
    for job, row in zip(sweep.jobs, rows):
        alone = Trial(spec=job.spec).run(project / "alone" / job.folder)
        assert alone.ok, alone.error
        swept = project / "first" / job.folder
        assert {k: row[k] for k in flatten_metrics(alone.metrics.to_dict())} == \
            flatten_metrics(alone.metrics.to_dict()), job.id
        for name in ("trial.mcap", "metrics.json"):
            assert (swept / name).read_bytes() == (project / "alone" / job.folder / name).read_bytes(), \
                f"{job.id}: {name} differs from the trial run alone"
    assert rows[0]["time_to_goal_s"] > rows[2]["time_to_goal_s"], "0.2 m/s takes longer than 0.4 m/s"
    csv_lines = (project / "first" / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 9 and csv_lines[0].startswith("trial,condition,crowd_scale,params.speed,seed,status")


def test_a_rerun_skips_all_8_and_gives_the_same_table(first, cluster, project):
    outcome, _ = first
    before = {p: p.stat().st_mtime_ns for p in (project / "first" / "trials").rglob("done.json")}
    starts = Starts()
    again = run_sweep(project / "grid.yaml", project / "first", scheduler=cluster.scheduler_address,
                      observer=starts)
    assert again.ran == 0 and again.skipped == 8 and not starts.events, "nothing ran again"
    assert again.rows == outcome.rows, "the same table, wall times included (they are the recorded ones)"
    assert {p: p.stat().st_mtime_ns for p in (project / "first" / "trials").rglob("done.json")} == before
    (project / "east.py").write_text(EAST + "\n# edited\n")  # an edited controller is another trial
    try:
        assert all(job.hash != old.hash for job, old in zip(load_sweep(project / "grid.yaml").jobs,
                                                            outcome.sweep.jobs))
    finally:
        (project / "east.py").write_text(EAST)


def test_a_worker_killed_mid_sweep_still_gives_all_8_rows(first, cluster, project):
    outcome, _ = first
    with Client(cluster.scheduler_address) as client:
        worker_pids = set(client.run(os.getpid).values())
    killed = {}

    def kill_once(event):
        if killed:
            return
        killed["event"] = event

        def later():
            killed["children"] = [pid for pid, _ in _children(event["runner"])]  # the trial's crowd
            os.kill(event["pid"], signal.SIGKILL)

        killed["timer"] = threading.Timer(1.0, later)  # well into the trial (2 s of sim time, world and crowd)
        killed["timer"].start()

    again = run_sweep(project / "grid.yaml", project / "killed", scheduler=cluster.scheduler_address,
                      observer=kill_once)
    killed["timer"].join()
    assert killed["event"]["pid"] in worker_pids, "the event named a worker process of the cluster"
    assert again.complete and all(r["status"] == "ok" for r in again.rows), \
        [(r["trial"], r["error"]) for r in again.rows]
    assert stable(again.rows) == stable(outcome.rows), "the same table as without the kill"
    assert not _alive(killed["event"]["pid"]) and not _alive(killed["event"]["runner"]), \
        "the worker and its trial process"
    assert killed["children"] and not any(_alive(pid) for pid in killed["children"]), "the crowd died with them"
    assert not list((project / "killed" / "trials").glob("*/.*.attempt-*")), "the killed attempt was cleaned up"


def test_a_trial_that_raises_or_never_ends_is_a_row_and_the_sweep_goes_on(cluster, project):
    (project / "stuck.yaml").write_text(textwrap.dedent('''\
        controller: east.py
        map: lab
        duration: 2
        timeout_s: 8
        cases:
          - {params: {speed: 0.2}}
          - {params: {speed: 0.4, fragile: true}}
          - {params: {spin: true}}
          - {duration: 100000}
    '''))
    outcome = run_sweep(project / "stuck.yaml", project / "stuck", scheduler=cluster.scheduler_address,
                        grace_s=2.0)
    ok, raised, spun, long = outcome.rows
    assert ok["status"] == "ok" and ok["success"], ok["error"]
    assert raised["status"] == "failed" and raised["error"] == "ValueError: too fast for me: 0.4"
    assert "too fast for me" in (project / "stuck" / raised["folder"] / "output.txt").read_text(), "traceback kept"
    assert spun["status"] == "timeout" and "killed" in spun["error"], spun["error"]
    assert long["status"] == "timeout" and long["stopped"] == "duration", long["error"]
    assert 0 < long["sim_s"] < 100000 and long["log.complete"] is True, "ended like a trial at its duration"
    assert not any(r["success"] for r in (raised, spun, long))
    assert [s["condition"] for s in outcome.summaries] == [r["condition"] for r in outcome.rows]


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def test_hil_sweep_on_a_local_cluster_writes_the_table_summary_plots_and_report(project):
    (project / "fragile.yaml").write_text(textwrap.dedent('''\
        controller: east.py
        map: lab
        duration: 2
        goal: [0.3, 0]
        params: {fragile: true}
        grid:
          params: {speed: [0.2, 0.4]}
    '''))
    proc = hil("sweep", "fragile.yaml", "--workers", "2", "--out", "cli", cwd=project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2/2 done" in proc.stderr and "1 failed" in proc.stderr, proc.stderr
    assert "failed: speed=0.4/seed=0: ValueError: too fast for me: 0.4" in proc.stderr
    out = project / "cli"
    rows = read_jsonl(out / "results.jsonl")
    assert [(r["params.speed"], r["status"], r["success"]) for r in rows] == [(0.2, "ok", True), (0.4, "failed", False)]
    assert "speed=0.4" in proc.stdout and "ValueError: too fast for me: 0.4" in proc.stdout, "the worst trial listed"
    summary = (out / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("condition,n,successes,success_rate,ci_low,ci_high") and len(summary) == 3
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "http" not in html.replace("http-equiv", ""), \
        "self-contained: the figures inline, nothing fetched"
    assert {p.name for p in (out / "plots").glob("*.png")} == {"success_by_condition.png", "success_by_axis.png",
                                                                 "metrics.png"}
    assert json.loads((out / "trials" / "speed=0.2" / "seed=0" / "done.json").read_text())["record"]["status"] == "ok"
