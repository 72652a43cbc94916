"""A real camera's path (runtime/robot/uvc.py) pointed at a video file: the same Camera.frame() gives the file's
frames, RGB at the descriptor's size, depth, labels and pose None; one frame per period of the camera's rate;
device names resolved (uvc:VID:PID, serial:) and refused with what was found."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hil.devices.catalog import load_part
from hil.runtime.robot.camera import Camera
from hil.runtime.robot.uvc import DeviceSource, resolve_device

import cv2  # noqa: E402  (the camera extra: opencv-python-headless, in the test extra)


def _video(path, colours, size=(320, 240)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    assert writer.isOpened()
    for rgb in colours:
        writer.write(np.full((size[1], size[0], 3), rgb[::-1], np.uint8))  # OpenCV writes BGR
    writer.release()


class StepClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_video_file_through_the_real_camera_path(tmp_path):
    video = tmp_path / "eye.avi"
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    _video(video, colours)
    desc = load_part("camera")
    sensor = desc.sensors[0]
    sensor = dataclasses.replace(sensor, params={**sensor.params, "device": str(video)})
    camera = Camera("head_camera", 43, "torso/neck/...", desc, sensor)
    clock = StepClock()
    source = DeviceSource(camera.spec, clock=clock)
    camera.attach(source)
    assert not camera.has_depth and not camera.has_labels  # a UVC camera: RGB only, known before a frame
    try:
        seen = []
        first = camera.frame()
        assert camera.frame() is first  # within the period: the same frame
        for k in range(4):
            clock.t = k / camera.spec.rate_hz
            frame = camera.frame()
            assert frame.rgb.shape == (240, 320, 3) and frame.rgb.dtype == np.uint8
            assert frame.depth is None and frame.labels is None and frame.pose is None
            seen.append(frame.rgb.reshape(-1, 3).mean(axis=0))
    finally:
        camera.close()
    assert np.allclose(seen[0], colours[0], atol=12)
    assert np.allclose(seen[1], colours[1], atol=12) and np.allclose(seen[2], colours[2], atol=12)
    assert np.allclose(seen[3], colours[0], atol=12)  # a recording loops


def test_device_names_resolve_through_sysfs(tmp_path):
    usb = tmp_path / "devices" / "usb1" / "1-2"
    usb.mkdir(parents=True)
    (usb / "idVendor").write_text("046d\n")
    (usb / "idProduct").write_text("0825\n")
    (usb / "serial").write_text("8F3A21C0\n")
    (usb / "1-2:1.0").mkdir()
    sys_video = tmp_path / "video4linux" / "video2"
    sys_video.mkdir(parents=True)
    (sys_video / "device").symlink_to(usb / "1-2:1.0")
    assert resolve_device("uvc:046d:0825", tmp_path / "video4linux") == "/dev/video2"
    assert resolve_device("serial:8f3a21c0", tmp_path / "video4linux") == "/dev/video2"
    assert resolve_device("/dev/video7", tmp_path / "video4linux") == "/dev/video7"
    with pytest.raises(ValueError, match=r"no video device with uvc 1234:5678; found: video2 \(046d:0825"):
        resolve_device("uvc:1234:5678", tmp_path / "video4linux")
