"""Where every ray of the ring should have met the rig: its range and incidence angle, from the logged pose.

The ray pattern is the ring firmware's own (firmware_sim.sensors.RangeRingModel: the axis ray and the cone's
rays of each sensor, in the ring frame), built from the descriptor params the log carries, so the fit judges
the same rays the part casts. A face is a vertical plane through a floor segment; a ray meets the nearest face
it crosses within the segment's ends, or the floor (the plane z = 0 of the base frame, which stands on it) if
that is nearer: a cone's lower rays reach the floor within the ring's range (the catalog ring's, 4 degrees down
from 0.215 m, at 3.1 m), and there they hit at a grazing incidence and nearly always drop out, hiding a farther
wall, as the firmware's ray casts do.
"""
from __future__ import annotations

import math

import numpy as np

from .rig import Rig


def ray_pattern(sensor_params: dict, sensor_name: str = "ring") -> tuple[np.ndarray, np.ndarray, int]:
    """(origins, directions) of every ray in the ring frame, sensor-major, and rays per sensor."""
    from hil.devices.descriptor.schema import Sensor
    from hil.firmware_sim.sensors import RangeRingModel

    model = RangeRingModel(Sensor(sensor_name, "range_ring", "ring", dict(sensor_params)), seed=0)
    return model.origins_local, model.directions_local, model.rays_per_sensor


def _yaw_matrix(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def expected_rays(rig: Rig, odometry: tuple[float, float, float], ring_in_base: dict,
                  origins: np.ndarray, dirs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(range m, incidence deg, what it meets) of every ray at this odometry pose (inf / nan where it meets no
    face); what it meets is the index of the face in ``rig.faces``, ``len(rig.faces)`` for the floor, -1 for
    nothing."""
    sx, sy, syaw = rig.start
    ox, oy, oyaw = odometry
    c, s = math.cos(syaw), math.sin(syaw)
    base_xy = np.array([sx + c * ox - s * oy, sy + s * ox + c * oy, 0.0])
    r_base = _yaw_matrix(syaw + oyaw)
    r_ring = np.asarray(ring_in_base["rotation"], dtype=float)
    t_ring = np.asarray(ring_in_base["translation"], dtype=float)
    world_o = (origins @ r_ring.T + t_ring) @ r_base.T + base_xy
    world_d = dirs @ r_ring.T @ r_base.T
    best = np.full(len(origins), np.inf)
    incidence = np.full(len(origins), np.nan)
    met = np.full(len(origins), -1)
    for k, face in enumerate(rig.faces):
        a, b = np.array(face.a), np.array(face.b)
        along = b - a
        normal = np.array([-along[1], along[0]]) / np.linalg.norm(along)
        denom = world_d[:, :2] @ normal
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((a - world_o[:, :2]) @ normal) / denom
            hit = world_o[:, :2] + t[:, None] * world_d[:, :2]
            u = ((hit - a) @ along) / (along @ along)
        ok = (t > 0) & (u >= 0) & (u <= 1) & np.isfinite(t)
        nearer = ok & (t < best)
        best = np.where(nearer, t, best)
        cos_inc = np.clip(np.abs(denom), 0.0, 1.0)
        incidence = np.where(nearer, np.degrees(np.arccos(cos_inc)), incidence)
        met = np.where(nearer, k, met)
    down = world_d[:, 2] < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where(down & (world_o[:, 2] > 0), world_o[:, 2] / -world_d[:, 2], np.inf)
    floor = t_floor < best
    best = np.where(floor, t_floor, best)
    incidence = np.where(floor, np.degrees(np.arccos(np.clip(np.abs(world_d[:, 2]), 0.0, 1.0))), incidence)
    return best, incidence, np.where(floor, len(rig.faces), met)
