"""The robot model: an immutable kinematic tree of links and joints, built from the virtual robot.

Every body of every part becomes a link. Inside a part, links are joined by the part's own joints (as its
descriptor declares them); between parts, by a fixed *mount* joint whose placement is the transform between the
connected parts (the modular-robot reference): the child part's parent connector coincides with the parent's port, so

    parent port body -> child base body  =  T(port in its body) * inverse(T(child's parent connector in its base body))

The root part's base body frame is the world frame (fixed base). Links are numbered parts-first in the virtual
robot's depth-first walk (children in port order), and within a part depth-first along its joints in descriptor
order; so a link's parent always has a smaller index, and the moving joints -- the ``q`` vector -- come in the
order of :attr:`runtime.scan.VirtualRobot.servo_joints` extended to every moving joint.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import numpy as np

from hil.devices.catalog import plain_servo
from hil.devices.descriptor import Joint, JointLimits, PartDescriptor, Shape
from hil.runtime.scan.robot import ScannedPart, VirtualRobot

from .spatial import SE3, Inertia, axis_angle_matrix, frozen_array
from .tree import KinematicTree, build_tree

MOVING_TYPES = ("revolute", "continuous", "prismatic")
ROTARY_TYPES = ("revolute", "continuous")


class ModelError(ValueError):
    """The virtual robot cannot be turned into a model (no root, a port that does not exist, ...)."""


@dataclass(frozen=True, eq=False)
class JointModel:
    """A joint of the tree: joins link ``parent`` to link ``child``; ``placement`` is the joint frame (at q = 0)
    in the parent link's frame, and the child link's frame is the joint frame moved by q.

    ``bus_id`` and ``part_joint`` say which part and which of its descriptor's joints this is, so a controller
    can find the joint's registers; a mount (the connection between two parts) has ``part_joint`` None and the
    child part's ID. ``idx_q`` is the joint's index in q, None when it does not move."""

    name: str
    type: str
    parent: int
    child: int
    placement: SE3
    axis: np.ndarray
    limits: JointLimits
    damping: float
    friction: float
    bus_id: int
    part_joint: str | None
    idx_q: int | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axis", frozen_array(self.axis, (3,)))

    @property
    def moving(self) -> bool:
        return self.type in MOVING_TYPES

    @property
    def rotary(self) -> bool:
        """Revolute or continuous: it turns about its axis (a prismatic joint slides along it)."""
        return self.type in ROTARY_TYPES

    @property
    def is_mount(self) -> bool:
        return self.part_joint is None

    @property
    def motion_subspace(self) -> np.ndarray:
        """S: the child's spatial velocity per unit joint velocity, in the child frame (zero when fixed)."""
        if self.type in ROTARY_TYPES:
            return np.concatenate((np.zeros(3), self.axis))
        if self.type == "prismatic":
            return np.concatenate((self.axis, np.zeros(3)))
        return np.zeros(6)

    def transform(self, q: float = 0.0) -> SE3:
        """The child link's frame in the parent link's frame at joint value ``q`` (rad or m)."""
        if self.type in ROTARY_TYPES:
            return self.placement * SE3(axis_angle_matrix(self.axis, q), np.zeros(3))
        if self.type == "prismatic":
            return self.placement * SE3(np.eye(3), self.axis * q)
        return self.placement


@dataclass(frozen=True, eq=False)
class Link:
    """One body of one part: its inertial data and shapes in its own frame (the body's descriptor frame)."""

    name: str
    parent: int  # parent link index, -1 for the root
    joint: int  # index in Model.joints of the joint whose child this link is, -1 for the root
    inertia: Inertia
    visuals: tuple[Shape, ...]
    collisions: tuple[Shape, ...]
    bus_id: int
    body: str


@dataclass(frozen=True, eq=False)
class Connection:
    """Part ``child_id`` hangs from port ``port`` of part ``parent_id``: ``transform`` places the child's base
    body in the frame of the parent body that carries the port (link ``parent_link``)."""

    parent_id: int
    port: str
    child_id: int
    parent_link: int
    child_link: int
    transform: SE3


@dataclass(frozen=True, eq=False)
class PartModel:
    """One part as the model sees it: its links (base body first), where it hangs and what hangs from it."""

    bus_id: int
    name: str  # the descriptor's name
    kind: str
    self_describing: bool
    links: tuple[int, ...]
    parent: Connection | None  # None for the root part
    children: tuple[Connection, ...]  # in port order

    @property
    def base_link(self) -> int:
        return self.links[0]


@dataclass(frozen=True, eq=False)
class Model:
    """The immutable robot model; mutable per-evaluation state lives in :class:`runtime.model.Data`."""

    name: str
    links: tuple[Link, ...]
    joints: tuple[JointModel, ...]
    parts: tuple[PartModel, ...]

    @property
    def nq(self) -> int:
        return len(self.moving_joints)

    @cached_property
    def moving_joints(self) -> tuple[JointModel, ...]:
        """The joints q addresses, in q order."""
        return tuple(sorted((j for j in self.joints if j.moving), key=lambda j: j.idx_q))

    @cached_property
    def tree(self) -> KinematicTree:
        """The tree of moving joints with every rigid subtree merged into one body, and the arrays the fast
        algorithms need (runtime.model.tree), computed on first use and kept: the model never changes."""
        return build_tree(self)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the moving joints, in q order (depth-first tree order)."""
        return tuple(j.name for j in self.moving_joints)

    @property
    def connections(self) -> tuple[Connection, ...]:
        """Every part-to-part connection, in tree order (the transforms between connected parts)."""
        return tuple(p.parent for p in self.parts if p.parent is not None)

    def link_index(self, name: str) -> int:
        for i, link in enumerate(self.links):
            if link.name == name:
                return i
        raise KeyError(f"no link {name!r}")

    def joint(self, name: str) -> JointModel:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(f"no joint {name!r}")

    def part(self, bus_id: int) -> PartModel:
        for part in self.parts:
            if part.bus_id == bus_id:
                return part
        raise KeyError(f"no part with bus ID {bus_id}")

    def q_index(self, bus_id: int, part_joint: str) -> int:
        """Where in q the joint ``part_joint`` of part ``bus_id`` sits (the controller's register mapping)."""
        for joint in self.joints:
            if joint.bus_id == bus_id and joint.part_joint == part_joint and joint.idx_q is not None:
                return joint.idx_q
        raise KeyError(f"part {bus_id} has no moving joint {part_joint!r}")

    def neutral(self) -> np.ndarray:
        return np.zeros(self.nq)


def sanitize(name: str) -> str:
    """A name safe for URDF and most tools: letters, digits and underscores."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def descriptor_of(part: ScannedPart) -> PartDescriptor:
    """The part's descriptor; a plain servo's scan may already carry the catalog's, else look it up."""
    if part.descriptor is not None:
        return part.descriptor
    desc = plain_servo(part.model_number)
    if desc is None:
        raise ModelError(f"part {part.id}: no descriptor and no catalog entry for model number {part.model_number}")
    return desc


def build_model(robot: VirtualRobot, name: str | None = None) -> Model:
    """The model of ``robot``: one link per body of every part reachable from the root, the parts' own joints,
    and a fixed mount joint per connection between parts."""
    if robot.root_id is None or robot.root_id not in robot.parts:
        raise ModelError(f"the virtual robot of {robot.bus_url} has no root part")
    builder = _Builder(robot)
    for part, connection in _walk(robot):
        builder.add_part(part, connection)
    return builder.finish(name or _robot_name(robot))


def _robot_name(robot: VirtualRobot) -> str:
    tail = re.split(r"[/:]+", robot.bus_url.rstrip("/"))[-1] if robot.bus_url else ""
    name = sanitize(tail.rsplit(".", 1)[0])
    return name if name and not name.isdigit() else "robot"  # socket://host:PORT names no robot


def _walk(robot: VirtualRobot) -> Iterator[tuple[ScannedPart, tuple[int, str] | None]]:
    """Parts depth-first from the root (children in port order, as VirtualRobot.walk), each with (parent ID,
    parent port) or None for the root."""
    stack: list[tuple[ScannedPart, tuple[int, str] | None]] = [(robot.parts[robot.root_id], None)]
    seen: set[int] = set()
    while stack:
        part, connection = stack.pop()
        if part.id in seen:
            raise ModelError(f"part {part.id} is reached twice from the root (a cycle in the port tables)")
        seen.add(part.id)
        yield part, connection
        ports = [p.name for p in descriptor_of(part).ports]
        kids = sorted(part.children.items(), key=lambda kv: _port_order(ports, kv[0], part), reverse=True)
        for port, child_id in kids:
            if child_id in robot.parts:
                stack.append((robot.parts[child_id], (part.id, port)))


def _port_order(ports: list[str], port: str, part: ScannedPart) -> int:
    if port not in ports:
        raise ModelError(f"part {part.id} ({descriptor_of(part).name}) lists a child on port {port!r}, "
                         f"which its descriptor does not declare (ports: {', '.join(ports)})")
    return ports.index(port)


def mount_transform(parent_desc: PartDescriptor, port: str, child_desc: PartDescriptor) -> SE3:
    """Child base body frame in the frame of the parent body carrying ``port``: T(port) * T(child connector)^-1."""
    parent_port = next((p for p in parent_desc.ports if p.name == port), None)
    if parent_port is None:
        raise ModelError(f"{parent_desc.name} has no port {port!r}")
    if parent_port.parent:
        raise ModelError(f"{parent_desc.name}: {port!r} is its parent connector; nothing can hang from it")
    connector = child_desc.parent_port
    return SE3.from_pose(parent_port.pose.xyz, parent_port.pose.rpy) * \
        SE3.from_pose(connector.pose.xyz, connector.pose.rpy).inverse()


class _Builder:
    """Accumulates links, joints and parts while walking the virtual robot."""

    def __init__(self, robot: VirtualRobot):
        self.robot = robot
        self.links: list[Link] = []
        self.joints: list[JointModel] = []
        self.parts: list[dict] = []
        self.link_of: dict[tuple[int, str], int] = {}  # (bus ID, body) -> link index
        self.names: dict[str, set[str]] = {"link": set(), "joint": set()}  # URDF: one namespace each
        self.nq = 0

    def unique(self, name: str, what: str) -> str:
        base, n = sanitize(name), 2
        name, taken = base, self.names[what]
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        return name

    def add_part(self, part: ScannedPart, connection: tuple[int, str] | None) -> None:
        desc = descriptor_of(part)
        self._check_parent_port(part, connection)
        prefix = f"{desc.name}_{part.id}"
        link_ids = []
        mount = None
        for body_name, joint in desc.body_order():
            if joint is None and connection is not None:
                mount = self._mount(part, desc, connection, prefix)
            link_ids.append(self._add_link(part, desc, body_name, joint, mount, prefix))
        self.parts.append({"part": part, "desc": desc, "links": tuple(link_ids), "parent": mount})

    def _check_parent_port(self, part: ScannedPart, connection: tuple[int, str] | None) -> None:
        if connection is not None and part.parent_port is not None and part.parent_port != connection[1]:
            raise ModelError(f"part {part.id}: scanned as hanging from port {part.parent_port!r} of part "
                             f"{part.parent_id}, but that part's port table has it on {connection[1]!r}")

    def _mount(self, part: ScannedPart, desc: PartDescriptor, connection: tuple[int, str], prefix: str) -> Connection:
        parent_id, port = connection
        parent_desc = descriptor_of(self.robot.parts[parent_id])
        transform = mount_transform(parent_desc, port, desc)  # raises on a port the parent does not have
        port_body = next(p.body for p in parent_desc.ports if p.name == port)
        return Connection(parent_id, port, part.id, self.link_of[(parent_id, port_body)], len(self.links), transform)

    def _add_link(self, part: ScannedPart, desc: PartDescriptor, body_name: str, joint: Joint | None,
                  mount: Connection | None, prefix: str) -> int:
        index = len(self.links)
        body = desc.body(body_name)
        inertial = body.inertial
        parent, joint_index = -1, -1
        if joint is not None:
            parent = self.link_of[(part.id, joint.parent)]
            joint_index = self._add_joint(self._part_joint(part, joint, parent, index, prefix))
        elif mount is not None:
            parent = mount.parent_link
            joint_index = self._add_joint(self._mount_joint(part, mount, index, prefix))
        self.links.append(Link(self.unique(f"{prefix}_{body_name}", "link"), parent, joint_index,
                               Inertia(inertial.mass, inertial.com, inertial.inertia), body.visuals, body.collisions,
                               part.id, body_name))
        self.link_of[(part.id, body_name)] = index
        return index

    def _add_joint(self, joint: JointModel) -> int:
        self.joints.append(joint)
        return len(self.joints) - 1

    def _part_joint(self, part: ScannedPart, joint: Joint, parent: int, child: int, prefix: str) -> JointModel:
        idx_q = None
        if joint.type in MOVING_TYPES:
            idx_q, self.nq = self.nq, self.nq + 1
        return JointModel(self.unique(f"{prefix}_{joint.name}", "joint"), joint.type, parent, child,
                          SE3.from_pose(joint.pose.xyz, joint.pose.rpy), np.asarray(joint.axis, dtype=float),
                          joint.limits, joint.damping, joint.friction, part.id, joint.name, idx_q)

    def _mount_joint(self, part: ScannedPart, mount: Connection, child: int, prefix: str) -> JointModel:
        return JointModel(self.unique(f"{prefix}_mount", "joint"), "fixed", mount.parent_link, child, mount.transform,
                          np.array([0.0, 0.0, 1.0]), JointLimits(), 0.0, 0.0, part.id, None, None)

    def finish(self, name: str) -> Model:
        children: dict[int, list[Connection]] = {}
        for entry in self.parts:
            if entry["parent"] is not None:
                children.setdefault(entry["parent"].parent_id, []).append(entry["parent"])
        parts = tuple(PartModel(e["part"].id, e["desc"].name, e["desc"].kind, e["part"].self_describing, e["links"],
                                e["parent"], tuple(children.get(e["part"].id, ()))) for e in self.parts)
        return Model(sanitize(name), tuple(self.links), tuple(self.joints), parts)
