"""Pedestrians in the physics world (the crowd-simulation reference): capsules that walk where the crowd intends, while
the physics engine resolves what happens when bodies meet.

The crowd simulator decides each person's intended velocity; here every person is an upright capsule on a planar
base: two prismatic joints (x, then y) under a fixed base, so the engine itself keeps the person upright and on
the floor (no rotation, no height to hold: the capsule hangs a hair above the floor, with which it never
collides). Each joint has a velocity motor whose target is the intended velocity and whose force limit is the
drive's force along that axis, F = m (v_intended - v) / tau capped at m x ``MAX_DRIVE_ACCEL`` (the person's
push limit), taken once per crowd tick (:meth:`Pedestrians.sync`): the force points where the person wants to
speed up, so a person walks freely where the way is clear, reaches the intended velocity with the time constant
``DRIVE_TAU_S`` (sampled per tick), and is stopped, pushed or deflected by the robot, walls or other people when
bodies collide, pushing back with at most the push limit. No Python runs per physics step for people: between
ticks the engine's motors do the driving. Their actual positions and velocities go back to the crowd. The
sensor ring sees them like any other body.

pybullet keeps no motor targets in a saved state: :meth:`Pedestrians.drives` and :meth:`Pedestrians.command`
hand them to a restore (firmware_sim/embodied/state.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pybullet as p

from .world import World

BODY_DENSITY_KG_M3 = 985.0  # a person is about as dense as water
DRIVE_TAU_S = 0.25  # how quickly a person reaches the intended velocity on free ground
MAX_DRIVE_ACCEL = 3.0  # m/s^2: a person cannot push harder than this (robot contact wins beyond it)
UPRIGHT = (0.0, 0.0, 0.0, 1.0)
CARRIER_MASS_KG = 1e-3  # the x joint's link, which carries the capsule's y joint (massless in effect)
AXES = [0, 1]  # the x and the y joint
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


@dataclass(frozen=True)
class PedestrianState:
    """What actually happened to a person: position and velocity in the world."""

    id: int
    x: float
    y: float
    vx: float
    vy: float


def drive_forces(mass: float, vx: float, vy: float, tx: float, ty: float) -> tuple[float, float]:
    """The force limits of the x and y motors of a person of ``mass`` at velocity (vx, vy) who intends (tx, ty):
    the components of m (t - v) / tau, the whole capped at m x MAX_DRIVE_ACCEL (the push limit)."""
    dx, dy = tx - vx, ty - vy
    speed = math.hypot(dx, dy)
    if speed == 0.0:
        return 0.0, 0.0
    k = mass * min(1.0 / DRIVE_TAU_S, MAX_DRIVE_ACCEL / speed)
    return k * abs(dx), k * abs(dy)


class Pedestrians:
    """The bodies of the crowd in a world; :meth:`sync` once per crowd tick, the world steps in between."""

    def __init__(self, world: World):
        self.world, self.client = world, world.client
        self.bodies: dict[int, int] = {}  # person id -> pybullet body
        self.masses: dict[int, float] = {}
        self.origins: dict[int, tuple[float, float]] = {}  # person id -> where the body was made (joints at 0)
        self.intended: dict[int, tuple[float, float]] = {}
        self.forces: dict[int, tuple[float, float]] = {}  # person id -> the x and y motors' force limits (N)
        self._shapes: dict[tuple[float, float], tuple[int, int]] = {}

    def sync(self, intents: list[PedestrianIntent]) -> None:
        """Spawn new people, remove those no longer intended, and drive everyone toward their intended velocity
        until the next sync."""
        wanted = {intent.id for intent in intents}
        for person in [pid for pid in self.bodies if pid not in wanted]:
            self._remove(person)
        for intent in intents:
            if intent.id not in self.bodies:
                self._spawn(intent)
            self.intended[intent.id] = (intent.vx, intent.vy)
        self._drive()

    def stand(self) -> None:
        """Everyone intends to stand still (no crowd decides where they go); physics still acts on them."""
        for person in self.intended:
            self.intended[person] = (0.0, 0.0)
        self._drive()

    def states(self) -> list[PedestrianState]:
        out = []
        get, client = p.getJointStates, self.client
        for person, body in sorted(self.bodies.items()):
            (qx, vx, _, _), (qy, vy, _, _) = get(body, AXES, physicsClientId=client)
            ox, oy = self.origins[person]
            out.append(PedestrianState(person, ox + qx, oy + qy, vx, vy))
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

    # --- the drive -----------------------------------------------------------------------------------------------
    def drives(self) -> list[list[float]]:
        """[[id, target vx, target vy, force x, force y]] of every person's motors, by id (for a saved state)."""
        return [[pid, *self.intended.get(pid, (0.0, 0.0)), *self.forces.get(pid, (0.0, 0.0))]
                for pid in sorted(self.bodies)]

    def command(self, drives: list[list[float]]) -> None:
        """Set the motors as :meth:`drives` gave them (after a restore: pybullet keeps no motor targets)."""
        for pid, tx, ty, fx, fy in drives:
            pid = int(pid)
            self.intended[pid], self.forces[pid] = (tx, ty), (fx, fy)
            p.setJointMotorControlArray(self.bodies[pid], AXES, p.VELOCITY_CONTROL, targetVelocities=[tx, ty],
                                        forces=[fx, fy], physicsClientId=self.client)

    def _drive(self) -> None:
        """Every person's two motors toward the intended velocity with the drive's force for the velocity now."""
        get, set_motors, client = p.getJointStates, p.setJointMotorControlArray, self.client
        velocity = p.VELOCITY_CONTROL
        for person, body in self.bodies.items():
            (_, vx, _, _), (_, vy, _, _) = get(body, AXES, physicsClientId=client)
            tx, ty = self.intended.get(person, (0.0, 0.0))
            forces = self.forces[person] = drive_forces(self.masses[person], vx, vy, tx, ty)
            set_motors(body, AXES, velocity, targetVelocities=[tx, ty], forces=list(forces), physicsClientId=client)

    # --- bodies --------------------------------------------------------------------------------------------------
    def _shape(self, radius: float, height: float) -> tuple[int, int]:
        """One collision/visual shape pair per body size (a crowd has a handful of sizes)."""
        key = (radius, height)
        if key not in self._shapes:
            length = max(0.0, height - 2 * radius)
            shape = p.createCollisionShape(p.GEOM_CAPSULE, radius=radius, height=length, physicsClientId=self.client)
            visual = p.createVisualShape(p.GEOM_CAPSULE, radius=radius, length=length, rgbaColor=PERSON_RGBA,
                                         physicsClientId=self.client)
            self._shapes[key] = (shape, visual)
        return self._shapes[key]

    def _spawn(self, intent: PedestrianIntent) -> None:
        client = self.client
        length = max(0.0, intent.height - 2 * intent.radius)
        shape, visual = self._shape(intent.radius, intent.height)
        mass = BODY_DENSITY_KG_M3 * math.pi * intent.radius ** 2 * (length + 4 * intent.radius / 3)
        zero, still = (0.0, 0.0, 0.0), UPRIGHT
        body = p.createMultiBody(
            0.0, -1, -1, basePosition=(intent.x, intent.y, intent.height / 2),
            linkMasses=[CARRIER_MASS_KG, mass], linkCollisionShapeIndices=[-1, shape],
            linkVisualShapeIndices=[-1, visual], linkPositions=[zero, zero], linkOrientations=[still, still],
            linkInertialFramePositions=[zero, zero], linkInertialFrameOrientations=[still, still],
            linkParentIndices=[0, 1], linkJointTypes=[p.JOINT_PRISMATIC, p.JOINT_PRISMATIC],
            linkJointAxis=[(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)], physicsClientId=client)
        p.changeDynamics(body, -1, linearDamping=0.0, angularDamping=0.0, physicsClientId=client)
        p.changeDynamics(body, AXES[1], lateralFriction=0.0, physicsClientId=client)  # bodies slide off a person
        p.setCollisionFilterPair(self.world.floor_id, body, -1, AXES[1], 0, physicsClientId=client)  # the joints
        # carry the weight: the floor is never touched, so it costs the engine no contact
        p.setJointMotorControlArray(body, AXES, p.VELOCITY_CONTROL, targetVelocities=[0.0, 0.0], forces=[0.0, 0.0],
                                    physicsClientId=client)  # pybullet's default motors would hold the joints
        self.bodies[intent.id], self.masses[intent.id] = body, mass
        self.origins[intent.id] = (intent.x, intent.y)

    def _remove(self, person: int) -> None:
        p.removeBody(self.bodies.pop(person), physicsClientId=self.client)
        self.masses.pop(person, None)
        self.origins.pop(person, None)
        self.intended.pop(person, None)
        self.forces.pop(person, None)
