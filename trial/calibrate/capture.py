"""A depth camera's capture of a rig: depth frames, each with the lens's pose in the rig frame, the camera's
intrinsics, and the part whose depth law is calibrated (its stated law gives the range limits and the projector).

Sources:

- a TUM RGB-D folder (the ``file:`` camera's format, runtime/robot/camera_file.py): ``depth.txt`` and its 16-bit
  depth PNGs, ``camera.yaml`` (the intrinsics; without it the part's descriptor's), and the pose of each frame:
  ``groundtruth.txt`` in the folder (TUM's format: ``timestamp tx ty tz qx qy qz qw`` per line, the optical frame
  of the camera, x right, y down, z forward, in the rig frame, which is z up from the floor; each depth frame takes
  the nearest pose within MAX_POSE_GAP_S, a frame without one is left out and counted), or one fixed pose for
  every frame (``--pose x,y,z,yaw,pitch``: a camera on a tripod; metres and degrees in the rig frame, yaw about
  z from the rig's x axis, pitch up positive). A folder with a groundtruth.txt and a fixed pose given is refused:
  which one is meant is not for the fit to guess;
- frames a hil camera made (``Frame`` or the world's frame mappings: depth, intrinsics, and the ground-truth pose
  a rendered frame carries): :func:`capture_from_frames`, how the tests make a virtual capture.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from hil.devices.descriptor.camera import CameraSpec, DepthFailure, Pinhole, camera_spec

from .camera_geometry import lens_rotation, quaternion_matrix

MAX_POSE_GAP_S = 0.02  # TUM associate.py's default: a pose taken within 20 ms of a depth image is its pose
GROUNDTRUTH = "groundtruth.txt"
OPTICAL_TO_LENS = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])  # rows: lens x, y, z in optical


class CaptureError(ValueError):
    """A capture that cannot be calibrated from: names the file (and line) and what is wrong."""


@dataclass
class CaptureFrame:
    t: float
    depth: np.ndarray  # HxW float32 m along the optical axis, NaN where nothing was measured
    position: np.ndarray  # the lens in the rig frame (m)
    rotation: np.ndarray  # columns: the lens's forward, left, up in the rig frame


@dataclass
class Capture:
    source: str
    part: str  # the camera part's descriptor name (CAL.yaml's ``part``)
    sensor: str  # its camera sensor's name
    pinhole: Pinhole
    depth: DepthFailure  # the stated law: range limits and projector (the fit replaces dropout and noise)
    frames: list[CaptureFrame]
    serial: int | None = None
    notes: list[str] = field(default_factory=list)


def camera_part(part: str | Path = "camera") -> tuple[str, str, CameraSpec]:
    """(descriptor name, camera sensor name, its checked spec) of a catalog part name or a part file; CaptureError
    naming the part when it has no camera."""
    from hil.devices.catalog import load_part, load_source
    from hil.devices.yaml_source import ConfigError

    try:
        desc = (load_source(Path(part), name_is_stem=False) if str(part).endswith((".yaml", ".yml"))
                else load_part(str(part)))
    except (ConfigError, OSError, KeyError, ValueError) as exc:
        raise CaptureError(f"camera part {part}: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None
    sensor = next((s for s in desc.sensors if s.kind == "camera"), None)
    if sensor is None:
        raise CaptureError(f"part {desc.name} ({part}) has no camera sensor: nothing to calibrate")
    return desc.name, sensor.name, camera_spec(sensor.params)


def fixed_pose(text: str) -> tuple[np.ndarray, np.ndarray]:
    """``x,y,z,yaw_deg,pitch_deg`` -> (lens position, rotation); CaptureError saying what is wrong."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 5 or not all(math.isfinite(v) for v in values):
        raise CaptureError(f"--pose {text!r}: give x,y,z,yaw,pitch (metres and degrees in the rig frame)")
    x, y, z, yaw, pitch = values
    yaw, pitch = math.radians(yaw), math.radians(pitch)
    forward = (math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch))
    up = (-math.sin(pitch) * math.cos(yaw), -math.sin(pitch) * math.sin(yaw), math.cos(pitch))
    return np.array([x, y, z]), lens_rotation(forward, up)


def read_tum_capture(folder: str | Path, part: str | Path = "camera", pose: str | None = None,
                     progress=lambda line: None) -> Capture:
    """A TUM RGB-D folder's depth frames with their poses (module docstring)."""
    from hil.runtime.robot.camera_file import (CALIBRATION, DEPTH_SCALE, RecordingError, read_calibration,
                                               read_depth, read_list)

    folder = Path(folder)
    name, sensor, spec = camera_part(part)
    if not folder.is_dir():
        raise CaptureError(f"{folder}: no such capture folder (a TUM RGB-D folder: depth.txt, depth/*.png)")
    depth_list, truth = folder / "depth.txt", folder / GROUNDTRUTH
    if not depth_list.is_file():
        raise CaptureError(f"{folder}: no depth.txt: a depth capture lists its depth images there (TUM RGB-D)")
    if truth.is_file() and pose is not None:
        raise CaptureError(f"{truth}: the folder has its poses and --pose gives one too; use one (remove --pose to "
                           "use the groundtruth, or move the file)")
    if not truth.is_file() and pose is None:
        raise CaptureError(f"{folder}: no {GROUNDTRUTH} (each frame's pose) and no --pose x,y,z,yaw,pitch (one "
                           "fixed pose for every frame): the fit needs to know where the camera stood")
    try:
        listed = read_list(depth_list)
        pinhole, scale = (read_calibration(folder / CALIBRATION) if (folder / CALIBRATION).is_file()
                          else (Pinhole(**spec.pinhole()), DEPTH_SCALE))
    except RecordingError as exc:
        raise CaptureError(str(exc)) from None
    poses = _groundtruth(truth) if pose is None else None
    fixed = fixed_pose(pose) if pose is not None else None
    frames, unposed = [], 0
    for k, (stamp, path) in enumerate(listed):
        if poses is not None:
            found = _nearest_pose(poses, stamp)
            if found is None:
                unposed += 1
                continue
            position, rotation = found
        else:
            position, rotation = fixed
        try:
            depth = read_depth(path, pinhole, scale)
        except RecordingError as exc:
            raise CaptureError(str(exc)) from None
        frames.append(CaptureFrame(stamp - listed[0][0], depth, position, rotation))
        if k == len(listed) - 1 or int(10 * (k + 1) / len(listed)) != int(10 * k / len(listed)):
            progress(f"calibrate camera: read frame {k + 1} of {len(listed)}")
    if not frames:
        raise CaptureError(f"{truth}: no pose within {MAX_POSE_GAP_S * 1000:g} ms of any depth image of "
                           f"{depth_list}")
    capture = Capture(str(folder), name, sensor, pinhole, spec.depth, frames)
    if unposed:
        capture.notes.append(f"{unposed} of {len(listed)} depth frames have no pose within "
                             f"{MAX_POSE_GAP_S * 1000:g} ms in {truth}: left out")
    return capture


def _groundtruth(path: Path) -> tuple[list[float], list[tuple[np.ndarray, np.ndarray]]]:
    """(stamps, (lens position, rotation) each) of a TUM groundtruth.txt; CaptureError at path:line."""
    stamps: list[float] = []
    poses: list[tuple[np.ndarray, np.ndarray]] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        try:
            values = [float(v) for v in fields]
        except ValueError:
            values = []
        if len(values) != 8 or not all(math.isfinite(v) for v in values):
            raise CaptureError(f"{path}:{number}: expected 'timestamp tx ty tz qx qy qz qw', not {line!r:.80}")
        if stamps and values[0] <= stamps[-1]:
            raise CaptureError(f"{path}:{number}: timestamp {fields[0]} is not after the previous line's")
        q = values[4:]
        if not 0.9 < math.sqrt(sum(v * v for v in q)) < 1.1:
            raise CaptureError(f"{path}:{number}: the quaternion {q} is not a unit quaternion")
        optical = quaternion_matrix(*q)  # columns: the optical x (right), y (down), z (forward) in the rig frame
        stamps.append(values[0])
        poses.append((np.array(values[1:4]), optical @ OPTICAL_TO_LENS.T))
    if not stamps:
        raise CaptureError(f"{path}: lists no poses")
    return stamps, poses


def _nearest_pose(poses, stamp: float):
    stamps, values = poses
    i = bisect.bisect_left(stamps, stamp)
    near = min((j for j in (i - 1, i) if 0 <= j < len(stamps)), key=lambda j: abs(stamps[j] - stamp))
    return values[near] if abs(stamps[near] - stamp) <= MAX_POSE_GAP_S else None


def frame_lens_pose(pose: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(lens position, rotation) in the map frame of a rendered frame's ``pose`` (the camera body's position and
    orientation, the lens's forward and up in the body frame)."""
    body = quaternion_matrix(*pose["orientation"])
    return np.asarray(pose["position"], float), lens_rotation(body @ np.asarray(pose["forward"], float),
                                                              body @ np.asarray(pose["up"], float))


def capture_from_frames(frames: Iterable[Any], part: str | Path = "camera", source: str = "frames") -> Capture:
    """A capture of frames a hil camera made (each with depth, intrinsics and a pose); ``part``: the camera part
    whose stated law they were made with (its range limits and projector)."""
    name, sensor, spec = camera_part(part)
    out: list[CaptureFrame] = []
    pinhole = None
    for k, frame in enumerate(frames):
        if frame["depth"] is None or frame["pose"] is None:
            raise CaptureError(f"{source}: frame {k} has no {'depth' if frame['depth'] is None else 'pose'}")
        pinhole = Pinhole(**frame["intrinsics"]) if isinstance(frame["intrinsics"], dict) else frame["intrinsics"]
        position, rotation = frame_lens_pose(frame["pose"])
        out.append(CaptureFrame(float(frame["t"]), np.asarray(frame["depth"], np.float32), position, rotation))
    if not out:
        raise CaptureError(f"{source}: no frames")
    return Capture(source, name, sensor, pinhole, spec.depth, out)
