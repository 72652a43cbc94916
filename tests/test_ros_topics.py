"""The ROS 2 bridge's other topics and its behaviour under bad input, with real rclpy nodes (Fast DDS) in
processes of their own against the real ``hil trial --ros`` (tests/ros_helpers.py runs them):

- ``/robot_description`` is transient-local: a node that subscribes after the trial started still gets it, and the
  URDF places each camera where runtime.model does (the registry's wheels have no tf2_msgs, so the cameras'
  poses are checked in the URDF rather than on /tf_static);
- joint commands as ros2_control's controllers take them: ``/joint_states`` follows a JointTrajectory, a
  Float64MultiArray sets the declared joints, and NaN, a wrong length or a position beyond a limit is refused with
  one line, nothing of it applied;
- a /cmd_vel flood (a node publishing as fast as it can: over 10 kHz here) does not stall the trial: it runs to its
  end on its clock and the base does what the flood says. (A node that dies is stopped by the watchdog:
  tests/test_ros_bridge.py.)
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from hil.runtime.model import build_model, create_data, forward_kinematics

from model_helpers import assembly_robot
from ros_helpers import NODE_COMMON, ros_env, ros_python, run_with_node  # noqa: F401 (fixtures)

DESCRIPTION_NODE = NODE_COMMON + '''
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
spin_until(lambda: sim_now() > 1.0)  # long after the bridge published the description (its first cycle)
got = {}
latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
subscribed_at = sim_now()
node.create_subscription(String, "/robot_description", lambda m: got.setdefault("urdf", m.data), latched)
spin_until(lambda: "urdf" in got, 20)
finish(urdf=got.get("urdf"), subscribed_at=subscribed_at, received_at=sim_now())
'''


def _rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis roll, pitch, yaw: Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
                              math.sin(yaw))
    return np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]]) @ np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]]) @ \
        np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])


def _urdf_frames(urdf: ET.Element) -> dict[str, np.ndarray]:
    """Every link's 4x4 frame in the root link at zero joint positions, chaining the joints' origins."""
    joints = {j.find("child").get("link"): j for j in urdf.iter("joint")}
    frames: dict[str, np.ndarray] = {}

    def frame(link: str) -> np.ndarray:
        if link not in frames:
            joint = joints.get(link)
            if joint is None:
                frames[link] = np.eye(4)
            else:
                origin = joint.find("origin")
                local = np.eye(4)
                local[:3, :3] = _rpy(*(float(v) for v in origin.get("rpy").split()))
                local[:3, 3] = [float(v) for v in origin.get("xyz").split()]
                frames[link] = frame(joint.find("parent").get("link")) @ local
        return frames[link]

    for link in urdf.iter("link"):
        frame(link.get("name"))
    return frames


def test_robot_description_is_latched_and_places_the_cameras_as_the_model_does(tmp_path, ros_env, ros_python):
    seen, log, stderr = run_with_node(tmp_path, ros_env, ros_python, DESCRIPTION_NODE, "--duration", "3",
                                      "--ros-rtf", "4")
    assert seen["urdf"], "the late subscriber got no /robot_description"
    assert seen["subscribed_at"] > 1.0
    urdf = ET.fromstring(seen["urdf"])
    moving = {j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"}
    assert moving == set(log.messages["/robot/state"][0].data["joints"])  # the names /joint_states uses
    assert urdf.find("link").get("name") == "base_link"
    model = build_model(assembly_robot("commbot"))
    placed = forward_kinematics(model, create_data(model), np.zeros(model.nq))
    frames = _urdf_frames(urdf)
    cameras = [k for k, link in enumerate(model.links) if link.name.startswith("camera_")]
    assert len(cameras) == 2
    for k in cameras:
        assert frames[model.links[k].name] == pytest.approx(placed[k].homogeneous, abs=1e-9)
    masses = [float(m.get("value")) for m in urdf.iter("mass")]
    assert sum(masses) == pytest.approx(sum(link.inertia.mass for link in model.links))  # the whole URDF


JOINTS_NODE = NODE_COMMON + '''
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
states = []
node.create_subscription(JointState, "/joint_states", lambda m: states.append(
    [stamp(m), dict(zip(m.name, m.position))]), 10)
trajectory = node.create_publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", 10)
forward = node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
spin_until(lambda: states and sim_now() > 0.5)
order = [name for name in states[-1][1] if not name.startswith("base.")]  # the position joints, in order

def send_trajectory(points):
    msg = JointTrajectory(joint_names=["head.neck_yaw", "left_arm.elbow"])
    for at, positions in points:
        msg.points.append(JointTrajectoryPoint(positions=positions, time_from_start=Duration(
            sec=int(at), nanosec=int((at % 1) * 1e9))))
    trajectory.publish(msg)

def wait(seconds):
    until = sim_now() + seconds
    spin_until(lambda: sim_now() > until)

sent_at = sim_now()
send_trajectory([(1.0, [0.6, -0.5]), (2.0, [0.3, -1.0])])
wait(3.0)
forward.publish(Float64MultiArray(data=[math.nan] + [0.0] * (len(order) - 1)))
wait(0.3)
forward.publish(Float64MultiArray(data=[0.0] * (len(order) - 1)))
wait(0.3)
send_trajectory([(0.5, [4.0, 0.0])])  # beyond the neck's limit (pi)
wait(0.5)
targets = [0.2 if name == "head.neck_pitch" else 0.0 for name in order]
forwarded_at = sim_now()
forward.publish(Float64MultiArray(data=targets))
wait(1.5)
finish(states=states, sent_at=sent_at, forwarded_at=forwarded_at, order=order)
'''


def test_joint_states_follow_a_trajectory_and_bad_joint_commands_are_refused(tmp_path, ros_env, ros_python):
    seen, log, stderr = run_with_node(tmp_path, ros_env, ros_python, JOINTS_NODE, "--duration", "7",
                                      "--ros-rtf", "4")
    taken = log.messages["/ros/joint_command"]
    assert [m.data["topic"] for m in taken] == ["/joint_trajectory_controller/joint_trajectory",
                                                "/forward_position_controller/commands"]
    start, end = taken[0].data["start"], taken[0].data["end"]
    assert end - start == pytest.approx(2.0)
    assert start == pytest.approx(seen["sent_at"], abs=0.5)  # it started when it came (DDS takes a moment)
    states = seen["states"]
    log_joints = {round(m.t * 1e9): m.data["joints"] for m in log.messages["/robot/state"]}
    assert all(log_joints[t] == joints for t, joints in states)  # /joint_states says what the log says

    def at(t_s: float) -> dict[str, float]:
        return min(states, key=lambda s: abs(s[0] / 1e9 - t_s))[1]

    assert at(start)["head.neck_yaw"] == pytest.approx(0.0, abs=0.02)
    assert at(start + 1.0)["head.neck_yaw"] > 0.4  # on its way through the first point (0.6 at 1 s)
    assert at(start + 1.0)["left_arm.elbow"] < -0.3
    settled = at(end + 0.7)
    assert settled["head.neck_yaw"] == pytest.approx(0.3, abs=0.02)
    assert settled["left_arm.elbow"] == pytest.approx(-1.0, abs=0.02)
    refused = [line for line in stderr.splitlines() if "refused" in line]
    assert len(refused) == 3, stderr
    assert "/forward_position_controller/commands" in refused[0] and "nan" in refused[0]
    assert "positions; the declared order has" in refused[1]
    assert "/joint_trajectory_controller/joint_trajectory" in refused[2] and "outside its limits" in refused[2]
    assert [m.data["by"] for m in log.messages["/trial/refused"]] == [
        "ros /forward_position_controller/commands"] * 2 + ["ros /joint_trajectory_controller/joint_trajectory"]
    before = at(seen["forwarded_at"] - 0.05)
    assert before["head.neck_yaw"] == pytest.approx(0.3, abs=0.02)  # none of the refused commands moved it
    assert taken[1].data["joints"] == seen["order"]
    last = states[-1][1]
    assert last["head.neck_pitch"] == pytest.approx(0.2, abs=0.02)
    assert last["head.neck_yaw"] == pytest.approx(0.0, abs=0.02) and last["left_arm.elbow"] == pytest.approx(0.0, abs=0.02)


FLOOD_NODE = NODE_COMMON + '''
from geometry_msgs.msg import Twist
pub = node.create_publisher(Twist, "/cmd_vel", 10)
spin_until(lambda: sim_now() > 0.2)
twist, sent, began = Twist(), 0, time.monotonic()
twist.linear.x = 0.2
while sim_now() < 3.0 and time.monotonic() - began < 60:
    pub.publish(twist)
    sent += 1
    if sent % 200 == 0:
        rclpy.spin_once(node, timeout_sec=0.0)
finish(sent=sent, wall_s=time.monotonic() - began, until=sim_now())
os._exit(0)
'''


def test_a_cmd_vel_flood_does_not_stall_the_trial(tmp_path, ros_env, ros_python):
    seen, log, stderr = run_with_node(tmp_path, ros_env, ros_python, FLOOD_NODE, "--duration", "4",
                                      "--ros-rtf", "4")
    print(f"flood: {seen['sent']} Twists in {seen['wall_s']:.2f} wall s ({seen['sent'] / seen['wall_s']:.0f}/s)")
    assert seen["sent"] > 2000 and seen["until"] >= 3.0
    assert log.complete and log.messages["/clock"][-1].t == pytest.approx(4.0, abs=0.05)  # ran to its end
    moving = [m.data["vx"] for m in log.messages["/robot/state"] if 1.5 < m.t < 3.0]
    assert moving and min(moving) == pytest.approx(0.2, abs=0.02)  # the flood's command, applied
    assert "refused" not in stderr
