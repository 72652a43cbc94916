"""Rigid-body math (SE3, Inertia, motion and force 6-vectors): it lives in ``devices.spatial`` so that the world
(firmware_sim.world, which merges a robot's fixed links into composite bodies) combines inertias with the very
code the host model uses, below both layers; this module keeps runtime.model's imports as they were."""
from hil.devices.spatial import (  # noqa: F401  (re-exported)
    SE3,
    ArrayLike,
    Inertia,
    axis_angle_matrix,
    force_cross,
    frozen_array,
    matrix_to_rpy,
    motion_cross,
    rpy_to_matrix,
    skew,
)
