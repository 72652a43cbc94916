"""`hil demo`: the full trial (crowd process + world + guide robot + recording + report), issue 7 items 2 and 4."""
import json
import subprocess
import sys

from runtime.demo import start_crowd
from runtime.robot import Robot

METRIC_KEYS = {"collisions", "duration_s", "goal", "intrusions", "log", "mean_distance_m", "meta", "min_clearance_m",
               "min_distance_m", "params", "path_length_m", "samples", "time_not_moving_s", "time_to_goal_s"}


def _demo(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "runtime.cli", "demo", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_demo_trial_writes_log_metrics_picture_and_is_deterministic(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        proc = _demo("--out", str(out), "--seed", "2", "--duration", "15")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "trial done" in proc.stdout
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
    from firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians

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
    crowd, endpoint = start_crowd(seed=4)
    demo = subprocess.Popen([sys.executable, "-m", "runtime.cli", "demo", "--out", str(tmp_path / "t"), "--seed", "4",
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
