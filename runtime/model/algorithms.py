"""Algorithms over (Model, Data): plain functions, as in Pinocchio, so the model stays a value and each caller
owns its workspace. Fast enough for the control loop: on the commbot (19 joints, 59 links) each is a fraction of
a millisecond in numpy (bench/dynamics.py measures them against Pinocchio).

How. Every algorithm runs on the model's tree of moving joints (``Model.tree``, runtime.model.tree): rigid
subtrees merged into composite bodies at build time, so the 40 fixed joints of the commbot cost nothing. Spatial
quantities are expressed in world coordinates at the world origin (Featherstone's "base coordinates", Pinocchio's
WORLD frame): there no quantity needs carrying from a body's frame to its parent's, so

- a body's velocity is the sum of its ancestors' joint velocities, and the force a joint transmits the sum of its
  descendants' forces: one product with the tree's 0/1 ancestor matrix each, for all bodies at once (RNEA);
- the composite inertias of CRBA are the same product applied to the bodies' inertias;
- only the placements and ABA's articulated inertias (not linear sums) need a recursion, which runs one batched
  numpy operation per depth of the tree (5 on the commbot) instead of one Python step per link.

q, qd, qdd and tau are vectors in the model's q order (:attr:`Model.joint_names`); revolute and continuous
joints in rad, prismatic in m. The base is fixed: the root part's base body frame is the world frame; gravity
enters as an acceleration of the base. Joint damping and friction are not included (rigid bodies only).

runtime.model.reference keeps the algorithms as the book and the modular-robot reference state them (per link, the mass
matrix from RNEA columns, forward dynamics as H^-1 (tau - b)); the tests check these against it, Pinocchio and pybullet.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .data import Data, Placements
from .model import Connection, Model
from .spatial import SE3, Inertia, skew
from .tree import KinematicTree

STANDARD_GRAVITY = (0.0, 0.0, -9.80665)  # m/s^2, world frame

Vector = Sequence[float] | np.ndarray

# reference frames of frame_jacobian, as Pinocchio names them
WORLD = "world"  # twist at the world origin, world axes
LOCAL_WORLD_ALIGNED = "local_world_aligned"  # twist at the frame's origin, world axes
LOCAL = "local"  # twist at the frame's origin, frame axes
REFERENCE_FRAMES = (WORLD, LOCAL_WORLD_ALIGNED, LOCAL)

_EYE3 = np.eye(3)
_BOTTOM_ROW = np.array([0.0, 0.0, 0.0, 1.0])
_P1, _P2 = np.array([1, 2, 0]), np.array([2, 0, 1])  # a x b = a[P1] b[P2] - a[P2] b[P1]
# v x m = crm(v) m for motion vectors v = [lin, ang]: crm = [[ang x, lin x], [0, ang x]]; rows, columns and
# (index into v, sign) of its 18 non-zero entries
_SKEW = ((0, 1, 2, -1.0), (0, 2, 1, 1.0), (1, 0, 2, 1.0), (1, 2, 0, -1.0), (2, 0, 1, -1.0), (2, 1, 0, 1.0))
_CRM_ROWS = np.array([r + o for o in (0, 3) for r, _, _, _ in _SKEW] + [r for r, _, _, _ in _SKEW])
_CRM_COLS = np.array([c + o for o in (0, 3) for _, c, _, _ in _SKEW] + [c + 3 for _, c, _, _ in _SKEW])
_CRM_SRC = np.array([3 + i for _ in (0, 3) for _, _, i, _ in _SKEW] + [i for _, _, i, _ in _SKEW])
_CRM_SIGN = np.array([s for _ in range(3) for _, _, _, s in _SKEW])
_SKEW_ROWS = np.array([r for r, _, _, _ in _SKEW])
_SKEW_COLS = np.array([c for _, c, _, _ in _SKEW])
_SKEW_SRC = np.array([i for _, _, i, _ in _SKEW])
_SKEW_SIGN = np.array([s for _, _, _, s in _SKEW])


def joint_vector(model: Model, values: Vector | None, what: str) -> np.ndarray:
    """``values`` as a float vector of length nq (zeros for None), or ValueError naming the joints."""
    nq = model.tree.nq
    if values is None:
        return np.zeros(nq)
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.shape != (nq,):
        raise ValueError(f"{what} has {arr.size} values; the model has nq = {nq} "
                         f"({', '.join(model.joint_names)})")
    return arr


# --- kinematics --------------------------------------------------------------------------------------------------
def forward_kinematics(model: Model, data: Data, q: Vector) -> Placements:
    """Place every link in the world at configuration ``q``; fills ``data.q``, ``data.body_placement`` and
    ``data.link_placement``, and returns ``data.oMi`` (each link's frame in the world, SE3 on access)."""
    data.q = joint_vector(model, q, "q").copy()
    _place(model.tree, data)
    return data.oMi


def _place(tree: KinematicTree, data: Data) -> None:
    """Body placements level by level, then every link's from its body's (one batched product)."""
    q = data.q
    sin, versine = np.sin(q) * tree.revolute, (1.0 - np.cos(q)) * tree.revolute
    joint = np.empty((tree.nq, 4, 4))
    joint[:, :3, :3] = _EYE3 + sin[:, None, None] * tree.axis_skew + versine[:, None, None] * tree.axis_skew2
    joint[:, :3, 3] = tree.axis * (q * tree.prismatic)[:, None]
    joint[:, 3] = _BOTTOM_ROW
    local = tree.placement @ joint  # each body in its parent body, at q
    body = data.body_placement
    for level in tree.levels:
        body[level.bodies] = body[level.parent_bodies] @ local[level.joints]
    data.link_placement = body[tree.link_body] @ tree.link_offset


def _subspaces(tree: KinematicTree, data: Data) -> np.ndarray:
    """Each joint's unit twist in world coordinates: [p x w, w] for a revolute joint of world axis w through p,
    [w, 0] for a prismatic one. Fills ``data.S``."""
    body = data.body_placement[1:]
    axis = np.einsum("kij,kj->ki", body[:, :3, :3], tree.axis)
    s = np.empty((tree.nq, 6))
    if tree.all_revolute:
        s[:, :3] = _cross(body[:, :3, 3], axis)
        s[:, 3:] = axis
    else:
        s[:, :3] = _cross(body[:, :3, 3], axis) * tree.revolute[:, None] + axis * tree.prismatic[:, None]
        s[:, 3:] = axis * tree.revolute[:, None]
    data.S = s
    return s


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross products of (n, 3) arrays (numpy's cross costs ten times more on small arrays)."""
    return a[:, _P1] * b[:, _P2] - a[:, _P2] * b[:, _P1]


def _crm(v: np.ndarray) -> np.ndarray:
    """(n, 6, 6) matrices of ``v x`` for (n, 6) motion vectors; ``v x* f`` is ``-crm(v)^T f``."""
    out = np.zeros((len(v), 6, 6))
    out[:, _CRM_ROWS, _CRM_COLS] = v[:, _CRM_SRC] * _CRM_SIGN
    return out


def _skews(c: np.ndarray) -> np.ndarray:
    out = np.zeros((len(c), 3, 3))
    out[:, _SKEW_ROWS, _SKEW_COLS] = c[:, _SKEW_SRC] * _SKEW_SIGN
    return out


def _matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise m[k] @ v[k] for stacks of matrices and vectors."""
    return (m @ v[:, :, None])[:, :, 0]


def _world_coms(body: np.ndarray, com: np.ndarray) -> np.ndarray:
    """Body CoMs (given in the body frames) in the world, for stacks of placements and CoMs."""
    return np.einsum("kij,kj->ki", body[:, :3, :3], com) + body[:, :3, 3]


def _world_inertias(tree: KinematicTree, data: Data) -> np.ndarray:
    """(nq, 6, 6) spatial inertia of each moving body at the world origin, world axes:
    [[m 1, -m [c]x], [m [c]x, Ic - m [c]x^2]] with c its world CoM and Ic = R I R^T."""
    body = data.body_placement[1:]
    rot = body[:, :3, :3]
    mass = tree.mass[1:]
    com = _world_coms(body, tree.com[1:])
    cx = _skews(com)
    mc = mass[:, None, None] * cx
    out = np.empty((tree.nq, 6, 6))
    out[:, :3, :3] = mass[:, None, None] * _EYE3
    out[:, :3, 3:] = -mc
    out[:, 3:, :3] = mc
    out[:, 3:, 3:] = rot @ tree.inertia[1:] @ rot.transpose(0, 2, 1) - mc @ cx
    return out


def _base_acceleration(gravity: Vector) -> np.ndarray:
    out = np.zeros(6)
    out[:3] = -np.asarray(gravity, dtype=float)
    return out


# --- mass properties ---------------------------------------------------------------------------------------------
def total_mass(model: Model) -> float:
    """The robot's mass (kg): the sum of every part's bodies."""
    return model.tree.total_mass


def link_inertias_world(model: Model, data: Data) -> list[Inertia]:
    """Each link's inertial data in the world frame, at the configuration of the last forward_kinematics."""
    placements = data.oMi
    return [link.inertia.transformed(placements[i]) for i, link in enumerate(model.links)]


def composite_inertia(model: Model, data: Data, q: Vector | None = None) -> Inertia:
    """Whole-robot mass, CoM and inertia about that CoM, in world axes (``q`` None: reuse the last
    forward_kinematics). Fills ``data.com`` and ``data.Ig``."""
    tree = model.tree
    if q is not None:
        forward_kinematics(model, data, q)
    body = data.body_placement
    com = _world_coms(body, tree.com)
    centre = tree.mass @ com / tree.total_mass if tree.total_mass > 0 else np.zeros(3)
    offset = com - centre
    rot = body[:, :3, :3]
    about = rot @ tree.inertia @ rot.transpose(0, 2, 1)
    parallel = (offset * offset).sum(1)[:, None, None] * _EYE3 - offset[:, :, None] * offset[:, None, :]
    inertia = np.einsum("k,kij->ij", tree.mass, parallel) + about.sum(0)
    data.com = centre
    data.Ig = Inertia(tree.total_mass, centre, inertia)
    return data.Ig


def center_of_mass(model: Model, data: Data, q: Vector | None = None) -> np.ndarray:
    """Whole-robot CoM in the world frame (m) (``q`` None: reuse the last forward_kinematics). Fills
    ``data.com``; :func:`composite_inertia` also gives the inertia about it."""
    tree = model.tree
    if q is not None:
        forward_kinematics(model, data, q)
    com = _world_coms(data.body_placement, tree.com)
    data.com = tree.mass @ com / tree.total_mass if tree.total_mass > 0 else np.zeros(3)
    return data.com.copy()


# --- dynamics ----------------------------------------------------------------------------------------------------
def rnea(model: Model, data: Data, q: Vector, qd: Vector, qdd: Vector,
         gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """Inverse dynamics (recursive Newton-Euler, fixed base): the joint efforts that produce ``qdd`` at ``q``,
    ``qd`` under ``gravity`` (world frame, m/s^2). Fills ``data.v``, ``data.a``, ``data.f``, ``data.tau``."""
    tree = model.tree
    data.qd, data.qdd = joint_vector(model, qd, "qd").copy(), joint_vector(model, qdd, "qdd").copy()
    forward_kinematics(model, data, q)
    s = _subspaces(tree, data)
    joint_velocity = s * data.qd[:, None]
    data.v = v = tree.ancestors @ joint_velocity
    crm = _crm(v)
    data.a = a = _base_acceleration(gravity) + tree.ancestors @ (s * data.qdd[:, None] + _matvec(crm, joint_velocity))
    inertia = _world_inertias(tree, data)
    f = _matvec(inertia, a) - _matvec(crm.transpose(0, 2, 1), _matvec(inertia, v))
    data.f = tree.descendants @ f
    data.tau = (s * data.f).sum(1)
    return data.tau.copy()


def gravity_torques(model: Model, data: Data, q: Vector, gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """The efforts that hold the robot still at ``q`` (the feed-forward gravity term): RNEA with qd = qdd = 0,
    where each body's force is just its weight. Fills ``data.f`` and ``data.tau``."""
    tree = model.tree
    forward_kinematics(model, data, q)
    s = _subspaces(tree, data)
    weight = tree.mass[1:, None] * _base_acceleration(gravity)[:3]  # m a0: what holds the body up
    f = np.empty((tree.nq, 6))
    f[:, :3] = weight
    f[:, 3:] = _cross(_world_coms(data.body_placement[1:], tree.com[1:]), weight)
    data.f = tree.descendants @ f
    data.tau = (s * data.f).sum(1)
    return data.tau.copy()


def nonlinear_effects(model: Model, data: Data, q: Vector, qd: Vector,
                      gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """b(q, qd): Coriolis, centrifugal and gravity efforts (inverse dynamics with qdd = 0)."""
    return rnea(model, data, q, qd, None, gravity)


def mass_matrix(model: Model, data: Data, q: Vector) -> np.ndarray:
    """H(q) by the composite rigid body algorithm: composite inertias as one sum over each joint's subtree
    (world frame), then H[i, j] = S_j . (I_c,i S_i) for every joint j on the path from i to the root. Fills
    ``data.M``."""
    tree = model.tree
    forward_kinematics(model, data, q)
    s = _subspaces(tree, data)
    nq = tree.nq
    composite = (tree.descendants @ _world_inertias(tree, data).reshape(nq, 36)).reshape(nq, 6, 6)
    lower = (s @ _matvec(composite, s).T).T * tree.ancestors  # [i, j] = S_j . Ic_i S_i for j on i's path
    data.M = lower + lower.T - np.diag(np.diag(lower))
    return data.M.copy()


crba = mass_matrix


def forward_dynamics(model: Model, data: Data, q: Vector, qd: Vector, tau: Vector,
                     gravity: Vector = STANDARD_GRAVITY) -> np.ndarray:
    """qdd = H(q)^-1 (tau - b(q, qd)) by the articulated body algorithm (O(n), no matrix built or inverted):
    articulated inertias from the leaves in, accelerations from the root out, a level of the tree at a time.
    Fills ``data.qdd``, ``data.v``, ``data.a``."""
    tree = model.tree
    data.qd = joint_vector(model, qd, "qd").copy()
    torque = joint_vector(model, tau, "tau")
    forward_kinematics(model, data, q)
    s = _subspaces(tree, data)
    joint_velocity = s * data.qd[:, None]
    data.v = v = tree.ancestors @ joint_velocity
    crm = _crm(v)
    bias_acc = _matvec(crm, joint_velocity)  # c = v x S qd
    inertia = _world_inertias(tree, data)
    bias_force = -_matvec(crm.transpose(0, 2, 1), _matvec(inertia, v))  # v x* I v
    u_vec, d, u = _aba_inward(tree, s, inertia, bias_force, bias_acc, torque)
    data.qdd, data.a = _aba_outward(tree, s, u_vec, d, u, bias_acc, _base_acceleration(gravity))
    return data.qdd.copy()


aba = forward_dynamics


def _aba_inward(tree: KinematicTree, s: np.ndarray, inertia: np.ndarray, bias_force: np.ndarray,
                bias_acc: np.ndarray, torque: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Articulated inertias and bias forces, deepest level first; returns U = IA S, D = S.U, u = tau - S.pA."""
    nq = tree.nq
    articulated, bias = inertia.copy(), bias_force.copy()
    u_vec, d, u = np.empty((nq, 6)), np.empty(nq), np.empty(nq)
    for level in reversed(tree.levels):
        k = level.joints
        sk, ia = s[k], articulated[k]
        uk = _matvec(ia, sk)
        dk = (sk * uk).sum(1)
        rest = torque[k] - (sk * bias[k]).sum(1)
        u_vec[k], d[k], u[k] = uk, dk, rest
        if not len(level.moving_parents):
            continue
        passed = ia - uk[:, :, None] * (uk / dk[:, None])[:, None, :]
        passed_bias = bias[k] + _matvec(passed, bias_acc[k]) + uk * (rest / dk)[:, None]
        if level.distinct_parents:  # each parent once: add in place
            articulated[level.parents] += passed
            bias[level.parents] += passed_bias
        else:  # some share a parent (the eyes on the head): sum into the parents first
            up = level.moving_parents
            articulated[up] += (level.gather @ passed.reshape(len(k), 36)).reshape(len(up), 6, 6)
            bias[up] += level.gather @ passed_bias
    return u_vec, d, u


def _aba_outward(tree: KinematicTree, s: np.ndarray, u_vec: np.ndarray, d: np.ndarray, u: np.ndarray,
                 bias_acc: np.ndarray, base_acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Joint accelerations from the root out; row 0 of the accelerations is the base's (gravity)."""
    acc = np.empty((tree.nq + 1, 6))
    acc[0] = base_acc
    qdd = np.empty(tree.nq)
    for level in tree.levels:
        k = level.joints
        passed = acc[level.parent_bodies] + bias_acc[k]
        qdd[k] = (u[k] - (u_vec[k] * passed).sum(1)) / d[k]
        acc[level.bodies] = passed + s[k] * qdd[k][:, None]
    return qdd, acc[1:]


# --- Jacobians and placements ------------------------------------------------------------------------------------
def frame_jacobian(model: Model, data: Data, q: Vector | None, frame: int | str,
                   reference: str = LOCAL_WORLD_ALIGNED) -> np.ndarray:
    """The 6 x nq Jacobian of link ``frame`` (index or name): its twist ``[linear, angular]`` per unit joint
    velocity, in ``reference``: ``world`` (at the world origin, world axes), ``local_world_aligned`` (at the
    link's origin, world axes: the linear rows give the velocity of the link's origin) or ``local`` (at its
    origin, in its axes) -- Pinocchio's WORLD, LOCAL_WORLD_ALIGNED and LOCAL. ``q`` None: reuse the last
    forward kinematics. Fills ``data.J``."""
    if reference not in REFERENCE_FRAMES:
        raise ValueError(f"reference must be one of {', '.join(REFERENCE_FRAMES)}, not {reference!r}")
    tree = model.tree
    link = model.link_index(frame) if isinstance(frame, str) else _link(model, frame)
    if q is not None:
        forward_kinematics(model, data, q)
    s = _subspaces(tree, data)
    body = tree.link_body[link]
    jac = (s * tree.ancestors[body - 1][:, None]).T if body > 0 else np.zeros((6, tree.nq))
    if reference != WORLD:
        placement = data.link_placement[link]
        jac[:3] -= skew(placement[:3, 3]) @ jac[3:]  # v at the origin p: v_O + w x p
        if reference == LOCAL:
            jac = placement[:3, :3].T @ jac.reshape(2, 3, -1)
            jac = jac.reshape(6, -1)
    data.J = jac
    return jac.copy()


def _link(model: Model, index: int) -> int:
    if not -len(model.links) <= index < len(model.links):
        raise IndexError(f"link {index} out of range: the model has {len(model.links)} links")
    return index % len(model.links)


def part_placements(model: Model, data: Data) -> dict[int, SE3]:
    """Each part's frame (its base body) in the world, by bus ID, after forward_kinematics."""
    placements = data.oMi
    return {part.bus_id: placements[part.base_link] for part in model.parts}


def connection_transforms(model: Model, data: Data) -> list[tuple[Connection, SE3]]:
    """For every connection, the child part's frame in the parent part's frame at the current configuration
    (equal to ``Connection.transform`` when the port sits on the parent's base body)."""
    placements = data.oMi
    out = []
    for connection in model.connections:
        parent_base = model.part(connection.parent_id).base_link
        out.append((connection, placements[parent_base].inverse() * placements[connection.child_link]))
    return out
