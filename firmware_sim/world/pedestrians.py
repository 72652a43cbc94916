"""Pedestrians in the physics world (the crowd-simulation reference): capsules that walk where the crowd intends, while
the physics engine resolves what happens when bodies meet.

The crowd simulator decides each person's intended velocity; here every person is an upright capsule pushed
toward that velocity by a horizontal force (F = m (v_intended - v) / tau, capped at m x ``MAX_DRIVE_ACCEL``, the
person's push limit), so a person walks freely where the way is clear and is stopped, pushed or deflected by the
robot, walls or other people when bodies collide. Their actual positions and velocities go back to the crowd.
The sensor ring sees them like any other body.

Upright without work per step: a capsule's rotational inertia is ``LOCKED_INERTIA_KG_M2`` (contacts' torques
turned people by ~1e-9 rad in 1.5 s among 373 of them; it grows with the square of time, ~1e-4 rad in 10 min), so
the engine never tips or spins a person and the drive only reads each person's velocity and applies the force, two
pybullet calls per person per physics step (the world's one pre-step hook for all of them). A planar base (two
prismatic joints with velocity motors set once per crowd tick, no Python per step at all) was measured against it
(``python -m bench.world --only-drive``): its links and motors cost the engine ~4 us each per step whether or not
anything touches, 1.8-2.4x the CPU of this drive at 373 people, 0.7x at 3 (docs/WORLD.md "People in the physics
world").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import pybullet as p

from .world import World

BODY_DENSITY_KG_M3 = 985.0  # a person is about as dense as water
DRIVE_TAU_S = 0.25  # how quickly a person reaches the intended velocity on free ground
MAX_DRIVE_ACCEL = 3.0  # m/s^2: a person cannot push harder than this (robot contact wins beyond it)
LOCKED_INERTIA_KG_M2 = 1e12  # every axis: a torque of 1e3 N m turns a person by 1e-9 rad/s^2
UPRIGHT = (0.0, 0.0, 0.0, 1.0)
AT_CENTRE = (0.0, 0.0, 0.0)  # the force's point in the capsule's frame: its centre of mass
PERSON_RGBA = (0.85, 0.55, 0.3, 1.0)


@dataclass(frozen=True)
class PedestrianIntent:
    """What the crowd wants from one person this tick (a new id spawns a body; a missing one is removed)."""

    id: int
    x: float
    y: float
    vx: float
    vy: float
    radius: float = 0.25
    height: float = 1.7
    surface: str | None = None  # what the sensors see of them (clothing, devices/surfaces.py); None: the default


@dataclass(frozen=True)
class PedestrianState:
    """What actually happened to a person: position and velocity in the world."""

    id: int
    x: float
    y: float
    vx: float
    vy: float


def capsule_shapes(client: int, radius: float, height: float, rgba: tuple[float, ...]) -> tuple[int, int]:
    """A person's collision and visual capsule (``height`` overall, ends included) in ``client``."""
    length = max(0.0, height - 2 * radius)
    shape = p.createCollisionShape(p.GEOM_CAPSULE, radius=radius, height=length, physicsClientId=client)
    visual = p.createVisualShape(p.GEOM_CAPSULE, radius=radius, length=length, rgbaColor=rgba, physicsClientId=client)
    return shape, visual


class Pedestrians:
    """The bodies of the crowd in a world; :meth:`sync` once per crowd tick, the world steps in between."""

    def __init__(self, world: World):
        self.world, self.client = world, world.client
        self.bodies: dict[int, int] = {}  # person id -> pybullet body
        self.masses: dict[int, float] = {}
        self._intended: dict[int, tuple[float, float]] = {}
        self._shapes: dict[tuple[float, float], tuple[int, int]] = {}
        # (body, mass, intended vx, vy) in the order of ``bodies``, rebuilt after a change (None): what the drive
        # reads every physics step, so it takes no dict look-ups and no tuples apart per person
        self._driven: list[tuple[int, float, float, float]] | None = []
        self._person_of: dict[int, int] = {}  # pybullet body -> person id (touching() runs every step)
        # every body spawned and removed, in order, once record_history() started it (a saved world's state:
        # firmware_sim/embodied/state.py): ["spawn", id, x, y, vx, vy, radius, height(, surface)] | ["remove", id]
        self.history: list[list] | None = None
        world.add_pre_step(self._drive)

    @property
    def intended(self) -> Mapping[int, tuple[float, float]]:
        """Each person's intended velocity (m/s, world frame) since the last crowd tick, read-only: the drive
        keeps its own list of it, so a change goes through :meth:`sync` / :meth:`stand`, or a new dict assigned
        whole (a restored state), never in place."""
        return MappingProxyType(self._intended)

    @intended.setter
    def intended(self, value: Mapping[int, tuple[float, float]]) -> None:
        self._intended, self._driven = dict(value), None

    def record_history(self) -> list[list]:
        """Start recording every spawn and remove (if not started yet; before the first one, for a history that
        re-creates the bodies with their pybullet ids: :meth:`replay`) and return the record so far."""
        if self.history is None:
            self.history = []
        return self.history

    def forget_history(self) -> None:
        """The record starts again empty (a world put back to a start that had no people), if one is kept."""
        if self.history is not None:
            self.history = []

    def replay(self, events: list[list]) -> None:
        """Create and remove bodies as a :attr:`history` says, into a world that has had none yet: every body gets
        the pybullet id and broadphase uid it had (recorded again, when a history is kept)."""
        for event in events:
            if event[0] == "spawn":
                self._spawn(PedestrianIntent(*event[1:]))
            else:
                self._remove(int(event[1]))

    def sync(self, intents: list, spawn_as: Callable[[Any], PedestrianIntent] | None = None) -> None:
        """Spawn new people, remove those no longer intended, and take everyone's intended velocity.

        ``intents``: PedestrianIntents, or anything with ``id``, ``vx`` and ``vy`` plus ``spawn_as`` to make a new
        person's PedestrianIntent (the crowd's own rows: only the people spawned this tick are converted)."""
        wanted = {intent.id for intent in intents}
        for person in [pid for pid in self.bodies if pid not in wanted]:
            self._remove(person)
        bodies, intended = self.bodies, self._intended
        for intent in intents:
            if intent.id not in bodies:
                self._spawn(intent if spawn_as is None else spawn_as(intent))
            intended[intent.id] = (intent.vx, intent.vy)
        self._driven = None

    def stand(self) -> None:
        """Everyone intends to stand still (no crowd decides where they go); physics still acts on them."""
        for person in self._intended:
            self._intended[person] = (0.0, 0.0)
        self._driven = None

    def states(self) -> list[PedestrianState]:
        out = []
        for person, body in sorted(self.bodies.items()):
            (x, y, _), _ = p.getBasePositionAndOrientation(body, physicsClientId=self.client)
            (vx, vy, _), _ = p.getBaseVelocity(body, physicsClientId=self.client)
            out.append(PedestrianState(person, x, y, vx, vy))
        return out

    def touching(self, contact_points) -> list[int]:
        """Ids of the people among ``contact_points`` (pybullet's, of one body: e.g. ``RobotBody.contact_points()``)
        as body B: ground truth from the engine, unlike a distance test on centres and radii."""
        by_body = self._person_of
        return sorted({by_body[c[2]] for c in contact_points if c[2] in by_body}) if contact_points else []

    def clear(self) -> None:
        """Every person's body removed, the newest first (a world put back to its start): pybullet hands freed ids
        out again last-freed-first, so the next people get the ids a world that never had anyone gives them."""
        for person, _ in sorted(self.bodies.items(), key=lambda item: -item[1]):
            self._remove(person)

    def _shape(self, radius: float, height: float) -> tuple[int, int]:
        """One collision/visual shape pair per body size (a crowd has a handful of sizes)."""
        key = (radius, height)
        if key not in self._shapes:
            self._shapes[key] = capsule_shapes(self.client, radius, height, PERSON_RGBA)
        return self._shapes[key]

    def _spawn(self, intent: PedestrianIntent) -> None:
        if self.history is not None:
            self.history.append(["spawn", intent.id, intent.x, intent.y, intent.vx, intent.vy, intent.radius,
                                 intent.height] + ([intent.surface] if intent.surface is not None else []))
        length = max(0.0, intent.height - 2 * intent.radius)
        shape, visual = self._shape(intent.radius, intent.height)
        mass = BODY_DENSITY_KG_M3 * math.pi * intent.radius ** 2 * (length + 4 * intent.radius / 3)
        body = p.createMultiBody(mass, shape, visual, basePosition=(intent.x, intent.y, intent.height / 2 + 0.001),
                                 physicsClientId=self.client)
        p.changeDynamics(body, -1, lateralFriction=0.0, linearDamping=0.0, angularDamping=0.0,
                         localInertiaDiagonal=(LOCKED_INERTIA_KG_M2,) * 3,
                         physicsClientId=self.client)  # people glide on the floor model: the drive does the walking
        self.bodies[intent.id], self.masses[intent.id] = body, mass
        if intent.surface is not None:
            self.world.set_surface(body, -1, intent.surface)
        self._person_of[body] = intent.id
        self._driven = None

    def _remove(self, person: int) -> None:
        if self.history is not None:
            self.history.append(["remove", person])
        body = self.bodies.pop(person)
        p.removeBody(body, physicsClientId=self.client)
        self.world.forget_body(body)
        self._person_of.pop(body, None)
        self.masses.pop(person, None)
        self._intended.pop(person, None)
        self._driven = None

    def _drive_list(self) -> list[tuple[int, float, float, float]]:
        """(body, mass, intended vx, vy) of everyone in the order of ``bodies`` (standing still when not told)."""
        if self._driven is None:
            intended = self._intended
            self._driven = [(body, self.masses[person], *intended.get(person, (0.0, 0.0)))
                            for person, body in self.bodies.items()]
        return self._driven

    def _drive(self, world: World) -> None:
        """Before every physics step: each person's drive force from their velocity now (two calls a person,
        positional arguments: pybullet parses keywords slower, and this runs 240 x people times a simulated s)."""
        client, frame = self.client, p.LINK_FRAME
        velocity, push = p.getBaseVelocity, p.applyExternalForce
        for body, mass, tx, ty in self._drive_list():
            (vx, vy, _), _ = velocity(body, client)
            ax, ay = (tx - vx) / DRIVE_TAU_S, (ty - vy) / DRIVE_TAU_S
            norm = (ax * ax + ay * ay) ** 0.5
            scale = MAX_DRIVE_ACCEL / (norm if norm > 1e-9 else 1e-9)  # max(1e-9, norm), without the call
            if scale < 1.0:  # at the push limit; else min(1.0, scale) is 1.0
                push(body, -1, (mass * ax * scale, mass * ay * scale, 0.0), AT_CENTRE, frame, client)
            else:
                push(body, -1, (mass * ax, mass * ay, 0.0), AT_CENTRE, frame, client)
