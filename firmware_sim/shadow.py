"""The shadow world of a mixed trial: what the robot's range ring would see of the *virtual* people.

A physical robot among virtual pedestrians needs its distance sensors to see those people as well as the real
room. The real ring already measures the real room (walls, floor, real people), so the shadow holds nothing of
it that echoes: no floor, no robot body, walls only to hide people. It holds the crowd's people, as upright
capsules placed kinematically where the crowd last said they are (there is no physics for them here: the
crowd's own state is their actual state), and casts the ring's rays from the robot's pose with the ring's own
sensor model (firmware_sim.sensors.range_ring: the same descriptor parameters, cone, dropout, noise and no-target
handling as the virtual part, with its own seeded generator). The runtime merges what it returns into the real readings
(runtime/robot/overlay.py: the nearer echo wins).

With a map (``crowd: {map: ...}``) the shadow also holds the map's walls (``World.add_map``), as occluders only:
a ray whose nearest hit is a wall has no virtual echo (``RangeRingModel.measure``'s ``occluders``), so a virtual
person behind a real wall is not seen, and the shadow never reports a wall itself (the real ring measures the
real walls, and the map need not match the room exactly).

Nothing is stepped: pybullet's ray test sees bodies where ``resetBasePositionAndOrientation`` put them, so one
``cast`` is a placement of the moved capsules plus one ``rayTestBatch`` (156 rays for the catalog ring).
The runtime imports this module lazily (runtime/robot/overlay.py), as it does the sim:// transport.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pybullet as p

from hil.devices.descriptor.schema import Sensor

from .sensors.range_ring import RangeRingModel, RingReading
from .world import Map, World
from .world.pedestrians import capsule_shapes

CAPSULE_RGBA = (0.85, 0.55, 0.3, 1.0)
UPRIGHT = (0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Person:
    """One virtual person as the crowd last reported them: centre on the floor (m, map frame), size (m)."""

    id: int
    x: float
    y: float
    radius: float = 0.25
    height: float = 1.7


class ShadowWorld:
    """Virtual people as capsules in a DIRECT pybullet world without a floor, seen by one range ring (a map's
    walls, if given, only hide them).

    ``sensor``: the ring's descriptor Sensor (kind range_ring); ``ring_in_base``: the ring body's frame in the
    robot's base frame, (translation (3,), rotation (3, 3)), as the host model's forward kinematics gives it;
    ``seed``: the shadow ring's generator (independent of the real part's, whose noise is real); ``world_map``:
    a map (firmware_sim.world.load_map) whose walls hide the people behind them and never echo, unless
    ``walls_echo`` (``crowd: {walls: echo}``): then the shadow ring reads the map's room as the twin would, beside
    the real ring, for ``hil calibrate check``.
    """

    def __init__(self, sensor: Sensor, ring_in_base: tuple[Sequence[float], Sequence[Sequence[float]]],
                 seed: int = 0, world_map: Map | None = None, walls_echo: bool = False):
        translation, rotation = ring_in_base
        self.ring_translation = np.asarray(translation, dtype=float).reshape(3)
        self.ring_rotation = np.asarray(rotation, dtype=float).reshape(3, 3)
        self.model = RangeRingModel(sensor, seed)  # validates the params; ValueError names the sensor and param
        self.world = World()
        p.removeBody(self.world.floor_id, physicsClientId=self.world.client)  # the real ring sees the real floor
        self.client = self.world.client
        self.walls: frozenset[int] = frozenset(self.world.add_map(world_map) if world_map is not None else ())
        self.occluders = frozenset() if walls_echo else self.walls  # echo: the walls are read like the people
        self.bodies: dict[int, int] = {}  # person id -> pybullet body
        self._sizes: dict[int, tuple[float, float]] = {}
        self._shapes: dict[tuple[float, float], tuple[int, int]] = {}
        self.casts = 0

    # --- people ----------------------------------------------------------------------------------------------
    def set_people(self, people: Iterable[Person]) -> None:
        """Make the capsules match the crowd's latest state: new ids appear, missing ones go, everyone moves."""
        people = list(people)
        for person in people:  # all checked before anything changes: a bad entry leaves the scene as it was
            if not (person.radius > 0 and person.height > 0 and math.isfinite(person.radius)
                    and math.isfinite(person.height) and math.isfinite(person.x) and math.isfinite(person.y)):
                raise ValueError(f"person {person.id}: radius and height must be finite and > 0, x and y finite; "
                                 f"not {person}")
        wanted = {person.id for person in people}
        for pid in [pid for pid in self.bodies if pid not in wanted]:
            p.removeBody(self.bodies.pop(pid), physicsClientId=self.client)
            self._sizes.pop(pid, None)
        for person in people:
            size = (float(person.radius), float(person.height))
            if person.id in self.bodies and self._sizes[person.id] != size:  # a person who changed size: rebuild
                p.removeBody(self.bodies.pop(person.id), physicsClientId=self.client)
            position = (float(person.x), float(person.y), size[1] / 2)
            if person.id not in self.bodies:
                shape, visual = self._shape(*size)
                self.bodies[person.id] = p.createMultiBody(0.0, shape, visual, basePosition=position,
                                                           physicsClientId=self.client)
                self._sizes[person.id] = size
            else:
                p.resetBasePositionAndOrientation(self.bodies[person.id], position, UPRIGHT,
                                                  physicsClientId=self.client)

    def _shape(self, radius: float, height: float) -> tuple[int, int]:
        """One collision/visual shape pair per body size (a crowd has a handful of sizes)."""
        key = (radius, height)
        if key not in self._shapes:
            self._shapes[key] = capsule_shapes(self.client, radius, height, CAPSULE_RGBA)
        return self._shapes[key]

    # --- the ring --------------------------------------------------------------------------------------------
    def ring_pose(self, x: float, y: float, yaw: float) -> tuple[np.ndarray, np.ndarray]:
        """The ring frame in the map for the robot's base at (x, y, yaw): (position (3,), rotation (3, 3))."""
        c, s = math.cos(yaw), math.sin(yaw)
        base = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return base @ self.ring_translation + np.array([x, y, 0.0]), base @ self.ring_rotation

    def sensor_origins(self, x: float, y: float, yaw: float) -> np.ndarray:
        """Where each sensor's rays start in the map (n_sensors, 3), for the robot's base at (x, y, yaw)."""
        position, rotation = self.ring_pose(x, y, yaw)
        per = self.model.rays_per_sensor
        return self.model.origins_local[::per] @ rotation.T + position

    def cast(self, x: float, y: float, yaw: float) -> RingReading:
        """Measure the ring once with the robot's base at (x, y, yaw) in the map: ``range_m`` per sensor (None:
        no echo from any virtual person, or only walls) and the cause of each invalid reading."""
        position, rotation = self.ring_pose(x, y, yaw)
        self.casts += 1
        return self.model.measure(self.client, position, matrix_quat(rotation), occluders=self.occluders,
                                  surfaces=self.world.surfaces)  # the map walls' surfaces (people: default)

    def close(self) -> None:
        self.world.close()

    def __enter__(self) -> ShadowWorld:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def matrix_quat(rot: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, z, w) quaternion of a rotation matrix (Shepperd's method: stable for every rotation)."""
    m = np.asarray(rot, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4)
    elif m[0, 0] >= m[1, 1] and m[0, 0] >= m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif m[1, 1] >= m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s)
    return tuple(float(v) for v in q)  # type: ignore[return-value]
