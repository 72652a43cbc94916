"""The robot model (DESIGN "The runtime" item 3; reference 002's claims): per-part inertial data and the
transforms between connected parts, forward kinematics, whole-robot mass / CoM / inertia, inverse dynamics for
feed-forward and gravity terms, and URDF export.

Split as in Pinocchio, because the same robot is evaluated by several users at once (controller, world,
planner): an immutable :class:`Model` built once from the scanned virtual robot by :func:`build_model`, a
mutable :class:`Data` per user (:func:`create_data`), and algorithms as plain functions of both. The model code
needs numpy only; nothing here imports pybullet (the tests check our dynamics against it).
"""
from .algorithms import (STANDARD_GRAVITY, center_of_mass, composite_inertia, connection_transforms,
                         forward_dynamics, forward_kinematics, gravity_torques, link_inertias_world, mass_matrix,
                         nonlinear_effects, part_placements, rnea, total_mass)
from .data import Data, create_data
from .model import (Connection, JointModel, Link, Model, ModelError, PartModel, build_model, mount_transform,
                    sanitize)
from .spatial import SE3, Inertia, matrix_to_rpy, rpy_to_matrix
from .urdf import to_urdf

__all__ = [
    "Model", "JointModel", "Link", "PartModel", "Connection", "ModelError", "build_model", "mount_transform",
    "sanitize", "Data", "create_data", "SE3", "Inertia", "rpy_to_matrix", "matrix_to_rpy",
    "forward_kinematics", "total_mass", "center_of_mass", "composite_inertia", "link_inertias_world", "rnea",
    "gravity_torques", "nonlinear_effects", "mass_matrix", "forward_dynamics", "part_placements",
    "connection_transforms", "STANDARD_GRAVITY", "to_urdf",
]
