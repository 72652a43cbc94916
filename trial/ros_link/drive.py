"""The controller of a trial whose controller is a ROS 2 graph (``hil trial --ros`` with no controller file).

:class:`RosDrive` is a controller (a callable taking the robot, runtime/robot/runner.py) that runs the bus cycles
at ``hz`` on the simulator's clock and, after each:

- applies the newest ``/cmd_vel`` the link took (trial/ros_link/link.py) to the base, within the wheels' velocity
  limits: a command that would need a wheel beyond its limit is scaled down, v and w together, so the robot
  keeps the curve it was asked for at the fastest speed the wheels allow (a Python controller's base.drive
  refuses such a command instead; ROS stacks expect a base to saturate);
- stops the base when the newest command was refused (NaN, inf, 1e9: the link wrote why);
- keeps a **watchdog**: when no command came for ``watchdog_s`` of trial time while the base was moving, it stops
  the base and writes ``/ros/watchdog`` to the log (a node that died, a bridge that hangs);
- writes ``/ros/cmd_vel`` to the log each time the command applied changes (what was asked, what was applied);
- sets the position joints' targets from the joint commands the link took (joint_commands.py: a
  Float64MultiArray in the declared order, or a JointTrajectory followed cycle by cycle);
- paces the lockstep to ``rtf`` (trial seconds per wall second): ROS nodes think in wall time, so the simulator
  must not run ahead of them. A trial that cannot keep up runs as fast as it can.

Its watchdog and its pacing use trial time and the wall's original clock (runtime/clock/base.py WALL,
WALL_SLEEP): the controller runs under the time patch, where time.sleep follows the simulator.
"""
from __future__ import annotations

import math
from typing import Any

from hil.runtime.clock.base import WALL, WALL_SLEEP

from .defaults import DEFAULT_HZ, DEFAULT_RTF, DEFAULT_WATCHDOG_S
from .joint_commands import JointCommander
from .link import REFUSED, CmdVel, RosLink

STOPPED = (0.0, 0.0)


def within_limits(base: Any, v: float, w: float) -> tuple[float, float]:
    """(v, w) scaled down together so that no wheel exceeds its velocity limit (as they are when none would)."""
    worst = 1.0
    for wheel, speed in zip(base.wheels, base.wheel_speeds(v, w)):
        limit = abs(wheel.joint.limits.velocity)
        if limit > 0 and abs(speed) > limit:
            worst = max(worst, abs(speed) / limit)
    if worst == 1.0:
        return v, w
    scale = (1.0 - 1e-9) / worst  # strictly inside: the joint's own check compares with <=
    return v * scale, w * scale


class RosDrive:
    """``Trial(RosDrive(link), ...)``: the base driven by ``/cmd_vel`` through ``link``."""

    def __init__(self, link: RosLink, *, hz: float = DEFAULT_HZ, rtf: float = DEFAULT_RTF,
                 watchdog_s: float = DEFAULT_WATCHDOG_S):
        for name, value in (("hz", hz), ("rtf", rtf), ("watchdog_s", watchdog_s)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"--ros-{name.replace('_s', '').replace('_', '-')} must be a number > 0, "
                                 f"not {value!r}")
        self.link, self.hz, self.rtf, self.watchdog_s = link, float(hz), float(rtf), float(watchdog_s)
        self.applied = STOPPED
        self.last_command_s: float | None = None
        self.watchdog_stops = 0
        self.joints = JointCommander(link)

    def __call__(self, robot: Any) -> None:
        base = robot.base  # a robot without a drivable base: BaseGeometryError, the trial fails saying so
        robot.mode = "ros"
        wall0, sim0 = WALL(), robot.clock.now()
        for tick in robot.loop(self.hz):
            t = self.link.trial_time(robot)
            self.step(base, t)
            self.joints.step(robot, t)
            ahead = (tick.time - sim0) / self.rtf - (WALL() - wall0)
            if ahead > 0:
                WALL_SLEEP(ahead)

    def step(self, base: Any, t: float) -> None:
        """One cycle's decision: the newest command, a refusal or the watchdog, applied to the base."""
        command = self.link.take_command(t)
        if command is REFUSED:
            self.last_command_s = t
            self._apply(base, t, STOPPED, asked=None, why="refused")
        elif command is not None:
            self.last_command_s = t
            self._apply(base, t, within_limits(base, command.v, command.w), asked=command)
        elif self.applied != STOPPED and self.last_command_s is not None and \
                t - self.last_command_s > self.watchdog_s + 1e-9:
            self.watchdog_stops += 1
            self.link.write("/ros/watchdog", t, {"last_command_s": self.last_command_s,
                                                 "silent_s": t - self.last_command_s, "limit_s": self.watchdog_s})
            print(f"hil ros: t={t:.3f} s: no /cmd_vel for {t - self.last_command_s:.3f} s (watchdog "
                  f"{self.watchdog_s:g} s): the base stops", file=self.link.err, flush=True)
            self._apply(base, t, STOPPED, asked=None, why="watchdog")

    def _apply(self, base: Any, t: float, vw: tuple[float, float], *, asked: CmdVel | None,
               why: str | None = None) -> None:
        if vw == self.applied:
            return
        base.drive(*vw)
        self.applied = vw
        record: dict[str, Any] = {"v": vw[0], "w": vw[1]}
        if asked is not None:
            record["asked"] = [asked.v, asked.w]
        if why is not None:
            record["why"] = why
        self.link.write("/ros/cmd_vel", t, record)
