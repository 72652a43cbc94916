"""Pedestrians in the physics world (the crowd-simulation reference): capsules that walk where the crowd intends, while
the physics engine resolves what happens when bodies meet.

The crowd simulator decides each person's intended velocity; here every person is an upright capsule pushed
toward that velocity by a horizontal force (F = m (v_intended - v) / tau, capped), so a person walks freely
where the way is clear and is stopped, pushed or deflected by the robot, walls or other people when bodies
collide. Their actual positions and velocities go back to the crowd. Capsules never topple: their orientation is
held upright and their spin cancelled before every step. The sensor ring sees them like any other body.
"""
from __future__ import annotations

from dataclasses import dataclass

import pybullet as p

from .world import World

BODY_DENSITY_KG_M3 = 985.0  # a person is about as dense as water
DRIVE_TAU_S = 0.25  # how quickly a person reaches the intended velocity on free ground
MAX_DRIVE_ACCEL = 3.0  # m/s^2: a person cannot push harder than this (robot contact wins beyond it)
UPRIGHT = (0.0, 0.0, 0.0, 1.0)


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


class Pedestrians:
    """The bodies of the crowd in a world; :meth:`sync` once per crowd tick, the world steps in between."""

    def __init__(self, world: World):
        self.world, self.client = world, world.client
        self.bodies: dict[int, int] = {}  # person id -> pybullet body
        self.masses: dict[int, float] = {}
        self.intended: dict[int, tuple[float, float]] = {}
        world.add_pre_step(self._drive)

    def sync(self, intents: list[PedestrianIntent]) -> None:
        """Spawn new people, remove those no longer intended, and take everyone's intended velocity."""
        wanted = {intent.id for intent in intents}
        for person in [pid for pid in self.bodies if pid not in wanted]:
            self._remove(person)
        for intent in intents:
            if intent.id not in self.bodies:
                self._spawn(intent)
            self.intended[intent.id] = (intent.vx, intent.vy)

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
        by_body = {body: person for person, body in self.bodies.items()}
        return sorted({by_body[c[2]] for c in contact_points if c[2] in by_body})

    def clear(self) -> None:
        """Every person's body removed, the newest first (a world put back to its start): pybullet hands freed ids
        out again last-freed-first, so the next people get the ids a world that never had anyone gives them."""
        for person, _ in sorted(self.bodies.items(), key=lambda item: -item[1]):
            self._remove(person)

    def _spawn(self, intent: PedestrianIntent) -> None:
        length = max(0.0, intent.height - 2 * intent.radius)
        shape = p.createCollisionShape(p.GEOM_CAPSULE, radius=intent.radius, height=length, physicsClientId=self.client)
        visual = p.createVisualShape(p.GEOM_CAPSULE, radius=intent.radius, length=length,
                                     rgbaColor=(0.85, 0.55, 0.3, 1.0), physicsClientId=self.client)
        volume = 3.14159 * intent.radius ** 2 * (length + 4 * intent.radius / 3)
        mass = BODY_DENSITY_KG_M3 * volume
        body = p.createMultiBody(mass, shape, visual, basePosition=(intent.x, intent.y, intent.height / 2 + 0.001),
                                 physicsClientId=self.client)
        p.changeDynamics(body, -1, lateralFriction=0.0, linearDamping=0.0, angularDamping=0.0,
                         physicsClientId=self.client)  # people glide on the floor model: the drive does the walking
        self.bodies[intent.id], self.masses[intent.id] = body, mass
        if intent.surface is not None:
            self.world.set_surface(body, -1, intent.surface)

    def _remove(self, person: int) -> None:
        body = self.bodies.pop(person)
        p.removeBody(body, physicsClientId=self.client)
        self.world.forget_body(body)
        self.masses.pop(person, None)
        self.intended.pop(person, None)

    def _drive(self, world: World) -> None:
        client = self.client
        for person, body in self.bodies.items():
            position, _ = p.getBasePositionAndOrientation(body, physicsClientId=client)
            (vx, vy, vz), _ = p.getBaseVelocity(body, physicsClientId=client)
            p.resetBasePositionAndOrientation(body, position, UPRIGHT, physicsClientId=client)
            p.resetBaseVelocity(body, (vx, vy, vz), (0.0, 0.0, 0.0), physicsClientId=client)
            tx, ty = self.intended.get(person, (0.0, 0.0))
            ax, ay = (tx - vx) / DRIVE_TAU_S, (ty - vy) / DRIVE_TAU_S
            scale = min(1.0, MAX_DRIVE_ACCEL / max(1e-9, (ax * ax + ay * ay) ** 0.5))
            mass = self.masses[person]
            p.applyExternalForce(body, -1, (mass * ax * scale, mass * ay * scale, 0.0), position, p.WORLD_FRAME,
                                 physicsClientId=client)
