"""Cameras as the controller sees them: ``robot.sensors["head_camera"].frame()`` -> :class:`Frame`.

    frame = robot.sensors["head_camera"].frame()
    frame.t            # s, the time the frame was taken (a read between two frames returns the last one)
    frame.rgb          # H x W x 3 uint8
    frame.depth        # H x W float32 metres along the optical axis, NaN where the camera measured nothing
    frame.labels       # H x W int32, frame.legend[id] -> "person:7", "wall", "robot:43/camera" (ground truth)
    frame.intrinsics   # width, height, fx, fy, cx, cy (OpenCV pixel convention), .matrix = K
    frame.pose         # the camera body in the map frame (ground truth; None for a real camera)
    camera.has_depth   # known when the robot opens: frame.depth is None exactly when this is False
    camera.has_labels  # ground-truth labels: only a rendered camera has them
    frame.invalid      # the depth's invalid pixels by cause: no_return, range, shadow, angle (None: no depth model)
    frame.surfaces     # (H x W uint8 index, names): the surface each pixel hit (ground truth; None for a device)

Pixels never travel over the Dynamixel bus: a frame comes from a *camera source* beside it. For a virtual robot
in this process (sim://), the transport renders it in the world (``transport.camera_frame``, firmware_sim's
cameras); for a camera whose descriptor (or the profile's ``cameras:``) names a ``device``, from that device:
a UVC camera through OpenCV (runtime/robot/uvc.py, RGB only), an Intel RealSense (runtime/robot/realsense.py,
RGB-D), or a recording standing in for one (``file:PATH``, runtime/robot/camera_file.py). The arrays are handed
out as made (no copy) and read-only: a controller that wants to draw on one copies it. For a device served by
``hil sim`` in another process, from its camera endpoint (the profile's ``camera_endpoint``,
runtime/robot/camera_remote.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hil.devices.descriptor import PartDescriptor, Sensor
from hil.devices.descriptor.camera import CameraSpec, Pinhole, camera_spec, device_kind
from hil.devices.yaml_source import ConfigError

CAMERA = "camera"


class CameraError(RuntimeError):
    """A frame that cannot be had: names the camera and says why."""


class CameraDeviceError(CameraError, ValueError):
    """A camera's device that cannot serve when the robot opens (a bad recording): the camera, the file and line.
    A ValueError too, so ``hil`` prints it as the one-line error of a bad config."""


class Intrinsics(Pinhole):
    """A frame's pinhole intrinsics (the descriptor's :class:`Pinhole` fields), with numpy and the body frame."""

    @property
    def matrix(self) -> np.ndarray:
        """The pinhole matrix K: pixel (u, v) of a point (X, Y, Z) in the optical frame (x right, y down, z
        forward) is u = fx X / Z + cx, v = fy Y / Z + cy."""
        return np.array(super().matrix)

    def project(self, point_camera: np.ndarray) -> tuple[float, float]:
        """Pixel of a point given in the camera *body* frame (x forward, y left, z up): u right, v down."""
        x, y, z = (float(v) for v in point_camera)
        return self.cx + self.fx * (-y) / x, self.cy + self.fy * (-z) / x

    def bearing(self, u: float) -> float:
        """The horizontal angle (rad, counter-clockwise = left positive) of image column ``u`` from the axis."""
        return float(np.arctan2(-(u - self.cx), self.fx))


@dataclass(frozen=True)
class CameraPose:
    """The camera body's frame in the map frame: position (m), orientation (xyzw quaternion); the body frame has
    x along the optical axis, y left, z up (the descriptor's ``forward`` and ``up``)."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]

    @property
    def matrix(self) -> np.ndarray:
        """4x4: the camera body frame in the map frame."""
        x, y, z, w = self.orientation
        out = np.eye(4)
        out[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                       [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                       [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
        out[:3, 3] = self.position
        return out

    def to_camera(self, point_map: np.ndarray) -> np.ndarray:
        """A map-frame point in the camera body frame."""
        m = self.matrix
        return m[:3, :3].T @ (np.asarray(point_map, float) - m[:3, 3])


@dataclass(frozen=True, eq=False)
class Frame:
    """One camera frame; see the module docstring. ``source`` says where it came from (the renderer, a device).
    The depth is taken from the source when first read (a rendered frame makes it then: its noise is seeded by the
    frame, so it is the same whenever it is made), so a reader of the colour image alone does not pay for it."""

    t: float
    rgb: np.ndarray | None
    labels: np.ndarray | None
    legend: Mapping[int, str]
    intrinsics: Intrinsics
    pose: CameraPose | None
    camera: str
    source: str
    depth_source: Mapping[str, Any] | None = field(default=None, repr=False)  # the source's frame, holding depth

    @property
    def depth(self) -> np.ndarray | None:
        """H x W float32 metres along the optical axis, NaN where the camera measured nothing (None: no depth)."""
        raw = self.depth_source
        if raw is None:
            return None
        depth = raw.get("depth")
        if depth is not None and depth.flags.writeable:
            depth.flags.writeable = False
        return depth

    @property
    def depth_made(self) -> bool:
        """Whether the depth (and its invalid counts) exists yet, without making it: a rendered frame makes its
        depth on the first look (firmware_sim/embodied/camera.py ``RenderedFrame``); other sources always have."""
        made = getattr(self.depth_source, "made", None)
        return made("depth") if made is not None else True

    @property
    def invalid(self) -> Mapping[str, int] | None:
        """The depth's invalid pixels by cause (firmware_sim/sensors/camera.py; None: no depth model), made with
        the depth on first lookup."""
        raw = self.depth_source
        invalid = raw.get("invalid") if raw is not None else None
        return dict(invalid) if invalid is not None else None

    @property
    def surfaces(self) -> tuple[np.ndarray, tuple[str | None, ...]] | None:
        """Ground truth of a rendered frame, as the labels are: per pixel (H x W uint8, read-only) the index of the
        surface it hit among the names (None: the default surface), the law its depth failed by; None when the
        source does not know (a device, a recording)."""
        raw = self.depth_source
        index = raw.get("surfaces") if raw is not None else None
        if index is None:
            return None
        return _read_only(index), tuple(raw.get("surface_names") or (None,))

    def label_of(self, name: str) -> int | None:
        """The label id of a legend entry (``"person:7"``), None when the frame has none by that name."""
        return next((i for i, n in self.legend.items() if n == name), None)


FrameSource = Callable[[], Mapping[str, Any]]


class Camera:
    """A camera part's handle: :meth:`frame` gives the frame of the current frame period."""

    def __init__(self, name: str, part_id: int, path: str, desc: PartDescriptor, sensor: Sensor):
        self.name, self.part_id, self.path = name, part_id, path  # part_id: the part's ID on its bus
        self.part_key = part_id  # robot-wide ID; Robot.open sets it, and bus / host
        self.bus = ""
        self.host = None
        self.sensor = sensor
        self.spec: CameraSpec = camera_spec(sensor.params)
        self.descriptor_name = desc.name
        self._source: FrameSource | None = None
        self._observe: FrameSource | None = None  # frames for a recording, where the source has such a way
        self._observed: Frame | None = None
        self._why = "the robot was not opened with a camera source"
        self._last: Frame | None = None
        self._handed: Frame | None = None  # the frame handed out last, to the controller or to an observer
        self._last_raw: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        s = self.spec
        return f"Camera({self.name!r}, id {self.part_id}, {s.width}x{s.height} at {s.rate_hz:g} Hz)"

    @property
    def intrinsics(self) -> Intrinsics:
        """The device's own when it reports them (a RealSense once streaming, a recording's camera.yaml), else
        the descriptor's."""
        own = getattr(self._source, "intrinsics", None)
        return Intrinsics(**(own.pinhole() if own is not None else self.spec.pinhole()))

    @property
    def has_depth(self) -> bool:
        """Whether frames carry depth, known when the robot opens: a rendered camera's descriptor says
        (``delivers``), a device's kind says (UVC no, RealSense yes, a recording whether it has depth.txt). A
        camera without frames has none."""
        return self._delivers("depth")

    @property
    def has_labels(self) -> bool:
        """Whether frames carry ground-truth labels: only a camera rendered in a world does."""
        return self._delivers("labels")

    def _delivers(self, what: str) -> bool:
        if self._source is None:
            return False
        own = getattr(self._source, f"has_{what}", None)
        return bool(own) if own is not None else what in self.spec.delivers

    def attach(self, source: FrameSource | None, why: str = "", observe: FrameSource | None = None) -> None:
        """Where frames come from (Robot.open decides); None with ``why``: this camera cannot give frames.
        ``observe``: where a recording's frames come from (a world's renderer: frames that change nothing the
        controller's use), default the source itself."""
        self._source, self._why, self._observe = source, why or self._why, observe

    def close(self) -> None:
        """Let a device go (Robot.close); a rendered camera has nothing to release."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    @property
    def available(self) -> bool:
        return self._source is not None

    @property
    def last_frame(self) -> Frame | None:
        """The frame handed out last, without making one (None before the first): what an observer such as the
        trial's log reads, so that looking never renders."""
        return self._handed

    def frame(self) -> Frame:
        """The frame of the current frame period (made now if it was not yet); CameraError says which camera and
        why when there is none to be had."""
        if self._source is None:
            raise CameraError(f"camera {self.name!r} (part id {self.part_id} at {self.path}) cannot give frames: "
                              f"{self._why}")
        try:
            raw = self._source()
        except CameraError:
            raise
        except Exception as exc:  # the renderer's or the device's own error, with the camera named
            raise CameraError(f"camera {self.name!r} (part id {self.part_id} at {self.path}): "
                              f"{str(exc) or type(exc).__name__}") from exc
        if self._last is not None and raw is self._last_raw:
            return self._last  # the source gave the same frame again: the same Frame object, no new wrapping
        self._last, self._last_raw = _frame(self.name, raw, self.intrinsics), raw
        self._handed = self._last
        return self._last

    @property
    def device(self) -> str | None:
        """The device frames come from (``uvc:...``, ``file:...``, ``realsense:...``), None for a rendered one."""
        return getattr(self._source, "device", None)

    def observe(self) -> Frame:
        """The current period's frame for an observer (the trial's recording): the controller's own when it has
        read this period's, else one made for observers alone; for a rendered camera, recording it (or not, or at
        another rate) changes no frame :meth:`frame` gives. Errors as :meth:`frame`'s."""
        if self._observe is None:
            return self.frame()
        try:
            raw = self._observe()
        except CameraError:
            raise
        except Exception as exc:
            raise CameraError(f"camera {self.name!r} (part id {self.part_id} at {self.path}): "
                              f"{str(exc) or type(exc).__name__}") from exc
        for held in (self._last, self._observed):
            if held is not None and held.depth_source is raw:
                self._handed = held
                return held
        self._observed = self._handed = _frame(self.name, raw, self.intrinsics)
        return self._observed


def _frame(name: str, raw: Mapping[str, Any], intrinsics: Intrinsics) -> Frame:
    pose = raw.get("pose")
    arrays = {k: _read_only(raw.get(k)) for k in ("rgb", "labels")}
    return Frame(t=float(raw["t"]), legend=dict(raw.get("legend") or {}), intrinsics=intrinsics,
                 pose=CameraPose(tuple(pose["position"]), tuple(pose["orientation"])) if pose else None,
                 camera=name, source=str(raw.get("renderer") or raw.get("source") or ""), depth_source=raw, **arrays)


def _read_only(array: np.ndarray | None) -> np.ndarray | None:
    if array is not None:
        array.flags.writeable = False
    return array


def camera_sensor(desc: PartDescriptor) -> Sensor | None:
    return next((s for s in desc.sensors if s.kind == CAMERA), None)


def attach_camera_sources(robot: Any, undo: Any = None) -> None:
    """Give every camera of an opened robot its frame source: the device the profile's ``cameras:`` names for it,
    else the in-process world of its bus when there is one (the transport's ``camera_frame``), else the served
    world's camera endpoint (the profile's ``camera_endpoint``, for the main bus's cameras), else the device its
    descriptor names, else none (frame() says why). A device is opened now only as far as needed to know what it
    delivers (a recording is read and checked; a UVC or RealSense camera opens on the first frame)."""
    profile = getattr(robot, "profile", None)
    endpoint = getattr(profile, "camera_endpoint", None)
    named = getattr(profile, "cameras", None) or ()
    overrides = {name: device for name, device, _ in named}
    cameras = {name: s for name, s in robot.sensors.items() if isinstance(s, Camera)}
    for name, _, line in named:
        if name not in cameras:
            raise ConfigError(profile.source, line, f"cameras: the robot has no camera {name!r}; its cameras: "
                                                    f"{', '.join(cameras) or 'none'}")
    for camera in cameras.values():
        transport = getattr(camera.host, "transport", None)
        render = getattr(transport, "camera_frame", None)
        if camera.name in overrides:
            _attach_device(camera, overrides[camera.name], robot.clock.now, undo)
        elif render is not None and getattr(transport, "embodied", None) is not None:
            part_id, sensor = camera.part_id, camera.sensor.name
            camera.attach(lambda render=render, part_id=part_id, sensor=sensor: render(part_id, sensor),
                          observe=lambda render=render, part_id=part_id, sensor=sensor: render(part_id, sensor,
                                                                                               observe=True))
        elif endpoint is not None and camera.host is robot.bus:
            from .camera_remote import RemoteCameraSource
            from .profile import profile_security

            source = RemoteCameraSource(endpoint, camera.part_id, camera.sensor.name,
                                        security=profile_security(profile))
            if undo is not None:
                undo.callback(source.close)
            camera.attach(source)
        elif camera.spec.device is not None:
            _attach_device(camera, camera.spec.device, robot.clock.now, undo)
        else:
            camera.attach(None, f"its bus ({camera.bus or 'main'}) is not a world in this process that could render "
                                "it, and its descriptor (params.device) names no device, nor does the profile "
                                "(cameras:): uvc:VID:PID, serial:SERIAL, a path, file:PATH or realsense[:SERIAL]")


def _attach_device(camera: Camera, device: str, clock: Callable[[], float], undo: Any) -> None:
    try:
        source = device_source(device, camera.spec, clock)
    except ValueError as exc:  # a bad recording: its file (and line) named, and the camera
        raise CameraDeviceError(f"camera {camera.name!r}: {exc}") from None
    if undo is not None:
        undo.callback(source.close)  # opening failed later on: let the device go
    camera.attach(source)


def device_source(device: str, spec: CameraSpec, clock: Callable[[], float]) -> Any:
    """The frame source of a ``device`` string (devices/descriptor/camera.py ``device_kind``), on ``clock``."""
    kind, rest = device_kind(device)
    if kind == "file":
        from .camera_file import FileSource

        source: Any = FileSource(spec, rest, clock)
    elif kind == "realsense":
        from .realsense import RealSenseSource

        source = RealSenseSource(spec, rest, clock)
    else:
        from .uvc import DeviceSource

        source = DeviceSource(spec, clock=clock, device=device)
    return source
