"""A recorded camera standing in for the real one: ``device: file:PATH``, served through the same Camera.frame()
as a UVC or RealSense camera, frame by frame at the recording's own timestamps against the robot's clock.

PATH is either

- a directory in the TUM RGB-D layout: ``rgb.txt`` and, for depth, ``depth.txt`` (lines ``timestamp filename``,
  ``#`` comments), the images they name (``rgb/*.png`` 8-bit colour, ``depth/*.png`` 16-bit, ``DEPTH_SCALE`` =
  5000 units per metre, 0 = no measurement). Each colour image is paired with the depth image of the nearest
  timestamp within ``MAX_PAIR_GAP_S`` (TUM's associate.py); colour images without one are left out. Without
  ``depth.txt`` the recording is RGB only;
- a video file OpenCV reads (RGB only), its frames at the video's frame rate.

Intrinsics: ``camera.yaml`` in the directory (for a video, ``NAME.yaml`` beside it): ``width, height, fx, fy, cx,
cy`` and optionally ``depth_scale`` (units per metre). Without one, the camera part's descriptor's intrinsics
are the recording's, and its images must be the descriptor's size.

Time: the recording starts when the robot opens (its clock's time then) and is served by timestamp: at robot time
t, the last frame whose offset from the first is at most (t - start) modulo the recording's length (last offset
plus one mean frame interval). It loops; each frame's ``t`` is the robot time it was due, so a read between two
frames returns the same frame. Depth is float32 metres, NaN where the recording has 0.

Everything the recording lists is checked when the robot opens (each txt line, that each image exists; the first
colour image's size); an image that cannot be read later is the frame's error, naming the file.
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hil.devices.descriptor.camera import CameraSpec, Pinhole
from hil.devices.yaml_source import ConfigError, check_keys, load_yaml_mapping

DEPTH_SCALE = 5000.0  # TUM RGB-D: 16-bit depth PNGs hold 5000 units per metre
STAMP_RESOLUTION_S = 1e-6  # TUM lists give microseconds: offsets are rounded to them
MAX_PAIR_GAP_S = 0.02  # TUM associate.py's default: colour and depth taken within 20 ms are one frame
CALIBRATION = "camera.yaml"
CALIBRATION_KEYS = ("width", "height", "fx", "fy", "cx", "cy", "depth_scale")


class RecordingError(ValueError):
    """A recording that cannot be served: names the file (and line) and what is wrong."""


@dataclass(frozen=True)
class RecordedFrame:
    offset_s: float  # from the recording's first frame
    rgb: Path | int  # an image file, or a video's frame index
    depth: Path | None


class FileSource:
    """``source()`` -> the frame dict due at the robot clock's time (module docstring). ``has_depth``,
    ``has_labels`` and ``intrinsics`` are known when it is made (the robot's open)."""

    has_labels = False

    def __init__(self, spec: CameraSpec, path: str | Path, clock: Callable[[], float]):
        self.path, self.clock = Path(path).expanduser(), clock
        if not self.path.exists():
            raise RecordingError(f"{self.path}: no such recording (a TUM RGB-D directory or a video file)")
        self._video: Any = None
        self._video_at = -1  # the index of the video frame read last
        if self.path.is_dir():
            self.frames = _tum_frames(self.path)
            calibration = self.path / CALIBRATION
        else:
            self.frames = self._video_frames(spec)
            calibration = self.path.with_suffix(".yaml")
        self.has_depth = self.frames[0].depth is not None
        self.intrinsics, self.depth_scale = read_calibration(calibration) if calibration.is_file() else (
            Pinhole(**spec.pinhole()), DEPTH_SCALE)
        size = self._size()
        if size != (self.intrinsics.width, self.intrinsics.height):
            where = calibration if calibration.is_file() else "the camera part's descriptor"
            raise RecordingError(f"{self._name(self.frames[0].rgb)}: the images are {size[0]}x{size[1]} pixels but "
                                 f"{where} says {self.intrinsics.width}x{self.intrinsics.height}"
                                 + ("" if calibration.is_file() else f"; give the recording's intrinsics in "
                                                                      f"{calibration}"))
        offsets = [f.offset_s for f in self.frames]
        step = round(offsets[-1] / (len(offsets) - 1), 6) if len(offsets) > 1 else 1.0 / spec.rate_hz
        self.length_s = offsets[-1] + step
        self._offsets = offsets
        self._t0 = clock()
        self._key: tuple[int, int] | None = None
        self._last: dict | None = None

    @property
    def device(self) -> str:
        return f"file:{self.path}"

    def __call__(self) -> dict:
        elapsed = max(0.0, self.clock() - self._t0) + STAMP_RESOLUTION_S / 2  # a frame due now is served now
        loop = int(elapsed // self.length_s)
        index = max(0, bisect.bisect_right(self._offsets, elapsed - loop * self.length_s) - 1)
        if self._last is not None and self._key == (loop, index):
            return self._last
        recorded = self.frames[index]
        self._last = {"t": self._t0 + loop * self.length_s + recorded.offset_s, "rgb": self._rgb(recorded.rgb),
                      "depth": self._depth(recorded.depth) if recorded.depth is not None else None,
                      "labels": None, "legend": {}, "pose": None, "source": f"file:{self.path}"}
        self._key = (loop, index)
        return self._last

    def close(self) -> None:
        if self._video is not None:
            self._video.release()
            self._video = None

    # --- images ----------------------------------------------------------------------------------------------
    def _rgb(self, which: Path | int) -> np.ndarray:
        cv2 = _cv2()
        if isinstance(which, Path):
            image = cv2.imread(str(which), cv2.IMREAD_COLOR)
            if image is None:
                raise RecordingError(f"{which}: not an image OpenCV can read")
        else:
            image = self._video_frame(which)
        if image.shape[:2] != (self.intrinsics.height, self.intrinsics.width):
            raise RecordingError(f"{self._name(which)}: {image.shape[1]}x{image.shape[0]} pixels, not the "
                                 f"recording's {self.intrinsics.width}x{self.intrinsics.height}")
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)

    def _depth(self, path: Path) -> np.ndarray:
        return read_depth(path, self.intrinsics, self.depth_scale)

    def _size(self) -> tuple[int, int]:
        first = self.frames[0].rgb
        if isinstance(first, int):
            return (int(self._open_video().get(_cv2().CAP_PROP_FRAME_WIDTH)),
                    int(self._open_video().get(_cv2().CAP_PROP_FRAME_HEIGHT)))
        image = _cv2().imread(str(first), _cv2().IMREAD_COLOR)
        if image is None:
            raise RecordingError(f"{first}: not an image OpenCV can read")
        return image.shape[1], image.shape[0]

    def _name(self, which: Path | int) -> str:
        return str(which) if isinstance(which, Path) else f"{self.path} (frame {which})"

    # --- a video ---------------------------------------------------------------------------------------------
    def _open_video(self):
        if self._video is None:
            cv2 = _cv2()
            video = cv2.VideoCapture(str(self.path))
            if not video.isOpened():
                raise RecordingError(f"{self.path}: neither a TUM RGB-D directory nor a video OpenCV can open")
            self._video, self._video_at = video, -1
        return self._video

    def _video_frames(self, spec: CameraSpec) -> list[RecordedFrame]:
        video = self._open_video()
        cv2 = _cv2()
        fps = video.get(cv2.CAP_PROP_FPS) or spec.rate_hz
        count = int(video.get(cv2.CAP_PROP_FRAME_COUNT))
        if count <= 0:
            raise RecordingError(f"{self.path}: the video has no frames")
        return [RecordedFrame(k / fps, k, None) for k in range(count)]

    def _video_frame(self, index: int) -> np.ndarray:
        video = self._open_video()
        if index != self._video_at + 1:
            video.set(_cv2().CAP_PROP_POS_FRAMES, index)
        ok, image = video.read()
        if not ok:
            raise RecordingError(f"{self.path}: frame {index} of {len(self.frames)} cannot be read")
        self._video_at = index
        return image


def _tum_frames(directory: Path) -> list[RecordedFrame]:
    rgb_list = directory / "rgb.txt"
    if not rgb_list.is_file():
        raise RecordingError(f"{directory}: no rgb.txt (a TUM RGB-D recording lists its colour images there)")
    colour = read_list(rgb_list)
    depth_list = directory / "depth.txt"
    if not depth_list.is_file():
        return [RecordedFrame(_offset(t, colour[0][0]), path, None) for t, path in colour]
    depth = read_list(depth_list)
    stamps = [t for t, _ in depth]
    pairs: list[tuple[float, Path, Path]] = []
    for t, path in colour:
        i = bisect.bisect_left(stamps, t)
        near = min((j for j in (i - 1, i) if 0 <= j < len(stamps)), key=lambda j: abs(stamps[j] - t))
        if abs(stamps[near] - t) <= MAX_PAIR_GAP_S:
            pairs.append((t, path, depth[near][1]))
    if not pairs:
        raise RecordingError(f"{depth_list}: no depth image within {MAX_PAIR_GAP_S * 1000:g} ms of any colour image "
                             f"of {rgb_list}")
    return [RecordedFrame(_offset(t, pairs[0][0]), rgb, d) for t, rgb, d in pairs]


def read_depth(path: Path, size: Pinhole, scale: float = DEPTH_SCALE) -> np.ndarray:
    """One TUM depth image as float32 metres, NaN where it holds 0 (nothing measured); RecordingError naming the
    file when it is not a 16-bit single-channel PNG of ``size``'s width x height."""
    cv2 = _cv2()
    raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if raw is None:
        raise RecordingError(f"{path}: not an image OpenCV can read")
    if raw.dtype != np.uint16 or raw.ndim != 2:
        channels = 1 if raw.ndim == 2 else raw.shape[2]
        raise RecordingError(f"{path}: a depth image must be a 16-bit single-channel PNG, not {raw.dtype} with "
                             f"{channels} channel(s)")
    if raw.shape != (size.height, size.width):
        raise RecordingError(f"{path}: {raw.shape[1]}x{raw.shape[0]} pixels, not the recording's "
                             f"{size.width}x{size.height}")
    depth = raw.astype(np.float32) / np.float32(scale)
    depth[raw == 0] = np.nan
    return depth


def _offset(stamp: float, first: float) -> float:
    return round(stamp - first, 6)


def read_list(path: Path) -> list[tuple[float, Path]]:
    """(timestamp, image) of each line of a TUM list, in order; a bad line is an error at path:line."""
    out: list[tuple[float, Path]] = []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: cannot read: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise RecordingError(f"{path}:{number}: expected 'timestamp filename', not {line!r}")
        try:
            stamp = float(fields[0])
        except ValueError:
            stamp = math.nan
        if not math.isfinite(stamp):
            raise RecordingError(f"{path}:{number}: the timestamp {fields[0]!r} is not a number of seconds")
        if out and stamp <= out[-1][0]:
            raise RecordingError(f"{path}:{number}: timestamp {fields[0]} is not after the previous line's "
                                 f"{out[-1][0]:.6f}")
        image = path.parent / fields[1]
        if not image.is_file():
            raise RecordingError(f"{path}:{number}: no such image {image}")
        out.append((stamp, image))
    if not out:
        raise RecordingError(f"{path}: lists no images")
    return out


def read_calibration(path: Path) -> tuple[Pinhole, float]:
    try:
        doc = load_yaml_mapping(path, "camera calibration")
        check_keys(doc, CALIBRATION_KEYS, "camera calibration")
        values = {}
        for key in CALIBRATION_KEYS:
            if key not in doc:
                if key in ("cx", "cy", "depth_scale"):
                    continue
                raise doc.error(None, f"camera calibration: missing {key}")
            value = doc[key]
            whole = key in ("width", "height")
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise doc.error(key, f"{key} must be a {'whole ' if whole else ''}number > 0, not {value!r}")
            values[key] = value
    except ConfigError as exc:
        raise RecordingError(str(exc)) from None
    width, height = values["width"], values["height"]
    pinhole = Pinhole(width, height, float(values["fx"]), float(values["fy"]),
                      float(values.get("cx", (width - 1) / 2.0)), float(values.get("cy", (height - 1) / 2.0)))
    return pinhole, float(values.get("depth_scale", DEPTH_SCALE))


def _cv2():
    try:
        import cv2
    except ImportError:
        raise RecordingError("reading a recorded camera needs OpenCV: pip install 'hil[camera]' "
                             "(opencv-python-headless)") from None
    return cv2
