"""A real camera part's frames: the device its descriptor names (``params.device``), read with OpenCV's
VideoCapture (the ``camera`` extra: opencv-python-headless), with depth, labels and pose None (``has_depth``
False). An RGB-D camera is ``realsense:`` (realsense.py); a recording standing in for one is ``file:PATH``
(camera_file.py).

    device: uvc:046d:0825        a UVC camera by USB VID:PID (found under /sys/class/video4linux)
    device: serial:8F3A21C0      a UVC camera by its USB serial number
    device: /dev/video2          a V4L2 node, or a video file (how the tests point the same path at a recording)

The device is opened on the first frame (a robot opens without it; the frame's error says what is missing).
Frames follow the camera's rate as the virtual one does: one grab per frame period of the robot's clock, read
from the device's own stream, so a read within a period returns the same frame. A video file's frames are
taken in order, one per period, and it loops at its end.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hil.devices.descriptor.camera import CameraSpec

from .camera_period import FramePeriods

SYS_VIDEO = Path("/sys/class/video4linux")


class DeviceSource:
    """``source()`` -> the frame dict of the current period, from the device (see the module docstring)."""

    has_depth = False  # a UVC camera gives colour only
    has_labels = False
    intrinsics = None  # the descriptor's

    def __init__(self, spec: CameraSpec, clock=time.monotonic, device: str | None = None):
        self.spec, self.clock = spec, clock
        self.device = device or str(spec.device)
        self._capture: Any = None
        self._last: dict | None = None
        self._last_k: int | None = None
        self._periods = FramePeriods(spec.rate_hz, clock)

    def __call__(self) -> dict:
        now, k = self._periods.now()
        if self._last is not None and k == self._last_k:
            return self._last
        capture = self._capture or self._open()
        ok, image = capture.read()
        if not ok and self._is_file():
            capture.set(self._cv2.CAP_PROP_POS_FRAMES, 0)  # a recording loops
            ok, image = capture.read()
        if not ok:
            raise RuntimeError(f"device {self.device!r} gave no frame")
        rgb = self._cv2.cvtColor(image, self._cv2.COLOR_BGR2RGB)
        if rgb.shape[:2] != (self.spec.height, self.spec.width):
            rgb = self._cv2.resize(rgb, (self.spec.width, self.spec.height), interpolation=self._cv2.INTER_AREA)
        self._last, self._last_k = {"t": now, "rgb": rgb, "depth": None, "labels": None, "legend": {},
                                    "pose": None, "source": f"device:{self.device}"}, k
        return self._last

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def _is_file(self) -> bool:
        return Path(str(self.device)).is_file()

    def _open(self):
        try:
            import cv2
        except ImportError:
            raise RuntimeError("reading a real camera needs OpenCV: pip install 'hil[camera]' "
                               "(opencv-python-headless)") from None
        self._cv2 = cv2
        target = resolve_device(str(self.device))
        capture = cv2.VideoCapture(target)
        if not capture.isOpened():
            raise RuntimeError(f"cannot open device {self.device!r} ({target})")
        if not self._is_file():
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.spec.width)
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.spec.height)
            capture.set(cv2.CAP_PROP_FPS, self.spec.rate_hz)
        self._capture = capture
        return capture


def resolve_device(device: str, sys_video: Path = SYS_VIDEO) -> str:
    """The path OpenCV opens for a device name: uvc:VID:PID or serial:SERIAL looked up among the V4L2 nodes'
    USB parents, a path as it is. ValueError names what was looked for and what was found."""
    if device.startswith("uvc:") or device.startswith("serial:"):
        kind, _, wanted = device.partition(":")
        found = []
        for node in sorted(sys_video.glob("video*")):
            usb = _usb_parent(node / "device")
            if usb is None:
                continue
            ident = {"uvc": f"{_read(usb / 'idVendor')}:{_read(usb / 'idProduct')}", "serial": _read(usb / "serial")}
            found.append(f"{node.name} ({ident['uvc']}, serial {ident['serial']})")
            if ident[kind].lower() == wanted.lower():
                return f"/dev/{node.name}"
        raise ValueError(f"no video device with {kind} {wanted}; found: {', '.join(found) or 'none'}")
    return device


def _usb_parent(path: Path) -> Path | None:
    try:
        path = path.resolve()
    except OSError:
        return None
    for parent in (path, *path.parents):
        if (parent / "idVendor").exists():
            return parent
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
