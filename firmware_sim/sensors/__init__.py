"""Sensor models for the part firmware: what the real part would measure in a pybullet world (the sensor-simulation
reference).

``range_ring``: the distance-sensor ring (infrared: one ray per sensor; ultrasonic: a cone of rays), with range
limits, the part's no-target code, incidence-angle dropout, occlusion, noise and invalid-reading counters.
``contact``: contact zones of a link from pybullet's contact points. ``geometry``: link frames and shape
distances. The models take a pybullet client id and poses, so they run on any scene, robot or not; their
numbers come from the descriptor's Sensor params.
"""
from __future__ import annotations

from hil.devices.descriptor.schema import Sensor

from .contact import ContactConfig, ContactSensorModel, Zone
from .geometry import link_frame_pose
from .range_ring import (
    CAUSES,
    CONE_PATTERN,
    RangeRingModel,
    RingConfig,
    RingReading,
    cast_rays,
)

MODELLED_KINDS: tuple[str, ...] = ("range_ring", "contact")

__all__ = ["CAUSES", "CONE_PATTERN", "MODELLED_KINDS", "ContactConfig", "ContactSensorModel", "RangeRingModel",
           "RingConfig", "RingReading", "Zone", "cast_rays", "link_frame_pose", "sensor_model"]


def sensor_model(sensor: Sensor, seed: int) -> RangeRingModel | ContactSensorModel | None:
    """The model for a descriptor Sensor, or None for a kind not modelled here (a camera, say).

    ``seed`` seeds the part's generator; contact sensors draw nothing and ignore it.
    """
    if sensor.kind == "range_ring":
        return RangeRingModel(sensor, seed)
    if sensor.kind == "contact":
        return ContactSensorModel(sensor)
    return None
