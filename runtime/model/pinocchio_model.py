"""The same model handed to Pinocchio, for users who need kHz rates (optional: ``pip install pin``).

Built from the scanned descriptors through our Model, not from a URDF file, so what Pinocchio computes is the
robot the bus reported. Pinocchio's own structure is the one our fast algorithms use (runtime.model.tree): one
Pinocchio joint per moving joint, in q order, placed in its parent's frame by the fixed chain between them; every
link is appended to the joint that carries it (Pinocchio sums the inertias itself) and added as a body frame named
like the link, so frame placements and Jacobians can be asked for by link name.

Departures, none of which changes a result:
- a continuous joint becomes a revolute joint without limits (Pinocchio's unbounded joints take cos/sin pairs in
  q, which would make its q differ from ours);
- the root body's mass sits on Pinocchio's universe, which its centre of mass leaves out: use
  :func:`center_of_mass` here for the whole robot's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .algorithms import STANDARD_GRAVITY, Vector
from .model import Model, ModelError


def import_pinocchio() -> Any:
    """The ``pinocchio`` module, or ModelError saying how to install it."""
    try:
        import pinocchio
    except ImportError as exc:
        raise ModelError(f"Pinocchio is not installed ({exc}); install it with `pip install pin`") from None
    return pinocchio


def to_pinocchio(model: Model, gravity: Vector = STANDARD_GRAVITY) -> Any:
    """A ``pinocchio.Model`` of ``model``: same q order, same joint names, a body frame per link, ``gravity``
    (m/s^2, world frame) set as its gravity."""
    pin = import_pinocchio()
    tree = model.tree
    out = pin.Model()
    out.name = model.name
    joint_frames = [0]  # the universe's frame, then each joint's
    for k, joint in enumerate(model.moving_joints):
        kind = pin.JointModelPrismaticUnaligned if tree.prismatic[k] else pin.JointModelRevoluteUnaligned
        limits = joint.limits
        bounded = joint.type != "continuous" and limits.upper > limits.lower
        lower, upper = (limits.lower, limits.upper) if bounded else (-np.inf, np.inf)
        parent = int(tree.parent[k] + 1)
        index = out.addJoint(parent, kind(*tree.axis[k]), _se3(pin, tree.placement[k]), joint.name,
                             np.array([limits.effort or np.inf]), np.array([limits.velocity or np.inf]),
                             np.array([lower]), np.array([upper]))
        joint_frames.append(out.addJointFrame(index, joint_frames[parent]))
    for i, link in enumerate(model.links):
        body, offset = int(tree.link_body[i]), _se3(pin, tree.link_offset[i])
        inertia = link.inertia
        out.appendBodyToJoint(body, pin.Inertia(inertia.mass, np.array(inertia.com), np.array(inertia.inertia)),
                              offset)
        out.addBodyFrame(link.name, body, offset, joint_frames[body])
    out.gravity = pin.Motion(np.concatenate((np.asarray(gravity, dtype=float), np.zeros(3))))
    return out


def center_of_mass(model: Model, pin_model: Any, pin_data: Any, q: Vector) -> np.ndarray:
    """The whole robot's CoM from Pinocchio's, adding back the root body Pinocchio leaves out (m, world)."""
    pin = import_pinocchio()
    tree = model.tree
    subtree = pin.centerOfMass(pin_model, pin_data, np.asarray(q, dtype=float))
    moving = tree.total_mass - tree.mass[0]
    return (moving * subtree + tree.mass[0] * tree.com[0]) / tree.total_mass


def _se3(pin: Any, matrix: np.ndarray) -> Any:
    return pin.SE3(np.array(matrix[:3, :3]), np.array(matrix[:3, 3]))
