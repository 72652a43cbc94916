"""Algorithms over (Model, Data): plain functions, as in Pinocchio, so the model stays a value and each caller
owns its workspace.

q, qd, qdd and tau are vectors in the model's q order (:attr:`Model.joint_names`); revolute and continuous
joints in rad, prismatic in m. The base is fixed: the root part's base body frame is the world frame.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .data import Data
from .model import Connection, Model
from .spatial import SE3, Inertia, force_cross, motion_cross

STANDARD_GRAVITY = (0.0, 0.0, -9.80665)  # m/s^2, world frame

Vector = Sequence[float] | np.ndarray


def _vector(model: Model, values: Vector | None, what: str) -> np.ndarray:
    if values is None:
        return np.zeros(model.nq)
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.shape != (model.nq,):
        raise ValueError(f"{what} has {arr.size} values; the model has nq = {model.nq} "
                         f"({', '.join(model.joint_names)})")
    return arr


def _joint_value(model: Model, link: int, q: np.ndarray) -> float:
    joint = model.joints[model.links[link].joint]
    return float(q[joint.idx_q]) if joint.idx_q is not None else 0.0


def forward_kinematics(model: Model, data: Data, q: Vector) -> list[SE3]:
    """Place every link in the world at configuration ``q``; fills ``data.q``, ``data.liMi``, ``data.oMi``."""
    data.q = _vector(model, q, "q").copy()
    for i, link in enumerate(model.links):
        if link.parent < 0:
            data.liMi[i] = data.oMi[i] = SE3.identity()
            continue
        data.liMi[i] = model.joints[link.joint].transform(_joint_value(model, i, data.q))
        data.oMi[i] = data.oMi[link.parent] * data.liMi[i]
    return data.oMi


def total_mass(model: Model) -> float:
    """The robot's mass (kg): the sum of every part's bodies."""
    return float(sum(link.inertia.mass for link in model.links))


def link_inertias_world(model: Model, data: Data) -> list[Inertia]:
    """Each link's inertial data in the world frame, at the configuration of the last forward_kinematics."""
    return [link.inertia.transformed(data.oMi[i]) for i, link in enumerate(model.links)]


def composite_inertia(model: Model, data: Data, q: Vector | None = None) -> Inertia:
    """Whole-robot mass, CoM and inertia about that CoM, in world axes (``q`` None: reuse the last
    forward_kinematics). Fills ``data.com`` and ``data.Ig``."""
    if q is not None:
        forward_kinematics(model, data, q)
    total = Inertia.zero()
    for inertia in link_inertias_world(model, data):
        total = total + inertia
    data.Ig, data.com = total, np.array(total.com)
    return total


def center_of_mass(model: Model, data: Data, q: Vector | None = None) -> np.ndarray:
    """Whole-robot CoM in the world frame (m); see :func:`composite_inertia`."""
    return np.array(composite_inertia(model, data, q).com)


def rnea(model: Model, data: Data, q: Vector, qd: Vector, qdd: Vector,
         gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """Inverse dynamics (recursive Newton-Euler, fixed base): the joint efforts that produce ``qdd`` at ``q``,
    ``qd`` under ``gravity`` (world frame, m/s^2). Rigid bodies only: joint damping and friction are not
    included. Fills ``data.v``, ``data.a``, ``data.f``, ``data.tau``."""
    forward_kinematics(model, data, q)
    data.qd, data.qdd = _vector(model, qd, "qd").copy(), _vector(model, qdd, "qdd").copy()
    base_acc = np.concatenate((-np.asarray(gravity, dtype=float), np.zeros(3)))  # gravity as base acceleration
    for i in range(len(model.links)):
        _forward_pass(model, data, i, base_acc)
    data.tau = np.zeros(model.nq)
    for i in reversed(range(len(model.links))):
        _backward_pass(model, data, i)
    return data.tau.copy()


def _forward_pass(model: Model, data: Data, i: int, base_acc: np.ndarray) -> None:
    link = model.links[i]
    if link.parent < 0:
        data.v[i], data.a[i] = 0.0, base_acc
    else:
        joint = model.joints[link.joint]
        s = joint.motion_subspace
        qd = data.qd[joint.idx_q] if joint.idx_q is not None else 0.0
        qdd = data.qdd[joint.idx_q] if joint.idx_q is not None else 0.0
        data.v[i] = data.liMi[i].act_inv_motion(data.v[link.parent]) + s * qd
        data.a[i] = data.liMi[i].act_inv_motion(data.a[link.parent]) + s * qdd + motion_cross(data.v[i], s * qd)
    inertia = link.inertia
    data.f[i] = inertia.momentum(data.a[i]) + force_cross(data.v[i], inertia.momentum(data.v[i]))


def _backward_pass(model: Model, data: Data, i: int) -> None:
    link = model.links[i]
    if link.parent < 0:
        return
    joint = model.joints[link.joint]
    if joint.idx_q is not None:
        data.tau[joint.idx_q] = float(joint.motion_subspace @ data.f[i])
    data.f[link.parent] += data.liMi[i].act_force(data.f[i])


def gravity_torques(model: Model, data: Data, q: Vector, gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """The efforts that hold the robot still at ``q`` (the feed-forward gravity term)."""
    return rnea(model, data, q, None, None, gravity)


def nonlinear_effects(model: Model, data: Data, q: Vector, qd: Vector,
                      gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """b(q, qd): Coriolis, centrifugal and gravity efforts (inverse dynamics with qdd = 0)."""
    return rnea(model, data, q, qd, None, gravity)


def mass_matrix(model: Model, data: Data, q: Vector) -> np.ndarray:
    """H(q), column by column from inverse dynamics with unit accelerations, no velocity, no gravity -- the
    method of reference 002's virtual world manager."""
    h = np.zeros((model.nq, model.nq))
    for k in range(model.nq):
        unit = np.zeros(model.nq)
        unit[k] = 1.0
        h[:, k] = rnea(model, data, q, None, unit, (0.0, 0.0, 0.0))
    return h


def forward_dynamics(model: Model, data: Data, q: Vector, qd: Vector, tau: Vector,
                     gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """qdd = H(q)^-1 (tau - b(q, qd)), as reference 002 computes it before integrating."""
    h = mass_matrix(model, data, q)
    b = nonlinear_effects(model, data, q, qd, gravity)
    return np.linalg.solve(h, _vector(model, tau, "tau") - b)


def part_placements(model: Model, data: Data) -> dict[int, SE3]:
    """Each part's frame (its base body) in the world, by bus ID, after forward_kinematics."""
    return {part.bus_id: data.oMi[part.base_link] for part in model.parts}


def connection_transforms(model: Model, data: Data) -> list[tuple[Connection, SE3]]:
    """For every connection, the child part's frame in the parent part's frame at the current configuration
    (equal to ``Connection.transform`` when the port sits on the parent's base body)."""
    out = []
    for connection in model.connections:
        parent_base = model.part(connection.parent_id).base_link
        out.append((connection, data.oMi[parent_base].inverse() * data.oMi[connection.child_link]))
    return out
