"""A trial's verdict (trial/verdict.py) and a map's default start and goal (trial/task.py, trial/placement.py).

Real parts: ``hil trial`` in its own process, the pybullet world, the lab and the arcade as shipped, a sweep on a
real Dask cluster. Trials are a second or two of simulated time. What a test compares against is read on its own
(the map's YAML with PyYAML, the log with the MCAP reader), never from the code under test.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import hil_command
from hil.devices.yaml_source import ConfigError
from hil.trial import Trial
from hil.trial.record.log import read_log

ROOT = Path(__file__).resolve().parent.parent
MAPS = ROOT / "config" / "maps"
STILL = "def main(robot):\n    for _ in robot.loop(hz=10):\n        pass\n"
EAST = textwrap.dedent('''\
    def main(robot):
        for _ in robot.loop(hz=10):
            robot.base.drive(v=0.3, w=0.0)
''')


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*hil_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def summary(stdout: str, label: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(f"{label}: "))


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "still.py").write_text(STILL)
    (tmp_path / "east.py").write_text(EAST)
    return tmp_path


# --- the verdict ------------------------------------------------------------------------------------------------
def test_a_trial_that_misses_its_goal_exits_1_naming_the_criterion_and_no_fail_keeps_0(folder):
    missed = hil("trial", "still.py", "--map", "lab", "--goal", "2,0", "--duration", "1", "--out", "a", "--quiet",
                 cwd=folder)
    assert missed.returncode == 1, missed.stderr[-2000:]
    assert summary(missed.stdout, "still").startswith("still: failed (duration) after 1.0 s, not met: goal.reached;")
    verdict = json.loads((folder / "a" / "metrics.json").read_text())["verdict"]
    assert verdict["passed"] is False and verdict["failed"] == ["goal.reached"]
    assert verdict["criteria"] == ["goal.reached", "collisions.robot_initiated == 0"], "the default, with a goal"
    failure = json.loads((folder / "a" / "metrics.json").read_text())["failure"]
    assert failure["cause"] == "timeout", "still, nothing in the way, odometry true: time ran out"
    assert failure["causes"][0]["evidence"]["distance_to_goal_m"] == pytest.approx(2.0, abs=0.01)

    kept = hil("trial", "still.py", "--map", "lab", "--goal", "2,0", "--duration", "1", "--out", "b", "--quiet",
               "--no-fail", cwd=folder)
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert "still: failed (duration) after 1.0 s, not met: goal.reached;" in kept.stdout, "it still says so"

    reached = hil("trial", "east.py", "--map", "lab", "--goal", "0.3,0", "--duration", "5", "--out", "c", "--quiet",
                  cwd=folder)
    assert reached.returncode == 0, reached.stdout[-2000:] + reached.stderr[-2000:]
    assert summary(reached.stdout, "east").startswith("east: passed (goal) after ")
    assert "failure" not in json.loads((folder / "c" / "metrics.json").read_text()), "a success has no failure"


def test_success_criteria_replace_the_default_and_a_typo_is_one_line(folder):
    proc = hil("trial", "still.py", "--map", "lab", "--duration", "1", "--out", "a", "--quiet",
               "--success", "min_distance_m >= 0.5 or none", "--success", "path_length_m > 0.5", "--success",
               "time_not_moving_s < 0.5", cwd=folder)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert ", not met: path_length_m > 0.5 and time_not_moving_s < 0.5;" in summary(proc.stdout, "still"), \
        "nobody came near: 'or none' lets that criterion pass; the others are named"
    (folder / "t.yaml").write_text("controller: still.py\nmap: lab\nduration: 1\n\nsuccess: [path_lenght_m > 0.5]\n")
    typo = hil("trial", "t.yaml", "--out", "b", cwd=folder)
    assert typo.returncode == 2 and not (folder / "b").exists()
    assert typo.stderr.strip().splitlines()[-1] == \
        "hil: error: t.yaml:5: success: no column 'path_lenght_m'; did you mean path_length_m?"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep of two trials in the lab on a real Dask cluster: one reaches its goal, one cannot in 2 s."""
    folder = tmp_path_factory.mktemp("verdict-sweep")
    (folder / "east.py").write_text(EAST)
    (folder / "two.yaml").write_text(textwrap.dedent('''\
        controller: east.py
        map: lab
        duration: 2
        cases:
          - {goal: [0.3, 0]}
          - {goal: [3, 0]}
        success: [goal.reached, path_length_m > 0.2]
    '''))
    proc = hil("sweep", "two.yaml", "--workers", "1", "--out", "out", cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (folder / "out" / "results.jsonl").read_text().splitlines()]
    return folder, rows


def test_a_sweeps_success_and_each_trials_verdict_agree(swept, tmp_path):
    from hil.trial.sweep import load_sweep

    folder, rows = swept
    assert [(r["success"], r["not_met"]) for r in rows] == [(True, None), (False, "goal.reached")]
    assert [r["failure"] for r in rows] == [None, "timeout"], "still driving toward the goal when time ran out"
    for job, row in zip(load_sweep(folder / "two.yaml").jobs, rows):
        recorded = json.loads((folder / "out" / row["folder"] / "metrics.json").read_text())["verdict"]
        assert recorded["passed"] is row["success"], "the trial's own metrics.json says what the table says"
        again = Trial(spec=job.spec).run(tmp_path / job.id.replace("/", "_"))
        assert again.passed is row["success"] and again.verdict["failed"] == ([row["not_met"]] if row["not_met"]
                                                                              else [])


# --- the map's defaults ------------------------------------------------------------------------------------------
def _map_yaml(name: str) -> dict:
    return yaml.safe_load((MAPS / f"{name}.yaml").read_text())


def test_a_trial_without_start_or_goal_takes_the_maps(folder):
    arcade = _map_yaml("arcade")
    result = Trial(folder / "still.py", map="arcade", duration=0.5).run(folder / "t")
    log = read_log(folder / "t" / "trial.mcap").messages
    first = log["/robot/state"][0].data
    assert (first["x"], first["y"]) == pytest.approx(arcade["start"][:2], abs=0.01)
    assert log["/map"][0].data["goal"] == pytest.approx(arcade["goal"])
    assert result.verdict["failed"] == ["goal.reached"], "the map's goal is the trial's"
    none = Trial(folder / "still.py", map="arcade", goal="none", duration=0.5).run(folder / "n")
    assert none.metrics.goal.xy is None and none.passed, "goal: none means no goal, not the map's"


def test_the_demo_drives_the_arcades_default_route():
    from hil.trial.presets import demo_spec

    arcade, demo = _map_yaml("arcade"), demo_spec()
    assert list(demo.start) == arcade["start"] and list(demo.goal) == arcade["goal"]


def test_a_start_inside_the_fountain_is_refused_naming_it_and_a_free_pose(folder):
    with pytest.raises(ConfigError, match=r"start: \[0, 0, 0\] puts the robot inside the fountain \(arcade\.yaml"
                                          r":\d+-\d+: walls fountain_s") as caught:
        Trial(folder / "still.py", map="arcade", start=(0, 0), duration=1).run(folder / "t")
    assert not (folder / "t").exists(), "nothing started"
    x, y, yaw = (float(v) for v in re.search(r"nearest free pose is \[([^]]+)\]", str(caught.value))[1].split(","))
    basin = 1.5 + 0.2 / 2  # the fountain's walls: centre lines at +-1.5 m, 0.2 m thick (arcade.yaml)
    gap = math.hypot(max(abs(x) - basin, 0.0), max(abs(y) - basin, 0.0))
    assert 0.3 <= gap <= 0.5 and yaw == 0.0, "clear of the basin by the robot's radius, and not far off"

    (folder / "t.yaml").write_text("controller: still.py\nmap: arcade\nstart: [-13, 4]\n")
    proc = hil("trial", "t.yaml", "--out", "u", cwd=folder)
    assert proc.returncode == 2 and not (folder / "u").exists()
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("hil: error: t.yaml:3: start: [-13, 4, 0] puts the robot inside the nw1 (arcade.yaml:")
    assert "the nearest free pose is [" in last


def test_a_maps_own_start_inside_an_obstacle_names_the_maps_line(tmp_path):
    from hil.trial.spec import make_spec
    from hil.trial.task import make_task

    text = (MAPS / "lab.yaml").read_text().replace("start: [0, 0, 0]", "start: [1.5, -2, 0]")
    (tmp_path / "tight.yaml").write_text(text)
    line = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("start:"))) + 1
    with pytest.raises(ConfigError) as caught:
        make_task(make_spec("x.py", map=str(tmp_path / "tight.yaml")))
    assert caught.value.source.endswith("tight.yaml") and caught.value.line == line
    assert "(the map's default: the trial gives no start) puts the robot with its body in the wall partition" \
        in caught.value.message
