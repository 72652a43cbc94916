"""Virtual cameras: a person where the pinhole model says, with the depth of their front; the view
turning with the neck; a grazing wall's depth failing at the descriptor's rate; the same bytes for the same seed;
bad camera descriptors refused at file:line; a frame that cannot be had names the camera and why.

Everything runs for real: the commbot in a pybullet DIRECT world, people from a served crowd running a
scenario, the frames rendered by moderngl on Mesa's EGL (llvmpipe: no GPU) or pybullet's TinyRenderer.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hil.devices.catalog import load_source
from hil.devices.descriptor import DescriptorError
from hil.firmware_sim.render.scene import PERSON_BASE, WALL
from hil.firmware_sim.world.figures import half_depth
from hil.runtime import Robot
from hil.runtime.robot.camera import CameraError, Frame
from hil.trial import Trial

ROOT = Path(__file__).resolve().parents[1]
CATALOG_CAMERA = ROOT / "devices" / "catalog" / "parts" / "camera.yaml"
START = (-18.0, 0.0, 0.0)  # the arcade's west hall: open floor around
CAMERA_AT_START = (START[0] + 0.045, 0.045, 1.07)  # the left eye's optical centre at q = 0
ADULT_HEIGHT = 1.7
NECK_TURN_RAD = 0.4


def _profile(**options: str) -> dict:
    query = "&".join(f"{k}={v}" for k, v in {"clock": "sim", **options}.items())
    return {"bus": f"sim://commbot?{query}", "clock": "sim", "semantics": str(ROOT / "config/semantics/commbot.yaml")}


def _predicted_pixel(frame: Frame, point_map) -> tuple[float, float, float]:
    """(u, v, z along the optical axis) of a map point, from the frame's ground-truth pose and its intrinsics."""
    x, y, z = frame.pose.to_camera(np.asarray(point_map, float))
    u, v = frame.intrinsics.project((x, y, z))
    return u, v, x


def _label_column(frame: Frame, label: int, row: int) -> float:
    cols = np.nonzero(frame.labels[row] == label)[0]
    assert len(cols) > 3, f"label {label} ({frame.legend.get(label)}) not on row {row}"
    return float(cols.min() + cols.max()) / 2.0


# --- a person 2 m ahead, then the neck turned ------------------------------------------------------------------

@pytest.fixture(scope="module")
def person_frames(tmp_path_factory):
    """One trial: an adult placed 2.0 m in front of the left eye, standing; a frame, then the neck turned by
    0.4 rad and another frame (the controller reads only its camera and its joints)."""
    folder = tmp_path_factory.mktemp("camera")
    px, py = CAMERA_AT_START[0] + 2.0, CAMERA_AT_START[1]
    scenario = folder / "ahead.scn"
    scenario.write_text(f"spawn p = man01 at {px} {py}\nplace p {px} {py}\nrun 10min\n")
    seen: dict = {}

    def controller(robot):
        camera = robot.sensors["head_camera"]
        for _ in robot.loop(hz=20, duration_s=1.0):
            pass
        seen["ahead"] = camera.frame()
        seen["again"] = camera.frame()
        robot.joints["head.neck_yaw"].target = NECK_TURN_RAD
        for _ in robot.loop(hz=20, duration_s=2.0):
            pass
        seen["turned"] = camera.frame()
        seen["neck"] = robot.joints["head.neck_yaw"].position

    result = Trial(controller, robot="commbot", map="arcade", scenario=str(scenario), start=START,
                   duration=4.0, seed=0).run()
    assert result.status == "ok", result.summary_line()
    seen["person"] = (px, py)
    return seen


def _person_label(frame: Frame) -> int:
    people = [i for i, name in frame.legend.items() if name.startswith("person:")]
    assert len(people) == 1, frame.legend
    return people[0]


def test_a_person_2m_ahead_is_at_the_pinhole_pixel_with_their_front_depth(person_frames):
    frame = person_frames["ahead"]
    label = _person_label(frame)
    assert label >= PERSON_BASE
    px, py = person_frames["person"]
    torso_z = 0.66 * ADULT_HEIGHT  # the figure's torso centre (world/figures.py: hip 0.50 h, shoulders 0.82 h)
    u, v, axis_z = _predicted_pixel(frame, (px, py, torso_z))
    assert axis_z == pytest.approx(2.0, abs=0.02)  # the scene put them 2.0 m ahead (the head sags a little)
    row = int(round(v))
    assert abs(_label_column(frame, label, row) - u) <= 2.0
    assert frame.labels[row, int(round(u))] == label
    window = frame.depth[row - 2:row + 3, int(round(u)) - 2:int(round(u)) + 3]
    measured = float(np.nanmedian(window))
    assert measured == pytest.approx(axis_z - half_depth(ADULT_HEIGHT), abs=0.03)


def test_a_read_within_the_frame_period_returns_the_same_frame(person_frames):
    assert person_frames["again"] is person_frames["ahead"]
    assert not person_frames["ahead"].rgb.flags.writeable  # handed out as made: read-only, not copied


def test_turning_the_neck_moves_the_person_by_the_predicted_pixels(person_frames):
    before, after = person_frames["ahead"], person_frames["turned"]
    assert person_frames["neck"] == pytest.approx(NECK_TURN_RAD, abs=0.02)
    px, py = person_frames["person"]
    torso_z = 0.66 * ADULT_HEIGHT
    u0, v0, _ = _predicted_pixel(before, (px, py, torso_z))
    u1, v1, _ = _predicted_pixel(after, (px, py, torso_z))
    assert u1 - u0 > 0.8 * before.intrinsics.fx * math.tan(NECK_TURN_RAD)  # turned left: they move right
    label = _person_label(after)
    row = int(round(v1))
    moved = _label_column(after, label, row) - _label_column(before, label, int(round(v0)))
    assert moved == pytest.approx(u1 - u0, abs=2.0)


# --- depth that fails like a depth camera's -------------------------------------------------------------------

def test_a_grazing_wall_loses_depth_beyond_the_descriptor_angle(tmp_path):
    """A long wall beside the robot, parallel to the optical axis: its pixels see it at 60..89 degrees; the
    fraction of invalid pixels per incidence bin follows the descriptor's logistic law within 5 pp."""
    wall_map = tmp_path / "corridor.yaml"
    wall_map.write_text("name: corridor\nwalls:\n  - {from: [-1, 0.6], to: [12, 0.6], thickness: 0.1, height: 3.0}\n")
    with Robot.open(_profile(map=str(wall_map), seed="5")) as robot:
        camera = robot.sensors["head_camera"]
        robot.cycle()
        frame = camera.frame()
        failure = camera.spec.depth
    on_wall = frame.labels == WALL
    pose = frame.pose.matrix
    k = frame.intrinsics
    v, u = np.nonzero(on_wall)
    rays_camera = np.stack([np.ones_like(u, float), -(u - k.cx) / k.fx, -(v - k.cy) / k.fy], axis=-1)
    rays = rays_camera @ pose[:3, :3].T
    rays /= np.linalg.norm(rays, axis=-1, keepdims=True)
    incidence = np.degrees(np.arccos(np.abs(rays[:, 1])))  # the wall's normal is the map's y axis
    hit_y = 0.55 - pose[1, 3]
    z_axis = hit_y / rays[:, 1] * (rays @ (pose[:3, :3] @ np.array([1.0, 0, 0])))
    in_range = (z_axis > failure.min_range_m + 0.05) & (z_axis < failure.max_range_m - 0.3)
    invalid = np.isnan(frame.depth[v, u])
    expected = 1.0 / (1.0 + np.exp(-(incidence - failure.dropout_angle50_deg) / failure.dropout_width_deg))
    checked = 0
    for lo in range(60, 90, 3):
        sel = in_range & (incidence >= lo) & (incidence < lo + 3)
        if sel.sum() < 300:
            continue
        assert invalid[sel].mean() == pytest.approx(expected[sel].mean(), abs=0.05), f"incidence {lo}..{lo + 3}"
        checked += 1
    assert checked >= 4, "the wall should fill at least four incidence bins"
    valid = ~invalid & in_range & (incidence < 60)
    if valid.any():  # the surviving pixels are near the truth (noise sigma = noise_z2 z^2)
        error = frame.depth[v, u][valid] - z_axis[valid]
        assert np.median(np.abs(error)) < 5 * failure.noise_z2 * np.median(z_axis[valid]) ** 2 + 0.01


def _frame_bytes(seed: int) -> tuple[bytes, bytes, bytes]:
    with Robot.open(_profile(map="lab", seed=str(seed))) as robot:
        for _ in robot.loop(hz=10, duration_s=0.3):
            pass
        frame = robot.sensors["head_camera"].frame()
        return frame.rgb.tobytes(), frame.depth.tobytes(), frame.labels.tobytes()


def test_the_same_seed_gives_the_same_bytes_of_every_image():
    first, second, other = _frame_bytes(3), _frame_bytes(3), _frame_bytes(4)
    assert first == second
    assert other[1] != first[1]  # another seed: other noise and dropouts in the depth


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, field", [
    ("width: 320", "width: 100000", "width"),
    ("height: 240", "height: 1", "height"),
    ("rate_hz: 10.0", "rate_hz: 0", "rate_hz"),
    ("rate_hz: 10.0", "rate_hz: -5", "rate_hz"),
    ("fov_deg: 70.0", "fx: 0", "fx"),
    ("fov_deg: 70.0", "fx: -200.0", "fx"),
])
def test_a_bad_camera_descriptor_is_refused_at_file_line(tmp_path, old, new, field):
    text = CATALOG_CAMERA.read_text()
    assert old in text
    bad = tmp_path / "camera.yaml"
    bad.write_text(text.replace(old, new, 1))
    line = next(i for i, row in enumerate(bad.read_text().splitlines(), 1) if row.strip().startswith(new))
    with pytest.raises(DescriptorError) as caught:
        load_source(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}:{line}: ") and f"params.{field}" in message, message


def test_a_camera_without_a_world_says_which_and_why():
    profile = {**_profile(world="0"), "clock": "real"}
    profile["bus"] = profile["bus"].replace("clock=sim", "clock=real")
    with Robot.open(profile) as robot:
        with pytest.raises(CameraError) as caught:
            robot.sensors["head_camera"].frame()
    message = str(caught.value)
    assert "head_camera" in message and "part id 43" in message and "names no device" in message


def test_a_camera_that_cannot_render_says_which_and_why(tmp_path):
    """The EGL renderer forced (HIL_CAMERA_RENDERER=gl) where EGL finds no driver: the frame's error names the
    camera and the reason, and says what to install (run in a child process: EGL is loaded once per process)."""
    script = tmp_path / "no_egl.py"
    script.write_text(
        "import sys\n"
        "from runtime import Robot\n"
        "from runtime.robot.camera import CameraError\n"
        f"profile = {_profile(map='lab')!r}\n"
        "with Robot.open(profile) as robot:\n"
        "    try:\n"
        "        robot.sensors['head_camera'].frame()\n"
        "    except CameraError as exc:\n"
        "        print(exc)\n"
        "        sys.exit(3)\n")
    env = {**os.environ, "HIL_CAMERA_RENDERER": "gl", "__EGL_VENDOR_LIBRARY_FILENAMES": str(tmp_path / "none.json"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "head_camera" in done.stdout and "part id 43" in done.stdout and "EGL" in done.stdout, done.stdout


def test_the_tinyrenderer_fallback_sees_the_same_walls(monkeypatch):
    """Without EGL the camera falls back to pybullet's TinyRenderer: the same geometry (walls and floor where the
    EGL renderer has them, depth within a centimetre), labels from pybullet's segmentation."""
    frames = {}
    for renderer in ("gl", "tiny"):
        monkeypatch.setenv("HIL_CAMERA_RENDERER", renderer)
        with Robot.open(_profile(map="lab", seed="1")) as robot:
            robot.cycle()
            frames[renderer] = robot.sensors["head_camera"].frame()
    gl, tiny = frames["gl"], frames["tiny"]
    assert gl.source == "moderngl-egl" and tiny.source == "pybullet-tinyrenderer"
    same = (gl.labels == tiny.labels).mean()
    assert same > 0.97 and (tiny.labels == WALL).mean() > 0.2
    both = ~np.isnan(gl.depth) & ~np.isnan(tiny.depth) & (gl.labels == WALL)
    assert np.median(np.abs(gl.depth[both] - tiny.depth[both])) < 0.01
