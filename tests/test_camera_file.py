"""A recorded camera (``device: file:PATH``, runtime/robot/camera_file.py) through the same Camera.frame() as a real
one: TUM RGB-D recordings written here with OpenCV from known geometry (16-bit depth, 5000 per metre, 0 =
none), served by timestamp against the robot's clock and looping; colour and depth paired by nearest stamp;
intrinsics from camera.yaml or the descriptor; bad recordings refused at open, naming the file (and line). And the
RealSense device without its driver or without a camera: the one line that says what is missing."""
from __future__ import annotations

import dataclasses
import sys

import cv2
import numpy as np
import pytest

from camera_recordings import colour, slab_depth, write_tum, write_video
from hil.devices.catalog import load_part
from hil.devices.descriptor.camera import CameraParamError, camera_spec, device_kind
from hil.runtime.robot.camera import Camera, CameraError, device_source
from hil.runtime.robot.camera_file import RecordingError


class StepClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _camera(device: str, clock: StepClock) -> Camera:
    desc = load_part("camera")
    sensor = dataclasses.replace(desc.sensors[0], params={**desc.sensors[0].params, "device": device})
    camera = Camera("head_camera", 43, "torso/neck", desc, sensor)
    camera.attach(device_source(device, camera.spec, clock))
    return camera


def test_frames_are_served_at_their_recorded_stamps_against_the_robots_clock_and_loop(tmp_path):
    stamps = [1000.0, 1000.05, 1000.2, 1000.25]  # uneven: 50 ms, 150 ms, 50 ms; mean interval 83.333 ms
    shades = [10, 80, 150, 220]
    depths = [slab_depth(0.5 + k, 0.3, None) for k in range(4)]
    write_tum(tmp_path / "rec", [colour((s, s, s)) for s in shades], depths, stamps)
    clock = StepClock(7.0)  # the robot's clock when it opens: the recording's start
    camera = _camera(f"file:{tmp_path / 'rec'}", clock)
    assert camera.has_depth and not camera.has_labels
    served = []
    for t in (7.0, 7.049, 7.05, 7.19, 7.2, 7.3, 7.333, 7.334, 7.39):
        clock.t = t
        frame = camera.frame()
        served.append((round(frame.t, 6), int(frame.rgb[0, 0, 0]), float(np.nanmax(frame.depth))))
    length = 0.25 + 0.25 / 3
    assert served == [(7.0, 10, 0.5), (7.0, 10, 0.5), (7.05, 80, 1.5), (7.05, 80, 1.5), (7.2, 150, 2.5),
                      (7.25, 220, 3.5), (7.25, 220, 3.5), (round(7 + length, 6), 10, 0.5),
                      (round(7 + length + 0.05, 6), 80, 1.5)]
    clock.t = 7.39
    assert camera.frame() is camera.frame(), "a read between two frames returns the same frame"


def test_depth_is_metres_with_nan_where_the_recording_measured_nothing(tmp_path):
    depth = slab_depth(1.2345, 0.25, 4.0)
    depth[100:110, 40:60] = np.nan  # written as 0
    write_tum(tmp_path / "rec", [colour((1, 2, 3))], [depth], [5.0])
    frame = _camera(f"file:{tmp_path / 'rec'}", StepClock()).frame()
    assert frame.depth.dtype == np.float32 and frame.depth.shape == (240, 320)
    assert np.isnan(frame.depth[100:110, 40:60]).all() and np.isfinite(frame.depth).sum() == 240 * 320 - 200
    assert np.nanmin(frame.depth) == pytest.approx(1.2346, abs=1e-6)  # 6173 / 5000: the PNG's 0.2 mm steps
    assert np.nanmax(frame.depth) == pytest.approx(4.0, abs=1e-6)
    assert frame.rgb[0, 0].tolist() == [1, 2, 3] and frame.labels is None and frame.pose is None


def test_colour_and_depth_are_paired_by_the_nearest_stamp_within_20_ms(tmp_path):
    rec = write_tum(tmp_path / "rec", [colour((k * 40, 0, 0)) for k in range(3)],
                    [slab_depth(1.0 + k, 0.3) for k in range(3)], [10.0, 10.1, 10.2], depth_lag_s=0.015)
    # a depth image of a fourth colour frame that was lost, 30 ms after the last one: never paired
    lines = (rec / "depth.txt").read_text().splitlines()
    cv2.imwrite(str(rec / "depth" / "late.png"), np.full((240, 320), 9000, np.uint16))
    (rec / "depth.txt").write_text("\n".join(lines + ["10.23 depth/late.png"]) + "\n")
    # and a colour frame with no depth within 20 ms: left out
    cv2.imwrite(str(rec / "rgb" / "lonely.png"), np.zeros((240, 320, 3), np.uint8))
    (rec / "rgb.txt").write_text((rec / "rgb.txt").read_text() + "10.26 rgb/lonely.png\n")
    clock = StepClock()
    camera = _camera(f"file:{rec}", clock)
    seen = []
    for t in (0.0, 0.1, 0.2, 0.35):
        clock.t = t
        frame = camera.frame()
        seen.append((int(frame.rgb[0, 0, 0]), float(np.nanmax(frame.depth))))
    assert seen == [(0, 1.0), (40, 2.0), (80, 3.0), (0, 1.0)]  # 3 frames, 0.3 s long, looped


def test_intrinsics_come_from_camera_yaml_beside_the_recording(tmp_path):
    small = [np.zeros((120, 160, 3), np.uint8)]
    rec = write_tum(tmp_path / "rec", small, None, [0.0])
    (rec / "camera.yaml").write_text("width: 160\nheight: 120\nfx: 117.0\nfy: 118.0\ncx: 80.5\ncy: 60.25\n")
    camera = _camera(f"file:{rec}", StepClock())
    assert not camera.has_depth
    frame = camera.frame()
    assert (frame.intrinsics.fx, frame.intrinsics.fy, frame.intrinsics.cx, frame.intrinsics.cy) == \
        (117.0, 118.0, 80.5, 60.25)
    assert frame.rgb.shape == (120, 160, 3) and frame.depth is None
    assert camera.intrinsics.matrix[0, 0] == 117.0  # before and after a frame: the recording's own


def test_a_video_is_an_rgb_only_recording_at_its_frame_rate(tmp_path):
    video = write_video(tmp_path / "clip.avi", [(200, 30, 30), (30, 200, 30), (30, 30, 200)], fps=5.0)
    clock = StepClock()
    camera = _camera(f"file:{video}", clock)
    assert not camera.has_depth and not camera.has_labels
    means = []
    for t in (0.0, 0.19, 0.2, 0.4, 0.6):
        clock.t = t
        means.append(camera.frame().rgb.reshape(-1, 3).mean(axis=0))
    expected = [(200, 30, 30), (200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 30, 30)]
    assert all(np.allclose(m, e, atol=12) for m, e in zip(means, expected)), means
    camera.close()


def _bad(tmp_path, edit) -> str:
    rec = write_tum(tmp_path / "rec", [colour((9, 9, 9))] * 2, [slab_depth(1.0, 0.2)] * 2, [3.0, 3.1])
    edit(rec)
    with pytest.raises(RecordingError) as err:
        device_source(f"file:{rec}", camera_spec(load_part("camera").sensors[0].params), StepClock())
    return str(err.value).replace(str(rec), "REC")


def test_bad_recordings_are_refused_naming_the_file_and_line(tmp_path):
    def lines(name, *text):
        return lambda rec: (rec / name).write_text("\n".join(text) + "\n")

    cases = [
        (lines("rgb.txt", "# c", "3.0 rgb/3.000000.png extra"), "REC/rgb.txt:2: expected 'timestamp filename'"),
        (lines("depth.txt", "x depth/3.004000.png"), "REC/depth.txt:1: the timestamp 'x' is not a number"),
        (lines("rgb.txt", "3.1 rgb/3.100000.png", "3.0 rgb/3.000000.png"),
         "REC/rgb.txt:2: timestamp 3.0 is not after the previous line's 3.100000"),
        (lines("rgb.txt", "3.0 rgb/gone.png"), "REC/rgb.txt:1: no such image REC/rgb/gone.png"),
        (lines("rgb.txt", "# nothing"), "REC/rgb.txt: lists no images"),
        (lines("depth.txt", "9.0 depth/3.004000.png"), "REC/depth.txt: no depth image within 20 ms"),
        (lambda rec: (rec / "rgb.txt").unlink(), "REC: no rgb.txt"),
        (lambda rec: (rec / "camera.yaml").write_text("width: 320\nheight: 240\nfx: 200\nfy: 200\nfz: 1\n"),
         "REC/camera.yaml:5: camera calibration: unknown key 'fz'"),
        (lambda rec: (rec / "camera.yaml").write_text("width: 320\nheight: 240\nfx: -2\nfy: 200\n"),
         "REC/camera.yaml:3: fx must be a number > 0"),
        (lambda rec: (rec / "camera.yaml").write_text("width: 640\nheight: 480\nfx: 500\nfy: 500\n"),
         "REC/rgb/3.000000.png: the images are 320x240 pixels but REC/camera.yaml says 640x480"),
        (lambda rec: cv2.imwrite(str(rec / "rgb" / "3.000000.png"), np.zeros((100, 100, 3), np.uint8)),
         "the images are 100x100 pixels but the camera part's descriptor says 320x240; give the recording's "
         "intrinsics in REC/camera.yaml"),
    ]
    for index, (edit, message) in enumerate(cases):
        assert message in _bad(tmp_path / str(index), edit), (index, message)


def test_a_depth_image_that_is_not_16_bit_is_the_frames_error_naming_it(tmp_path):
    rec = write_tum(tmp_path / "rec", [colour((9, 9, 9))], [slab_depth(1.0, 0.2)], [3.0])
    cv2.imwrite(str(rec / "depth" / "3.004000.png"), np.zeros((240, 320, 3), np.uint8))
    camera = _camera(f"file:{rec}", StepClock())
    with pytest.raises(CameraError, match=r"camera 'head_camera' .*depth/3\.004000\.png: a depth image must be a "
                                          r"16-bit single-channel PNG, not uint8 with 3 channel"):
        camera.frame()


def test_no_such_recording_is_refused_when_the_robot_opens(tmp_path):
    from hil.runtime import Robot
    from hil.runtime.robot.camera import CameraDeviceError

    write_tum(tmp_path / "rec", [colour((1, 1, 1))], None, [0.0])
    (tmp_path / "rec" / "rgb.txt").write_text("0.0 rgb/0.000000.png\n1.0 rgb/missing.png\n")
    with pytest.raises(CameraDeviceError, match=r"camera 'head_camera': .*rec/rgb\.txt:2: no such image"):
        Robot.open({"bus": "sim://commbot?clock=sim", "clock": "sim", "semantics": "commbot",
                    "cameras": {"head_camera": f"file:{tmp_path / 'rec'}"}})


def test_device_strings_are_checked_in_the_descriptor():
    assert device_kind("file:/x/y") == ("file", "/x/y")
    assert device_kind("realsense") == ("realsense", "") and device_kind("realsense:f123") == ("realsense", "f123")
    assert device_kind("uvc:046d:0825") == ("uvc", "046d:0825")
    assert device_kind("/dev/video0") == ("path", "/dev/video0")
    params = load_part("camera").sensors[0].params
    with pytest.raises(CameraParamError, match=r"device: 'file:' names no file after file:"):
        camera_spec({**params, "device": "file:"})


def test_a_realsense_without_its_driver_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyrealsense2", None)  # as on a machine without the realsense extra
    clock = StepClock()
    camera = _camera("realsense:923322071234", clock)
    assert camera.has_depth and not camera.has_labels  # known from the kind, before any driver is loaded
    with pytest.raises(CameraError) as err:
        camera.frame()
    assert str(err.value).endswith("a realsense camera needs Intel's driver: pip install 'hil[realsense]' "
                                   "(Intel's pyrealsense2)")
    assert "\n" not in str(err.value)


def test_a_realsense_that_is_not_connected_is_named_in_the_frames_error():
    """With the driver installed (the realsense extra) and no camera plugged in, the error names the serial; without
    the driver, the one line that says what to install (no machine this runs on has a RealSense)."""
    camera = _camera("realsense:923322071234", StepClock())
    try:
        import pyrealsense2  # noqa: F401
        expected = "RealSense 923322071234: no RealSense camera is connected"
    except ImportError:
        expected = "pip install 'hil[realsense]'"
    with pytest.raises(CameraError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        camera.frame()


def test_the_profiles_cameras_are_checked_at_their_lines(tmp_path):
    from hil.devices.yaml_source import ConfigError
    from hil.runtime.robot.profile import load_profile

    write_tum(tmp_path / "rec", [colour((1, 1, 1))], None, [0.0])
    head = "bus: sim://commbot\nclock: sim\ncameras:\n  right_camera: file:rec\n"
    assert load_profile(_write(tmp_path, head)).cameras == (("right_camera", f"file:{tmp_path / 'rec'}", 4),)
    for body, message in [("  head_camera: file:nowhere\n", f"p.yaml:5: cameras: head_camera: no such recording "
                                                             f"{tmp_path / 'nowhere'}"),
                          ("  head_camera: 'uvc:'\n", "p.yaml:5: cameras: head_camera: 'uvc:' names no uvc id"),
                          ("  head_camera: 3\n", "p.yaml:5: cameras: 'head_camera': give a camera name and a device")]:
        with pytest.raises(ConfigError) as err:
            load_profile(_write(tmp_path, head + body))
        assert message in str(err.value), str(err.value)


def _write(folder, text):
    path = folder / "p.yaml"
    path.write_text(text)
    return path

