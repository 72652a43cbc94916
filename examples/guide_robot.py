"""The guide robot: along the arcade's middle passage from the west hall to the plaza, on odometry waypoints;
slows down and stops when the ring sees someone (or something) close ahead, and turns its head toward the
nearest thing the ring sees close by. Bus data only: odometry, ring ranges, joint targets.

    hil demo                                     # the full trial: crowd, world, this controller, report
    hil run examples/guide_robot.py --profile config/profiles/virtual.yaml \
        --bus "sim://commbot?clock=sim&map=arcade&pose=-18,0,0" --duration 60

The start pose is where the robot is put in the map (the odometry is reset to it), so waypoints are map points.
"""
from __future__ import annotations

import math

HZ = 10.0
START = (-18.0, 0.0, 0.0)  # the west hall, facing east along the middle passage
WAYPOINTS = ((-10.0, 0.0), (-4.5, 0.0))  # mid_west, then the plaza's west node
REACHED_M = 0.4
CRUISE_M_S = 0.45
TURN_GAIN = 1.5
MAX_TURN_RAD_S = 0.8
AHEAD = math.radians(25)  # the sensors within this of straight on see "ahead"
SLOW_M = 1.6  # something ahead closer than this: slow down
STOP_M = 0.8  # closer than this: stop
LOOK_M = 1.5  # the head turns toward the nearest reading closer than this (the passage walls are ~1.8 m away)
HEAD = "head.neck_yaw"


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


class Guide:
    """One decision per tick: ``step(robot)`` sets the base's twist and the head's target; ``done`` at the end."""

    def __init__(self, robot, start=START, waypoints=WAYPOINTS):
        self.waypoints = list(waypoints)
        self.done = False
        robot.base.reset_odometry(*start)

    def step(self, robot) -> tuple[float, float]:
        base, ring = robot.base, robot.sensors["ring"]
        x, y, yaw = base.odometry
        while self.waypoints and math.hypot(self.waypoints[0][0] - x, self.waypoints[0][1] - y) < REACHED_M:
            self.waypoints.pop(0)
        if not self.waypoints:
            self.done = True
            base.stop()
            return 0.0, 0.0
        wx, wy = self.waypoints[0]
        error = _wrap(math.atan2(wy - y, wx - x) - yaw)
        w = max(-MAX_TURN_RAD_S, min(MAX_TURN_RAD_S, TURN_GAIN * error))
        v = CRUISE_M_S * max(0.0, math.cos(error))
        front = ring.nearest(-AHEAD, AHEAD)
        if front is not None and front < SLOW_M:
            v *= max(0.0, (front - STOP_M) / (SLOW_M - STOP_M))
        base.drive(v, w)
        self.look(robot)
        return v, w

    def look(self, robot) -> None:
        """Head toward the nearest close reading (back to straight ahead when nothing is close)."""
        ring = robot.sensors["ring"]
        close = [(r, a) for a, r in zip(ring.angles, ring.ranges) if r is not None and r < LOOK_M]
        target = _wrap(min(close)[1]) if close else 0.0
        head = robot.joints.get(HEAD)
        if head is not None:
            head.target = max(-1.2, min(1.2, target))


def main(robot) -> None:
    guide = Guide(robot)
    for tick in robot.loop(hz=HZ):
        guide.step(robot)
        if guide.done:
            x, y, _ = robot.base.odometry
            print(f"t={tick.time:6.2f} s  arrived at x={x:.2f} y={y:.2f} m", flush=True)
            robot.cycle()
            return
