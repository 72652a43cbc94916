"""Per-evaluation state of the model: what the algorithms compute, kept apart from the immutable Model.

One Model can serve many Data (a controller thread and a planner, say) without either seeing the other's
intermediate results; a Data is cheap to create and is overwritten by every algorithm call that fills it.

The fast algorithms (runtime.model.algorithms) work on the tree of moving joints (runtime.model.tree) in world
coordinates, so what they keep is arrays: one 4x4 placement per body of that tree and per link, and one spatial
6-vector per moving joint (``[linear, angular]``, world axes, taken at the world origin, Pinocchio's WORLD
convention). ``oMi`` and ``liMi`` give the links' placements as SE3 values, made when they are read.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from .model import Model
from .spatial import SE3, Inertia


class Placements(Sequence):
    """Link placements read from a Data's arrays: ``placements[i]`` is an SE3, made on access (a view: it shows
    the Data's latest configuration, as the list the algorithms used to fill in place did)."""

    def __init__(self, data: Data, relative: bool = False):
        self._data, self._relative = data, relative

    def __len__(self) -> int:
        return len(self._data.link_placement)

    @overload
    def __getitem__(self, index: int) -> SE3: ...

    @overload
    def __getitem__(self, index: slice) -> list[SE3]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        placements = self._data.link_placement
        matrix = placements[index]
        if self._relative:
            up = self._data.link_parent[index]
            if up >= 0:
                matrix = _inverse(placements[up]) @ matrix
        return SE3(matrix[:3, :3], matrix[:3, 3])

    def __repr__(self) -> str:
        return f"Placements({len(self)} links{', in their parents' if self._relative else ''})"


def _inverse(matrix: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = matrix[:3, :3].T
    out[:3, 3] = -(matrix[:3, :3].T @ matrix[:3, 3])
    return out


@dataclass(eq=False)
class Data:
    """Mutable workspace of one Model: vectors by q index, placements by body of the moving-joint tree (0: the
    root body, k + 1: the body joint k carries) and by link, spatial vectors by moving joint in world coordinates."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray  # the accelerations given to rnea, or found by forward_dynamics
    tau: np.ndarray  # joint efforts from rnea (N m or N)
    body_placement: np.ndarray  # (nq + 1, 4, 4) each body of the moving-joint tree in the world
    link_placement: np.ndarray  # (links, 4, 4) each link's frame in the world (the root part's base body)
    link_parent: np.ndarray  # (links,) parent link index, -1 for the root (for liMi)
    S: np.ndarray  # (nq, 6) each joint's motion subspace (unit-velocity twist), world frame
    v: np.ndarray  # (nq, 6) spatial velocity of the body each joint carries, world frame
    a: np.ndarray  # (nq, 6) its spatial acceleration, gravity included as a base acceleration, world frame
    f: np.ndarray  # (nq, 6) spatial force each joint transmits to its subtree, world frame
    M: np.ndarray  # (nq, nq) joint-space mass matrix from mass_matrix
    J: np.ndarray  # (6, nq) the last frame_jacobian
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))  # whole-robot CoM, world frame
    Ig: Inertia | None = None  # whole-robot inertia about the CoM, world axes

    @property
    def oMi(self) -> Placements:
        """Each link's frame in the world frame, at q (SE3 values made on access)."""
        return Placements(self)

    @property
    def liMi(self) -> Placements:
        """Each link's frame in its parent link's frame, at q."""
        return Placements(self, relative=True)

    @classmethod
    def for_model(cls, model: Model) -> Data:
        n, nq = len(model.links), model.nq
        return cls(q=np.zeros(nq), qd=np.zeros(nq), qdd=np.zeros(nq), tau=np.zeros(nq),
                   body_placement=np.tile(np.eye(4), (nq + 1, 1, 1)), link_placement=np.tile(np.eye(4), (n, 1, 1)),
                   link_parent=np.array([link.parent for link in model.links], dtype=int),
                   S=np.zeros((nq, 6)), v=np.zeros((nq, 6)), a=np.zeros((nq, 6)), f=np.zeros((nq, 6)),
                   M=np.zeros((nq, nq)), J=np.zeros((6, nq)))


def create_data(model: Model) -> Data:
    """A fresh Data for ``model`` (Pinocchio's ``model.createData()``)."""
    return Data.for_model(model)
