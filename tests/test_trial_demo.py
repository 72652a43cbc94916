"""`hil demo`: the full trial (crowd process + world + guide robot + recording + report)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hil.runtime.robot import Robot
from hil.trial.spec import make_spec
from hil.trial.task import CrowdProcess, make_task
from once import once_per_run

METRIC_KEYS = {"collisions", "duration_s", "goal", "intrusions", "log", "mean_distance_m", "meta", "min_clearance_m",
               "min_distance_m", "params", "path_length_m", "samples", "time_not_moving_s", "time_to_goal_s"}


def _demo(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "hil", "demo", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_demo_trial_writes_log_metrics_picture_and_is_deterministic(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        proc = _demo("--out", str(out), "--seed", "2", "--duration", "15", "--no-fail")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "demo: failed (duration) after 15.0 s, not met: goal.reached;" in proc.stdout, proc.stdout[-2000:]
        for f in ("trial.mcap", "metrics.json", "topdown.png"):
            assert (out / f).stat().st_size > 0, f
        runs.append(out)
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert METRIC_KEYS <= set(metrics)
    assert metrics["log"]["complete"] and metrics["meta"]["seed"] == 2
    assert metrics["samples"]["robot_states"] == 150 and metrics["path_length_m"] > 3.0  # it went down the passage
    assert (runs[0] / "metrics.json").read_bytes() == (runs[1] / "metrics.json").read_bytes()
    assert (runs[0] / "trial.mcap").read_bytes() == (runs[1] / "trial.mcap").read_bytes()


def test_the_ring_sees_a_pedestrian_who_steps_in_front_of_the_robot():
    from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians

    with Robot.open({"bus": "sim://commbot?clock=sim&pose=0,0,0", "clock": "sim", "semantics": "commbot"}) as robot:
        ring = robot.sensors["ring"]
        for _ in robot.loop(hz=10, duration_s=0.5):
            pass
        assert ring.nearest(-0.3, 0.3) is None  # an empty world: nothing ahead
        embodied = robot.bus.transport.embodied
        people = Pedestrians(embodied.world)
        with embodied.device.lock:
            people.sync([PedestrianIntent(7, 1.2, 0.0, 0.0, 0.0, radius=0.25, height=1.7)])
        for _ in robot.loop(hz=10, duration_s=0.5):
            pass
        seen = ring.nearest(-0.3, 0.3)
        assert seen is not None and 0.5 < seen < 1.2, ring


def test_killing_the_crowd_mid_trial_fails_naming_it(tmp_path):
    spec = make_spec("x.py", map="arcade", crowd="weekday", seed=4)
    served = CrowdProcess(spec, make_task(spec), realtime=False)
    crowd, endpoint = served.proc, served.endpoint
    demo = subprocess.Popen([sys.executable, "-m", "hil", "demo", "--out", str(tmp_path / "t"), "--seed", "4",
                             "--duration", "600", "--crowd", endpoint, "--crowd-timeout", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in demo.stdout:
            if "t=  0.0/600" not in line and "t=" in line:  # a few simulated seconds in: the crowd dies
                break
        crowd.kill()
        crowd.wait()
        _, err = demo.communicate(timeout=60)
    finally:
        for proc in (crowd, demo):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        crowd.stdout.close()
    assert demo.returncode == 1, err[-2000:]
    assert endpoint in err and "did not answer" in err, err[-2000:]
    assert (tmp_path / "t" / "trial.mcap").exists()  # what was recorded up to the failure is kept


def record_guide_meets_child(out: Path) -> None:
    proc = _demo("--out", str(out), "--seed", "0", "--duration", "40", "--no-fail")  # 40 s: the goal is further
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="session")
def guide_meets_child(tmp_path_factory) -> Path:
    """The folder of one 40 s demo (seed 0), recorded once per run of the suite (tests/once.py): the tests below only
    read it, the staged child and the guide's dwell, and ground truth beside odometry, on the same recording."""
    return once_per_run(tmp_path_factory, "guide-meets-child", record_guide_meets_child)


def test_the_demo_stages_the_child_and_the_guide_goes_to_the_child_who_stopped(guide_meets_child):
    from hil.trial.record.log import read_log

    out = guide_meets_child
    log = read_log(out / "trial.mcap").messages
    staged = [m.data["text"].split("#")[0].split() for m in log["/crowd/script"]]
    assert ["spawn", "kid", "=", "boy02", "at", "north_gate"] in staged
    assert ["objective", "kid", "interact", "Dstop=0.8", "duration_s=12"] in staged
    states = log["/robot/state"]
    modes = [m.data["mode"] for m in states]
    assert "dwell" in modes, "the guide stopped to be with someone (as in the crowd-simulation reference)"
    first = states[modes.index("dwell")]
    people = next(m.data["people"] for m in log["/pedestrians"] if m.t == first.t)
    nearest = min(people, key=lambda p: (p["x"] - first.data["x"]) ** 2 + (p["y"] - first.data["y"]) ** 2)
    assert nearest["type"] == "boy02", "...with the child the script sent to it"
    assert ((nearest["x"] - first.data["x"]) ** 2 + (nearest["y"] - first.data["y"]) ** 2) ** 0.5 < 1.2
    assert modes[modes.index("dwell"):].count("route") > 0, "and then went on"
    assert len(log["/world/contacts"]) == len(states), "ground-truth contacts are logged every tick"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["collisions"]["source"] == "contacts" and metrics["meta"]["scenario"] == "guide_meets_child"


def test_a_bad_scenario_fails_with_its_file_and_line(tmp_path):
    bad = tmp_path / "bad.scn"
    bad.write_text("run 5s\nspawn kid = boy02 at nowhere_gate\n")
    proc = _demo("--out", str(tmp_path / "t"), "--scenario", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:2:" in proc.stderr and "nowhere_gate" in proc.stderr, proc.stderr
    assert not (tmp_path / "t").exists(), "nothing was started or written"


def test_gui_without_a_display_fails_clearly_before_anything_starts(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, "-m", "hil", "demo", "--gui", "--out", str(tmp_path / "t")],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "needs a display" in proc.stderr, proc.stderr
    assert not (tmp_path / "t").exists()


def test_the_guide_counts_what_is_in_its_way_not_what_is_beside_it():
    import importlib.util
    import math
    from pathlib import Path
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("guide", Path(__file__).parent.parent / "examples" / "guide_robot.py")
    guide = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guide)
    angles = [math.radians(a) for a in range(0, 360, 30)]

    def ring(**readings):
        return SimpleNamespace(angles=angles, ranges=[readings.get(f"a{round(math.degrees(a))}") for a in angles])

    assert guide._clearance_ahead(ring()) is None
    assert guide._clearance_ahead(ring(a90=1.8, a270=1.8)) is None, "passage walls beside the robot"
    near_nose = guide._clearance_ahead(ring(a30=0.3))  # a child 30 degrees off the nose, 0.3 m from the sensor
    # the sensor's face is 0.2 m from the ring's centre (the catalog ring's origin_radius_m): the child is
    # (0.2 + 0.3) cos 30 deg ahead of the centre, 0.233 m ahead of the ring's front
    assert near_nose == pytest.approx(0.5 * math.cos(math.radians(30)) - 0.2, abs=1e-6)
    assert near_nose < guide.STOP_M
    assert guide._clearance_ahead(ring(a180=0.2)) is None, "behind is not ahead"


def test_the_guide_pulls_drifted_odometry_back_to_the_passage_centre_from_the_wall_echoes():
    import importlib.util
    import math
    from pathlib import Path
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("guide", Path(__file__).parent.parent / "examples" / "guide_robot.py")
    guide_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guide_mod)
    angles = [math.radians(a) for a in range(0, 360, 30)]

    class Base:  # odometry only: what Guide.correct_lateral reads and resets
        def __init__(self, x, y, yaw):
            self.odometry = (x, y, yaw)

        def reset_odometry(self, x, y, yaw):
            self.odometry = (x, y, yaw)

    # the world's numbers, not the guide's: the arcade's middle passage at x = -14 lies between the walls nw1_s
    # (y = 2) and sw_n (y = -2), 0.2 m thick, so their faces are 1.9 m from the centre line; the ring's sensors
    # measure from 0.2 m out (the catalog ring's origin_radius_m)
    from hil.devices.catalog import load_part
    from hil.devices.yaml_source import load_yaml_file

    arcade = load_yaml_file(Path(__file__).parent.parent / "config" / "maps" / "arcade.yaml")
    walls = {w["name"]: w for w in arcade["walls"]}
    assert walls["nw1_s"]["from"][1] == 2 and walls["sw_n"]["from"][1] == -2 and arcade["defaults"]["thickness"] == 0.2
    faces_m = 2.0 - 0.2 / 2
    sensor_m = next(s for s in load_part("range_ring").sensors if s.name == "ring").params["origin_radius_m"]
    assert (faces_m, sensor_m) == (1.9, 0.2)

    def robot_at(true_y: float, believed_y: float, x: float = -14.0, person_left: bool = False):
        left = faces_m - true_y - sensor_m  # echo from the left wall (+y)
        right = faces_m + true_y - sensor_m
        ranges = [None] * 12
        ranges[3], ranges[9] = (0.5 if person_left else left), right
        ring = SimpleNamespace(angles=angles, ranges=ranges)
        return SimpleNamespace(base=Base(x, believed_y, 0.0), sensors={"ring": ring})

    guide = guide_mod.Guide.__new__(guide_mod.Guide)
    guide.corrections = 0
    robot = robot_at(true_y=-0.6, believed_y=0.0)
    for _ in range(40):
        assert guide.correct_lateral(robot)
    assert robot.base.odometry[1] == pytest.approx(-0.6, abs=0.01), "odometry converged on the measured offset"
    beside = robot_at(true_y=-0.6, believed_y=0.0, person_left=True)
    assert not guide.correct_lateral(beside), "echoes that do not add up to the passage's width are not walls"
    plaza = robot_at(true_y=-0.6, believed_y=0.0, x=0.0)
    assert not guide.correct_lateral(plaza), "no correction where the passage has no two walls"
    assert beside.base.odometry[1] == 0.0 and plaza.base.odometry[1] == 0.0


def test_the_demo_logs_ground_truth_beside_what_the_robot_believed(guide_meets_child):
    from hil.trial.record.log import read_log

    states = read_log(guide_meets_child / "trial.mcap").messages["/robot/state"]
    drift = [((m.data["x"] - m.data["odometry"][0]) ** 2 + (m.data["y"] - m.data["odometry"][1]) ** 2) ** 0.5
             for m in states]
    assert drift[0] < 0.05 and 0 < max(drift) < 0.5, "odometry is logged apart from the world's pose, and stays near"


def test_the_demo_records_no_camera_images_unless_asked(monkeypatch):
    """hil alone has no image encoder: the demo must not warn that it cannot record, nor log differently where the
    camera extra is installed. $HIL_CAMERA_RATE and an explicit rate still ask for images."""
    from hil.trial.presets import demo_spec

    monkeypatch.delenv("HIL_CAMERA_RATE", raising=False)
    assert demo_spec().camera_rate == 0.0
    assert make_spec("x.py", source="t").camera_rate == 2.0  # a user's own trial keeps recording by default
    assert demo_spec(camera_rate=5.0).camera_rate == 5.0
    monkeypatch.setenv("HIL_CAMERA_RATE", "2")
    assert demo_spec().camera_rate == 2.0
