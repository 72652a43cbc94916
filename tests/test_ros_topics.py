"""The ROS 2 bridge's topics and its behaviour under bad input, with a real rclpy node (Fast DDS) in a process of
its own against the real ``hil trial --ros`` (tests/ros_helpers.py runs them). One trial (the lab, facing its north
wall 2.95 m ahead) and one node that goes through four scenarios in turn, each timed from what the node saw; each
test checks one of them against the trial's log:

- a /cmd_vel flood (the node publishing as fast as it can: over 10 kHz here) does not stall the trial: it runs to
  its end on its clock and the base does what the flood says;
- ``/robot_description`` is transient-local: a node that subscribes long after the bridge published it still gets
  it, and the URDF places each camera and its optical frame where runtime.model does (/tf_static's values:
  tests/test_ros_tf.py);
- joint commands as ros2_control's controllers take them: ``/joint_states`` follows a JointTrajectory, a
  Float64MultiArray sets the declared joints, and NaN, a wrong length or a position beyond a limit is refused with
  one line, nothing of it applied;
- the node drives on /odom toward a goal beyond the wall and stops on /scan before it; every stamp it got is a time
  of the trial's /clock.

Broken Twists and a node that dies (the watchdog): tests/test_ros_bridge.py, a trial of its own (its watchdog is
the default one).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from hil.runtime.model import build_model, create_data, forward_kinematics

from model_helpers import assembly_robot
from ros_helpers import NODE_COMMON, decoded_bag, hil_log_rosbag, ros_env, ros_python, run_with_node  # noqa: F401

# the node: each scenario starts when the one before it ended, timed on the trial's clock (sim time)
SESSION_NODE = NODE_COMMON + '''
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Twist
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
states = []
node.create_subscription(JointState, "/joint_states", lambda m: states.append(
    [stamp(m), dict(zip(m.name, m.position))]), 500)  # deep: a node the machine holds back for a moment misses none
cmd_vel = node.create_publisher(Twist, "/cmd_vel", 10)
trajectory = node.create_publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", 10)
forward = node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
spin_until(lambda: state["odom"] is not None and state["front"] is not None and states and sim_now() > 0)
out = {}

def twist(v, w=0.0):
    msg = Twist()
    msg.linear.x, msg.angular.z = v, w
    return msg

def wait(seconds):
    until = sim_now() + seconds
    spin_until(lambda: sim_now() > until)

def hold_still(seconds):  # stop commands all along: the node stops the base, not the watchdog
    until = sim_now() + seconds
    while sim_now() < until and not clock_stopped():
        cmd_vel.publish(Twist())
        rclpy.spin_once(node, timeout_sec=0.05)

# 1. a /cmd_vel flood: 0.2 m/s as fast as rclpy publishes, for 2 trial seconds
flood_from, sent, began = sim_now(), 0, time.monotonic()
moving = twist(0.2)
while sim_now() < flood_from + 2.0 and time.monotonic() - began < 60:
    cmd_vel.publish(moving)
    sent += 1
    if sent % 200 == 0:
        rclpy.spin_once(node, timeout_sec=0.0)
        if clock_stopped():
            break
out["flood"] = {"sent": sent, "wall_s": time.monotonic() - began, "from": flood_from, "until": sim_now()}
hold_still(0.3)

# 2. /robot_description, subscribed long after the bridge published it (its first cycle)
got = {}
latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
subscribed_at = sim_now()
node.create_subscription(String, "/robot_description", lambda m: got.setdefault("urdf", m.data), latched)
spin_until(lambda: "urdf" in got, 20)
out["description"] = {"urdf": got.get("urdf"), "subscribed_at": subscribed_at, "received_at": sim_now()}

# 3. joint commands: a trajectory, three refused commands, a forward command
order = [name for name in states[-1][1] if not name.startswith("base.")]  # the position joints, in order

def send_trajectory(points):
    msg = JointTrajectory(joint_names=["head.neck_yaw", "left_arm.elbow"])
    for at, positions in points:
        msg.points.append(JointTrajectoryPoint(positions=positions, time_from_start=Duration(
            sec=int(at), nanosec=int((at % 1) * 1e9))))
    trajectory.publish(msg)

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
wait(0.2)  # the joints get there during the drive below; the test checks them at the end
out["joints"] = {"sent_at": sent_at, "forwarded_at": forwarded_at, "order": order}

# 4. to a goal 5 m north (odom starts at the start pose in the map), beyond the wall: stop on /scan before it
GOAL, STOP_M, CRUISE = (0.0, 5.0), 0.7, 0.4
goal_from, reason, commands = sim_now(), None, []
while reason is None:
    rclpy.spin_once(node, timeout_sec=0.02)
    x, y, yaw = state["odom"]
    if math.hypot(GOAL[0] - x, GOAL[1] - y) < 0.2:
        reason = "goal"
    elif state["front"] < STOP_M:
        reason = "wall"
    elif sim_now() > goal_from + 20 or clock_stopped():
        reason = "time"
    command = Twist()
    if reason is None:
        heading = math.atan2(GOAL[1] - y, GOAL[0] - x) - yaw
        command = twist(CRUISE, 1.5 * math.atan2(math.sin(heading), math.cos(heading)))
    cmd_vel.publish(command)
    commands.append([sim_now(), command.linear.x, command.angular.z])
stopped_at = sim_now()
out["goal"] = {"from": goal_from, "reason": reason, "stopped_at": stopped_at, "odom_at_stop": state["odom"],
               "front_at_stop": state["front"], "commands": commands}
hold_still(0.5)
finish(states=states, **out)
'''
DURATION_S = 14.0  # the four scenarios take about 10.5 trial seconds from the trial's first cycle


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("ros_session")


@pytest.fixture(scope="module")
def session(folder, ros_env, ros_python):
    """(what the node saw, the trial's log, the trial's stderr) of the one trial: facing north 0.5 m from the
    lab's centre (the wall 2.45 m ahead), rtf 4; a watchdog of 2 trial seconds (0.5 wall seconds at rtf 4: on a
    busy machine the node may miss less; tests/test_ros_bridge.py checks the default one)."""
    return run_with_node(folder, ros_env, ros_python, SESSION_NODE,
                         "--start", "0,0.5,1.5707963", "--duration", f"{DURATION_S:g}", "--ros-rtf", "4",
                         "--ros-watchdog", "2")


def _refusals(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "refused" in line]


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


def test_a_cmd_vel_flood_does_not_stall_the_trial(session):
    seen, log, stderr = session
    flood = seen["flood"]
    print(f"flood: {flood['sent']} Twists in {flood['wall_s']:.2f} wall s ({flood['sent'] / flood['wall_s']:.0f}/s)")
    assert flood["sent"] > 2000 and flood["until"] >= flood["from"] + 2.0
    assert log.complete and log.messages["/clock"][-1].t == pytest.approx(DURATION_S, abs=0.05)  # ran to its end
    # when the flood's 0.2 m/s was applied and until the next command replaced it, by the log (the node's view of
    # the trial's clock lags on a busy machine, so its own from/until are only bounds)
    applied = log.messages["/ros/cmd_vel"]
    k = next(i for i, m in enumerate(applied) if m.data["v"] == pytest.approx(0.2) and m.t >= flood["from"] - 0.5)
    began, ended = applied[k].t, (applied[k + 1].t if k + 1 < len(applied) else log.messages["/clock"][-1].t)
    assert ended - began >= 1.8, "the flood's command held (no watchdog, no other command) while it lasted"
    moving = [m.data["vx"] for m in log.messages["/robot/state"] if began + 1.2 < m.t < ended]
    assert moving and min(moving) == pytest.approx(0.2, abs=0.02)  # the flood's command, applied
    assert not any("/cmd_vel" in line for line in _refusals(stderr))


def test_robot_description_is_latched_and_places_the_cameras_as_the_model_does(session):
    seen, log, _ = session
    late = seen["description"]
    assert late["urdf"], "the late subscriber got no /robot_description"
    assert late["subscribed_at"] > 1.0
    urdf = ET.fromstring(late["urdf"])
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
    # each camera's optical frame (REP-103: x right, y down, z forward) on a fixed joint from its body's link
    optical_in_body = np.eye(4)
    optical_in_body[:3, :3] = np.array([[0, -1, 0], [0, 0, -1], [1, 0, 0]]).T  # x = -y, y = -z, z = x of the body
    bodies = {}
    for camera in ("head_camera", "right_camera"):
        joint = next(j for j in urdf.iter("joint") if j.get("name") == f"{camera}_optical_joint")
        assert joint.get("type") == "fixed" and joint.find("child").get("link") == f"{camera}_optical_frame"
        bodies[camera] = joint.find("parent").get("link")
        k = next(k for k in cameras if model.links[k].name == bodies[camera])
        assert frames[f"{camera}_optical_frame"] == pytest.approx(placed[k].homogeneous @ optical_in_body, abs=1e-9)
    assert len(set(bodies.values())) == 2
    masses = [float(m.get("value")) for m in urdf.iter("mass")]
    assert sum(masses) == pytest.approx(sum(link.inertia.mass for link in model.links))  # the whole URDF


def test_joint_states_follow_a_trajectory_and_bad_joint_commands_are_refused(session):
    seen, log, stderr = session
    joints = seen["joints"]
    taken = log.messages["/ros/joint_command"]
    assert [m.data["topic"] for m in taken] == ["/joint_trajectory_controller/joint_trajectory",
                                                "/forward_position_controller/commands"]
    start, end = taken[0].data["start"], taken[0].data["end"]
    assert end - start == pytest.approx(2.0)
    assert start == pytest.approx(joints["sent_at"], abs=0.5)  # it started when it came (DDS takes a moment)
    states = seen["states"]
    log_joints = {round(m.t * 1e9): m.data["joints"] for m in log.messages["/robot/state"]}
    assert all(log_joints[t] == positions for t, positions in states)  # /joint_states says what the log says

    def at(t_s: float) -> dict[str, float]:
        return min(states, key=lambda s: abs(s[0] / 1e9 - t_s))[1]

    assert at(start)["head.neck_yaw"] == pytest.approx(0.0, abs=0.02)
    assert at(start + 1.0)["head.neck_yaw"] > 0.4  # on its way through the first point (0.6 at 1 s)
    assert at(start + 1.0)["left_arm.elbow"] < -0.3
    settled = at(end + 0.7)
    assert settled["head.neck_yaw"] == pytest.approx(0.3, abs=0.02)
    assert settled["left_arm.elbow"] == pytest.approx(-1.0, abs=0.02)
    refused = _refusals(stderr)
    assert len(refused) == 3, stderr  # these three, and nothing the other scenarios sent
    assert "/forward_position_controller/commands" in refused[0] and "nan" in refused[0]
    assert "positions; the declared order has" in refused[1]
    assert "/joint_trajectory_controller/joint_trajectory" in refused[2] and "outside its limits" in refused[2]
    assert [m.data["by"] for m in log.messages["/trial/refused"]] == [
        "ros /forward_position_controller/commands"] * 2 + ["ros /joint_trajectory_controller/joint_trajectory"]
    before = at(joints["forwarded_at"] - 0.05)
    assert before["head.neck_yaw"] == pytest.approx(0.3, abs=0.02)  # none of the refused commands moved it
    assert taken[1].data["joints"] == joints["order"]
    last = states[-1][1]  # seconds later, after the drive to the wall: the forward command's targets held
    assert last["head.neck_pitch"] == pytest.approx(0.2, abs=0.02)
    assert last["head.neck_yaw"] == pytest.approx(0.0, abs=0.02)
    assert last["left_arm.elbow"] == pytest.approx(0.0, abs=0.02)


def test_ros_node_drives_to_the_goal_and_stops_before_the_wall(session):
    """From where the flood left it (about 0.85 m north of the lab's centre, the wall 2.95 m north of it) the node
    drives on /odom toward the goal, stops on /scan before the wall; the log shows the commanded speed, the stop, no
    collision, no watchdog, and every stamp the node got is a time of the trial's /clock."""
    seen, log, stderr = session
    goal = seen["goal"]
    assert goal["reason"] == "wall", goal
    clock_ns = {round(m.t * 1e9) for m in log.messages["/clock"]}
    for topic in ("odom", "scan"):
        assert len(seen[topic]) > 50
        assert set(seen[topic]) <= clock_ns, f"/{topic} stamps not in the log's /clock"
    applied = [m for m in log.messages["/ros/cmd_vel"]]
    assert any(m.data["v"] == pytest.approx(0.4) for m in applied if m.t >= goal["from"])
    assert applied[-1].data["v"] == 0.0 and applied[-1].data.get("why") is None  # the node's stop, no watchdog
    assert "/ros/watchdog" not in log.messages
    states = log.messages["/robot/state"]
    started = next(m.t for m in applied if m.t >= goal["from"] and m.data["v"] > 0)  # its first drive command
    cruising = [m.data["vx"] for m in states if started + 1.0 < m.t < goal["stopped_at"] - 0.3]
    assert cruising and min(cruising) == pytest.approx(0.4, abs=0.05)  # moved as commanded
    last = states[-1].data
    assert 1.5 < last["y"] < 2.95 - 0.25, last  # moved toward the wall (north, y = 2.95 its face) and short of it
    assert abs(last["x"]) < 0.3, last
    assert abs(last["vx"]) < 0.02
    assert not any(m.data.get("contacts") for m in log.messages["/robot/sensors"])
    assert not any("/cmd_vel" in line for line in _refusals(stderr))




def test_the_trials_rosbag_replays_the_joint_commands_it_took(session, folder):
    """``hil log rosbag`` of this trial: the trajectory and the forward command the trial took, as the node sent
    them (the trajectory stamped with the trial time it started at), and none of the three it refused."""
    seen, log, _ = session
    status, out, err = hil_log_rosbag(str(folder / "trial"), "--out", str(folder / "bag"))
    assert status == 0, out + err
    bag = decoded_bag(folder / "bag")
    taken = log.messages["/ros/joint_command"]
    [(t, trajectory)] = bag["/joint_trajectory_controller/joint_trajectory"]
    assert t == round(taken[0].t * 1e9)
    assert list(trajectory.joint_names) == ["head.neck_yaw", "left_arm.elbow"]
    stamp = trajectory.header.stamp
    assert stamp.sec + stamp.nanosec * 1e-9 == pytest.approx(taken[0].data["start"], abs=1e-9)
    assert [(p.time_from_start.sec + p.time_from_start.nanosec * 1e-9, list(p.positions))
            for p in trajectory.points] == [(1.0, [0.6, -0.5]), (2.0, [0.3, -1.0])]
    [(t, forward)] = bag["/forward_position_controller/commands"]
    assert t == round(taken[1].t * 1e9)
    order = seen["joints"]["order"]
    assert list(forward.data) == [0.2 if name == "head.neck_pitch" else 0.0 for name in order]
