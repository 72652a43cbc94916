"""``hil run CONTROLLER --profile P --record DIR``: any run recorded as a trial, without the controller knowing.

Real ``python -m hil run`` subprocesses: the commbot on the in-process virtual bus on the simulator's clock
(the same run twice gives the same bytes), a controller that raises (the log and the report are still there), a
robot without a base (joints only), and a mixed trial (the commbot's stand-in on a pty with the real clock, a
real-time crowd) whose log keeps the real and the virtual ring readings apart. No timing assertions.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ARCADE_WEST_HALL
from test_bridge_realtime import CrowdProcess, free_endpoint

from hil.runtime.robot.sensors import merge_ranges
from hil.trial.record import read_log

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "examples" / "guide_robot.py"
VIRTUAL = ROOT / "config" / "profiles" / "virtual.yaml"
ARCADE_BUS = "sim://commbot?clock=sim&map=arcade&pose=-18,0,0"
START = ARCADE_WEST_HALL  # where the real_robot fixture (conftest) stands
TIMEOUT_S = 240


def hil_run(tmp_path: Path, controller: Path, profile: Path, *args: str,
            cache: str = "cache") -> subprocess.CompletedProcess:
    env = {**os.environ, "HIL_CACHE_DIR": str(tmp_path / cache)}
    return subprocess.run([sys.executable, "-m", "hil", "run", str(controller), "--profile", str(profile),
                           *args], check=False, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, env=env)


def test_a_virtual_run_on_the_sim_clock_is_recorded_and_reported_and_twice_gives_the_same_bytes(tmp_path):
    dirs = [tmp_path / "first", tmp_path / "second"]
    for out in dirs:
        # each run scans with an empty descriptor cache: /bus/stats counts the scan's transactions too
        proc = hil_run(tmp_path, GUIDE, VIRTUAL, "--bus", ARCADE_BUS, "--duration", "3", "--record", str(out),
                       cache=f"cache-{out.name}")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"record: {out / 'trial.mcap'} (30 ticks)" in proc.stdout, proc.stdout
        for name in ("trial.mcap", "metrics.json", "topdown.png"):
            assert (out / name).is_file(), name
    first, second = dirs
    assert (first / "trial.mcap").read_bytes() == (second / "trial.mcap").read_bytes()
    assert (first / "metrics.json").read_bytes() == (second / "metrics.json").read_bytes()

    log = read_log(first / "trial.mcap")
    assert log.complete and log.stopped is None
    m = log.messages
    assert "/pedestrians" not in m and "/robot/joints" not in m, "no overlay: no people; a base: joints in the state"
    # one message set per tick of the guide's 10 Hz loop, on the robot's (simulated) clock from 0
    assert [round(msg.t, 6) for msg in m["/clock"]] == [round(k / 10, 6) for k in range(30)]
    times = [msg.t for msg in m["/clock"]]
    assert [msg.t for msg in m["/robot/state"]] == times == [msg.t for msg in m["/robot/sensors"]]
    states = [msg.data for msg in m["/robot/state"]]
    assert states[0]["x"] == pytest.approx(START[0]) and states[-1]["x"] > START[0] + 0.5, "the guide drove east"
    assert {"base.wheel_left", "head.neck_yaw"} <= set(states[0]["joints"])
    sensors = m["/robot/sensors"][-1].data
    assert len(sensors["ring"]) == 12 and "ring_real" not in sensors and isinstance(sensors["contacts"], list)
    # bus statistics once a second (plus the totals at the end), marked with the bus, counters only on sim time
    stats = m["/bus/stats"]
    assert [round(msg.t, 6) for msg in stats] == [0.0, 1.0, 2.0, 2.9]
    assert all(msg.data["bus"] == "main" and not any(k.startswith("latency") for k in msg.data) for msg in stats)
    assert stats[-1].data["transactions"] > stats[0].data["transactions"]
    meta = m["/trial/meta"][0].data
    assert meta["controller"] == str(GUIDE) and meta["profile"] == str(VIRTUAL) and meta["clock"] == "sim"
    assert meta["buses"] == [{"name": "main", "url": ARCADE_BUS}]
    the_map = m["/map"][0].data
    assert the_map["name"] == "arcade" and len(the_map["walls"]) > 10 and the_map["goal"] is None

    metrics = json.loads((first / "metrics.json").read_text())
    assert metrics["log"]["complete"] and metrics["duration_s"] == pytest.approx(2.9)
    assert metrics["goal"] == {"reached": False, "xy": None} and metrics["path_length_m"] > 0.5
    assert metrics["samples"]["robot_states"] == 30 and metrics["meta"]["scenario"] == "none"


FAILING = """\
import time

for _ in range(12):
    robot.base.drive(v=0.2, w=0.0)
    robot.cycle()
    time.sleep(0.1)
raise RuntimeError("the controller gave up")
"""


def test_a_controller_that_raises_still_leaves_a_readable_log_and_a_report(tmp_path):
    controller = tmp_path / "failing.py"  # a script (no main): it paces itself and calls robot.cycle()
    controller.write_text(FAILING)
    out = tmp_path / "trial"
    proc = hil_run(tmp_path, controller, VIRTUAL, "--record", str(out))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "RuntimeError: the controller gave up" in proc.stderr
    assert ": failed" in proc.stdout and f"record: {out / 'trial.mcap'} (12 ticks)" in proc.stdout, proc.stdout
    log = read_log(out / "trial.mcap")
    assert log.complete, log.stopped
    assert len(log.messages["/robot/state"]) == 12 and "/map" not in log.messages, "sim://commbot names no map"
    assert log.messages["/robot/state"][-1].data["x"] > 0.05, "the script drove forward"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["samples"]["robot_states"] == 12 and metrics["goal"]["xy"] is None
    assert (out / "topdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = subprocess.run([sys.executable, "-m", "hil", "report", str(out)], check=False, capture_output=True,
                            text=True, timeout=TIMEOUT_S, cwd=ROOT)
    assert report.returncode == 0 and "no goal in the log" in report.stdout, report.stdout + report.stderr


def test_a_robot_without_a_base_logs_its_joints_alone(tmp_path):
    controller = tmp_path / "still.py"  # five cycles, then it returns: on the real clock a run of a fixed
    # duration has as many cycles as the machine's load lets it have (none, when opening took that long)
    controller.write_text("def main(robot):\n    for n, _ in enumerate(robot.loop(hz=20)):\n        if n == 4:\n"
                          "            return\n")
    profile = tmp_path / "arm.yaml"
    profile.write_text("bus: sim://left_arm?world=0\nclock: real\n")
    out = tmp_path / "trial"
    proc = hil_run(tmp_path, controller, profile, "--duration", "60", "--record", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = read_log(out / "trial.mcap")
    assert "/robot/state" not in log.messages and len(log.messages["/robot/joints"]) == 5
    assert len(log.messages["/robot/joints"][0].data["joints"]) == 5
    assert log.messages["/robot/sensors"][0].data == {"ring": [], "contacts": []}
    assert log.messages["/bus/stats"][0].data["latency_p50_ms"] is not None, "real clock: latencies are kept"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["samples"]["robot_states"] == 0 and metrics["duration_s"] is None


STANDING = """\
def main(robot):
    for _ in robot.loop(hz=20):
        pass
"""




@pytest.mark.parametrize("crowd_map", [None, "arcade"])
def test_a_mixed_trial_logs_the_real_and_the_virtual_ring_apart_and_the_virtual_people(real_robot, tmp_path,
                                                                                        crowd_map):
    script = tmp_path / "guest.scn"
    script.write_text(f"spawn guest = man01 at {START[0] + 2:g} 0\nrun 5min\n")  # 2 m in front of the robot
    crowd = CrowdProcess(free_endpoint(), "--script", str(script))
    try:
        profile = tmp_path / "mixed.yaml"
        profile.write_text(f"bus: {real_robot.where}\nclock: real\nsemantics: commbot\n"
                           f"start_pose: [{START[0]}, {START[1]}, {START[2]}]\n"
                           f"crowd: {{endpoint: '{crowd.endpoint}', mode: realtime, seed: 3"
                           + (f", map: {crowd_map}}}\n" if crowd_map else "}\n"))
        controller = tmp_path / "standing.py"
        controller.write_text(STANDING)
        out = tmp_path / "trial"
        proc = hil_run(tmp_path, controller, profile, "--duration", "3", "--record", str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert crowd.wait() == 0, crowd.stderr()  # the robot closed: bye to the crowd
    finally:
        crowd.stop()
    log = read_log(out / "trial.mcap")
    m = log.messages
    sensors = [msg.data for msg in m["/robot/sensors"]]
    assert sensors and all("ring_real" in s and "ring_virtual" in s for s in sensors)
    for s in sensors:
        assert s["ring"] == merge_ranges(s["ring_real"], s["ring_virtual"]), "ring is what the controller read"
    # the front sensor: the virtual guest 2 m ahead shows in ring_virtual and ring, never in ring_real
    seen = [s for s in sensors if s["ring_virtual"][0] is not None]
    assert seen, "the shadow ring never saw the guest"
    assert all(s["ring_real"][0] is None or s["ring_real"][0] > 3.0 for s in sensors), "nothing real in front"
    assert 1.0 < seen[-1]["ring_virtual"][0] < 2.0 - 0.25 + 0.1, "the guest's near side, 2 m from the centre"
    assert seen[-1]["ring"][0] == seen[-1]["ring_virtual"][0]
    # the virtual people as the overlay placed them, in the map frame like the robot's odometry
    people = [msg.data["people"] for msg in m["/pedestrians"]]
    assert all(len(p) == 1 for p in people), "only the crowd's word: no empty message before it"
    guest = people[-1][0]
    assert guest["type"] == "man01" and math.hypot(guest["x"] - (START[0] + 2), guest["y"]) < 0.3
    assert guest["doing"] == "scripted" and guest["name"] == "guest", "the real-time crowd says who is scripted"
    assert m["/robot/state"][0].data["x"] == pytest.approx(START[0], abs=0.01)
    meta = m["/trial/meta"][0].data
    assert meta["clock"] == "real" and meta["seed"] == 3
    if crowd_map is None:
        assert "/map" not in m, "a pty bus names no map, nor does this crowd block"
    else:  # the crowd block's map (its walls hide virtual people), with the profile's start_pose as the start
        (map_msg,) = [msg.data for msg in m["/map"]]
        assert map_msg["name"] == crowd_map and len(map_msg["walls"]) == 36 and map_msg["goal"] is None
        assert map_msg["start"] == [START[0], START[1]]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["samples"]["people_seen"] == 1 and metrics["min_distance_m"] == pytest.approx(2.0, abs=0.3)


def test_a_run_whose_controller_blocks_outside_the_clock_fails_after_stall_seconds_saying_where(tmp_path):
    """``hil run --stall S`` as ``hil trial --stall S``: on the sim clock a controller blocked on something the
    clock does not drive (a pipe nobody writes) ends the run failed, with the line it waits on, no traceback."""
    controller = tmp_path / "stuck.py"
    controller.write_text("import os\ndef main(robot):\n    robot.cycle()\n    readable, _ = os.pipe()\n"
                          "    os.read(readable, 1)\n")
    proc = hil_run(tmp_path, controller, VIRTUAL, "--duration", "10", "--stall", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "the simulator's time stood still at" in said and "for 2 s" in said, said
    assert f"{controller}:5 in main: os.read(readable, 1)" in said, said
    assert "Traceback" not in said
