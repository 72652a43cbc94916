"""Joint commands from ROS, as ros2_control's controllers take them, applied to the robot's position joints.

- ``/forward_position_controller/commands`` (std_msgs/Float64MultiArray): one position per joint in the
  **declared order**: the robot's position-mode joints in the order ``/joint_states`` names them (on the
  commbot: the neck, the eyes, the arms and hands; the wheels are velocity-mode and driven by ``/cmd_vel``). It
  sets those targets at once and ends any trajectory running.
- ``/joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory): joints by name (any
  subset of the declared ones), points with ``time_from_start``. It starts at the header's stamp (trial time),
  or when it arrives if the stamp is 0 or past; from the joints' positions then, each cycle's target follows
  the points around it as joint_trajectory_controller's splines do: the straight line between positions only, a
  cubic Hermite when every point gives velocities, a quintic when every point gives accelerations beside them
  (:class:`Trajectory`); the last point is held. A new trajectory replaces the one running (a spline starts
  with the running one's velocity, so the motion stays smooth).

The robot's limits apply as for a Python controller (runtime/robot/joints.py): a command naming a joint the
robot does not have or cannot position, with the wrong number of positions, or with a position outside a joint's
limits is refused as a whole, with one line and ``/trial/refused`` in the log (RosLink.refuse); nothing of it is
applied. Each command taken is logged as ``/ros/joint_command``: the topic, the joints and the positions, for a
trajectory its start and end (trial time), its points' ``times`` (time_from_start) and ``positions``, so a rosbag
of the log (rosbag.py) replays it.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

from hil.runtime.robot.joints import LIMIT_TOLERANCE, POSITION

from .link import JointCommand, JointPositions, RosLink


class CommandError(ValueError):
    """Why a joint command is refused (the message is the reason shown)."""


def declared_order(robot: Any) -> list[str]:
    """The joints a Float64MultiArray addresses, in order: the position-mode joints as /joint_states lists them."""
    return [name for name, joint in robot.joints.items() if joint.mode == POSITION]


class Trajectory:
    """A running trajectory: from the joints' state at ``start`` through its points, then held.

    Between two points the positions follow, as ros2_control's joint_trajectory_controller interpolates them: a
    straight line when the points give positions only; a cubic Hermite spline (position and velocity matched at
    both ends) when every point gives velocities; a quintic (position, velocity and acceleration matched) when
    every point gives accelerations too. The implicit first point is the joints' positions at ``start``, with
    ``first_velocities`` (and ``first_accelerations``): the running trajectory's at that time, else zero."""

    def __init__(self, joints: list[str], start: float, first: list[float], times: list[float],
                 points: list[list[float]], velocities: list[list[float]] | None = None,
                 accelerations: list[list[float]] | None = None, first_velocities: list[float] | None = None,
                 first_accelerations: list[float] | None = None):
        self.joints, self.start = joints, start
        self.times = [0.0, *times]
        self.points = [first, *points]
        zero = [0.0] * len(joints)
        self.velocities = [first_velocities or zero, *velocities] if velocities else None
        self.accelerations = [first_accelerations or zero, *accelerations] \
            if accelerations and velocities else None

    @property
    def kind(self) -> str:
        """``linear``, ``cubic`` or ``quintic``: how it interpolates between its points."""
        return "quintic" if self.accelerations else "cubic" if self.velocities else "linear"

    def at(self, t: float) -> list[float] | None:
        """The positions at trial time ``t`` (None before it starts)."""
        state = self.state_at(t)
        return None if state is None else state[0]

    def state_at(self, t: float) -> tuple[list[float], list[float], list[float]] | None:
        """(positions, velocities, accelerations) at trial time ``t`` (None before it starts); held at the end."""
        tau = t - self.start
        if tau < 0:
            return None
        zero = [0.0] * len(self.joints)
        k = bisect_right(self.times, tau)
        if k >= len(self.times):
            return self.points[-1], zero, zero
        t0, t1 = self.times[k - 1], self.times[k]
        span = t1 - t0
        if span <= 0:
            return self.points[k], zero, zero
        s = tau - t0
        if self.velocities is None:
            share = s / span
            a, b = self.points[k - 1], self.points[k]
            return [p + (q - p) * share for p, q in zip(a, b)], [(q - p) / span for p, q in zip(a, b)], zero
        acc = self.accelerations
        out = [spline(self.points[k - 1][j], self.velocities[k - 1][j], acc[k - 1][j] if acc else None,
                      self.points[k][j], self.velocities[k][j], acc[k][j] if acc else None, span, s)
               for j in range(len(self.joints))]
        return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out]


def spline(p0: float, v0: float, a0: float | None, p1: float, v1: float, a1: float | None, span: float,
           s: float) -> tuple[float, float, float]:
    """(position, velocity, acceleration) at ``s`` seconds into a segment of ``span`` seconds from (p0, v0, a0)
    to (p1, v1, a1): a cubic Hermite polynomial when the accelerations are None, else a quintic, the polynomials
    joint_trajectory_controller's splines use."""
    T = span
    if a0 is None or a1 is None:
        c0, c1 = p0, v0
        c2 = (3 * (p1 - p0) - (2 * v0 + v1) * T) / T ** 2
        c3 = (2 * (p0 - p1) + (v0 + v1) * T) / T ** 3
        coeffs = [c0, c1, c2, c3]
    else:
        h = p1 - p0
        c0, c1, c2 = p0, v0, a0 / 2
        c3 = (20 * h - (8 * v1 + 12 * v0) * T - (3 * a0 - a1) * T ** 2) / (2 * T ** 3)
        c4 = (-30 * h + (14 * v1 + 16 * v0) * T + (3 * a0 - 2 * a1) * T ** 2) / (2 * T ** 4)
        c5 = (12 * h - 6 * (v1 + v0) * T - (a0 - a1) * T ** 2) / (2 * T ** 5)
        coeffs = [c0, c1, c2, c3, c4, c5]
    position = sum(c * s ** n for n, c in enumerate(coeffs))
    velocity = sum(n * c * s ** (n - 1) for n, c in enumerate(coeffs) if n)
    acceleration = sum(n * (n - 1) * c * s ** (n - 2) for n, c in enumerate(coeffs) if n > 1)
    return position, velocity, acceleration


class JointCommander:
    """Takes the link's checked joint commands and sets the robot's joint targets, cycle by cycle."""

    def __init__(self, link: RosLink):
        self.link = link
        self.trajectory: Trajectory | None = None
        self._order: list[str] | None = None

    def step(self, robot: Any, t: float) -> None:
        for command in self.link.take_joint_commands():
            try:
                self._take(robot, command, t)
            except CommandError as exc:
                self.link.refuse(command.topic, _summary(command), str(exc), t)
        if self.trajectory is not None:
            positions = self.trajectory.at(t)
            if positions is not None:
                self._set(robot, self.trajectory.joints, positions)

    def _take(self, robot: Any, command: JointCommand, t: float) -> None:
        if self._order is None:
            self._order = declared_order(robot)
        got = command.command
        if isinstance(got, JointPositions):
            if len(got.positions) != len(self._order):
                raise CommandError(f"{len(got.positions)} positions; the declared order has {len(self._order)} "
                                   f"joints ({', '.join(self._order)})")
            self._check(robot, self._order, [got.positions])
            self.trajectory = None
            self._set(robot, self._order, got.positions)
            self.link.write("/ros/joint_command", t, {"topic": command.topic, "joints": self._order,
                                                      "positions": list(got.positions)})
            return
        if not got.points:
            raise CommandError("a trajectory without points")
        for k, point in enumerate(got.points):
            if len(point.positions) != len(got.joints):
                raise CommandError(f"point {k} has {len(point.positions)} positions for {len(got.joints)} joints")
            for what in ("velocities", "accelerations"):
                given = getattr(point, what)
                if given and len(given) != len(got.joints):
                    raise CommandError(f"point {k} has {len(given)} {what} for {len(got.joints)} joints")
            if k and point.t < got.points[k - 1].t:
                raise CommandError(f"point {k}'s time_from_start {point.t:g} s is before point {k - 1}'s")
        if len(set(got.joints)) != len(got.joints):
            raise CommandError("a joint named twice")
        self._check(robot, got.joints, [p.positions for p in got.points])
        first = [robot.joints[name].position for name in got.joints]
        # velocities only when every point gives them, accelerations only beside them (as the controller does)
        velocities = [list(p.velocities) for p in got.points] if all(p.velocities for p in got.points) else None
        accelerations = [list(p.accelerations) for p in got.points] \
            if velocities and all(p.accelerations for p in got.points) else None
        start = max(t, got.start)
        first_v = first_a = None
        if velocities and self.trajectory is not None:  # continue the running trajectory's motion smoothly
            running = self.trajectory.state_at(start)
            if running is not None:
                by_name = {name: k for k, name in enumerate(self.trajectory.joints)}
                first_v = [running[1][by_name[n]] if n in by_name else 0.0 for n in got.joints]
                first_a = [running[2][by_name[n]] if n in by_name else 0.0 for n in got.joints]
        self.trajectory = Trajectory(list(got.joints), start, first, [p.t for p in got.points],
                                     [list(p.positions) for p in got.points], velocities, accelerations,
                                     first_v, first_a)
        record = {"topic": command.topic, "joints": list(got.joints), "start": self.trajectory.start,
                  "points": len(got.points), "end": self.trajectory.start + got.points[-1].t,
                  "times": [p.t for p in got.points], "positions": [list(p.positions) for p in got.points],
                  "interpolation": self.trajectory.kind}
        if velocities:
            record["velocities"] = velocities
        if accelerations:
            record["accelerations"] = accelerations
        self.link.write("/ros/joint_command", t, record)

    def _check(self, robot: Any, names: list[str], rows: list[list[float]]) -> None:
        """CommandError unless every joint can be positioned and every position is within its limits."""
        for col, name in enumerate(names):
            joint = robot.joints.get(name)
            if joint is None or joint.mode != POSITION:
                known = ", ".join(self._order or ())
                raise CommandError(f"no position joint {name!r} (these are: {known})")
            lo, hi = joint.limits.lower, joint.limits.upper
            for row in rows:
                if joint.bounded and not lo - LIMIT_TOLERANCE <= row[col] <= hi + LIMIT_TOLERANCE:
                    raise CommandError(f"joint {name}: {row[col]:.6g} rad is outside its limits {lo:g}..{hi:g} rad")

    @staticmethod
    def _set(robot: Any, names: list[str], positions: list[float]) -> None:
        for name, value in zip(names, positions):
            robot.joints[name].target = value


def _summary(command: JointCommand) -> str:
    got = command.command
    if isinstance(got, JointPositions):
        return f"positions={[round(p, 6) for p in got.positions]}"[:120]
    return f"joints={got.joints} ({len(got.points)} points)"[:120]
