"""What the fast algorithms precompute once per Model: the tree of moving joints, with rigid subtrees merged.

Most bodies of a robot built from parts are joined by fixed joints (the commbot has 59 links and 19 moving
joints: every bracket, housing and mount is rigid on the body it hangs from). Between two moving joints nothing
moves, so every link rigidly attached to the child of a moving joint is merged, at build time, into one composite
rigid body (mass, CoM and inertia summed through the fixed transforms), and every fixed chain of placements is
multiplied out into one constant transform. Pinocchio does the same when it reads a URDF. What is left is a tree
of ``nq + 1`` bodies (body 0: everything fixed to the root; body ``k + 1``: the child side of the joint with
``idx_q == k``), on which the algorithms run with numpy arrays instead of per-link Python objects:

- the constant placement of each moving joint in its parent body, and of each link in its body (for the
  placements of all links after forward kinematics, one batched product);
- each joint's axis, type masks (revolute / prismatic) and the Rodrigues matrices of its axis;
- the ancestor matrix: ``ancestors[i, j] = 1`` when joint ``j`` is joint ``i`` or one of its ancestors. In world
  coordinates a body's velocity is the sum of its ancestors' joint velocities, and the force a joint transmits is
  the sum of its descendants' forces, so those recursions become one matrix product each;
- the bodies grouped by depth (levels), for the recursions that are not linear sums (placements, the
  articulated inertias of ABA): one batched numpy operation per level instead of one per body.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .spatial import SE3, Inertia, skew


class TreeSource(Protocol):
    """What the tree is built from: a :class:`runtime.model.Model` (model.py imports this module to cache its
    tree, so this one names only the attributes it reads, and the import goes one way)."""

    @property
    def nq(self) -> int: ...

    @property
    def links(self) -> Sequence: ...  # Link: parent, joint, inertia

    @property
    def joints(self) -> Sequence: ...  # JointModel: moving, idx_q, placement, axis, rotary


@dataclass(frozen=True, eq=False)
class Level:
    """The moving bodies at one depth: ``joints`` (their q indices), the q index of each one's parent joint
    (-1: the root body), and for the backward passes the distinct parents with a 0/1 matrix that sums the
    level's rows into them (several children of one parent can sit at one level)."""

    joints: np.ndarray  # (k,) q indices
    parents: np.ndarray  # (k,) q index of the parent joint, -1 for the root body
    bodies: np.ndarray  # (k,) body indices (joints + 1)
    parent_bodies: np.ndarray  # (k,) body indices of the parents (parents + 1; 0 is the root body)
    moving_parents: np.ndarray  # (u,) distinct parent q indices >= 0
    gather: np.ndarray  # (u, k): row r sums the level's rows whose parent is moving_parents[r]
    distinct_parents: bool  # every body of the level has its own moving parent (rows add in place)


@dataclass(frozen=True, eq=False)
class KinematicTree:
    """The precomputed arrays of one Model (see the module docstring). Indices: ``k`` in ``0..nq-1`` is the
    moving joint with ``idx_q == k`` and the body it carries; the root body has no joint."""

    nq: int
    parent: np.ndarray  # (nq,) q index of the parent joint, -1 when the parent body is the root body
    placement: np.ndarray  # (nq, 4, 4) joint frame in the parent body's frame, at q = 0
    axis: np.ndarray  # (nq, 3) joint axis in the joint frame (unit)
    revolute: np.ndarray  # (nq,) 1.0 for revolute and continuous joints
    prismatic: np.ndarray  # (nq,) 1.0 for prismatic joints
    axis_skew: np.ndarray  # (nq, 3, 3) [axis]x
    axis_skew2: np.ndarray  # (nq, 3, 3) [axis]x^2
    mass: np.ndarray  # (nq + 1,) composite body masses; index 0 is the root body
    com: np.ndarray  # (nq + 1, 3) composite CoMs in the body frames
    inertia: np.ndarray  # (nq + 1, 3, 3) composite inertias about the CoM, body axes
    ancestors: np.ndarray  # (nq, nq) ancestors[i, j] = 1 if j is i or an ancestor of i
    levels: tuple[Level, ...]  # by depth, root's children first
    link_body: np.ndarray  # (links,) body of each link: 0 for the root body, k + 1 for joint k's
    link_offset: np.ndarray  # (links, 4, 4) each link's frame in its body's frame
    total_mass: float
    all_revolute: bool  # no prismatic joint (the usual case: a shorter path for the motion subspaces)

    @property
    def descendants(self) -> np.ndarray:
        return self.ancestors.T


def build_tree(model: TreeSource) -> KinematicTree:
    """Merge the rigid subtrees of ``model`` and precompute its arrays (cached as ``Model.tree``)."""
    nq, n_links = model.nq, len(model.links)
    body = np.zeros(n_links, dtype=int)  # 0 = root body, k + 1 = body of joint k
    offset = [SE3.identity()] * n_links  # link frame in its body's frame
    parent = np.full(nq, -1, dtype=int)
    placement = np.zeros((nq, 4, 4))
    axis = np.zeros((nq, 3))
    revolute, prismatic = np.zeros(nq), np.zeros(nq)
    inertias = [Inertia.zero() for _ in range(nq + 1)]
    for i, link in enumerate(model.links):
        if link.parent >= 0:
            joint = model.joints[link.joint]
            up = link.parent
            if joint.moving:
                k = joint.idx_q
                body[i] = k + 1
                parent[k] = body[up] - 1
                placement[k] = (offset[up] * joint.placement).homogeneous
                axis[k] = joint.axis / np.linalg.norm(joint.axis)
                revolute[k], prismatic[k] = (1.0, 0.0) if joint.rotary else (0.0, 1.0)
            else:
                body[i] = body[up]
                offset[i] = offset[up] * joint.placement
        inertias[body[i]] = inertias[body[i]] + link.inertia.transformed(offset[i])
    skews = np.array([skew(a) for a in axis]).reshape(nq, 3, 3)
    return KinematicTree(
        nq=nq, parent=parent, placement=placement, axis=axis, revolute=revolute, prismatic=prismatic,
        axis_skew=skews, axis_skew2=skews @ skews,
        mass=np.array([b.mass for b in inertias]), com=np.array([b.com for b in inertias]).reshape(nq + 1, 3),
        inertia=np.array([b.inertia for b in inertias]).reshape(nq + 1, 3, 3),
        ancestors=_ancestors(parent), levels=_levels(parent), link_body=body,
        link_offset=np.array([o.homogeneous for o in offset]).reshape(n_links, 4, 4),
        total_mass=float(sum(link.inertia.mass for link in model.links)), all_revolute=not prismatic.any())


def _ancestors(parent: np.ndarray) -> np.ndarray:
    nq = len(parent)
    out = np.zeros((nq, nq))
    for k in range(nq):
        j = k
        while j >= 0:
            out[k, j] = 1.0
            j = parent[j]
    return out


def _levels(parent: np.ndarray) -> tuple[Level, ...]:
    depth = np.zeros(len(parent), dtype=int)
    for k, up in enumerate(parent):  # a parent joint always has the smaller q index
        depth[k] = depth[up] + 1 if up >= 0 else 1
    levels = []
    for d in range(1, int(depth.max(initial=0)) + 1):
        joints = np.flatnonzero(depth == d)
        parents = parent[joints]
        moving = np.unique(parents[parents >= 0])
        gather = (moving[:, None] == parents[None, :]).astype(float)
        distinct = bool((parents >= 0).all() and len(moving) == len(parents))
        levels.append(Level(joints, parents, joints + 1, parents + 1, moving, gather, distinct))
    return tuple(levels)
