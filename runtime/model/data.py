"""Per-evaluation state of the model: what the algorithms compute, kept apart from the immutable Model.

One Model can serve many Data (a controller thread and a planner, say) without either seeing the other's
intermediate results; a Data is cheap to create and is overwritten by every algorithm call that fills it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .model import Model
from .spatial import SE3, Inertia


@dataclass(eq=False)
class Data:
    """Mutable workspace of one Model (arrays indexed by link, vectors by q index)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray  # joint efforts from rnea (N m or N)
    liMi: list[SE3]  # each link's frame in its parent link's frame, at q
    oMi: list[SE3]  # each link's frame in the world frame (the root part's base body), at q
    v: np.ndarray  # (links, 6) spatial velocity of each link, in its own frame
    a: np.ndarray  # (links, 6) spatial acceleration (gravity included as a base acceleration), own frame
    f: np.ndarray  # (links, 6) spatial force transmitted by each link's joint, own frame
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))  # whole-robot CoM, world frame
    Ig: Inertia | None = None  # whole-robot inertia about the CoM, world axes

    @classmethod
    def for_model(cls, model: Model) -> Data:
        n, nq = len(model.links), model.nq
        identity = [SE3.identity()] * n
        return cls(q=np.zeros(nq), qd=np.zeros(nq), qdd=np.zeros(nq), tau=np.zeros(nq), liMi=list(identity),
                   oMi=list(identity), v=np.zeros((n, 6)), a=np.zeros((n, 6)), f=np.zeros((n, 6)))


def create_data(model: Model) -> Data:
    """A fresh Data for ``model`` (Pinocchio's ``model.createData()``)."""
    return Data.for_model(model)
