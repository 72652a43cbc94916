"""Frames and shapes the sensor models need: where a pybullet link's own frame is, and how far a point is from
a descriptor collision shape.

Frames (verified in tests/test_sensors.py on bodies made with ``createMultiBody``): pybullet reports a base's
pose as its *inertial* frame (``getBasePositionAndOrientation``), while its collision shapes are placed in the
base's own (link) frame, the one ``basePosition`` set; for a child link ``getLinkState(...)[4:6]``
(``worldLinkFramePosition/Orientation``) is the link frame its collision shapes are placed in, and index 0/1
is again the inertial frame. :func:`link_frame_pose` returns the link frame in both cases, which is the
descriptor body's frame when the body was built with its collisions placed as the descriptor places them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pybullet as pb

from hil.devices.descriptor.schema import Shape

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]


def quat_matrix(quat: Sequence[float]) -> np.ndarray:
    """3x3 rotation matrix of an (x, y, z, w) quaternion (pybullet's order), normalised first."""
    x, y, z, w = (float(v) for v in quat)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if n == 0.0:
        raise ValueError("zero quaternion")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def rpy_matrix(rpy: Sequence[float]) -> np.ndarray:
    """Rotation matrix of URDF roll-pitch-yaw (fixed axes x, then y, then z): Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def link_frame_pose(client: int, body_id: int, link_index: int) -> tuple[Vec3, Quat]:
    """World pose of a pybullet link's own frame (not its inertial frame); ``link_index`` -1 is the base.

    For the base pybullet only reports the inertial frame, so the local inertial offset from
    ``getDynamicsInfo`` is taken back out: link = inertial * inverse(local inertial).
    """
    if link_index >= 0:
        state = pb.getLinkState(body_id, link_index, computeForwardKinematics=True, physicsClientId=client)
        return tuple(state[4]), tuple(state[5])
    pos, orn = pb.getBasePositionAndOrientation(body_id, physicsClientId=client)
    info = pb.getDynamicsInfo(body_id, -1, physicsClientId=client)
    inv_pos, inv_orn = pb.invertTransform(info[3], info[4])
    world_pos, world_orn = pb.multiplyTransforms(pos, orn, inv_pos, inv_orn)
    return tuple(world_pos), tuple(world_orn)


def to_frame(points: np.ndarray, position: Sequence[float], orientation: Sequence[float]) -> np.ndarray:
    """World points (n, 3) expressed in the frame at ``position``/``orientation``."""
    rot = quat_matrix(orientation)
    return (np.asarray(points, dtype=float) - np.asarray(position, dtype=float)) @ rot


def signed_distance(shape: Shape, point: np.ndarray) -> float:
    """Signed distance from a point in the body frame to a collision shape (negative inside, depth).

    Box, sphere, cylinder and capsule are exact; a mesh is approximated by the box bounding its vertices.
    """
    local = (np.asarray(point, dtype=float) - np.asarray(shape.pose.xyz, dtype=float)) @ rpy_matrix(shape.pose.rpy)
    kind, size = shape.kind, shape.size
    if kind == "box":
        return _box_sd(local, np.asarray(size, dtype=float) / 2.0)
    if kind == "sphere":
        return float(np.linalg.norm(local)) - float(size[0])
    if kind == "cylinder":
        return _cylinder_sd(local, float(size[0]), float(size[1]) / 2.0)
    if kind == "capsule":
        half = float(size[1]) / 2.0
        axis_point = np.array([0.0, 0.0, min(max(local[2], -half), half)])
        return float(np.linalg.norm(local - axis_point)) - float(size[0])
    if kind == "mesh":
        verts = np.asarray(shape.vertices, dtype=float)
        if verts.size == 0:
            raise ValueError("mesh shape without vertices")
        lo, hi = verts.min(axis=0), verts.max(axis=0)
        return _box_sd(local - (lo + hi) / 2.0, (hi - lo) / 2.0)
    raise ValueError(f"unknown shape kind {kind!r}")


def _box_sd(local: np.ndarray, half: np.ndarray) -> float:
    q = np.abs(local) - half
    outside = float(np.linalg.norm(np.maximum(q, 0.0)))
    return outside + min(float(q.max()), 0.0)


def _cylinder_sd(local: np.ndarray, radius: float, half_length: float) -> float:
    q = np.array([math.hypot(local[0], local[1]) - radius, abs(local[2]) - half_length])
    outside = float(np.linalg.norm(np.maximum(q, 0.0)))
    return outside + min(float(q.max()), 0.0)
