"""Camera parts in the world: each renders, on demand, what it sees from its own body's pose (so turning the neck
or an eye turns the view), with its descriptor's intrinsics, and its depth fails as a depth camera's does: with
a projector, the scene is drawn a second time from the projector's pose and a pixel is measured only where the
projector sees its point too (sensors/projector.py).

Frames are rendered only when someone asks (``EmbodiedRobot.camera_frame``), at most once per frame period of
the camera's ``rate_hz``: frame k belongs to the period [k / rate, (k + 1) / rate) of world time, and a read
within the same period returns the frame already made, with its own time, as a real camera's driver does. A
frame is a read-only mapping of numpy arrays made once (rgb HxWx3 uint8, depth HxW float32 metres NaN invalid,
labels HxW int32; ``invalid``: the depth's invalid pixels by cause; ``surfaces`` HxW uint8, which of
``surface_names`` each pixel hit, None the default surface) and handed out as is: whoever reads it must not
write into it (the runtime marks them read-only). Its depth and its invalid counts (the failure model over the
exact z, ~10 ms a 320x240 frame) are made when first looked up: a recording of the colour image alone does not pay
for them, and since frame k's noise is seeded by k (sensors/camera.py) the depth is the same whenever, and whether,
it is made. Each pixel's depth fails by the law of the surface it hit (sensors/camera.py): the renderer says
which surface that is (a wall's map ``surface``, a robot body's descriptor ``surface``, a person's clothing).

Images do not travel over the Dynamixel bus (a 320x240 RGB-D frame is ~380 kB: about 3 s at 1 Mbit/s): the
camera's pixels come through a camera service beside the bus (runtime.robot.camera; ARCHITECTURE "Cameras").
"""
from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from hil.devices.descriptor.camera import CameraSpec, camera_spec

from ..part import PartFirmware
from .adopt import adopt
from .sensing import part_seed
from ..render.gl import RendererUnavailable, projection_matrix, view_matrix
from ..render.scene import (InstanceList, SurfacePalette, base_legend, people_scene, quat_matrix, robot_scene,
                            static_scene)
from ..sensors.camera import DepthModel
from ..sensors.projector import ProjectorView
from ..world import RobotBody, World
from ..world.figures import Gait

RENDERER_ENV = "HIL_CAMERA_RENDERER"  # "gl" (moderngl on EGL), "tiny" (pybullet's TinyRenderer), or unset: gl,
# else tiny
_CONTEXT: dict[str, Any] = {}
_CONTEXT_LOCK = threading.Lock()


class CameraError(RuntimeError):
    """A frame that cannot be made: says which camera and why."""


class CameraFirmware(PartFirmware):
    def attach(self, world: World, robot: RobotBody, seed: int, crowd_of, gait: Gait) -> "CameraFirmware":
        """``crowd_of()`` gives the crowd bridge (or None) when a frame is made: the crowd may attach later."""
        self.world, self.robot, self.crowd_of, self.gait, self.seed = world, robot, crowd_of, gait, seed
        self.observer_gait = Gait(gait.seed)  # the people's gait in frames made for an observer alone
        self.cameras: dict[str, _Camera] = {}
        for sensor in self.descriptor.sensors:
            if sensor.kind == "camera":
                self.cameras[sensor.name] = _Camera(self, sensor.name, sensor.body, camera_spec(sensor.params),
                                                    seed + len(self.cameras))
        return self

    def reseed(self, seed: int, gait: Gait) -> None:
        """As :meth:`attach` with ``seed`` and ``gait`` left the cameras (a world put back to its start): no frame
        made yet, the depth noise and the people's clothes from ``seed``, the observers' gait from ``gait``'s
        seed."""
        self.seed, self.gait, self.observer_gait = seed, gait, Gait(gait.seed)
        for k, camera in enumerate(self.cameras.values()):
            camera.restart(seed + k)

    def frame(self, name: str | None = None, observe: bool = False) -> Mapping[str, Any]:
        """The current period's frame; ``observe``: for an observer (a recording), see :meth:`_Camera.frame`."""
        camera = self.camera(name)
        return camera.frame(self.world.time_s, observe)

    def camera(self, name: str | None = None) -> _Camera:
        if name is None:
            return next(iter(self.cameras.values()))
        try:
            return self.cameras[name]
        except KeyError:
            raise CameraError(f"part {self.id} ({self.descriptor.name}) has no camera {name!r}; it has "
                              f"{', '.join(self.cameras)}") from None


def silence(device: Any, part_id: int) -> str | None:
    """Why the part at ``part_id`` gives nothing now (unplugged, rebooting), else None: a camera without power
    gives no frames, as it answers nothing on the bus."""
    until = device.silent_until.get(part_id)
    if until is None:
        return None
    if math.isinf(until):
        return "it is unplugged"
    if device.clock() < until:
        return f"it is rebooting (back at t={until:.3f} s)"
    return None


def follow_swap(embodied: Any, new: PartFirmware) -> None:
    """The world's cameras after a swap put ``new`` at its ID (called under the device's lock, by the swap hook):
    a camera swapped out gives no frames and says what replaced it; a camera part swapped in renders when the
    world has a body for each of its cameras at that ID (the same shapes: a swapped part keeps the old part's),
    else says why it cannot. The other cameras are left as they are."""
    cameras = embodied.cameras if embodied.cameras is not None else {}
    embodied.cameras = cameras
    part_id, desc = new.id, getattr(new, "descriptor", None)
    old = cameras.pop(part_id, None)
    t = embodied.world.time_s
    if desc is not None and any(s.kind == "camera" for s in desc.sensors):
        if all(_has_body(embodied.robot, part_id, s.body) for s in desc.sensors if s.kind == "camera"):
            gait = old.gait if old is not None else next((c.gait for c in cameras.values()), None)
            cameras[part_id] = adopt(CameraFirmware, new).attach(
                embodied.world, embodied.robot, part_seed(embodied.seed, new.serial_number),
                lambda: embodied.crowd, gait if gait is not None else Gait(embodied.seed))
            embodied.cameras_gone.pop(part_id, None)
            return
        embodied.cameras_gone[part_id] = (f"part {part_id} is a {desc.name} swapped in at t={t:.3f} s where the "
                                          "world has no body for its camera (a swapped part keeps the old part's "
                                          "shapes)")
    elif old is not None:
        names = ", ".join(repr(name) for name in old.cameras)
        what = f"a {desc.name}" if desc is not None else "a part that does not describe itself"
        embodied.cameras_gone[part_id] = (f"camera {names} of part {part_id} ({old.descriptor.name}) gives no "
                                          f"frames: the part was replaced by {what} at t={t:.3f} s")


def reseed(embodied: Any, seed: int) -> None:
    """The cameras as a world opened with ``seed`` has them, for a world put back to its start (hil.gym's reset):
    no frame made yet, the depth noise, the people's clothes and their gait drawn from ``seed`` again."""
    from ..world.figures import Gait

    embodied.seed = seed
    gait = Gait(seed)  # one per world, as _attach_cameras makes it
    for part in (embodied.cameras or {}).values():
        part.reseed(part_seed(seed, part.serial_number), gait)


def _has_body(robot: RobotBody, part_id: int, body: str) -> bool:
    try:
        robot.link(part_id, body)
    except KeyError:
        return False
    return True


class _Camera:
    def __init__(self, part: CameraFirmware, name: str, body: str, spec: CameraSpec, seed: int):
        self.part, self.name, self.body, self.spec = part, name, body, spec
        self.depth_model = DepthModel(spec.depth, spec.fx, seed, name)
        self.palette = SurfacePalette()  # what each pixel's surface index stands for (kept: the static scene's)
        self.projection = projection_matrix(spec.width, spec.height, spec.fx, spec.fy, spec.cx, spec.cy,
                                            spec.near_m, spec.far_m)
        projector = spec.depth.projector_pose() if "depth" in spec.delivers else None
        # a projector in the lens sees what the lens sees: no second view to draw
        self.projector = ProjectorView(spec, projector) if projector is not None and any(projector.position) else None
        self.last: Mapping[str, Any] | None = None  # the frame the controller got, of period _last_k
        self._last_k: int | None = None
        self._observed: tuple[int, Mapping[str, Any]] | None = None  # (k, frame) made for an observer alone
        self._renderer = None
        self._second_renderer = None
        self._static: InstanceList | None = None
        self._robot_cache: dict = {}  # the robot's shapes as unit primitives per body (scene.robot_scene)
        self.rendered = 0  # frames actually rendered (a read between frames does not count)

    def restart(self, seed: int) -> None:
        """No frame made yet and the depth noise drawn from ``seed`` (a world put back to its start)."""
        self.depth_model = DepthModel(self.spec.depth, self.spec.fx, seed, self.name)
        self.last, self._last_k, self._observed = None, None, None

    @property
    def label(self) -> str:
        return f"camera {self.name!r} of part {self.part.id} ({self.part.descriptor.name})"

    def frame(self, now_s: float, observe: bool = False) -> Mapping[str, Any]:
        """The frame of the period of ``now_s``, rendered now if the controller has none yet.

        ``observe`` (a recording): the controller's frame of this period when it has one, else one made for
        observers alone, which the controller never gets and which advances nothing the controller's frames use
        (the gait has an observer's copy; the depth noise is the frame's own): so whether and how often a trial
        is recorded changes no frame its controller sees, nor anything it does. A period both recorded and read,
        the read coming second, is rendered twice."""
        k = math.floor(now_s * self.spec.rate_hz + 1e-9)
        if self.last is not None and k == self._last_k:
            return self.last
        if observe:
            if self._observed is None or self._observed[0] != k:
                self._observed = (k, self.render(now_s, k, self.part.observer_gait))
            return self._observed[1]
        self.last, self._last_k = self.render(now_s, k), k
        return self.last

    def render(self, now_s: float, k: int | None = None, gait: Gait | None = None) -> Mapping[str, Any]:
        """Frame ``k`` (default: the period of ``now_s``) rendered at ``now_s``, the people's limbs from ``gait``
        (default: the part's)."""
        if k is None:
            k = math.floor(now_s * self.spec.rate_hz + 1e-9)
        gait = gait if gait is not None else self.part.gait
        spec, part = self.spec, self.part
        renderer = self._renderer or self._open_renderer()
        position, quat = part.robot.link_pose(part.id, self.body)
        rotation = quat_matrix(quat)
        view = view_matrix(np.asarray(position, float), rotation, np.asarray(spec.forward), np.asarray(spec.up))
        crowd = part.crowd_of()
        people = crowd.states() if crowd is not None else []
        projector, projector_z = self.projector, None
        if renderer.name == "pybullet-tinyrenderer":
            bodies = getattr(getattr(crowd, "pedestrians", None), "bodies", {})
            rgb, labels, z, cos, surfaces, legend = renderer.render_world(
                part.world.client, view, self.projection, spec.near_m, spec.far_m, spec.fx, spec.fy, spec.cx,
                spec.cy, part.world, part.robot, bodies, self.palette)
            if projector is not None:
                projector_z = self._projector_renderer().render_depth(
                    part.world.client, projector.view(view), projector.projection, projector.near_m,
                    projector.far_m)
        else:
            legend = base_legend()
            scene = InstanceList()
            if self._static is None:
                self._static = static_scene(part.world.walls.values(), self.palette)
            scene.extend(self._static)
            scene.extend(robot_scene(part.robot, legend, self._robot_cache, self.palette))
            scene.extend(people_scene(people, gait.update(now_s, people), part.seed, legend, self.palette))
            packed = scene.pack()
            second = self._projector_renderer() if projector is not None else None
            with _CONTEXT_LOCK, renderer.ctx:
                rgb, labels, z, cos, surfaces = renderer.render_surfaces(view, self.projection, packed)
                if second is not None:
                    projector_z = second.render_depth(projector.view(view), projector.projection, packed)
        self.rendered += 1
        delivers = spec.delivers
        depth_model, measured = self.depth_model, {}
        surface_names = tuple(self.palette.names)  # as they are now: a later frame may add names

        def measure() -> tuple:  # the depth and its invalid counts, made together on the first lookup of either
            if not measured:
                lit = projector.lit(z, projector_z) if projector is not None else None
                measured["both"] = depth_model.apply(z, cos, k, lit, surfaces, surface_names)
            return measured["both"]

        has_depth = "depth" in delivers
        return RenderedFrame({
                "t": now_s, "camera": self.name, "part_id": part.id, "renderer": renderer.name,
                "rgb": rgb if "rgb" in delivers else None,
                "depth": (lambda: measure()[0]) if has_depth else None,
                "invalid": (lambda: measure()[1]) if has_depth else None,
                "labels": labels if "labels" in delivers else None,
                "surfaces": surfaces, "surface_names": surface_names,
                "legend": {int(i): n for i, n in legend.items() if "labels" in delivers},
                "intrinsics": spec.pinhole(),
                "pose": {"position": tuple(float(v) for v in position), "orientation": tuple(float(v) for v in quat),
                         "forward": spec.forward, "up": spec.up}})

    def _projector_renderer(self):
        """The renderer of the projector's picture (its own size), of the same kind as the camera's."""
        if self._second_renderer is None:
            from ..render.tiny import TinyRenderer

            size = (self.projector.width, self.projector.height)
            self._second_renderer = (TinyRenderer(*size) if self._renderer.name == TinyRenderer.name
                                     else _gl_renderer(*size))
        return self._second_renderer

    def _open_renderer(self):
        try:
            self._renderer = make_renderer(self.spec.width, self.spec.height)
        except RendererUnavailable as exc:
            raise CameraError(f"{self.label} cannot render: {exc}") from None
        return self._renderer


class RenderedFrame(Mapping):
    """One rendered frame's fields (a read-only mapping); a field given as a zero-argument function (the depth) is
    made on its first lookup, once, under a lock of its own (a frame may be read from several threads)."""

    def __init__(self, fields: dict[str, Any]):
        self._fields = fields
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> Any:
        value = self._fields[key]
        if callable(value):
            with self._lock:
                value = self._fields[key]
                if callable(value):
                    value = self._fields[key] = value()
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def made(self, key: str) -> bool:
        """Whether the field is there without making it (a lazy field not yet looked up: False)."""
        return not callable(self._fields.get(key))


def make_renderer(width: int, height: int):
    """The EGL renderer (moderngl), else pybullet's TinyRenderer; ``HIL_CAMERA_RENDERER=gl|tiny`` forces one
    (``gl`` then fails with the reason instead of falling back)."""
    from ..render.tiny import TinyRenderer

    choice = os.environ.get(RENDERER_ENV, "").strip().lower()
    if choice not in ("", "gl", "tiny"):
        raise RendererUnavailable(f"{RENDERER_ENV}={choice!r}: use gl or tiny")
    if choice == "tiny":
        return TinyRenderer(width, height)
    try:
        return _gl_renderer(width, height)
    except RendererUnavailable:
        if choice == "gl":
            raise
        return TinyRenderer(width, height)


def _gl_renderer(width: int, height: int):
    """One EGL context per process (contexts are heavy), one framebuffer per image size."""
    from ..render.gl import GLRenderer, open_context

    with _CONTEXT_LOCK:
        if "ctx" not in _CONTEXT:
            _CONTEXT["ctx"] = open_context()
        ctx = _CONTEXT["ctx"]
        key = (width, height)
        if key not in _CONTEXT:
            with ctx:
                _CONTEXT[key] = GLRenderer(width, height, ctx=ctx)
        return _CONTEXT[key]
