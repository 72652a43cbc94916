"""An Intel RealSense RGB-D camera: ``device: realsense`` (the first one connected) or ``realsense:SERIAL``, read
with Intel's pyrealsense2 (the ``realsense`` extra: ``pip install 'hil[realsense]'``), imported only when the
camera is first read, so hil without it still opens a robot that names one.

The colour stream runs at the descriptor's width x height, the depth stream at the camera's default size, both at
the smallest frame rate the camera offers at or above the descriptor's ``rate_hz``; depth is aligned to the colour
image (librealsense's ``align``), scaled to metres by the depth sensor's own scale, 0 (no measurement) -> NaN.
Frames follow the robot's clock as every camera's do: at most one per frame period of ``rate_hz``, the newest the
camera delivered. The frame's intrinsics are the colour stream's, as the camera reports them (its factory
calibration), not the descriptor's. The device opens on the first frame; no driver, no camera, or a size it
cannot stream is that frame's error, in one line.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hil.devices.descriptor.camera import CameraSpec, Pinhole

from .camera_period import FramePeriods

INSTALL = "pip install 'hil[realsense]' (Intel's pyrealsense2)"
DEVICE_FPS = (6, 15, 30, 60, 90)  # the frame rates a D400-series camera streams colour and depth at
WAIT_MS = 2000  # a camera that gives no frame for this long is named in the error


class RealSenseSource:
    """``source()`` -> the frame dict of the current period (module docstring)."""

    has_depth = True
    has_labels = False

    def __init__(self, spec: CameraSpec, serial: str, clock: Callable[[], float]):
        self.spec, self.serial, self.clock = spec, serial, clock
        self.intrinsics: Pinhole | None = None  # the device's, once it streams; the descriptor's until then
        self._pipeline: Any = None
        self._align: Any = None
        self._scale = 0.001
        self._periods = FramePeriods(spec.rate_hz, clock)
        self._last_k: int | None = None
        self._last: dict | None = None

    @property
    def device(self) -> str:
        return f"realsense:{self.serial}" if self.serial else "realsense"

    @property
    def name(self) -> str:
        return f"RealSense {self.serial}" if self.serial else "RealSense (the first connected)"

    def __call__(self) -> dict:
        now, k = self._periods.now()
        if self._last is not None and k == self._last_k:
            return self._last
        pipeline = self._pipeline or self._open()
        try:
            frames = self._align.process(pipeline.wait_for_frames(WAIT_MS))
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name} gave no frame within {WAIT_MS} ms: {exc}") from None
        colour, depth = frames.get_color_frame(), frames.get_depth_frame()
        if not colour or not depth:
            raise RuntimeError(f"{self.name} gave a frame without {'colour' if not colour else 'depth'}")
        raw = np.asanyarray(depth.get_data())
        metres = raw.astype(np.float32) * np.float32(self._scale)
        metres[raw == 0] = np.nan
        self._last = {"t": now, "rgb": np.array(colour.get_data(), dtype=np.uint8, copy=True), "depth": metres,
                      "labels": None, "legend": {}, "pose": None, "source": self.device}
        self._last_k = k
        return self._last

    def close(self) -> None:
        if self._pipeline is not None:
            self._pipeline.stop()
            self._pipeline = None

    def _open(self):
        rs = driver()
        if not len(rs.context().query_devices()):
            raise RuntimeError(f"{self.name}: no RealSense camera is connected")
        fps = device_fps(self.spec.rate_hz)
        config = rs.config()
        if self.serial:
            config.enable_device(self.serial)
        config.enable_stream(rs.stream.color, self.spec.width, self.spec.height, rs.format.rgb8, fps)
        config.enable_stream(rs.stream.depth, rs.format.z16, fps)
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(config)
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name} cannot stream colour {self.spec.width}x{self.spec.height} and depth at "
                               f"{fps} fps: {exc}") from None
        self._scale = float(profile.get_device().first_depth_sensor().get_depth_scale())
        i = profile.get_stream(rs.stream.color).as_video_stream_profile().get_intrinsics()
        self.intrinsics = Pinhole(int(i.width), int(i.height), float(i.fx), float(i.fy), float(i.ppx), float(i.ppy))
        self._align = rs.align(rs.stream.color)
        self._pipeline = pipeline
        return pipeline


def device_fps(rate_hz: float) -> int:
    """The smallest frame rate the camera streams at that is at least ``rate_hz`` (the fastest it has if none)."""
    return next((f for f in DEVICE_FPS if f >= rate_hz - 1e-9), DEVICE_FPS[-1])


def driver():
    """pyrealsense2, or a RuntimeError that says in one line what to install."""
    try:
        import pyrealsense2 as rs
    except ImportError:
        raise RuntimeError(f"a realsense camera needs Intel's driver: {INSTALL}") from None
    return rs
