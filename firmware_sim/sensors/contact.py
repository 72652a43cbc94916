"""Contact sensors (bumper zones, shoulder pads, forearm skin) from pybullet's contact points.

pybullet reports contacts per link, not per collision shape of a compound link, so each contact point is
classified geometrically: its position on the sensor's link (``positionOnA``) is taken into the link frame
(see :func:`geometry.link_frame_pose`) and assigned to the collision shape of the descriptor body with the
smallest signed distance to it (negative inside; ties go to the lower index). All of the body's collision
shapes compete, not only the zones', so a touch on the torso's side is not credited to a shoulder pad.

A zone reads pressed when the normal forces of all the contact points assigned to it add up to more than
``threshold_n``: a plate resting on a switch spreads its weight over several contact points, and the switch
feels the sum. Contacts need a simulation step to exist; measure after ``stepSimulation``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pybullet as pb

from hil.devices.descriptor.schema import Sensor, Shape

from .geometry import link_frame_pose, signed_distance, to_frame
from .params import ParamReader


@dataclass(frozen=True)
class Zone:
    name: str
    bit: int
    collision: int  # index into the body's collisions


@dataclass(frozen=True)
class ContactConfig:
    """A contact sensor's params, validated."""

    name: str
    register: str
    threshold_n: float
    zones: tuple[Zone, ...]

    @classmethod
    def from_sensor(cls, sensor: Sensor) -> ContactConfig:
        """Validate a descriptor Sensor's params; a missing or ill-typed one raises ValueError naming it."""
        r = ParamReader(sensor.name, sensor.params)
        register = r.string("register")
        threshold = r.number("threshold_n", minimum=0.0)
        raw_zones = r.raw("zones")
        if not isinstance(raw_zones, (list, tuple)) or not raw_zones:
            raise r.error("zones", f"must be a non-empty list of {{name, bit, collision}}, not {raw_zones!r}")
        zones = tuple(_zone(r, i, z) for i, z in enumerate(raw_zones))
        bits = [z.bit for z in zones]
        if len(set(bits)) != len(bits):
            raise r.error("zones", f"use bit numbers more than once: {bits}")
        return cls(sensor.name, register, threshold, zones)


def _zone(r: ParamReader, index: int, value: object) -> Zone:
    if not isinstance(value, dict):
        raise r.error(f"zones[{index}]", f"must be a mapping with name, bit and collision, not {value!r}")
    name, bit, collision = value.get("name"), value.get("bit"), value.get("collision")
    if not isinstance(name, str):
        raise r.error(f"zones[{index}].name", f"must be a string, not {name!r}")
    for key, item, top in (("bit", bit, 7), ("collision", collision, None)):
        if isinstance(item, bool) or not isinstance(item, int) or item < 0 or (top is not None and item > top):
            limit = f"0..{top}" if top is not None else ">= 0"
            raise r.error(f"zones[{index}].{key}", f"must be an integer {limit}, not {item!r}")
    return Zone(name, bit, collision)


class ContactSensorModel:
    """One contact sensor of a part: which of its zones are pressed, as a bit mask."""

    def __init__(self, sensor: Sensor):
        self.config = ContactConfig.from_sensor(sensor)

    def check_collisions(self, body_collisions: Sequence[Shape]) -> None:
        """Raise ValueError if a zone names a collision shape the body does not have."""
        for zone in self.config.zones:
            if zone.collision >= len(body_collisions):
                raise ValueError(f"sensor {self.config.name!r}: zone {zone.name!r} names collision "
                                 f"{zone.collision}, the body has {len(body_collisions)}")

    def zone_forces(self, client: int, body_id: int, link_index: int, body_collisions: Sequence[Shape],
                    link_frame: tuple[Sequence[float], Sequence[float]] | None = None) -> dict[str, float]:
        """Total normal force (N) on each zone now, from pybullet's contact points on one link whose only body is
        the sensor's. ``link_frame``: the body frame's world (position, quaternion) if the caller has it (the
        world's RobotBody.link_pose); by default :func:`link_frame_pose`."""
        self.check_collisions(body_collisions)
        contacts = pb.getContactPoints(bodyA=body_id, linkIndexA=link_index, physicsClientId=client)
        if not contacts:
            return {zone.name: 0.0 for zone in self.config.zones}
        frame = link_frame if link_frame is not None else link_frame_pose(client, body_id, link_index)
        return self.forces_of(contacts, body_collisions, frame)

    def forces_of(self, contacts: Sequence, body_collisions: Sequence[Shape],
                  body_frame: tuple[Sequence[float], Sequence[float]]) -> dict[str, float]:
        """Total normal force (N) on each zone from ``contacts`` (pybullet's tuples, all on the sensor's body, e.g.
        RobotBody.body_contacts), the body's frame in the world being ``body_frame``."""
        forces = {zone.name: 0.0 for zone in self.config.zones}
        if not contacts:
            return forces
        zone_of_shape = {zone.collision: zone.name for zone in self.config.zones}
        points = to_frame(np.array([c[5] for c in contacts]), body_frame[0], body_frame[1])
        for point, contact in zip(points, contacts):
            zone = zone_of_shape.get(nearest_shape(body_collisions, point))
            if zone is not None:
                forces[zone] += float(contact[9])
        return forces

    def measure(self, client: int, body_id: int, link_index: int, body_collisions: Sequence[Shape],
                link_frame: tuple[Sequence[float], Sequence[float]] | None = None) -> int:
        """The bit mask of the zones whose total normal force exceeds the threshold (see zone_forces)."""
        return self.mask_of(self.zone_forces(client, body_id, link_index, body_collisions, link_frame))

    def mask_of(self, forces: dict[str, float]) -> int:
        """The bit mask of the zones whose total normal force (``forces``, by zone name) exceeds the threshold."""
        mask = 0
        for zone in self.config.zones:
            if forces[zone.name] > self.config.threshold_n:
                mask |= 1 << zone.bit
        return mask


def nearest_shape(shapes: Sequence[Shape], point: np.ndarray) -> int:
    """Index of the shape with the smallest signed distance to a body-frame point (lowest index on ties)."""
    distances = [signed_distance(shape, point) for shape in shapes]
    return int(np.argmin(distances))
