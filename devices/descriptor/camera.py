"""A camera sensor's params (``kind: camera`` in a part's ``sensors:``), checked whole: what the virtual camera
renders and what a real camera's driver reports, from one description.

    params:
      width: 320                 # pixels, 1..MAX_SIDE_PX, at most MAX_PIXELS in all, aspect within MAX_ASPECT
      height: 240
      fov_deg: 70.0              # horizontal field of view; or fx, fy (pixels) and optionally cx, cy
      rate_hz: 10.0              # frames per second (> 0, <= MAX_RATE_HZ); ``fps`` is the same key's old name
      near_m: 0.05               # what the camera can see: rendering's near and far planes
      far_m: 10.0
      delivers: [rgb, depth, labels]
      forward: [1, 0, 0]         # optical axis in the body frame
      up: [0, 0, 1]              # image up in the body frame
      depth:                     # a depth camera's failures (the sensor-simulation reference); optional, defaults below
        min_range_m: 0.2         # nearer: invalid (NaN)
        max_range_m: 8.0         # farther: invalid
        noise_z2: 0.0015         # sigma = noise_z2 * z^2 (m, z in m)
        dropout_angle50_deg: 70  # incidence at which half the pixels drop out (logistic, as the ring's)
        dropout_width_deg: 4
        baseline_m: 0.05         # projector/stereo baseline beside the lens (0: no projector, nothing shadowed)
        shadow_side: right       # which side of a near edge the shadow falls on in the image (the projector sits
                                 # on the other side of the lens)
        projector:               # or the projector's (second imager's) pose itself, in the lens frame (x forward
          position: [0, 0, 0.05] # along the optical axis, y image left, z image up; metres): here above the lens
          forward: [1, 0, 0]     # its axis and up in the lens frame (defaults: the lens's)
          up: [0, 0, 1]
        surfaces:                # optional: the law measured on a surface (devices/surfaces.py), any key left out
          glass: {dropout_angle50_deg: 48, dropout_width_deg: 2, noise_z2: 0.003}  # from the table's factors
      device: "uvc:046d:0825"    # a real camera: uvc:VID:PID, serial:SERIAL, a path (/dev/video0, a video file),
                                 # file:PATH (a recorded RGB-D sequence or video), realsense[:SERIAL] (RGB-D)

Pixel convention: OpenCV's (pixel (0, 0)'s centre is at u = v = 0, v down), so a centred camera has
cx = (width - 1) / 2. A fov gives fx = fy = (width / 2) / tan(fov / 2).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

MAX_SIDE_PX = 8192
MAX_PIXELS = 4096 * 4096
MAX_ASPECT = 16.0  # a 100000 x 1 "camera" is a typo, not a line scanner
MAX_RATE_HZ = 1000.0
DELIVERABLE = ("rgb", "depth", "labels")
SHADOW_SIDES = ("left", "right")
KEYS = ("width", "height", "fov_deg", "fx", "fy", "cx", "cy", "rate_hz", "fps", "near_m", "far_m", "delivers",
        "forward", "up", "depth", "device")
DEPTH_KEYS = ("min_range_m", "max_range_m", "noise_z2", "dropout_angle50_deg", "dropout_width_deg", "baseline_m",
              "shadow_side", "projector", "surfaces")
SURFACE_DEPTH_KEYS = ("dropout_angle50_deg", "dropout_width_deg", "noise_z2")  # what a surface's measured law sets
MAX_SURFACE_NAME_CHARS = 40
PROJECTOR_KEYS = ("position", "forward", "up")
MAX_PROJECTOR_OFFSET_M = 1.0  # a projector a metre from its lens is a typo (millimetres?), not a depth camera


class CameraParamError(ValueError):
    """A bad camera param: ``key`` is the param (``depth.noise_z2``) the message is about."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class Projector:
    """Where a depth camera's pattern comes from (a structured-light projector, a stereo pair's second imager), in
    the lens frame: x forward along the optical axis, y to the image's left, z to the image's up (metres); its
    own axis ``forward`` and ``up`` in that frame. A pixel is measured only where both the lens and it see the
    point."""

    position: tuple[float, float, float]
    forward: tuple[float, float, float] = (1.0, 0.0, 0.0)
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)


@dataclass(frozen=True)
class SurfaceDepth:
    """The depth law measured on one surface (``depth.surfaces``): each number given replaces what the surface
    table's factors would make of the calibrated law (firmware_sim/sensors/surface_law.py); None: the factors'."""

    name: str
    dropout_angle50_deg: float | None = None
    dropout_width_deg: float | None = None
    noise_z2: float | None = None

    def measured(self) -> dict[str, float]:
        """The numbers given, by key."""
        return {k: getattr(self, k) for k in SURFACE_DEPTH_KEYS if getattr(self, k) is not None}


@dataclass(frozen=True)
class DepthFailure:
    """How the depth image fails (see the module docstring); all lengths in metres, angles in degrees."""

    min_range_m: float = 0.2
    max_range_m: float = 8.0
    noise_z2: float = 0.0015
    dropout_angle50_deg: float = 72.0
    dropout_width_deg: float = 4.0
    baseline_m: float = 0.05
    shadow_side: str = "right"
    projector: Projector | None = None  # given as a pose; None: ``baseline_m`` beside the lens (projector_pose)
    surfaces: tuple[SurfaceDepth, ...] = ()  # the law measured per surface; the rest: the surface table's factors

    def projector_pose(self) -> Projector | None:
        """The projector's pose in the lens frame: the one given, else ``baseline_m`` to the side opposite
        ``shadow_side`` (a projector left of the lens shadows the right of near edges), parallel to the lens;
        None when there is none (baseline 0: every point the lens sees is lit)."""
        if self.projector is not None:
            return self.projector
        if self.baseline_m <= 0:
            return None
        left = self.baseline_m if self.shadow_side == "right" else -self.baseline_m
        return Projector((0.0, left, 0.0))


@dataclass(frozen=True)
class Pinhole:
    """A camera's pinhole intrinsics (pixels, OpenCV's convention): written once, here, for the descriptor's
    :class:`CameraSpec` and the frames a controller gets (runtime/robot/camera.py ``Intrinsics``)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @property
    def matrix(self) -> tuple[tuple[float, float, float], ...]:
        """The 3x3 pinhole matrix K (row-major)."""
        return ((self.fx, 0.0, self.cx), (0.0, self.fy, self.cy), (0.0, 0.0, 1.0))

    def pinhole(self) -> dict[str, float]:
        """The six intrinsics by name (what a frame carries as its ``intrinsics``)."""
        return {f.name: getattr(self, f.name) for f in fields(Pinhole)}


@dataclass(frozen=True)
class CameraSpec(Pinhole):
    """A camera's intrinsics (:class:`Pinhole`) and behaviour, checked (pixels, metres, Hz)."""

    rate_hz: float
    near_m: float
    far_m: float
    delivers: tuple[str, ...]
    forward: tuple[float, float, float] = (1.0, 0.0, 0.0)
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)
    depth: DepthFailure = field(default_factory=DepthFailure)
    device: str | None = None

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


def camera_spec(params: Mapping[str, Any]) -> CameraSpec:
    """The checked spec of a camera's params; CameraParamError names the param that is wrong."""
    if not isinstance(params, Mapping):
        raise CameraParamError("params", f"must be a mapping, not {type(params).__name__}")
    for key in params:
        if key not in KEYS:
            raise CameraParamError(str(key), f"unknown camera param; known: {', '.join(KEYS)}")
    width, height = _int(params, "width"), _int(params, "height")
    _check_size(width, height)
    fx, fy, cx, cy = _intrinsics(params, width, height)
    rate = _number(params, "rate_hz", params.get("fps", 30.0))
    if not 0 < rate <= MAX_RATE_HZ:
        raise CameraParamError("rate_hz", f"must be > 0 and <= {MAX_RATE_HZ:g} frames per second, not {rate:g}")
    near, far = _number(params, "near_m", 0.05), _number(params, "far_m", 20.0)
    if not 0 < near < far:
        raise CameraParamError("near_m", f"need 0 < near_m < far_m, not near_m={near:g}, far_m={far:g}")
    return CameraSpec(width, height, fx, fy, cx, cy, rate, near, far, _delivers(params),
                      _unit(params, "forward", (1.0, 0.0, 0.0)), _unit(params, "up", (0.0, 0.0, 1.0)),
                      _depth(params.get("depth", {})), _device(params))


def _check_size(width: int, height: int) -> None:
    for key, value in (("width", width), ("height", height)):
        if not 1 <= value <= MAX_SIDE_PX:
            raise CameraParamError(key, f"must be 1..{MAX_SIDE_PX} pixels, not {value}")
    if width * height > MAX_PIXELS or max(width, height) > MAX_ASPECT * min(width, height):
        raise CameraParamError("height" if height < width else "width", f"{width} x {height} pixels is not a camera image (at most {MAX_PIXELS} "
                                        f"pixels, aspect ratio at most {MAX_ASPECT:g}:1)")


def _intrinsics(params: Mapping, width: int, height: int) -> tuple[float, float, float, float]:
    if "fx" in params:
        if "fov_deg" in params:
            raise CameraParamError("fov_deg", "give fov_deg or fx/fy, not both")
        fx = _number(params, "fx")
        fy = _number(params, "fy", fx)
    else:
        fov = _number(params, "fov_deg", None)
        if fov is None:
            raise CameraParamError("fov_deg", "missing: give fov_deg (horizontal) or fx (pixels)")
        if not 0 < fov < 180:
            raise CameraParamError("fov_deg", f"must be between 0 and 180 degrees, not {fov:g}")
        fx = fy = (width / 2.0) / math.tan(math.radians(fov) / 2.0)
    for key, value in (("fx", fx), ("fy", fy)):
        if not value > 0:
            raise CameraParamError(key, f"must be > 0 pixels, not {value:g}")
    cx, cy = _number(params, "cx", (width - 1) / 2.0), _number(params, "cy", (height - 1) / 2.0)
    return fx, fy, cx, cy


def _delivers(params: Mapping) -> tuple[str, ...]:
    value = params.get("delivers", list(DELIVERABLE))
    if not isinstance(value, (list, tuple)) or not value or any(v not in DELIVERABLE for v in value):
        raise CameraParamError("delivers", f"must be a non-empty list of {', '.join(DELIVERABLE)}, not {value!r}")
    return tuple(v for v in DELIVERABLE if v in value)


def _depth(node: Any) -> DepthFailure:
    if not isinstance(node, Mapping):
        raise CameraParamError("depth", f"must be a mapping, not {type(node).__name__}")
    for key in node:
        if key not in DEPTH_KEYS:
            raise CameraParamError(f"depth.{key}", f"unknown depth param; known: {', '.join(DEPTH_KEYS)}")
    base = DepthFailure()
    values = {k: _number(node, k, getattr(base, k), prefix="depth.") for k in DEPTH_KEYS
              if k not in ("shadow_side", "projector", "surfaces")}
    for key, value in values.items():
        if value < 0:
            raise CameraParamError(f"depth.{key}", f"must be >= 0, not {value:g}")
    if not values["min_range_m"] < values["max_range_m"]:
        raise CameraParamError("depth.min_range_m", "must be below depth.max_range_m")
    if not values["dropout_width_deg"] > 0:
        raise CameraParamError("depth.dropout_width_deg", "must be > 0")
    side = node.get("shadow_side", base.shadow_side)
    if side not in SHADOW_SIDES:
        raise CameraParamError("depth.shadow_side", f"must be one of {', '.join(SHADOW_SIDES)}, not {side!r}")
    projector = None
    if "projector" in node:
        for key in ("baseline_m", "shadow_side"):
            if key in node:
                raise CameraParamError(f"depth.{key}", "give depth.projector (its pose) or depth.baseline_m and "
                                                       "depth.shadow_side, not both")
        projector = _projector(node["projector"])
    surfaces = _surfaces(node["surfaces"]) if "surfaces" in node else ()
    return DepthFailure(shadow_side=side, projector=projector, surfaces=surfaces, **values)


def _surfaces(node: Any) -> tuple[SurfaceDepth, ...]:
    """``depth.surfaces: {name: {dropout_angle50_deg?, dropout_width_deg?, noise_z2?}}``, checked for form and
    numbers; whether the surface table knows each name is checked where a table is read (a YAML descriptor's
    load, the camera's depth model)."""
    if not isinstance(node, Mapping):
        raise CameraParamError("depth.surfaces", f"must map surface names to {{{', '.join(SURFACE_DEPTH_KEYS)}}}, "
                                                 f"not {type(node).__name__}")
    out = []
    for name, law in node.items():
        key = f"depth.surfaces.{name}"
        if (not isinstance(name, str) or not name or len(name) > MAX_SURFACE_NAME_CHARS
                or not name.replace("_", "").isalnum()):
            raise CameraParamError(key, f"surface names are words of letters, digits and _, not {name!r}")
        if not isinstance(law, Mapping):
            raise CameraParamError(key, f"must be a mapping of {', '.join(SURFACE_DEPTH_KEYS)}, not {law!r}")
        for k in law:
            if k not in SURFACE_DEPTH_KEYS:
                raise CameraParamError(f"{key}.{k}", f"unknown key; known: {', '.join(SURFACE_DEPTH_KEYS)}")
        values = {k: _number(law, k, None, prefix=key + ".") for k in SURFACE_DEPTH_KEYS}
        for k, value in values.items():
            if value is not None and (value < 0 or (k == "dropout_width_deg" and value == 0)):
                raise CameraParamError(f"{key}.{k}", f"must be {'> 0' if k == 'dropout_width_deg' else '>= 0'}, "
                                                     f"not {value:g}")
        out.append(SurfaceDepth(name, **values))
    return tuple(out)


def _projector(node: Any) -> Projector:
    if not isinstance(node, Mapping):
        raise CameraParamError("depth.projector", f"must be a mapping (position, forward, up), not "
                                                  f"{type(node).__name__}")
    for key in node:
        if key not in PROJECTOR_KEYS:
            raise CameraParamError(f"depth.projector.{key}", f"unknown projector param; known: "
                                                             f"{', '.join(PROJECTOR_KEYS)}")
    if "position" not in node:
        raise CameraParamError("depth.projector.position", "missing: the projector's [x, y, z] in the lens frame "
                                                           "(m; x forward, y left, z up)")
    position = _vector(node, "position", "depth.projector.")
    offset = math.sqrt(sum(v * v for v in position))
    if offset > MAX_PROJECTOR_OFFSET_M:
        raise CameraParamError("depth.projector.position", f"is {offset:g} m from the lens; at most "
                                                           f"{MAX_PROJECTOR_OFFSET_M:g} m (metres, not mm?)")
    forward = _unit(node, "forward", (1.0, 0.0, 0.0), "depth.projector.")
    up = _unit(node, "up", (0.0, 0.0, 1.0), "depth.projector.")
    if abs(sum(f * u for f, u in zip(forward, up))) > 0.999:
        raise CameraParamError("depth.projector.up", "must not be parallel to depth.projector.forward")
    return Projector(position, forward, up)


DEVICE_FORMS = "uvc:VID:PID, serial:SERIAL, a path, file:PATH or realsense[:SERIAL]"


def device_kind(device: str) -> tuple[str, str]:
    """What a ``device`` string names: ("uvc" | "serial" | "file" | "realsense" | "path", the rest). ValueError
    says what is wrong (an empty name after the prefix)."""
    if not isinstance(device, str) or not device:
        raise ValueError(f"must be a string ({DEVICE_FORMS}), not {device!r}")
    if device == "realsense":
        return "realsense", ""
    kind, sep, rest = device.partition(":")
    if sep and kind in ("uvc", "serial", "file", "realsense"):
        if not rest and kind != "realsense":
            raise ValueError(f"{device!r} names no {'file' if kind == 'file' else kind + ' id'} after {kind}:")
        return kind, rest
    return "path", device


def _device(params: Mapping) -> str | None:
    value = params.get("device")
    if value is None:
        return None
    try:
        device_kind(value)
    except ValueError as exc:
        raise CameraParamError("device", str(exc)) from None
    return value


def _int(params: Mapping, key: str) -> int:
    if key not in params:
        raise CameraParamError(key, "missing")
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise CameraParamError(key, f"must be an integer, not {value!r}")
    return value


def _number(params: Mapping, key: str, default: Any = ..., prefix: str = "") -> Any:
    if key not in params:
        if default is ...:
            raise CameraParamError(prefix + key, "missing")
        return default
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CameraParamError(prefix + key, f"must be a finite number, not {value!r}")
    return float(value)


def _vector(params: Mapping, key: str, prefix: str = "",
            default: tuple[float, float, float] | None = None) -> tuple[float, float, float]:
    value = params.get(key, default)
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        raise CameraParamError(prefix + key, f"must be 3 finite numbers, not {value!r}")
    return tuple(float(v) for v in value)


def _unit(params: Mapping, key: str, default: tuple[float, float, float],
          prefix: str = "") -> tuple[float, float, float]:
    value = _vector(params, key, prefix, default)
    norm = math.sqrt(sum(v * v for v in value))
    if norm < 1e-9:
        raise CameraParamError(prefix + key, "must not be the zero vector")
    return tuple(v / norm for v in value)
