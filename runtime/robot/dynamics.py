"""``robot.dynamics``: the robot's model evaluated where the robot is, for controllers.

The modular-robot reference's point in reading each part's mass, centre of mass and inertia is that the host can compute
the robot's dynamics from them. This is where a controller does: every method evaluates the model (runtime.model,
built from the scanned descriptors) at the joint positions and velocities the last bus cycle read, so a
controller calls ``robot.dynamics.gravity_torques()`` inside ``robot.loop`` and gets the efforts that hold the
robot where it is now, for a feed-forward term or a torque-limit check. Vectors are in the model's q order;
:meth:`Dynamics.by_name` and :meth:`Dynamics.index` translate to and from the blueprint's joint names.

A moving joint the bus does not report (or that has not been read yet) counts as 0 rad and 0 rad/s; a joint
without a velocity register as 0 rad/s. The base is fixed: the root part (the carriage) is the world frame.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..model import (LOCAL_WORLD_ALIGNED, SE3, STANDARD_GRAVITY, Model, create_data, forward_dynamics,
                     forward_kinematics, frame_jacobian, gravity_torques, mass_matrix, rnea)
from ..model import center_of_mass as model_center_of_mass
from ..model.algorithms import Vector
from .joints import Joint


class Dynamics:
    """The model at the robot's current state. Made by :attr:`runtime.robot.Robot.dynamics`; holds its own
    :class:`runtime.model.Data`, so it is one workspace for one controller thread."""

    def __init__(self, model: Model, joints: Mapping[str, Joint], gravity: Vector = STANDARD_GRAVITY):
        self.model = model
        self.data = create_data(model)
        self.gravity = tuple(float(g) for g in gravity)
        self._slots: list[tuple[int, Joint]] = []
        self._names = list(model.joint_names)  # q index -> blueprint name (the model's name when unnamed)
        for name, joint in joints.items():
            try:
                k = model.q_index(joint.part_key, joint.part_joint)
            except KeyError:
                continue
            self._slots.append((k, joint))
            self._names[k] = name
        self._index = {name: k for k, name in enumerate(self._names)}

    # --- the state ------------------------------------------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        """The name of each q entry: the blueprint's (``left_arm.elbow``) where it has one."""
        return tuple(self._names)

    def index(self, name: str) -> int:
        """Where joint ``name`` sits in q (KeyError naming the known joints otherwise)."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no joint {name!r} in the model; joints: {', '.join(self._names)}") from None

    def by_name(self, vector: Vector) -> dict[str, float]:
        """A q-ordered vector (efforts, accelerations, ...) as {joint name: value}."""
        values = np.asarray(vector, dtype=float).reshape(-1)
        return dict(zip(self._names, values.tolist(), strict=True))

    @property
    def q(self) -> np.ndarray:
        """Joint positions (rad, m) as the last bus cycle read them, in q order."""
        return self._read("position")

    @property
    def qd(self) -> np.ndarray:
        """Joint velocities (rad/s, m/s) as the last bus cycle read them, in q order."""
        return self._read("velocity")

    def _read(self, what: str) -> np.ndarray:
        out = np.zeros(self.model.nq)
        for k, joint in self._slots:
            value = getattr(joint, what)
            if not math.isnan(value):
                out[k] = value
        return out

    # --- the model at that state ------------------------------------------------------------------------------
    def gravity_torques(self) -> np.ndarray:
        """The efforts (N m, N) that hold the robot still where it is: the feed-forward gravity term."""
        return gravity_torques(self.model, self.data, self.q, self.gravity)

    def inverse_dynamics(self, qdd: Vector | None = None) -> np.ndarray:
        """The efforts that give accelerations ``qdd`` (None: zero) at the current q and qd (RNEA)."""
        return rnea(self.model, self.data, self.q, self.qd, qdd, self.gravity)

    def mass_matrix(self) -> np.ndarray:
        """H(q), nq x nq (kg m^2, kg)."""
        return mass_matrix(self.model, self.data, self.q)

    def forward_dynamics(self, tau: Vector) -> np.ndarray:
        """The accelerations efforts ``tau`` give at the current q and qd (ABA)."""
        return forward_dynamics(self.model, self.data, self.q, self.qd, tau, self.gravity)

    def center_of_mass(self) -> np.ndarray:
        """The whole robot's CoM in the base frame (m)."""
        return model_center_of_mass(self.model, self.data, self.q)

    def placement(self, link: int | str) -> SE3:
        """Link ``link`` (index or name) in the base frame."""
        index = self.model.link_index(link) if isinstance(link, str) else link
        return forward_kinematics(self.model, self.data, self.q)[index]

    def jacobian(self, link: int | str, reference: str = LOCAL_WORLD_ALIGNED) -> np.ndarray:
        """The 6 x nq Jacobian of link ``link`` (see runtime.model.frame_jacobian for ``reference``)."""
        return frame_jacobian(self.model, self.data, self.q, link, reference)
