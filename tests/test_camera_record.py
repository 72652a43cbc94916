"""Trials record their cameras (trial/record/camera_log.py): JPEG images and calibrations at --camera-rate in
Foxglove's schemas, depth as RawImage when asked, none at rate 0; decoded here with the schemas the log carries."""
from __future__ import annotations

import io
import json

import numpy as np
from mcap.reader import make_reader
from PIL import Image

from hil.trial import Trial

ROOT_MAP = "lab"


def _still(robot):
    for _ in robot.loop(hz=20):
        pass


def _messages(folder):
    """topic -> [(schema name, log time, decoded protobuf message or None for JSON, raw bytes)]."""
    from test_foxglove_log import _protobuf_class

    out: dict[str, list] = {}
    classes: dict = {}
    with open(folder / "trial.mcap", "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            decoded = None
            if schema is not None and schema.encoding == "protobuf":
                cls = classes.get(schema.id) or classes.setdefault(schema.id, _protobuf_class(schema))
                decoded = cls.FromString(message.data)
            out.setdefault(channel.topic, []).append((schema.name if schema else "", message.log_time, decoded,
                                                      message.data))
    return out


def test_a_trial_records_its_cameras_at_the_camera_rate(tmp_path):
    result = Trial(_still, robot="commbot", map=ROOT_MAP, duration=2.0, seed=0, camera_rate=5.0,
                   camera_depth=True).run(tmp_path / "a")
    assert result.status == "ok", result.summary_line()
    messages = _messages(tmp_path / "a")
    images = messages["/foxglove/head_camera/image"]
    assert {m[0] for m in images} == {"foxglove.CompressedImage"}
    assert 10 <= len(images) <= 11  # 2 s at 5 Hz (t = 0 included)
    image = images[3][2]
    assert image.format == "jpeg" and image.frame_id == "head_camera_optical"
    picture = np.asarray(Image.open(io.BytesIO(image.data)))
    assert picture.shape == (240, 320, 3) and picture.std() > 5  # a picture, not a blank
    calibration = messages["/foxglove/head_camera/calibration"][3][2]
    assert (calibration.width, calibration.height) == (320, 240)
    assert calibration.K[2] == 159.5 and abs(calibration.K[0] - 228.5037) < 1e-3
    depth = messages["/foxglove/head_camera/depth"][3][2]
    values = np.frombuffer(depth.data, "<f4").reshape(240, 320)
    assert depth.encoding == "32FC1" and np.isfinite(values).mean() > 0.3 and np.isnan(values).any()
    assert "/foxglove/right_camera/image" in messages


def test_camera_rate_zero_records_no_images_and_the_same_seed_the_same_log(tmp_path):
    off = Trial(_still, robot="commbot", map=ROOT_MAP, duration=1.0, seed=0, camera_rate=0).run(tmp_path / "off")
    assert off.status == "ok"
    assert not any(topic.startswith("/foxglove/head_camera") for topic in _messages(tmp_path / "off"))
    for name in ("x", "y"):
        Trial(_still, robot="commbot", map=ROOT_MAP, duration=1.0, seed=2, camera_rate=5.0).run(tmp_path / name)
    first, second = (_messages(tmp_path / n)["/foxglove/head_camera/image"] for n in ("x", "y"))
    assert [(t, raw) for _, t, _, raw in first] == [(t, raw) for _, t, _, raw in second]


def test_without_pillow_a_trial_runs_and_says_its_cameras_were_not_recorded(tmp_path):
    """A core install (no camera extra: what .ci/wheel_smoke's ``hil demo`` runs) records no images and says so in
    the robot's notes, instead of failing the trial (it did: the wheel's demo crashed). A real trial in a child
    process in which Pillow cannot be imported."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import json, sys
sys.modules["PIL"] = None  # import PIL raises ImportError, as where Pillow is not installed
from hil.trial import Trial
def still(robot):
    for _ in robot.loop(hz=20):
        pass
result = Trial(still, robot="commbot", map="lab", duration=1.0, seed=0, camera_rate=5.0).run({str(tmp_path / "t")!r})
print(json.dumps({{"ok": result.ok, "error": result.error, "notes": result.notes}}))
"""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"], got["error"]
    unrecorded = [n for n in got["notes"] if "not recorded" in n and "Pillow" in n]
    assert len(unrecorded) == 2 and "pip install 'hil[camera]'" in unrecorded[0], got["notes"]
    topics = set(_messages(tmp_path / "t"))
    assert "/robot/state" in topics and not any(t.endswith("/image") for t in topics), sorted(topics)


def test_hil_camera_rate_sets_the_default_and_an_explicit_rate_wins(monkeypatch):
    """``$HIL_CAMERA_RATE`` is the recording rate of trials that do not set one (the suite sets 0: conftest.py);
    a trial's own camera_rate wins; a bad value names the variable."""
    import pytest

    from hil.trial.spec import make_spec

    monkeypatch.setenv("HIL_CAMERA_RATE", "2.5")
    assert make_spec(_still, robot="commbot").camera_rate == 2.5
    assert make_spec(_still, robot="commbot", camera_rate=5.0).camera_rate == 5.0
    assert make_spec(_still, robot="commbot").but(seed=3).camera_rate == 2.5
    monkeypatch.delenv("HIL_CAMERA_RATE")
    assert make_spec(_still, robot="commbot").camera_rate == 2.0, "hil's own default (bench/README.md \"camera_record\")"
    monkeypatch.setenv("HIL_CAMERA_RATE", "fast")
    with pytest.raises(ValueError, match=r"\$HIL_CAMERA_RATE='fast': a camera recording rate is 0..100 Hz"):
        make_spec(_still, robot="commbot")


def _steered_by_depth(robot):
    """Reads the right camera at its own pace (every 0.35 s, out of step with any recording rate) and turns the
    neck by the fractional part of a depth sum: a change of one noise draw in a frame it reads moves the robot."""
    camera, neck = robot.sensors["right_camera"], robot.joints["head.neck_yaw"]
    next_read = 0.0
    for tick in robot.loop(hz=20):
        if tick.time >= next_read - 1e-9:
            next_read += 0.35
            depth = camera.frame().depth
            neck.target = 0.4 * (float(np.nansum(depth[80:160, 120:200], dtype=np.float64)) % 1.0) - 0.2


CAMERAS = ("head_camera", "right_camera")


def _log_without_cameras(folder) -> dict[str, list[tuple[int, bytes]]]:
    """Every topic but the cameras' own (their images, and what was counted of the frames handed out: invalid
    depth pixels, people seen, which depend on how many frames were looked at), their optical frames' transform
    and the trial's description (which names camera_rate): time and bytes; /robot/sensor_faults without the
    cameras' entries (the ring's counters must match)."""
    skip = tuple(f"/foxglove/{name}/" for name in CAMERAS)
    out = {topic: [(t, raw) for _, t, _, raw in messages if b"_camera_optical" not in raw]
           for topic, messages in _messages(folder).items()
           if not topic.startswith(skip) and topic not in ("/trial/meta", "/trial/spec", "/robot/camera_faults",
                                                           "/camera/people")}
    if "/robot/sensor_faults" in out:
        out["/robot/sensor_faults"] = [(t, _without_cameras(raw)) for t, raw in out["/robot/sensor_faults"]]
    return out


def _without_cameras(raw: bytes) -> bytes:
    data = json.loads(raw)
    data.pop("frames", None)
    data["sensors"] = {k: v for k, v in data.get("sensors", {}).items() if k not in CAMERAS}
    return json.dumps(data, sort_keys=True).encode()


def test_recording_the_cameras_or_not_changes_nothing_else_in_the_log(tmp_path):
    """Observing never changes the simulation: the same seed with camera_rate 0 and 5 gives byte-identical robot,
    ring, people and metric messages, in the arcade among the weekday crowd, with a controller that reads a camera
    (its depth noise is frame k's own, whichever frames the recording made before it) and steers by that noise."""
    for rate in (0.0, 5.0):
        result = Trial(_steered_by_depth, robot="commbot", map="arcade", crowd="weekday", start=(-18.0, 0.0, 0.0),
                       duration=3.0, seed=4, camera_rate=rate).run(tmp_path / f"rate{rate:g}")
        assert result.status == "ok", result.summary_line()
    off, on = (_log_without_cameras(tmp_path / f"rate{rate:g}") for rate in (0.0, 5.0))
    assert "/foxglove/head_camera/image" in _messages(tmp_path / "rate5")
    assert {"/robot/state", "/pedestrians"} <= set(off), sorted(off)
    assert any(t.startswith("/ring") or "ring" in t for t in off), sorted(off)
    assert sorted(off) == sorted(on)
    for topic in off:
        assert off[topic] == on[topic], f"{topic} differs with the cameras recorded"
