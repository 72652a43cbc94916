"""The robot model (DESIGN "The runtime" item 3; the modular-robot reference's claims): per-part inertial data and the
transforms between connected parts, forward kinematics, whole-robot mass / CoM / inertia, inverse dynamics for
feed-forward and gravity terms, and URDF export.

Split as in Pinocchio, because the same robot is evaluated by several users at once (controller, world,
planner): an immutable :class:`Model` built once from the scanned virtual robot by :func:`build_model`, a
mutable :class:`Data` per user (:func:`create_data`), and algorithms as plain functions of both. The model code
needs numpy only; nothing here imports pybullet (the tests check our dynamics against it).

The algorithms exported here are the fast ones (runtime.model.algorithms: rigid subtrees merged, world-frame
spatial algebra batched in numpy; fractions of a millisecond on the commbot). runtime.model.reference keeps the
per-link versions as the modular-robot reference states them, for cross-checks; runtime.model.pinocchio_model hands the
same model to Pinocchio when it is installed.
"""
from .algorithms import (LOCAL, LOCAL_WORLD_ALIGNED, STANDARD_GRAVITY, WORLD, aba, center_of_mass,
                         composite_inertia, connection_transforms, crba, forward_dynamics, forward_kinematics,
                         frame_jacobian, gravity_torques, link_inertias_world, mass_matrix, nonlinear_effects,
                         part_placements, rnea, total_mass)
from .data import Data, Placements, create_data
from .model import (Connection, JointModel, Link, Model, ModelError, PartModel, build_model, mount_transform,
                    sanitize)
from .spatial import SE3, Inertia, matrix_to_rpy, rpy_to_matrix
from .urdf import to_urdf

__all__ = [
    "Model", "JointModel", "Link", "PartModel", "Connection", "ModelError", "build_model", "mount_transform",
    "sanitize", "Data", "Placements", "create_data", "SE3", "Inertia", "rpy_to_matrix", "matrix_to_rpy",
    "forward_kinematics", "total_mass", "center_of_mass", "composite_inertia", "link_inertias_world", "rnea",
    "gravity_torques", "nonlinear_effects", "mass_matrix", "crba", "forward_dynamics", "aba", "frame_jacobian",
    "WORLD", "LOCAL", "LOCAL_WORLD_ALIGNED", "part_placements", "connection_transforms", "STANDARD_GRAVITY",
    "to_urdf",
]
