"""What a camera sees, as lists of primitives: the floor, the map's walls, the robot's visual shapes at their
bodies' poses and the people as human figures (world/figures.py), each with a colour and a label.

A renderer draws :class:`Instances` (one array of 4x4 poses, colours and labels per primitive kind: unit box,
unit cylinder along z, unit sphere), so any renderer -- OpenGL here, another later -- draws the same scene. The
robot's bodies are placed only through ``RobotBody.link_pose(part_id, body)`` (the world's contract: fixed links
may be merged into one pybullet link, the body's own frame is what counts), so each part's shapes keep their
own label whatever pybullet carries them on.

Labels (int32 per pixel): 0 nothing (the sky beyond the far plane), 1 the floor, 2 a wall, ROBOT_BASE + k the
k-th body of the robot (``legend`` names it ``robot:PART_ID/BODY``), PERSON_BASE + id a person of the crowd by
their crowd id (``person:ID``).

Surfaces (a small unsigned integer per primitive, and so per pixel): what the primitive is made of as a depth
sensor sees it (devices/surfaces.py), an index into the camera's :class:`SurfacePalette`; 0 is the default
surface (whatever names none: the floor, a wall, a person or a robot body without a ``surface``). A wall's is its
map ``surface``, a robot body's its descriptor's, a person's their clothing's (the whole figure: the ``surface``
of their person type or of their script line).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..world.figures import Limb, figures

NOTHING, FLOOR, WALL = 0, 1, 2
ROBOT_BASE = 1000
PERSON_BASE = 100000
KINDS = ("box", "cylinder", "sphere")
FLOOR_RGBA = (0.78, 0.78, 0.74, 1.0)  # world.FLOOR_RGBA
WALL_RGBA = (0.55, 0.57, 0.62, 1.0)  # world.WALL_RGBA
FLOOR_HALF_SIZE_M = 50.0
FLOOR_THICKNESS_M = 0.02


@dataclass
class Instances:
    """Primitives of one kind: poses (N, 4, 4) of the unit shape scaled and placed, colours (N, 4), labels (N,),
    surfaces (N,): each one's index in the camera's :class:`SurfacePalette` (0: the default surface)."""

    poses: np.ndarray
    colours: np.ndarray
    labels: np.ndarray
    surfaces: np.ndarray | None = None  # None: every primitive the default surface

    def __post_init__(self) -> None:
        if self.surfaces is None:
            self.surfaces = np.zeros(len(self.labels), np.int32)

    @classmethod
    def empty(cls) -> Instances:
        return cls(np.zeros((0, 4, 4), np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int32),
                   np.zeros(0, np.int32))


MAX_SURFACES = 255  # a pixel's surface index is one byte (render/gl.py's surface target)


class SurfacePalette:
    """Small integers for surface names, one palette per camera: 0 is the default surface (None: what names
    none), every other name gets the next integer the first time it is drawn, and keeps it."""

    def __init__(self) -> None:
        self.names: list[str | None] = [None]
        self._index: dict[str | None, int] = {None: 0}

    def index(self, name: str | None) -> int:
        """The integer of ``name`` (None or "": the default surface, 0)."""
        found = self._index.get(name or None)
        if found is not None:
            return found
        if len(self.names) >= MAX_SURFACES:
            raise ValueError(f"a camera can tell at most {MAX_SURFACES} surfaces apart; {name!r} is one too many")
        self._index[name] = len(self.names)
        self.names.append(name)
        return self._index[name]


class InstanceList:
    """Collects primitives kind by kind, then packs them into :class:`Instances`."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[list, list, list, list]] = {k: ([], [], [], []) for k in KINDS}

    def add(self, kind: str, size: Sequence[float], pose: np.ndarray, rgba: Sequence[float], label: int,
            surface: int = 0) -> None:
        """One primitive: box (edges x, y, z), cylinder (radius, length along z), sphere (radius,), capsule
        (radius, length of its straight part: a cylinder and two spheres); ``surface``: its palette index."""
        if kind == "capsule":
            radius, length = float(size[0]), float(size[1])
            self.add("cylinder", (radius, length), pose, rgba, label, surface)
            for end in (-length / 2, length / 2):
                self.add("sphere", (radius,), pose @ _translation(0.0, 0.0, end), rgba, label, surface)
            return
        poses, colours, labels, surfaces = self.items[kind]
        poses.append(pose @ _scale(kind, size))
        colours.append(rgba)
        labels.append(label)
        surfaces.append(surface)

    def extend(self, other: InstanceList) -> None:
        for kind in KINDS:
            for mine, theirs in zip(self.items[kind], other.items[kind]):
                mine.extend(theirs)

    def pack(self) -> dict[str, Instances]:
        out = {}
        for kind, (poses, colours, labels, surfaces) in self.items.items():
            if poses:
                out[kind] = Instances(np.asarray(poses, np.float32), np.asarray(colours, np.float32),
                                      np.asarray(labels, np.int32), np.asarray(surfaces, np.int32))
            else:
                out[kind] = Instances.empty()
        return out


def static_scene(walls: Iterable, palette: SurfacePalette | None = None) -> InstanceList:
    """The floor and the map's walls (they never move: built once per camera); each wall drawn as its map
    ``surface`` (``palette``; None: every wall the default surface)."""
    out = InstanceList()
    out.add("box", (2 * FLOOR_HALF_SIZE_M, 2 * FLOOR_HALF_SIZE_M, FLOOR_THICKNESS_M),
            _translation(0.0, 0.0, -FLOOR_THICKNESS_M / 2), FLOOR_RGBA, FLOOR)
    for wall in walls:
        (mx, my), yaw = wall.midpoint, wall.yaw
        surface = palette.index(getattr(wall, "surface", None)) if palette is not None else 0
        out.add("box", (wall.length, wall.thickness, wall.height), _pose_xyz_yaw(mx, my, wall.bottom + wall.height / 2, yaw),
                WALL_RGBA, WALL, surface)
    return out


def robot_scene(robot, legend: dict[int, str], cache: dict | None = None,
                palette: SurfacePalette | None = None) -> InstanceList:
    """Every visual shape of every body of the robot (and of its mirrors) at its body's pose now, each drawn as
    its body's descriptor ``surface`` (``palette``; None: the default surface). ``cache`` (kept by the caller,
    one per robot) holds each body's shapes as unit primitives in the body frame, made once."""
    out = InstanceList()
    if cache is None:
        shapes = _robot_shapes(robot)
    else:
        mirrors = len(getattr(robot, "mirrors", ()))  # a mirror hung later (world/mirror.py): built anew
        if cache.get("mirrors") != mirrors:
            cache["shapes"], cache["mirrors"] = _robot_shapes(robot), mirrors
        shapes = cache["shapes"]
    frames = {id(body): _frames_of(body) for body in (robot, *getattr(robot, "mirrors", ()))}
    for k, (body, row, link, surface_name, primitives) in enumerate(shapes):
        label = ROBOT_BASE + k
        legend[label] = f"robot:{link.part_id}/{link.body}"
        if not primitives:
            continue
        surface = palette.index(surface_name) if palette is not None else 0
        frame = frames[id(body)][row]
        for kind, local, rgba in primitives:
            items = out.items[kind]
            items[0].append(frame @ local)
            items[1].append(rgba)
            items[2].append(label)
            items[3].append(surface)
    return out


def _frames_of(body) -> Sequence[np.ndarray]:
    """The 4x4 world frame of every body of ``body``, in ``body.links`` order (one batched call where it has it)."""
    if hasattr(body, "link_matrices"):
        return body.link_matrices()
    return [_matrix(*body.link_pose(link.part_id, link.body)) for link in body.links]


def _robot_shapes(robot) -> list:
    """[(carrier body, the link's row in its links, link, its body's surface name or None, [(kind, unit-primitive
    pose in the body frame, rgba)])] in label order."""
    out = []
    for body in (robot, *getattr(robot, "mirrors", ())):
        for row, link in enumerate(body.links):
            primitives = []
            part_body = body.parts[link.part_id].body(link.body)
            for shape in part_body.visuals:
                kind, size = _shape_kind(shape)
                local = InstanceList()
                local.add(kind, size, _matrix(tuple(shape.pose.xyz), _quat_rpy(shape.pose.rpy)), tuple(shape.rgba), 0)
                for k in KINDS:
                    primitives += [(k, pose, rgba) for pose, rgba in zip(local.items[k][0], local.items[k][1])]
            out.append((body, row, link, getattr(part_body, "surface", None), primitives))
    return out


def people_scene(people: Sequence[Mapping], phases: Mapping[int, float], seed: int,
                 legend: dict[int, str], palette: SurfacePalette | None = None) -> InstanceList:
    """The crowd's people as figures at their gait phases, each figure drawn as the person's ``surface`` (their
    clothing; ``palette``; None or no ``surface``: the default surface)."""
    out = InstanceList()
    surfaces = ({person["id"]: palette.index(person.get("surface")) for person in people}
                if palette is not None else {})
    for pid, limbs in figures(people, phases, seed).items():
        label = PERSON_BASE + pid
        legend[label] = f"person:{pid}"
        surface = surfaces.get(pid, 0)
        for limb in limbs:
            add_limb(out, limb, label, surface)
    return out


def add_limb(out: InstanceList, limb: Limb, label: int, surface: int = 0) -> None:
    out.add(limb.kind, limb.size, limb.pose, limb.rgba, label, surface)


def base_legend() -> dict[int, str]:
    return {NOTHING: "nothing", FLOOR: "floor", WALL: "wall"}


def _shape_kind(shape) -> tuple[str, tuple[float, ...]]:
    """A descriptor shape as a primitive; a mesh is drawn as its vertices' bounding box (no catalog part has one)."""
    if shape.kind != "mesh":
        return shape.kind, tuple(float(v) for v in shape.size)
    vertices = np.asarray(shape.vertices, float)
    return "box", tuple(float(v) for v in vertices.max(axis=0) - vertices.min(axis=0))


def _scale(kind: str, size: Sequence[float]) -> np.ndarray:
    if kind == "box":
        sx, sy, sz = (float(v) for v in size)
    elif kind == "cylinder":
        sx = sy = float(size[0])
        sz = float(size[1])
    else:
        sx = sy = sz = float(size[0])
    return np.diag((sx, sy, sz, 1.0))


def _translation(x: float, y: float, z: float) -> np.ndarray:
    out = np.eye(4)
    out[:3, 3] = (x, y, z)
    return out


def _pose_xyz_yaw(x: float, y: float, z: float, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, z], [0.0, 0.0, 0.0, 1.0]])


def quat_matrix(quat: Sequence[float]) -> np.ndarray:
    x, y, z, w = (float(v) for v in quat)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _matrix(xyz: Sequence[float], quat: Sequence[float]) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = quat_matrix(quat)
    out[:3, 3] = xyz
    return out


def _quat_rpy(rpy: Sequence[float]) -> tuple[float, float, float, float]:
    """URDF roll-pitch-yaw (fixed axes x, y, z) as an xyzw quaternion (pybullet's getQuaternionFromEuler)."""
    r, p, y = (float(v) / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy)


matrix_of = _matrix
