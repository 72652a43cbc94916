"""Sweep files, the table, the summary and the report without a cluster: what a sweep expands to, that
a bad one is refused at file:line before anything starts, seeds that come from the file, Wilson's interval,
success criteria, done markers, the progress line, the plots and report.html.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hil.devices.yaml_source import ConfigError
from hil.trial.sweep.progress import Progress
from hil.trial.sweep.spec import load_sweep
from hil.trial.sweep.store import commit, read_done
from hil.trial.sweep.summary import by_axis, by_condition, format_summary, wilson, worst
from hil.trial.sweep.table import flatten_metrics, metric_columns, parse_criteria

CONTROLLER = '"""Stand still."""\ndef main(robot):\n    for tick in robot.loop(hz=10):\n        pass\n'


def write(folder: Path, text: str, name: str = "s.yaml") -> Path:
    (folder / "c.py").write_text(CONTROLLER)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_sweep_expands_cases_times_grid_times_seeds_in_the_files_order(tmp_path):
    sweep = load_sweep(write(tmp_path, '''\
        controller: c.py
        map: arcade
        crowd: weekday
        params: {gain: 1.5}
        grid:
          scenario: [none, child_interacts]
          params: {cruise_m_s: [0.3, 0.45]}
        cases:
          - {crowd_start: "tue 10:00"}
          - {crowd_start: "sat 15:00", crowd: weekend}
        seeds: [7, 3]
    '''))
    assert len(sweep.jobs) == 2 * 2 * 2 * 2 and sweep.seeds == (7, 3)
    assert sweep.axes == ("crowd_start", "scenario", "params.cruise_m_s", "crowd")
    first, last = sweep.jobs[0], sweep.jobs[-1]
    assert first.condition_label == "crowd_start=tue 10:00 scenario=none params.cruise_m_s=0.3" and first.seed == 7
    assert last.condition_label == ("crowd_start=sat 15:00 crowd=weekend scenario=child_interacts "
                                    "params.cruise_m_s=0.45") and last.seed == 3
    assert dict(last.spec.params) == {"gain": 1.5, "cruise_m_s": 0.45}, "the varied parameter over the base ones"
    assert last.spec.crowd == ("weekend",) and last.spec.crowd_start == "sat 15:00" and last.spec.scenario == \
        "child_interacts"
    assert last.folder == "trials/crowd_start=sat-15-00,crowd=weekend,scenario=child_interacts,cruise_m_s=0.45/seed=3"
    assert len({j.folder for j in sweep.jobs}) == len(sweep.jobs) and len({j.hash for j in sweep.jobs}) == 16
    assert first.spec.controller == tmp_path / "c.py", "paths relative to the sweep file"


def test_seeds_and_hashes_come_from_the_file_not_from_where_it_runs(tmp_path, monkeypatch):
    text = '''\
        controller: c.py
        map: lab
        grid: {start: [[0, 0, 0], [1, 0, 0]]}
        seeds: 3
    '''
    one = load_sweep(write(tmp_path, text))
    monkeypatch.chdir(tmp_path)  # another working directory, the same sweep
    two = load_sweep(write(tmp_path, text))
    assert [(j.folder, j.seed, j.hash) for j in one.jobs] == [(j.folder, j.seed, j.hash) for j in two.jobs]
    assert [j.seed for j in one.jobs] == [0, 1, 2, 0, 1, 2], "every condition meets the same seeds"
    assert one.conditions == ["start=0,0,0", "start=1,0,0"]
    assert one.jobs[0].folder == "trials/start=0,0,0/seed=0"
    three = load_sweep(write(tmp_path, text.replace("seeds: 3", "seeds: 3\n        params: {speed: 2}")))
    assert {j.hash for j in three.jobs}.isdisjoint(j.hash for j in one.jobs), "other parameters, other trials"


def test_a_trial_file_is_a_sweep_of_one_trial(tmp_path):
    sweep = load_sweep(write(tmp_path, "controller: c.py\nmap: lab\nseed: 4\nduration: 5\n"))
    assert [(j.seed, j.condition_label, j.folder) for j in sweep.jobs] == [(4, "all", "trials/all/seed=4")]
    assert sweep.timeout_s == 60 + 10 * 5 and sweep.axes == ()


@pytest.mark.parametrize("text, line, words", [
    ("controller: c.py\nmap: lab\ngird: {seed: [1]}\n", 3, "unknown key 'gird'; did you mean 'grid'"),
    ("controller: c.py\nmap: lab\ngrid:\n  crowd_scale:\n    - 1\n    - -2\n", 6, "crowd_scale must be"),
    ("controller: c.py\nmap: arcade\ngrid:\n  scenario:\n    - none\n    - no_such_scene\n", 6,
     "no scenario of that name"),
    ("controller: c.py\nmap: lab\ngrid:\n  start: [centre, nowhere]\n", 4, "has no place 'nowhere'"),
    ("controller: c.py\nmap: lab\nseed: 1\nseeds: 3\n", 3, "give seeds:"),
    ("controller: c.py\nmap: lab\nseeds: [1, -1]\n", 3, "is not a seed"),
    ("controller: missing.py\nmap: lab\n", 1, "cannot read the controller"),
    ("controller: c.py\nmap: lab\ngrid: {seed: [1, 2]}\n", 3, "vary seeds with seeds:"),
    ("controller: c.py\nmap: lab\ncrowd_endpoint: tcp://127.0.0.1:5760\n", 3, "cannot share one served crowd"),
    ("controller: c.py\nmap: lab\ngrid: {duration: [1, 2, 1]}\n", 3, "lists 1 twice"),
    ("controller: c.py\nmap: lab\nsuccess: [min_distanse_m >= 0.5]\n", 3, "did you mean min_distance_m"),
    ("controller: c.py\nmap: lab\nsuccess: ['goal.reached ~ 3']\n", 3, "is not COLUMN or COLUMN OP VALUE"),
    ("controller: c.py\nmap: lab\ncases:\n  - {duration: 3}\n  - {duration: 3}\n", 5, "appears twice"),
    ("controller: c.py\nmap: lab\ngrid: {params: {cruise_m_s: 0.3}}\n", 3, "must be a non-empty list"),
])
def test_a_bad_sweep_is_refused_at_file_line_before_anything_starts(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        sweep = load_sweep(path)
        parse_criteria(sweep, ["trial", "status", *metric_columns()])
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert words in str(caught.value)


def test_hil_sweep_refuses_a_bad_sweep_with_file_line_and_starts_nothing(tmp_path):
    write(tmp_path, "controller: c.py\nmap: arcade\ngrid:\n  crowd: [weekday, nobody_knows]\n")
    proc = subprocess.run([sys.executable, "-m", "hil", "sweep", "s.yaml", "--out", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert proc.returncode == 2 and "s.yaml:4: crowd: " in proc.stderr and "nobody_knows" in proc.stderr, \
        proc.stderr
    assert not (tmp_path / "out").exists(), "nothing was started or written"


def test_wilson_interval():
    assert wilson(0, 0) is None
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4), "0 of 10 is not a certain 0"
    low, high = wilson(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == pytest.approx(1.0)
    low, high = wilson(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def _row(condition: str, status: str = "ok", success: bool = True, **metrics):
    return {"trial": f"{condition}/seed=0", "condition": condition, "status": status, "success": success,
            "wall_s": 1.0, "folder": f"trials/{condition}/seed=0", **metrics}


def test_summary_per_condition_and_axis_and_the_worst_first():
    rows = [_row("a", time_to_goal_s=10.0, min_distance_m=1.0, **{"collisions.total": 0}),
            _row("a", time_to_goal_s=20.0, min_distance_m=None, **{"collisions.total": 0}),
            _row("b", success=False, time_to_goal_s=None, min_distance_m=0.3, failure="sensed_no_stop",
                 **{"collisions.total": 2, "collisions.robot_initiated": 2}),
            _row("b", status="failed", success=False, failure="controller_error")]
    for row, axis in zip(rows, ("x", "x", "y", "y")):
        row["axis"] = axis
    a, b = by_condition(rows)
    assert (a["n"], a["successes"], a["success_rate"]) == (2, 2, 1.0) and a["time_to_goal_s.p50"] == 15.0
    assert a["min_distance_m.count"] == 1 and a["min_distance_m.mean"] == 1.0, "no value, not a zero"
    assert (b["success_rate"], b["failed"], b["ok"]) == (0.0, 1, 1) and b["collisions.total.mean"] == 2.0
    assert a["failures"] == {} and b["failures"] == {"sensed_no_stop": 1, "controller_error": 1}, \
        "the causes' fixed order: collisions before the goal's"
    text = format_summary([a, b])
    assert text.splitlines()[0].endswith("why they failed") and text.splitlines()[2].endswith(
        "sensed_no_stop 1, controller_error 1")
    assert [r["value"] for r in by_axis(rows, ["axis"])["axis"]] == ["x", "y"]
    assert [r["status"] for r in worst(rows, 2)] == ["failed", "ok"] and worst(rows, 2)[1]["min_distance_m"] == 0.3


def test_success_criteria_with_or_none_and_the_default_goal_only_with_a_goal(tmp_path):
    from hil.trial.sweep.table import make_row

    sweep = load_sweep(write(tmp_path, '''\
        controller: c.py
        map: lab
        success: [min_distance_m >= 0.5 or none, intrusions.intimate.entries == 0, goal.reached]
    '''))
    columns = ["trial", "status", *metric_columns()]
    criteria = parse_criteria(sweep, columns)
    job = sweep.jobs[0]
    metrics = {"min_distance_m": None, "intrusions": {"intimate": {"entries": 0}}, "goal": {"reached": True}}
    assert make_row(job, {"status": "ok", "metrics": metrics}, (), criteria)["success"] is True
    metrics["min_distance_m"] = 0.4
    row = make_row(job, {"status": "ok", "metrics": metrics}, (), criteria)
    assert row["success"] is False and row["not_met"] == "min_distance_m >= 0.5 or none"
    assert make_row(job, {"status": "failed", "metrics": None}, (), criteria)["success"] is False
    default = parse_criteria(load_sweep(write(tmp_path, "controller: c.py\nmap: lab\n", "d.yaml")), columns)
    no_goal = {"goal": {"reached": False}, "collisions": {"robot_initiated": 0}}
    assert make_row(job, {"status": "ok", "metrics": no_goal}, (), default)["success"] is True, \
        "a trial without a goal is not failed for not reaching one"


def test_flattened_metrics_cover_every_metric_and_count_collisions():
    flat = flatten_metrics({"goal": {"reached": True, "xy": [1, 2]}, "collisions": {"robot_initiated": 1,
                            "person_initiated": 2, "unclassified": 0, "events": [{}]}, "meta": {"seed": 1},
                            "intrusions": {"social": {"entries": 3, "radius_m": 3.6}}})
    assert flat == {"goal.reached": True, "collisions.robot_initiated": 1, "collisions.person_initiated": 2,
                    "collisions.unclassified": 0, "collisions.total": 3, "intrusions.social.entries": 3}
    assert {"time_to_goal_s", "min_distance_m", "intrusions.intimate.entries", "collisions.total",
            "log.complete"} <= set(metric_columns())


def test_done_markers_resume_and_two_attempts_of_one_trial_do_not_mix(tmp_path):
    final = tmp_path / "trials" / "c" / "seed=0"
    first, second = tmp_path / "trials" / "c" / ".a1", tmp_path / "trials" / "c" / ".a2"
    for attempt, note in ((first, "first"), (second, "second")):
        attempt.mkdir(parents=True)
        (attempt / "trial.mcap").write_text(note)
    assert read_done(final, "h") is None
    assert commit(first, final, "h", {"status": "ok", "n": 1}) == {"status": "ok", "n": 1}
    assert commit(second, final, "h", {"status": "ok", "n": 2}) == {"status": "ok", "n": 1}, "the first one won"
    assert (final / "trial.mcap").read_text() == "first" and not second.exists()
    assert read_done(final, "other spec") is None, "another spec's trial is not done"
    third = tmp_path / "trials" / "c" / ".a3"
    third.mkdir()
    (third / "trial.mcap").write_text("third")
    assert commit(third, final, "h", {"status": "ok", "n": 3}, replace=True)["n"] == 3, "--retry-failed"
    assert json.loads((final / "done.json").read_text())["hash"] == "h"


def test_the_progress_line_counts_done_running_failed_and_estimates_the_rest():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress("s", total=10, skipped=2, stream=stream, tty=False, clock=lambda: now[0])
    progress.begin()
    progress.started("a")
    progress.started("b")
    now[0] = 30.0
    progress.finished("a", "ok")
    progress.finished("b", "failed", "ValueError: no")
    assert progress.eta_s() == pytest.approx(30.0 / 2 * 6)
    line = stream.getvalue().splitlines()[-1]
    assert line.startswith("sweep s: [") and "4/10 done, 0 running, 1 failed, 2 skipped (done before)" in line
    assert "ETA 1m30s" in line and "failed: b: ValueError: no" in stream.getvalue()


def test_plots_and_a_self_contained_report(tmp_path):
    from hil.trial.sweep.html import write_report
    from hil.trial.sweep.plots import write_plots

    rows = [_row(c, success=s, **{"time_to_goal_s": t, "min_distance_m": 0.5, "axis": c[:1], "failure": f})
            for c, s, t, f in (("aa", True, 10.0, None), ("aa", False, None, "odometry_drift"),
                               ("bb", True, 12.0, None))]
    summaries = by_condition(rows)
    figures = write_plots(rows, summaries, by_axis(rows, ["axis"]), tmp_path / "plots", "t")
    assert [f.name for f in figures] == ["success_by_condition.png", "success_by_axis.png", "metrics.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    page = write_report(tmp_path / "report.html", title="t", source="s.yaml", rows=rows, summaries=summaries,
                        worst=worst(rows, 2), figures=figures, criteria=["goal.reached"], tables=["results.csv"],
                        out=tmp_path).read_text()
    assert page.count("data:image/png;base64,") == 3 and "<td>50%</td>" in page and "hil report " in page
    assert page.count("<td class='text'>odometry_drift</td>") == 1, "the worst trial says why it failed"
    assert "<td>odometry_drift 1</td>" in page, "and its condition counts it"


def test_the_summary_csv_counts_each_failure_cause_per_condition(tmp_path):
    import csv

    from hil.trial.sweep.run import _write_summary

    rows = [_row("a", success=False, failure="blocked"), _row("a", success=False, failure="person_not_sensed:angle"),
            _row("b", success=False, failure="blocked"), _row("b"), _row("b", success=False, failure=None)]
    _write_summary(by_condition(rows), tmp_path / "summary.csv")
    with open(tmp_path / "summary.csv", newline="") as f:
        a, b = csv.DictReader(f)
    causes = [c for c in a if c.startswith("failures.")]
    assert causes == ["failures.person_not_sensed:angle", "failures.blocked", "failures.unexplained"]
    assert [a[c] for c in causes] == ["1", "1", "0"] and [b[c] for c in causes] == ["0", "1", "1"]
