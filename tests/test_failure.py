"""Why a trial failed (metrics.json ``failure``, trial/report/failure.py), on real trials: the pybullet world, the
crowd process staging one person in the lab, the range ring's own readings. Each trial is a few seconds of
simulated time. What a test compares with is read on its own: the map's walls from its YAML, the poses from the
log with the MCAP reader.
"""
from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
import yaml

from hil.trial import Trial
from hil.trial.record.log import read_log
from hil.trial.report.build import format_metrics
from hil.trial.report.failure import DRIFT_MIN_M

ROOT = Path(__file__).resolve().parent.parent
# stands still for 3 s (a person walks up to it meanwhile), then drives ahead at 0.6 m/s whatever its ring says
WAIT_THEN_GO = textwrap.dedent('''\
    def main(robot):
        for _ in robot.loop(hz=10):
            robot.base.drive(v=0.6 if robot.clock.now() >= 3.0 else 0.0, w=0.0)
''')
STILL = "def main(robot):\n    for _ in robot.loop(hz=10):\n        pass\n"
# drives ahead and stops when the front sensor reads an echo nearer than 0.4 m
STOPPER = textwrap.dedent('''\
    def main(robot):
        ring = robot.sensors["ring"]
        for _ in robot.loop(hz=10):
            ahead = ring.ranges[0]
            robot.base.drive(v=0.0 if ahead is not None and ahead < 0.4 else 0.4, w=0.0)
''')
# spins on the spot for 5 s (the wheels slip: odometry's heading drifts), then drives to (0, 0) by odometry
SPIN_THEN_GO = textwrap.dedent('''\
    import math

    def main(robot):
        for _ in robot.loop(hz=10, duration_s=5.0):
            robot.base.drive(v=0.0, w=3.4)
        for _ in robot.loop(hz=10):
            x, y, yaw = robot.base.odometry
            if math.hypot(x, y) < 0.2:
                robot.base.drive(v=0.0, w=0.0)
                continue
            err = math.atan2(math.sin(math.atan2(-y, -x) - yaw), math.cos(math.atan2(-y, -x) - yaw))
            robot.base.drive(v=0.5 if abs(err) < 0.3 else 0.0, w=max(-2.0, min(2.0, 2.0 * err)))
''')
COMES = "spawn p = man01 at {x} 0\nplace p {x} 0\nmove p to robot\nrun 10min\n"  # walks up to the robot
BLIND = textwrap.dedent('''\
    schema: 1
    parts:
      - part: range_ring
        sensor: ring
        params: {dropout_angle50_deg: 0.0, dropout_width_deg: 0.001}   # every echo drops out by its angle
''')


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("failure")
    for name, text in (("wait_then_go.py", WAIT_THEN_GO), ("still.py", STILL), ("stopper.py", STOPPER),
                       ("spin_then_go.py", SPIN_THEN_GO), ("ahead.scn", COMES.format(x=2.5)),
                       ("behind.scn", COMES.format(x=-2.5)), ("blind.cal.yaml", BLIND)):
        (folder / name).write_text(text)
    (folder / "blind.yaml").write_text("bus: sim://commbot?clock=sim\nclock: sim\nsemantics: commbot\n"
                                       "calibration: blind.cal.yaml\n")
    return folder


def _run(folder: Path, name: str, controller: str, **keys) -> dict:
    keys = {"map": "lab", "start": (0.0, 0.0, 0.0), "seed": 0, **keys}
    if "profile" not in keys:
        keys["robot"] = "commbot"
    result = Trial(str(folder / controller), **keys).run(folder / name)
    assert result.status == "ok", result.summary_line()
    return json.loads((folder / name / "metrics.json").read_text())


def _first(metrics: dict) -> dict:
    failure = metrics["failure"]
    assert failure["cause"] == failure["causes"][0]["label"]
    return failure["causes"][0]


@pytest.fixture(scope="module")
def seen(folder):
    """The robot drives into the person who walked up to it, its ring working."""
    return _run(folder, "seen", "wait_then_go.py", scenario=str(folder / "ahead.scn"), duration=3.6)


@pytest.fixture(scope="module")
def blinded(folder):
    """The same scene with the ring blinded by its calibration (angle50 = 0)."""
    return _run(folder, "blinded", "wait_then_go.py", profile=str(folder / "blind.yaml"),
                scenario=str(folder / "ahead.scn"), duration=3.6)


def test_driving_into_a_person_the_ring_echoed_from_is_sensed_no_stop(seen):
    assert seen["collisions"]["robot_initiated"] == 1, seen["collisions"]
    cause = _first(seen)
    assert cause["label"] == "sensed_no_stop"
    ring = cause["evidence"]["ring"]
    assert ring["sensed"] is True and ring["sensor"] == 0, "the front sensor saw them"
    assert 0.5 < ring["distance_m"] < 2.5 and ring["first_sensed_t"] < cause["t"]
    assert cause["evidence"]["robot_approach_mps"] > cause["evidence"]["person_approach_mps"]
    text = format_metrics(seen)
    assert "failure             sensed_no_stop" in text and "ring echoed from them" in text


def test_the_same_collision_with_the_ring_blinded_is_person_not_sensed_angle(blinded):
    assert blinded["collisions"]["robot_initiated"] == 1, blinded["collisions"]
    cause = _first(blinded)
    assert blinded["failure"]["cause"] == "person_not_sensed:angle"
    assert (cause["cause"], cause["reason"]) == ("person_not_sensed", "angle")
    ring = cause["evidence"]["ring"]
    assert "sensed" not in ring["observations"] and ring["observations"]["angle"] >= ring["in_cone_samples"] > 0
    assert ring["window_s"] == [pytest.approx(cause["t"] - 2.0), cause["t"]]


def test_the_cameras_frames_of_the_lookback_are_the_evidence_beside_the_ring(folder, blinded):
    """The blinded scene again, its head cameras recorded at 5 Hz: the ring's cause stands, and each camera says
    how many of its frames in the 2 s before the contact showed the person. Without a frame made (the suite
    records none), the cameras reported nothing."""
    assert _first(blinded)["evidence"]["cameras"] == {}
    filmed = _run(folder, "filmed", "wait_then_go.py", profile=str(folder / "blind.yaml"),
                  scenario=str(folder / "ahead.scn"), duration=3.6, camera_rate=5)
    cause = _first(filmed)
    assert filmed["failure"]["cause"] == "person_not_sensed:angle"
    assert cause["t"] == _first(blinded)["t"], "recording the cameras changed nothing of the collision"
    cameras = cause["evidence"]["cameras"]
    assert cameras, "the recorded frames are evidence"
    pid = cause["evidence"]["person"]
    log = read_log(folder / "filmed" / "trial.mcap").messages
    for name, seen in cameras.items():
        frames = [m for m in log["/camera/people"] if m.data["camera"] == name and cause["t"] - 2.0 <= m.t <= cause["t"]]
        assert seen["frames"] == len(frames) >= 9, "5 Hz over 2 s"
        assert seen["frames_with_person"] == sum(any(p["id"] == pid for p in m.data["people"]) for m in frames)
    text = format_metrics(filmed)
    assert all(f"{name} showed them in {c['frames_with_person']} of {c['frames']} frames" in text
               for name, c in cameras.items()), text
    ahead = max(cameras.values(), key=lambda seen: seen["frames_with_person"])
    assert ahead["frames_with_person"] >= 5 and ahead["pixels_max"] > 500, "the person ahead filled the view"


def test_people_in_counts_each_persons_pixels_from_the_labels():
    from hil.trial.record.camera_people import people_in

    labels = [[0, 3, 3], [7, 7, 7], [9, 9, 0]]
    import numpy as np

    legend = {0: "wall", 3: "person:12", 7: "person:4", 9: "robot:43/camera", 11: "person:5"}
    assert people_in(np.array(labels, dtype=np.int32), legend) == [{"id": 4, "pixels": 3}, {"id": 12, "pixels": 2}]
    assert people_in(None, legend) is None


def test_a_person_walking_into_a_still_robot_is_person_initiated(folder):
    metrics = _run(folder, "bumped", "still.py", scenario=str(folder / "behind.scn"), duration=3.2,
                   success=["collisions.total == 0"])
    assert metrics["verdict"]["failed"] == ["collisions.total == 0"]
    cause = _first(metrics)
    assert cause["label"] == "person_initiated"
    assert cause["evidence"]["robot_approach_mps"] == 0.0 and cause["evidence"]["person_approach_mps"] > 0.3


def test_a_goal_behind_a_wall_is_blocked_by_that_wall(folder):
    metrics = _run(folder, "blocked", "stopper.py", start=(0.3, -2.2, 0.0), goal=(2.5, -2.2), duration=4.0)
    cause = _first(metrics)
    assert cause["label"] == "blocked"
    walls = {w["name"]: [*w["from"], *w["to"]] for w in
             yaml.safe_load((ROOT / "config" / "maps" / "lab.yaml").read_text())["walls"]}
    obstacle = cause["evidence"]["obstacle"]
    assert obstacle["kind"] == "wall" and obstacle["segment"] == walls["partition"]
    assert obstacle["distance_m"] <= 1.0 and abs(cause["evidence"]["progress_m"]) < 0.1


def test_a_goal_missed_by_odometry_that_drifted_is_odometry_drift(folder):
    metrics = _run(folder, "drift", "spin_then_go.py", start=(-3.0, 0.0, 0.0), goal=(0.0, 0.0), duration=12.0)
    assert metrics["goal"]["reached"] is False
    cause = _first(metrics)
    assert cause["label"] == "odometry_drift"
    last = read_log(folder / "drift" / "trial.mcap").messages["/robot/state"][-1].data
    drift = math.hypot(last["odometry"][0] - last["x"], last["odometry"][1] - last["y"])
    missed_by = math.hypot(last["x"], last["y"]) - 0.5  # the goal radius: the lab's map gives none, 0.5 m
    assert cause["evidence"]["drift_m"] == pytest.approx(drift, abs=1e-3)
    assert drift >= DRIFT_MIN_M and drift >= missed_by, "the drift alone accounts for the miss"


def test_the_page_shows_the_failure_in_red(seen):
    from hil.trial.view.app import _metrics_html

    page = _metrics_html(seen)
    assert "hil-metric-error" in page and "failure             sensed_no_stop" in page


EAST = "def main(robot):\n    for _ in robot.loop(hz=10):\n        robot.base.drive(v=0.3, w=0.0)\n"
RAISES = textwrap.dedent('''\
    def main(robot):
        for _ in robot.loop(hz=10):
            if robot.clock.now() >= 0.5:
                raise RuntimeError("lost its way")
''')


def test_a_lost_wheel_and_a_controller_that_raises_say_so(folder):
    (folder / "east.py").write_text(EAST)
    (folder / "raises.py").write_text(RAISES)
    Trial(str(folder / "east.py"), robot="commbot", map="lab", start=(0.0, 0.0, 0.0), goal=(3.0, 0.0), duration=2.0,
          faults=[{"at": 0.5, "unplug": "base.wheel_left"}]).run(folder / "unplugged")
    lost = _first(json.loads((folder / "unplugged" / "metrics.json").read_text()))
    assert lost["label"] == "part_lost"
    assert [(p["kind"], p["back_t"]) for p in lost["evidence"]["parts"]] == [("lost", None)]
    assert "base.wheel_left" in lost["evidence"]["parts"][0]["names"]
    result = Trial(str(folder / "raises.py"), robot="commbot", map="lab", start=(0.0, 0.0, 0.0), goal=(3.0, 0.0),
                   duration=2.0).run(folder / "raised")
    assert result.status == "failed"
    raised = _first(json.loads((folder / "raised" / "metrics.json").read_text()))
    assert raised["label"] == "controller_error" and raised["evidence"]["status"] == "failed"
    assert raised["evidence"]["error"] == result.error.splitlines()[0], "the run's error, as the result has it"
