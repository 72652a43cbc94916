"""The reference implementation: the algorithms written the way the book and the modular-robot reference state them, one
link at a time, with SE3 and Inertia objects. Kept for cross-checks (tests/test_dynamics.py checks the fast
algorithms against it, and both against Pinocchio and pybullet), not for the control loop: on the commbot
(59 links) its RNEA takes tens of milliseconds, the mass matrix and forward dynamics around a second.

- :func:`rnea`: recursive Newton-Euler over every link (fixed joints included), each link's velocity,
  acceleration and force in its own frame;
- :func:`mass_matrix`: H(q) column by column from inverse dynamics with unit accelerations, no velocity and no
  gravity, and :func:`forward_dynamics`: qdd = H(q)^-1 (tau - b(q, qd)) -- the method of the modular-robot reference's
  virtual world manager.

They work on a :class:`ReferenceData` (lists of SE3, per-link spatial vectors in link frames), not on the fast
:class:`runtime.model.Data`. q, qd, qdd and tau are vectors in the model's q order; the base is fixed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .algorithms import STANDARD_GRAVITY, Vector
from .algorithms import joint_vector as _vector
from .model import Model
from .spatial import SE3, Inertia, force_cross, motion_cross


@dataclass(eq=False)
class ReferenceData:
    """Workspace of the reference algorithms (arrays indexed by link, vectors by q index)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    liMi: list[SE3]  # each link's frame in its parent link's frame, at q
    oMi: list[SE3]  # each link's frame in the world frame (the root part's base body), at q
    v: np.ndarray  # (links, 6) spatial velocity of each link, in its own frame
    a: np.ndarray  # (links, 6) spatial acceleration (gravity included as a base acceleration), own frame
    f: np.ndarray  # (links, 6) spatial force transmitted by each link's joint, own frame
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    Ig: Inertia | None = None

    @classmethod
    def for_model(cls, model: Model) -> ReferenceData:
        n, nq = len(model.links), model.nq
        identity = [SE3.identity()] * n
        return cls(q=np.zeros(nq), qd=np.zeros(nq), qdd=np.zeros(nq), tau=np.zeros(nq), liMi=list(identity),
                   oMi=list(identity), v=np.zeros((n, 6)), a=np.zeros((n, 6)), f=np.zeros((n, 6)))


def _joint_value(model: Model, link: int, q: np.ndarray) -> float:
    joint = model.joints[model.links[link].joint]
    return float(q[joint.idx_q]) if joint.idx_q is not None else 0.0


def forward_kinematics(model: Model, data: ReferenceData, q: Vector) -> list[SE3]:
    """Place every link in the world at configuration ``q``; fills ``data.q``, ``data.liMi``, ``data.oMi``."""
    data.q = _vector(model, q, "q").copy()
    for i, link in enumerate(model.links):
        if link.parent < 0:
            data.liMi[i] = data.oMi[i] = SE3.identity()
            continue
        data.liMi[i] = model.joints[link.joint].transform(_joint_value(model, i, data.q))
        data.oMi[i] = data.oMi[link.parent] * data.liMi[i]
    return data.oMi


def link_inertias_world(model: Model, data: ReferenceData) -> list[Inertia]:
    """Each link's inertial data in the world frame, at the configuration of the last forward_kinematics."""
    return [link.inertia.transformed(data.oMi[i]) for i, link in enumerate(model.links)]


def composite_inertia(model: Model, data: ReferenceData, q: Vector | None = None) -> Inertia:
    """Whole-robot mass, CoM and inertia about that CoM, in world axes (``q`` None: reuse the last
    forward_kinematics). Fills ``data.com`` and ``data.Ig``."""
    if q is not None:
        forward_kinematics(model, data, q)
    total = Inertia.zero()
    for inertia in link_inertias_world(model, data):
        total = total + inertia
    data.Ig, data.com = total, np.array(total.com)
    return total


def center_of_mass(model: Model, data: ReferenceData, q: Vector | None = None) -> np.ndarray:
    """Whole-robot CoM in the world frame (m); see :func:`composite_inertia`."""
    return np.array(composite_inertia(model, data, q).com)


def rnea(model: Model, data: ReferenceData, q: Vector, qd: Vector, qdd: Vector,
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


def _forward_pass(model: Model, data: ReferenceData, i: int, base_acc: np.ndarray) -> None:
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


def _backward_pass(model: Model, data: ReferenceData, i: int) -> None:
    link = model.links[i]
    if link.parent < 0:
        return
    joint = model.joints[link.joint]
    if joint.idx_q is not None:
        data.tau[joint.idx_q] = float(joint.motion_subspace @ data.f[i])
    data.f[link.parent] += data.liMi[i].act_force(data.f[i])


def gravity_torques(model: Model, data: ReferenceData, q: Vector, gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """The efforts that hold the robot still at ``q`` (the feed-forward gravity term)."""
    return rnea(model, data, q, None, None, gravity)


def nonlinear_effects(model: Model, data: ReferenceData, q: Vector, qd: Vector,
                      gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """b(q, qd): Coriolis, centrifugal and gravity efforts (inverse dynamics with qdd = 0)."""
    return rnea(model, data, q, qd, None, gravity)


def mass_matrix(model: Model, data: ReferenceData, q: Vector) -> np.ndarray:
    """H(q), column by column from inverse dynamics with unit accelerations, no velocity, no gravity -- the
    method of the modular-robot reference's virtual world manager."""
    h = np.zeros((model.nq, model.nq))
    for k in range(model.nq):
        unit = np.zeros(model.nq)
        unit[k] = 1.0
        h[:, k] = rnea(model, data, q, None, unit, (0.0, 0.0, 0.0))
    return h


def forward_dynamics(model: Model, data: ReferenceData, q: Vector, qd: Vector, tau: Vector,
                     gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """qdd = H(q)^-1 (tau - b(q, qd)), as the modular-robot reference computes it before integrating."""
    h = mass_matrix(model, data, q)
    b = nonlinear_effects(model, data, q, qd, gravity)
    return np.linalg.solve(h, _vector(model, tau, "tau") - b)
