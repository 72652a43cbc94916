"""Joint commands from ROS, as ros2_control's controllers take them, applied to the robot's position joints.

- ``/forward_position_controller/commands`` (std_msgs/Float64MultiArray): one position per joint in the
  **declared order**: the robot's position-mode joints in the order ``/joint_states`` names them (on the
  commbot: the neck, the eyes, the arms and hands; the wheels are velocity-mode and driven by ``/cmd_vel``). It
  sets those targets at once and ends any trajectory running.
- ``/joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory): joints by name (any
  subset of the declared ones), points with ``time_from_start``. It starts at the header's stamp (trial time),
  or when it arrives if the stamp is 0 or past; from the joints' positions then, each cycle's target is the
  straight line between the points around it (joint_trajectory_controller interpolates with splines; a line
  between close points is what a servo's own profile does anyway), and the last point is held. A new
  trajectory replaces the one running.

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
    """A running trajectory: from the joints' positions at ``start`` through its points, then held."""

    def __init__(self, joints: list[str], start: float, first: list[float], times: list[float],
                 points: list[list[float]]):
        self.joints, self.start = joints, start
        self.times = [0.0, *times]
        self.points = [first, *points]

    def at(self, t: float) -> list[float] | None:
        """The positions at trial time ``t`` (None before it starts)."""
        tau = t - self.start
        if tau < 0:
            return None
        k = bisect_right(self.times, tau)
        if k >= len(self.times):
            return self.points[-1]
        t0, t1 = self.times[k - 1], self.times[k]
        share = (tau - t0) / (t1 - t0) if t1 > t0 else 1.0
        return [a + (b - a) * share for a, b in zip(self.points[k - 1], self.points[k])]


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
            if k and point.t < got.points[k - 1].t:
                raise CommandError(f"point {k}'s time_from_start {point.t:g} s is before point {k - 1}'s")
        if len(set(got.joints)) != len(got.joints):
            raise CommandError("a joint named twice")
        self._check(robot, got.joints, [p.positions for p in got.points])
        first = [robot.joints[name].position for name in got.joints]
        self.trajectory = Trajectory(list(got.joints), max(t, got.start), first, [p.t for p in got.points],
                                     [list(p.positions) for p in got.points])
        self.link.write("/ros/joint_command", t, {"topic": command.topic, "joints": list(got.joints),
                                                  "start": self.trajectory.start, "points": len(got.points),
                                                  "end": self.trajectory.start + got.points[-1].t,
                                                  "times": [p.t for p in got.points],
                                                  "positions": [list(p.positions) for p in got.points]})

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
