"""The part descriptor: what a part stores about itself (the modular-robot reference), as immutable typed records.

All quantities are SI; every pose is in the frame of the body it names. A part's frame is the frame of its
first body. Joints follow the URDF convention: the joint frame is placed in the parent body's frame by
``xyz``/``rpy`` and the child body's frame coincides with it. Ports are the part's connectors, placed in a
body's frame; exactly one is the parent connector (where the part attaches to its parent, or to the host).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

KINDS = ("hub", "link", "bracket", "servo_joint", "wheel", "range_sensor_ring", "contact_sensor", "camera",
         "speaker", "gripper")
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")
SHAPE_KINDS = ("box", "cylinder", "sphere", "capsule", "mesh")

Vec3 = tuple[float, float, float]
Mat3 = tuple[Vec3, Vec3, Vec3]


@dataclass(frozen=True)
class Pose:
    xyz: Vec3 = (0.0, 0.0, 0.0)
    rpy: Vec3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Shape:
    """A primitive (or a small mesh) placed in its body's frame. Sizes: box (x, y, z) edge lengths; cylinder
    and capsule (radius, length) along z; sphere (radius,); mesh: vertices and triangle indices."""

    kind: str
    size: tuple[float, ...] = ()
    pose: Pose = Pose()
    rgba: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)
    vertices: tuple[Vec3, ...] = ()
    triangles: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class Inertial:
    """Mass, centre of mass and the inertia matrix about the centre of mass, in the body's frame."""

    mass: float
    com: Vec3
    inertia: Mat3


@dataclass(frozen=True)
class Body:
    """A rigid body of the part. ``friction`` is the Coulomb coefficient of its collision surfaces against the
    world (None: the physics engine's default); a ball caster's body says it rolls with a small one. ``surface``
    is what its outside is made of, as range sensors see it (devices/surfaces.py; None: the default surface)."""

    name: str
    inertial: Inertial
    visuals: tuple[Shape, ...] = ()
    collisions: tuple[Shape, ...] = ()
    friction: float | None = None
    surface: str | None = None


@dataclass(frozen=True)
class JointLimits:
    lower: float = 0.0
    upper: float = 0.0
    effort: float = 0.0
    velocity: float = 0.0


@dataclass(frozen=True)
class Joint:
    """A joint between two bodies of the part; ``registers`` names the registers that command and report it
    (keys: goal_position, present_position, goal_velocity, present_velocity, goal_current, present_current,
    torque_enable, operating_mode)."""

    name: str
    type: str
    parent: str
    child: str
    pose: Pose
    axis: Vec3 = (0.0, 0.0, 1.0)
    limits: JointLimits = JointLimits()
    damping: float = 0.0
    friction: float = 0.0
    registers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Port:
    name: str
    body: str
    pose: Pose
    parent: bool = False


@dataclass(frozen=True)
class RegisterSpec:
    """A function register and its driver: ``si = raw * scale + offset`` in ``unit``."""

    name: str
    address: int
    size: int
    signed: bool = False
    access: str = "R"
    area: str = "RAM"
    default: int = 0
    minimum: int | None = None
    maximum: int | None = None
    unit: str = ""
    scale: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Sensor:
    """A sensing function: its kind (range_ring, contact, camera, ...), the body it sits on, and its model
    parameters (ranges, fields of view, dropout, noise), interpreted by the firmware and the drivers."""

    name: str
    kind: str
    body: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DriverCode:
    """Conversion code a table cannot express. Runs on the host only when trusted (runtime.drivers.trust)."""

    source: str
    sha256: str
    signature: str = ""  # hex Ed25519 signature of the source, by the key named in key_id
    key_id: str = ""


@dataclass(frozen=True)
class PartDescriptor:
    name: str
    kind: str
    bodies: tuple[Body, ...]
    ports: tuple[Port, ...]
    joints: tuple[Joint, ...] = ()
    registers: tuple[RegisterSpec, ...] = ()
    sensors: tuple[Sensor, ...] = ()
    driver: DriverCode | None = None
    model_number: int = 0
    vendor: str = ""
    description: str = ""
    schema: int = SCHEMA_VERSION

    @property
    def parent_port(self) -> Port:
        return next(p for p in self.ports if p.parent)

    @property
    def child_ports(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if not p.parent)

    def body(self, name: str) -> Body:
        return next(b for b in self.bodies if b.name == name)

    def register(self, name: str) -> RegisterSpec:
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise KeyError(f"part {self.name} declares no register {name!r}")

    @property
    def moving_joints(self) -> tuple[Joint, ...]:
        return tuple(j for j in self.joints if j.type != "fixed")

    def body_order(self) -> list[tuple[str, Joint | None]]:
        """The bodies depth-first from the base body, each with the joint that carries it (None for the base):
        the order in which both the host's model and the simulated world lay out a part's links."""
        out: list[tuple[str, Joint | None]] = []
        stack: list[tuple[str, Joint | None]] = [(self.bodies[0].name, None)]
        while stack:
            body, joint = stack.pop()
            out.append((body, joint))
            stack.extend((j.child, j) for j in reversed([j for j in self.joints if j.parent == body]))
        return out
