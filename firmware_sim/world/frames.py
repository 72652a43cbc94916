"""Rigid transforms as pybullet writes them: a frame is ``(xyz, quaternion xyzw)``, the pose of a child frame in
its parent frame, so ``compose(a, b)`` places ``b`` (given in ``a``) in the frame ``a`` is given in.

Rotations come from pybullet's own conversions (``getQuaternionFromEuler``, ``getMatrixFromQuaternion``: URDF
roll-pitch-yaw, double precision). Composition and inversion are done here in double precision rather than with
pybullet's ``multiplyTransforms`` / ``invertTransform``: those go through the client library's single-precision
math (pybullet 3.2.7 returns 0.4794255495071411 for sin(0.5), float32, where the double is 0.479425538604203),
which would put ~1e-7 errors into every mount transform of a robot whose physics runs in double.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pybullet as p

from hil.devices.descriptor import Pose

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]
Frame = tuple[Vec3, Quat]

IDENTITY: Frame = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))


def frame_of(pose: Pose) -> Frame:
    """A descriptor pose (xyz + URDF rpy) as a pybullet frame."""
    return tuple(float(v) for v in pose.xyz), tuple(p.getQuaternionFromEuler(pose.rpy))


def rotation_matrix(quat: Sequence[float]) -> np.ndarray:
    return np.array(p.getMatrixFromQuaternion(quat)).reshape(3, 3)


def quat_multiply(a: Sequence[float], b: Sequence[float]) -> Quat:
    """Hamilton product of two xyzw quaternions: the rotation ``b`` followed, in ``a``'s frame, by ``a``."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def compose(a: Frame, b: Frame) -> Frame:
    """Frame ``b`` (given in frame ``a``) expressed where ``a`` is given."""
    t = np.asarray(a[0], dtype=float) + rotation_matrix(a[1]) @ np.asarray(b[0], dtype=float)
    return tuple(float(v) for v in t), quat_multiply(a[1], b[1])


def inverse(a: Frame) -> Frame:
    """The frame in which ``a``'s parent sits, seen from ``a``."""
    x, y, z, w = a[1]
    t = -(rotation_matrix(a[1]).T @ np.asarray(a[0], dtype=float))
    return tuple(float(v) for v in t), (-x, -y, -z, w)


def quaternion_from_matrix(rot: np.ndarray) -> Quat:
    """xyzw quaternion of a proper rotation matrix (Shepperd's method: divides by the largest component, so
    stable for every rotation). pybullet has no matrix-to-quaternion helper."""
    m = np.asarray(rot, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    candidates = (trace, m[0, 0], m[1, 1], m[2, 2])
    k = int(np.argmax(candidates))
    if k == 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s)
    elif k == 1:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif k == 2:
        s = 2.0 * np.sqrt(1.0 - m[0, 0] + m[1, 1] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * np.sqrt(1.0 - m[0, 0] - m[1, 1] + m[2, 2])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s)
    return tuple(float(v) for v in q)


def principal_axes(inertia: Sequence[Sequence[float]]) -> tuple[Vec3, Quat]:
    """(principal moments, orientation of the principal axes in the body frame) of an inertia tensor, so that
    ``inertia = R diag(moments) R^T``. pybullet takes only a diagonal inertia in the link's inertial frame.

    A tensor that is already diagonal keeps its axes (identity, moments exact); otherwise ``numpy.linalg.eigh``
    gives the axes, turned into a proper rotation if it returned a reflection."""
    tensor = np.asarray(inertia, dtype=float)
    if not np.any(tensor - np.diag(np.diag(tensor))):
        return tuple(float(v) for v in np.diag(tensor)), IDENTITY[1]
    moments, axes = np.linalg.eigh(tensor)
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    return tuple(float(v) for v in moments), quaternion_from_matrix(axes)
