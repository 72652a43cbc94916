"""The greeter (examples/greeter.py) and look_around on a recorded camera standing in for the real one
(``cameras: {head_camera: "file:..."}``), on the virtual commbot's body: with an RGB-D recording of a person-sized
slab at a known distance it sees that depth in metres and greets; on RGB-only recordings (a TUM list without
depth.txt, a video) both examples say once that the camera has no depth and run to the end without failing."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from camera_recordings import colour, slab_depth, write_tum, write_video

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SLAB_M, WALL_M, HALF_WIDTH_M = 1.2, 3.0, 0.2
# the catalog commbot: the head camera 0.145 m ahead of and 0.045 m left of the neck's axis. The slab is centred
# straight ahead of the neck (0.045 m right of the camera's axis), so the head has no reason to turn: a recording
# does not turn with the head, and a person off to a side would be chased to the neck's limit.
CAMERA_LEFT_OF_NECK_M = 0.045
NECK_TO_SLAB_M = 0.1 + 0.045 + SLAB_M
INVALID_ROWS = slice(0, 12)  # the recording measured nothing there (0 in the PNG)


def _greeter():
    spec = importlib.util.spec_from_file_location("greeter", EXAMPLES / "greeter.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rgbd_recording(folder: Path) -> Path:
    depth = slab_depth(SLAB_M, HALF_WIDTH_M, WALL_M, left_m=-CAMERA_LEFT_OF_NECK_M)
    depth[INVALID_ROWS] = np.nan
    return write_tum(folder, [colour((90, 60, 40))] * 20, [depth] * 20, [1305031102.175304 + k / 10 for k in range(20)])


def test_the_greeter_sees_a_recorded_person_at_its_recorded_depth_and_greets(tmp_path, capsys):
    from hil.runtime import Robot

    recording = _rgbd_recording(tmp_path / "hall")
    greeter = _greeter()
    profile = {"bus": "sim://commbot?clock=sim", "clock": "sim", "semantics": "commbot",
               "cameras": {"head_camera": f"file:{recording}"}}
    seen: dict = {}
    with Robot.open(profile) as robot:
        camera = robot.sensors["head_camera"]
        assert camera.has_depth and not camera.has_labels  # known at open, before any frame
        rendered = robot.sensors["right_camera"]  # the other eye, rendered in the world: depth and labels
        assert rendered.has_depth and rendered.has_labels and rendered.device is None

        def watch(robot):  # the frame of this period: the same object the controller read
            seen["frame"], seen["mode"] = camera.frame(), robot.mode
            seen["neck"] = robot.joints["head.neck_yaw"].position
        robot.after_cycle.append(watch)
        robot.deadline_s = 2.0
        greeter.main(robot)
    frame = seen["frame"]
    left = -(np.arange(320) - frame.intrinsics.cx) / frame.intrinsics.fx * SLAB_M
    columns = np.abs(left + CAMERA_LEFT_OF_NECK_M) <= HALF_WIDTH_M
    body = frame.depth[INVALID_ROWS.stop:]
    assert np.allclose(body[:, columns], SLAB_M, atol=1 / 5000), "the slab at 1.2 m, in metres"
    assert np.allclose(body[:, ~columns], WALL_M, atol=1 / 5000), "the wall behind it"
    assert np.isnan(frame.depth[INVALID_ROWS]).all(), "0 in the recording is NaN"
    assert frame.pose is None and frame.labels is None and frame.source == f"file:{recording}"
    assert seen["mode"] == "greet" and abs(seen["neck"]) < 0.05, seen
    said = re.findall(r"greeter: greet: a person ([0-9.]+) m away at bearing ([-+0-9.]+) rad", capsys.readouterr().out)
    assert len(said) == 1, "said once, when it started greeting"
    assert abs(float(said[0][0]) - NECK_TO_SLAB_M) < 0.02 and abs(float(said[0][1])) < 0.02, said


@pytest.mark.parametrize("kind", ["tum", "video"])
@pytest.mark.parametrize("example", ["greeter", "look_around"])
def test_the_examples_on_an_rgb_only_recording_say_so_once_and_run_to_the_end(tmp_path, kind, example):
    if kind == "tum":
        write_tum(tmp_path / "rec", [colour((200, 200, 200)), colour((20, 20, 20))] * 5, None,
                  [50 + k / 10 for k in range(10)])
        device = "file:rec"  # relative to the profile
    else:
        write_video(tmp_path / "rec.avi", [(200, 200, 200), (20, 20, 20)] * 5)
        device = "file:rec.avi"
    profile = tmp_path / "rgb_only.yaml"
    profile.write_text(f"bus: sim://commbot\nclock: sim\nsemantics: commbot\ncameras:\n  head_camera: {device}\n")
    proc = subprocess.run([sys.executable, "-m", "hil", "run", str(EXAMPLES / f"{example}.py"), "--profile",
                           str(profile), "--duration", "1.0"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HIL_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("has no depth") == 1, proc.stdout
    assert f"camera 'head_camera' has no depth (file:{tmp_path / device[5:]})" in proc.stdout
    if example == "look_around":
        brightness = [float(b) for b in re.findall(r"brightness\s+([0-9.]+) / 255", proc.stdout)]
        assert len(brightness) >= 10, proc.stdout  # one line per recorded frame at 10 Hz
        assert brightness[:4] == pytest.approx([200, 20, 200, 20], abs=3), "the recording's frames in order"


def test_a_camera_the_profile_names_that_the_robot_lacks_is_refused_at_its_line(tmp_path):
    write_tum(tmp_path / "rec", [colour((1, 2, 3))], None, [1.0])
    profile = tmp_path / "p.yaml"
    profile.write_text("bus: sim://commbot\nclock: sim\nsemantics: commbot\ncameras:\n  nose_camera: file:rec\n")
    proc = subprocess.run([sys.executable, "-m", "hil", "run", str(EXAMPLES / "greeter.py"), "--profile",
                           str(profile), "--duration", "0.2"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HIL_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode != 0
    assert f"{profile}:5: cameras: the robot has no camera 'nose_camera'; its cameras: head_camera" in proc.stderr
    assert "Traceback" not in proc.stderr
