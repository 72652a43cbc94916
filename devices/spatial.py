"""Rigid-body math with numpy: SE3 placements, spatial inertias, motion and force 6-vectors (shared by the host
model, runtime.model, and the world, firmware_sim.world, which combines fixed bodies with the same Inertia sums).

Conventions (those of Pinocchio, so the algorithms read like Featherstone's book):
- an :class:`SE3` ``M`` placing frame B in frame A maps B coordinates to A coordinates: ``p_A = R p_B + t``;
- a spatial motion vector is ``[linear, angular]`` (6,), a spatial force is ``[force, moment]`` (6,), both taken at
  the origin of the frame they are expressed in;
- roll-pitch-yaw as URDF: fixed axes, ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

Every value object is immutable (frozen dataclass, read-only arrays): a Model built from them cannot be changed
behind the back of the algorithms that cached something about it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

ArrayLike = Sequence[float] | np.ndarray


def frozen_array(values: ArrayLike, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A read-only float copy of ``values`` (optionally checked against ``shape``)."""
    arr = np.array(values, dtype=float)
    if shape is not None and arr.shape != shape:
        raise ValueError(f"expected shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


def skew(v: ArrayLike) -> np.ndarray:
    """The matrix of ``v x``: ``skew(v) @ w == cross(v, w)``."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def rpy_to_matrix(rpy: ArrayLike) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, then Y, then Z) to a rotation matrix."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_to_rpy(rot: np.ndarray) -> tuple[float, float, float]:
    """Inverse of :func:`rpy_to_matrix`; at gimbal lock (pitch = +-pi/2) yaw is set to 0 and roll absorbs it."""
    cp = math.hypot(rot[0, 0], rot[1, 0])
    pitch = math.atan2(-rot[2, 0], cp)
    if cp > 1e-9:
        return math.atan2(rot[2, 1], rot[2, 2]), pitch, math.atan2(rot[1, 0], rot[0, 0])
    # R = Ry(+-pi/2) Rx(roll): row 0 is (0, +-sin(roll), +-cos(roll)), row 1 is (0, cos(roll), -sin(roll))
    return math.atan2(-rot[1, 2], rot[1, 1]), pitch, 0.0


def axis_angle_matrix(axis: ArrayLike, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit vector ``axis`` (Rodrigues)."""
    k = skew(axis)
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


@dataclass(frozen=True, eq=False)
class SE3:
    """A rigid placement: rotation (3x3) and translation (3,), both read-only."""

    rotation: np.ndarray
    translation: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "rotation", frozen_array(self.rotation, (3, 3)))
        object.__setattr__(self, "translation", frozen_array(self.translation, (3,)))

    @classmethod
    def identity(cls) -> SE3:
        return cls(np.eye(3), np.zeros(3))

    @classmethod
    def from_pose(cls, xyz: ArrayLike, rpy: ArrayLike) -> SE3:
        """From URDF-style ``xyz`` and ``rpy`` (what descriptors store)."""
        return cls(rpy_to_matrix(rpy), xyz)

    @classmethod
    def from_homogeneous(cls, matrix: np.ndarray) -> SE3:
        return cls(matrix[:3, :3], matrix[:3, 3])

    @property
    def homogeneous(self) -> np.ndarray:
        out = np.eye(4)
        out[:3, :3] = self.rotation
        out[:3, 3] = self.translation
        return out

    @property
    def rpy(self) -> tuple[float, float, float]:
        return matrix_to_rpy(self.rotation)

    def __mul__(self, other: SE3) -> SE3:
        """Composition: ``(aMb * bMc) = aMc``."""
        return SE3(self.rotation @ other.rotation, self.rotation @ other.translation + self.translation)

    def inverse(self) -> SE3:
        rt = self.rotation.T
        return SE3(rt, -(rt @ self.translation))

    def act_point(self, point: ArrayLike) -> np.ndarray:
        """A point given in the placed frame, in the reference frame."""
        return self.rotation @ np.asarray(point, dtype=float) + self.translation

    def act_motion(self, motion: np.ndarray) -> np.ndarray:
        """A motion vector expressed in the placed frame, expressed in the reference frame."""
        w = self.rotation @ motion[3:]
        return np.concatenate((self.rotation @ motion[:3] + np.cross(self.translation, w), w))

    def act_inv_motion(self, motion: np.ndarray) -> np.ndarray:
        """A motion vector expressed in the reference frame, expressed in the placed frame."""
        w = motion[3:]
        return np.concatenate((self.rotation.T @ (motion[:3] - np.cross(self.translation, w)), self.rotation.T @ w))

    def act_force(self, force: np.ndarray) -> np.ndarray:
        """A force vector expressed in the placed frame, expressed in the reference frame."""
        f = self.rotation @ force[:3]
        return np.concatenate((f, self.rotation @ force[3:] + np.cross(self.translation, f)))

    def isclose(self, other: SE3, atol: float = 1e-9) -> bool:
        return bool(np.allclose(self.rotation, other.rotation, atol=atol)
                    and np.allclose(self.translation, other.translation, atol=atol))

    def __repr__(self) -> str:
        xyz = ", ".join(f"{v:.6g}" for v in self.translation)
        rpy = ", ".join(f"{v:.6g}" for v in self.rpy)
        return f"SE3(xyz=[{xyz}], rpy=[{rpy}])"


def motion_cross(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``v x m`` for two motion vectors (how a motion changes seen from a moving frame)."""
    lin, ang = v[:3], v[3:]
    return np.concatenate((np.cross(ang, m[:3]) + np.cross(lin, m[3:]), np.cross(ang, m[3:])))


def force_cross(v: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``v x* f``: the dual cross product, motion ``v`` acting on force ``f``."""
    lin, ang = v[:3], v[3:]
    return np.concatenate((np.cross(ang, f[:3]), np.cross(ang, f[3:]) + np.cross(lin, f[:3])))


@dataclass(frozen=True, eq=False)
class Inertia:
    """A rigid body's inertial data in some frame: mass, centre of mass, and the 3x3 inertia about the CoM
    (axes those of the frame) -- the quantities the modular-robot reference stores per part body."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass", float(self.mass))
        object.__setattr__(self, "com", frozen_array(self.com, (3,)))
        object.__setattr__(self, "inertia", frozen_array(self.inertia, (3, 3)))

    @classmethod
    def zero(cls) -> Inertia:
        return cls(0.0, np.zeros(3), np.zeros((3, 3)))

    def matrix(self) -> np.ndarray:
        """The 6x6 spatial inertia at the frame origin (motion ``[v, w]`` -> momentum ``[h, k]``)."""
        c = skew(self.com)
        out = np.zeros((6, 6))
        out[:3, :3] = self.mass * np.eye(3)
        out[:3, 3:] = -self.mass * c
        out[3:, :3] = self.mass * c
        out[3:, 3:] = self.inertia - self.mass * (c @ c)
        return out

    def momentum(self, motion: np.ndarray) -> np.ndarray:
        """``I v``: the spatial momentum of the body moving with ``motion`` (same frame)."""
        lin = self.mass * (motion[:3] - np.cross(self.com, motion[3:]))
        return np.concatenate((lin, self.inertia @ motion[3:] + np.cross(self.com, lin)))

    def transformed(self, placement: SE3) -> Inertia:
        """The same body seen from the frame in which ``placement`` places this one."""
        rot = placement.rotation
        return Inertia(self.mass, placement.act_point(self.com), rot @ self.inertia @ rot.T)

    def inertia_about(self, point: ArrayLike) -> np.ndarray:
        """The 3x3 inertia about ``point`` (parallel-axis theorem)."""
        d = self.com - np.asarray(point, dtype=float)
        return self.inertia + self.mass * (float(d @ d) * np.eye(3) - np.outer(d, d))

    def __add__(self, other: Inertia) -> Inertia:
        """Two bodies rigidly joined (both given in the same frame)."""
        mass = self.mass + other.mass
        if mass <= 0.0:
            return Inertia.zero()
        com = (self.mass * self.com + other.mass * other.com) / mass
        return Inertia(mass, com, self.inertia_about(com) + other.inertia_about(com))
