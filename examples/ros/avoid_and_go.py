"""Avoid and go to a goal: a small rclpy node that drives hil's robot from ROS 2 (hil trial --ros).

It follows the trial's clock (use_sim_time), reads /odom and /scan, and sends /cmd_vel: it heads for the goal (in
the odom frame, which starts at the robot's start pose in the map: with the default start, (0, 0) heading +x,
the odom frame is the map's), turns away from what the ring sees ahead,
and stops at the goal. Run it in ROS's Python (a sourced ROS 2 install, or the venv of the ROS wheels), beside
the trial:

    export ROS_DOMAIN_ID=42 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
    .venv-ros/bin/python examples/ros/avoid_and_go.py --goal=-2.5,1.5 &
    hil trial --ros --map lab --goal=-2.5,1.5 --duration 60

Nothing here knows hil: the same node drives any robot that publishes /odom and /scan and takes /cmd_vel.
"""
from __future__ import annotations

import argparse
import math

import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan

CRUISE_M_S = 0.35
TURN_RAD_S = 0.9
STOP_M = 0.6  # something this close ahead: turn on the spot
SLOW_M = 1.2  # closer than this: slow down and turn away
AHEAD = math.radians(35)
GOAL_RADIUS_M = 0.3


def nearest(scan: LaserScan, lo: float, hi: float) -> float:
    """The shortest finite range between the directions lo and hi (rad); +inf when nothing is seen there."""
    found = [r for k, r in enumerate(scan.ranges)
             if lo <= scan.angle_min + k * scan.angle_increment <= hi and math.isfinite(r)]
    return min(found, default=math.inf)


def steer(pose: tuple[float, float, float], goal: tuple[float, float], scan: LaserScan) -> tuple[float, float]:
    """(v, w): toward the goal, away from the nearer side when something is ahead."""
    x, y, yaw = pose
    bearing = math.atan2(goal[1] - y, goal[0] - x) - yaw
    bearing = math.atan2(math.sin(bearing), math.cos(bearing))
    front = nearest(scan, -AHEAD, AHEAD)
    if front < min(SLOW_M, math.dist((x, y), goal)):  # in the way, and nearer than the goal
        away = -TURN_RAD_S if nearest(scan, AHEAD, math.pi) < nearest(scan, -math.pi, -AHEAD) else TURN_RAD_S
        return (0.0 if front < STOP_M else CRUISE_M_S * (front - STOP_M) / (SLOW_M - STOP_M)), away
    w = max(-TURN_RAD_S, min(TURN_RAD_S, 1.5 * bearing))
    return CRUISE_M_S * max(0.0, math.cos(bearing)), w


class AvoidAndGo:
    def __init__(self, goal: tuple[float, float]):
        self.node = rclpy.create_node("avoid_and_go", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.goal, self.pose, self.scan, self.done = goal, None, None, False
        self.node.create_subscription(Odometry, "/odom", self.on_odom, 10)
        self.node.create_subscription(LaserScan, "/scan", self.on_scan, qos_profile_sensor_data)
        self.cmd = self.node.create_publisher(Twist, "/cmd_vel", 10)
        self.node.create_timer(0.05, self.tick)  # 20 Hz of the trial's clock

    def on_odom(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        self.pose = (p.x, p.y, 2 * math.atan2(q.z, q.w))

    def on_scan(self, msg: LaserScan) -> None:
        self.scan = msg

    def tick(self) -> None:
        if self.pose is None or self.scan is None:
            return
        twist = Twist()
        if math.dist(self.pose[:2], self.goal) < GOAL_RADIUS_M:
            if not self.done:
                self.node.get_logger().info(f"at the goal {self.goal}: stopping")
            self.done = True
        else:
            twist.linear.x, twist.angular.z = steer(self.pose, self.goal, self.scan)
        self.cmd.publish(twist)  # the stop too, every tick: hil's watchdog stops the base if commands stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goal", default="-2.5,1.5", help="X,Y in the odom frame (m; default -2.5,1.5)")
    goal = tuple(float(v) for v in parser.parse_args().goal.split(","))
    rclpy.init()
    node = AvoidAndGo(goal)
    try:
        rclpy.spin(node.node)
    except KeyboardInterrupt:
        pass
    finally:
        node.node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    main()
