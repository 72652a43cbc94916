"""People as walking human figures (for eyes, not for physics): torso, head, arms and legs of a person's size,
clothes coloured by seed, limbs swinging with a gait phase that follows walking speed, facing where they go.

The physics keeps its capsules (world/pedestrians.py); what a camera renders and what ``hil view`` draws are the
figures made here from a person's state (``{id, x, y, vx, vy, height, radius, type, gaze}``, as the crowd bridge
and the /pedestrians channel give it), so both show the same person the same way.

Gait. The phase advances by 2 pi per gait cycle (two steps), i.e. by ``2 pi * distance / cycle_length`` with a
cycle about ``CYCLE_PER_HEIGHT`` times the person's height (a 1.7 m adult walks 1.4 m per cycle); the swing
amplitude grows with speed up to ``FULL_SWING_SPEED``, so a person who stops stands straight and still. Legs and
arms swing about the hip and shoulder's lateral axis, each arm opposite its leg. Every person's first phase and
clothes come from (seed, id), so the same trial draws the same figures.

Each figure is a list of :class:`Limb` primitives (box, cylinder along z, sphere) with a 4x4 pose in the world.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

CYCLE_PER_HEIGHT = 0.82  # gait cycle length / height
FULL_SWING_SPEED = 1.2  # m/s: at and above it the limbs swing fully
STANDING_SPEED = 0.05  # m/s: slower is standing (no swing, no phase advance, heading from the gaze)
LEG_SWING_RAD = 0.45
ARM_SWING_RAD = 0.35
SKIN = ((0.96, 0.80, 0.69), (0.87, 0.67, 0.52), (0.67, 0.47, 0.33), (0.45, 0.31, 0.21))
SHIRTS = ((0.80, 0.15, 0.15), (0.15, 0.35, 0.75), (0.20, 0.60, 0.30), (0.95, 0.75, 0.15), (0.55, 0.25, 0.60),
          (0.95, 0.95, 0.92), (0.15, 0.15, 0.18), (0.90, 0.45, 0.10), (0.30, 0.70, 0.80))
TROUSERS = ((0.15, 0.20, 0.40), (0.12, 0.12, 0.14), (0.45, 0.40, 0.30), (0.35, 0.35, 0.38), (0.25, 0.30, 0.20))
HAIR = ((0.10, 0.07, 0.05), (0.35, 0.22, 0.10), (0.75, 0.60, 0.35), (0.55, 0.55, 0.55))
LIMBS = ("torso", "head", "hair", "arm_left", "arm_right", "leg_left", "leg_right")


@dataclass(frozen=True)
class Limb:
    """One primitive of a figure: ``kind`` box (size = x, y, z edges), cylinder (radius, length along its z) or
    sphere (radius,); ``pose`` the 4x4 transform of its centre in the world; ``rgba`` its colour."""

    name: str
    kind: str
    size: tuple[float, ...]
    pose: np.ndarray
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class Proportions:
    """Body measures (m) of a figure of height ``height``, scaled from a 1.7 m adult; a child is slimmer."""

    height: float
    hip_z: float
    shoulder_z: float
    torso_width: float
    torso_depth: float
    head_radius: float
    leg_radius: float
    arm_radius: float
    arm_length: float

    @classmethod
    def of(cls, height: float, radius: float = 0.25) -> Proportions:
        s = height / 1.7
        width = min(2.0 * radius * 0.8, 0.40 * s)
        return cls(height=height, hip_z=0.50 * height, shoulder_z=0.82 * height, torso_width=width,
                   torso_depth=0.22 * s, head_radius=0.105 * s, leg_radius=0.06 * s, arm_radius=0.04 * s,
                   arm_length=0.36 * height)


def half_depth(height: float, radius: float = 0.25) -> float:
    """Half the torso's front-to-back depth: how far a figure's front is in front of its centre."""
    return Proportions.of(height, radius).torso_depth / 2.0


@functools.lru_cache(maxsize=4096)
def colours(seed: int, person_id: int) -> dict[str, tuple[float, float, float, float]]:
    """Skin, shirt, trousers and hair of one person, drawn from (seed, id): the same person looks the same.
    Kept per (seed, id): every camera frame draws every person (a generator each was a quarter of a figure's
    cost); callers only read the dict."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(person_id) & 0xFFFFFFFF])
    pick = lambda table: tuple(table[int(rng.integers(len(table)))]) + (1.0,)  # noqa: E731
    return {"skin": pick(SKIN), "shirt": pick(SHIRTS), "trousers": pick(TROUSERS), "hair": pick(HAIR)}


class Gait:
    """Every person's gait phase, advanced from their speed between two calls of :meth:`update` (a camera's
    frames, the viewer's ticks); a new person starts at a phase from (seed, id)."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.phase: dict[int, float] = {}
        self._t: float | None = None

    def update(self, t_s: float, people: Iterable[Mapping]) -> dict[int, float]:
        dt = 0.0 if self._t is None else max(0.0, t_s - self._t)
        self._t = t_s
        phases = {}
        for person in people:
            pid = int(person["id"])
            phase = self.phase.get(pid)
            if phase is None:
                phase = float(np.random.default_rng([self.seed & 0xFFFFFFFF, pid, 7]).uniform(0, 2 * math.pi))
            speed = math.hypot(person.get("vx", 0.0), person.get("vy", 0.0))
            if speed >= STANDING_SPEED:
                cycle = CYCLE_PER_HEIGHT * float(person.get("height", 1.7))
                phase = (phase + 2 * math.pi * speed * dt / cycle) % (2 * math.pi)
            phases[pid] = phase
        self.phase = phases
        return phases


def heading(person: Mapping) -> float:
    """Where a person faces (rad): where they walk, or where they look when standing."""
    vx, vy = person.get("vx", 0.0), person.get("vy", 0.0)
    if math.hypot(vx, vy) >= STANDING_SPEED:
        return math.atan2(vy, vx)
    gaze = person.get("gaze") or (1.0, 0.0)
    return math.atan2(gaze[1], gaze[0]) if math.hypot(gaze[0], gaze[1]) > 1e-9 else 0.0


def figure(person: Mapping, phase: float, seed: int = 0) -> list[Limb]:
    """The limbs of one person at gait ``phase`` (rad), standing on the floor at (x, y)."""
    height = float(person.get("height", 1.7))
    body = Proportions.of(height, float(person.get("radius", 0.25)))
    paint = colours(seed, int(person["id"]))
    speed = math.hypot(person.get("vx", 0.0), person.get("vy", 0.0))
    swing = min(1.0, speed / FULL_SWING_SPEED) if speed >= STANDING_SPEED else 0.0
    base = _placement(float(person["x"]), float(person["y"]), heading(person))
    leg = swing * LEG_SWING_RAD * math.sin(phase)
    arm = swing * ARM_SWING_RAD * math.sin(phase)
    torso_h = body.shoulder_z - body.hip_z
    head_z = body.height - body.head_radius
    side = body.torso_width / 2.0
    limbs = [
        Limb("torso", "box", (body.torso_depth, body.torso_width, torso_h),
             base @ _translate(0.0, 0.0, body.hip_z + torso_h / 2), paint["shirt"]),
        Limb("head", "sphere", (body.head_radius,), base @ _translate(0.0, 0.0, head_z), paint["skin"]),
        Limb("hair", "sphere", (body.head_radius * 0.92,),
             base @ _translate(-0.25 * body.head_radius, 0.0, head_z + 0.3 * body.head_radius), paint["hair"]),
    ]
    for name, y, angle in (("leg_left", side / 2, leg), ("leg_right", -side / 2, -leg)):
        length = body.hip_z
        limbs.append(Limb(name, "cylinder", (body.leg_radius, length),
                          base @ _swing(0.0, y, body.hip_z, angle, length), paint["trousers"]))
    for name, y, angle in (("arm_left", side + body.arm_radius, -arm), ("arm_right", -side - body.arm_radius, arm)):
        limbs.append(Limb(name, "cylinder", (body.arm_radius, body.arm_length),
                          base @ _swing(0.0, y, body.shoulder_z - body.arm_radius, angle, body.arm_length),
                          paint["shirt"]))
    return limbs


def figures(people: Iterable[Mapping], phases: Mapping[int, float], seed: int = 0) -> dict[int, list[Limb]]:
    """Person id -> limbs, for everyone in ``people`` (phase 0 for an id ``phases`` lacks)."""
    return {int(p["id"]): figure(p, phases.get(int(p["id"]), 0.0), seed) for p in people}


def _placement(x: float, y: float, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _translate(x: float, y: float, z: float) -> np.ndarray:
    out = np.eye(4)
    out[:3, 3] = (x, y, z)
    return out


def _swing(x: float, y: float, z: float, angle: float, length: float) -> np.ndarray:
    """A limb hanging from a joint at (x, y, z), swung forward by ``angle`` about the lateral (y) axis: the
    cylinder's centre half its length below the joint along the swung axis."""
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, 0.0, s, 0.0], [0.0, 1.0, 0.0, 0.0], [-s, 0.0, c, 0.0], [0.0, 0.0, 0.0, 1.0]])
    # rotating -z (down) by +angle about y gives (-sin, 0, -cos): swing forward is +x, so use -angle's sine
    return _translate(x, y, z) @ rot.T @ _translate(0.0, 0.0, -length / 2)
