"""The mobile base: differential drive and odometry from the wheel parts' own geometry.

Nothing is assumed about the robot but its base frame (the root part's frame: x forward, y left, z up, on the
floor). For each wheel part the model gives, at q = 0, where its wheel joint sits and which way its axle points;
the wheel body's collision cylinder gives the radius. A wheel turning at +w rad/s about its axle ``a`` rolls its
centre along ``w * r * (a x z)``, so its forward gain ``r * (a x z) . x`` is +r for an axle along +y (the left
wheel) and -r for one along -y (the right wheel, mounted mirrored): the sign comes out of the geometry, it is not
written down anywhere. A rigid base moving at (v, w) moves the point at lateral offset y forward at v - w y,
which gives each wheel's speed for ``drive`` and, solved the other way (least squares over the wheels), the
odometry.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..model import Model
from ..model.spatial import SE3, rpy_to_matrix
from .joints import Joint, JointLimitError

AXLE_ACROSS_MIN = 0.5  # |forward gain / r| below this: the axle is not across the driving direction
PARALLEL_COS = 0.99


class BaseGeometryError(ValueError):
    """The wheels cannot make a differential base (no wheels, an axle along the driving direction, ...)."""


class Pose2D(NamedTuple):
    x: float  # m, in the odometry frame (the base frame at the start, unless reset)
    y: float
    yaw: float  # rad, counter-clockwise


class Twist2D(NamedTuple):
    v: float  # m/s forward
    w: float  # rad/s counter-clockwise


@dataclass(frozen=True)
class Wheel:
    joint: Joint
    radius: float  # m, from the wheel body's collision cylinder
    lateral: float  # m, y of the wheel joint in the base frame
    gain: float  # m of forward travel per rad of joint rotation (signed)


def wheel_geometry(model: Model, placements: Sequence[SE3], joint: Joint) -> Wheel:
    """A wheel joint's geometry from the model at q = 0 (``placements``: forward_kinematics' oMi)."""
    jm = next(j for j in model.joints if j.bus_id == joint.part_key and j.part_joint == joint.part_joint)
    frame = placements[jm.child]  # the child link's frame is the joint frame at q = 0
    axle = frame.rotation @ jm.axis
    radius = _wheel_radius(model, jm.child, jm.axis, joint.name)
    along = float(np.cross(axle, (0.0, 0.0, 1.0)) @ np.array((1.0, 0.0, 0.0)))
    if abs(along) < AXLE_ACROSS_MIN:
        raise BaseGeometryError(f"wheel {joint.name}: its axle points along {np.round(axle, 3).tolist()} in the base "
                                "frame, not across the driving direction (x)")
    return Wheel(joint, radius, float(frame.translation[1]), radius * along)


def _wheel_radius(model: Model, link: int, axis: np.ndarray, name: str) -> float:
    """The largest collision cylinder of the wheel body whose axis is the joint's (a sphere also rolls)."""
    radii = []
    for shape in model.links[link].collisions:
        if shape.kind == "cylinder":
            shape_axis = rpy_to_matrix(shape.pose.rpy) @ np.array((0.0, 0.0, 1.0))
            if abs(float(shape_axis @ axis)) >= PARALLEL_COS:
                radii.append(shape.size[0])
        elif shape.kind == "sphere":
            radii.append(shape.size[0])
    if not radii:
        raise BaseGeometryError(f"wheel {name}: its body ({model.links[link].name}) has no collision cylinder "
                                "about the wheel's axle to take the radius from")
    return float(max(radii))


class DifferentialBase:
    """``drive(v, w)`` sets every wheel's velocity; ``odometry`` integrates the wheels' positions read on each
    bus cycle. Commands go out on the next bus cycle, as joint targets do."""

    def __init__(self, wheels: Sequence[Wheel]):
        if len(wheels) < 2:
            raise BaseGeometryError(f"a differential base needs two wheels; this robot has {len(wheels)}")
        lateral = np.array([w.lateral for w in wheels])
        if np.ptp(lateral) < 1e-6:
            raise BaseGeometryError("the wheels sit on one line along the driving direction: they cannot steer")
        self.wheels = tuple(wheels)
        # rows [1, -y]: a wheel's contact moves forward by ds - dyaw * y
        self._solve = np.linalg.pinv(np.column_stack((np.ones(len(wheels)), -lateral)))
        self._last: np.ndarray | None = None
        self._pose = Pose2D(0.0, 0.0, 0.0)
        self._twist = Twist2D(0.0, 0.0)
        self.halted: str | None = None  # why the base is stopped (a wheel part lost: presence.py), None: it drives

    def __repr__(self) -> str:
        return (f"DifferentialBase({len(self.wheels)} wheels, track {self.track_width:.3f} m, "
                f"radius {self.wheel_radius:.3f} m, odometry {self._pose})")

    @property
    def track_width(self) -> float:
        """m between the outermost wheels."""
        lateral = [w.lateral for w in self.wheels]
        return max(lateral) - min(lateral)

    @property
    def wheel_radius(self) -> float:
        return float(np.mean([w.radius for w in self.wheels]))

    @property
    def max_speed(self) -> float:
        """Fastest straight-line speed (m/s) the wheels' velocity limits allow."""
        limits = [abs(w.joint.limits.velocity * w.gain) for w in self.wheels if w.joint.limits.velocity > 0]
        return min(limits) if limits else math.inf

    def wheel_speeds(self, v: float, w: float) -> list[float]:
        """Joint velocities (rad/s) that move the base at ``v`` m/s forward and ``w`` rad/s about z."""
        return [(v - w * wheel.lateral) / wheel.gain for wheel in self.wheels]

    def drive(self, v: float, w: float = 0.0) -> None:
        """Move at ``v`` m/s forward while turning at ``w`` rad/s (counter-clockwise). Refuses, changing no
        wheel, a command that needs a wheel beyond its velocity limit."""
        v, w = float(v), float(w)
        if not (math.isfinite(v) and math.isfinite(w)):
            raise ValueError(f"base.drive: v and w must be finite, not ({v}, {w})")
        speeds = self.wheel_speeds(v, w)
        for wheel, speed in zip(self.wheels, speeds):
            try:
                wheel.joint.check_velocity(speed)
            except JointLimitError as exc:
                raise JointLimitError(f"base.drive(v={v:g}, w={w:g}): {exc} (straight-line top speed "
                                      f"{self.max_speed:.3f} m/s)") from None
        if self.halted:
            speeds = [0.0] * len(self.wheels)  # a wheel is lost: the others must not turn the robot on the spot
        for wheel, speed in zip(self.wheels, speeds):
            wheel.joint.target_velocity = speed

    def stop(self) -> None:
        self.drive(0.0, 0.0)

    def halt(self, why: str | None) -> None:
        """Stop every wheel now and keep them at 0 whatever drive() asks, for ``why``; None lets it drive again."""
        self.halted = why
        if why:
            for wheel in self.wheels:
                wheel.joint.target_velocity = 0.0

    @property
    def odometry(self) -> Pose2D:
        """(x, y, yaw) integrated from the wheel positions since the start (or the last reset)."""
        return self._pose

    @property
    def velocity(self) -> Twist2D:
        """(v, w) of the base from the wheel velocities read on the last bus cycle."""
        return self._twist

    def reset_odometry(self, x: float = 0.0, y: float = 0.0, yaw: float = 0.0) -> None:
        self._pose = Pose2D(float(x), float(y), float(yaw))

    def saved_state(self) -> dict:
        """The odometry's state, JSON-safe (trial/state/host.py): pose, twist and the wheel positions it
        integrates from (None before the first update)."""
        return {"pose": list(self._pose), "twist": list(self._twist),
                "last": self._last.tolist() if self._last is not None else None}

    def restore_state(self, saved: dict) -> None:
        """Take up a :meth:`saved_state`: the next update integrates from the saved wheel positions."""
        self._pose, self._twist = Pose2D(*saved["pose"]), Twist2D(*saved["twist"])
        self._last = np.asarray(saved["last"], dtype=float) if saved["last"] is not None else None

    def update(self) -> None:
        """Integrate the wheel motion since the previous bus cycle (called by the robot after each read)."""
        positions = np.array([w.joint.position for w in self.wheels])
        gains = np.array([w.gain for w in self.wheels])
        velocities = np.array([w.joint.velocity for w in self.wheels])
        if np.all(np.isfinite(velocities)):
            v, w = (float(x) for x in self._solve @ (gains * velocities))
            self._twist = Twist2D(v, w)
        if self._last is None:
            self._last = positions
            return
        ds, dyaw = (float(x) for x in self._solve @ (gains * (positions - self._last)))
        self._last = positions
        x, y, yaw = self._pose
        heading = yaw + dyaw / 2  # midpoint rule: exact for arcs to second order
        self._pose = Pose2D(x + ds * math.cos(heading), y + ds * math.sin(heading), yaw + dyaw)
