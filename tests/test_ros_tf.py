"""``/tf`` and ``/tf_static`` from the ROS 2 bridge, live, with a real rclpy node (Fast DDS) in a process of its own
against the real ``hil trial --ros`` (tests/ros_helpers.py runs them).

The registry's wheels have no tf2_msgs, so the bridge writes both topics through Cyclone DDS
(trial/ros_link/ros_side/dds_tf.py); the node checks that Fast DDS's graph lists them as ROS topics of type
tf2_msgs/msg/TFMessage, and reads their values with a Cyclone DDS reader whose types are declared here (the rmw's
names and layout: ``rt/tf``, ``tf2_msgs::msg::dds_::TFMessage_``), as any DDS program could. The values are checked
against the trial's log (odometry, ground truth) and runtime.model (the cameras' poses); /tf_static is read by a
reader that joins two trial seconds after the bridge published it.
"""
from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest

from hil.runtime.model import build_model, create_data, forward_kinematics

from model_helpers import assembly_robot
from ros_helpers import NODE_COMMON, ros_env, ros_python, run_with_node  # noqa: F401

CAMERAS = ("head_camera", "right_camera")
LATE_S = 2.0  # trial seconds after the start when the late reader of /tf_static joins
DURATION_S = 4.0

NODE = NODE_COMMON + '''
from dataclasses import dataclass, field
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import final
from cyclonedds.idl.types import float64, int32, sequence, uint32
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from geometry_msgs.msg import Twist

@final
@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32

@final
@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time
    frame_id: str

@final
@dataclass
class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64
    y: float64
    z: float64

@final
@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64
    y: float64
    z: float64
    w: float64

@final
@dataclass
class Transform(IdlStruct, typename="geometry_msgs::msg::dds_::Transform_"):
    translation: Vector3
    rotation: Quaternion

@final
@dataclass
class TransformStamped(IdlStruct, typename="geometry_msgs::msg::dds_::TransformStamped_"):
    header: Header
    child_frame_id: str
    transform: Transform

@final
@dataclass
class TFMessage(IdlStruct, typename="tf2_msgs::msg::dds_::TFMessage_"):
    transforms: sequence[TransformStamped]

def rows(message):  # a writer that leaves gives an InvalidSample (no data): none
    if not isinstance(message, TFMessage):
        return []
    return [[t.header.stamp.sec * 1_000_000_000 + t.header.stamp.nanosec, t.header.frame_id, t.child_frame_id,
             [t.transform.translation.x, t.transform.translation.y, t.transform.translation.z],
             [t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w]]
            for t in message.transforms]

# 1. Fast DDS's graph, before this process has any DDS endpoint of its own on these topics
def tf_graph():
    types = dict(node.get_topic_names_and_types())
    return {topic: {"types": types.get(topic, []), "publishers": [
        [info.node_name, info.topic_type] for info in node.get_publishers_info_by_topic(topic)]}
        for topic in ("/tf", "/tf_static")}

spin_until(lambda: all(g["publishers"] for g in tf_graph().values()), 30)
graph = tf_graph()

# 2. Cyclone readers: /tf from now on, /tf_static once LATE_S trial seconds have passed
domain_id = int(os.environ["ROS_DOMAIN_ID"])
domain = Domain(domain_id, f"""<CycloneDDS><Domain id="{domain_id}"><General><Interfaces>
    <NetworkInterface address="127.0.0.1"/></Interfaces><AllowMulticast>false</AllowMulticast></General>
    <Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>
    <Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>""")
participant = DomainParticipant(domain_id)
reliable = Policy.Reliability.Reliable(duration(seconds=1))
tf_reader = DataReader(participant, Topic(participant, "rt/tf", TFMessage),
                       qos=Qos(reliable, Policy.Durability.Volatile, Policy.History.KeepLast(1000)))
tf, static, late = [], [], {}
cmd_vel = node.create_publisher(Twist, "/cmd_vel", 10)
turning = Twist()
turning.linear.x, turning.angular.z = 0.3, 0.8
began = time.monotonic()
while not clock_stopped() and time.monotonic() - began < 90:
    rclpy.spin_once(node, timeout_sec=0.02)
    cmd_vel.publish(turning)
    tf.extend(r for r in (rows(m) for m in tf_reader.take(N=100)) if r)
    if "reader" not in late and sim_now() > LATE_S:
        late["at"] = sim_now()
        late["reader"] = DataReader(participant, Topic(participant, "rt/tf_static", TFMessage), qos=Qos(
            reliable, Policy.Durability.TransientLocal, Policy.History.KeepLast(1)))
    if "reader" in late:
        static.extend(r for m in late["reader"].take(N=10) for r in rows(m))
finish(graph=graph, tf=tf, static=static, late_at=late.get("at"))
'''.replace("LATE_S", repr(LATE_S))


@pytest.fixture(scope="module")
def session(tmp_path_factory, ros_env, ros_python):
    """(what the node saw, the trial's log, the trial's stderr): the lab, the node driving a curve, rtf 2."""
    return run_with_node(tmp_path_factory.mktemp("ros_tf"), ros_env, ros_python, NODE,
                         "--duration", f"{DURATION_S:g}", "--ros-rtf", "2")


def _yaw(xyzw: list[float]) -> float:
    x, y, z, w = xyzw
    assert x == pytest.approx(0.0, abs=1e-12) and y == pytest.approx(0.0, abs=1e-12)
    return 2 * math.atan2(z, w)


def _angle(a: float) -> float:
    return math.atan2(math.sin(a), math.cos(a))


def _matrix(xyz: list[float], xyzw: list[float]) -> np.ndarray:
    x, y, z, w = xyzw
    out = np.eye(4)
    out[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                   [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                   [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    out[:3, 3] = xyz
    return out


def test_the_graph_lists_tf_and_tf_static_as_ros_topics(session):
    seen, _, stderr = session
    for topic in ("/tf", "/tf_static"):
        assert seen["graph"][topic]["types"] == ["tf2_msgs/msg/TFMessage"], seen["graph"]
        assert [kind for _, kind in seen["graph"][topic]["publishers"]] == ["tf2_msgs/msg/TFMessage"]


def test_tf_is_the_logs_odometry_and_ground_truth_at_each_stamp(session):
    """odom -> base_link is the log's odometry at the transform's stamp; map -> odom composed with it is the
    base's ground truth there (where the robot really is)."""
    seen, log, _ = session
    states = {round(m.t * 1e9): m.data for m in log.messages["/robot/state"]}
    got = seen["tf"]
    print(f"/tf: {len(got)} messages read of {len(states)} cycles")
    assert len(got) >= 0.8 * len(states)  # reliable: a loaded machine may start the reader a little late
    moved = 0
    for message in got:
        frames = {(parent, child): (stamp, xyz, xyzw) for stamp, parent, child, xyz, xyzw in message}
        assert set(frames) == {("odom", "base_link"), ("map", "odom")}
        stamp, xyz, xyzw = frames["odom", "base_link"]
        state = states[stamp]  # every stamp is a cycle of the log
        ox, oy, oyaw = state["odometry"]
        assert xyz == pytest.approx([ox, oy, 0.0], abs=1e-9)
        assert _angle(_yaw(xyzw) - oyaw) == pytest.approx(0.0, abs=1e-9)
        placed_stamp, placed_xyz, placed_xyzw = frames["map", "odom"]
        assert placed_stamp == stamp
        base_in_map = _matrix(placed_xyz, placed_xyzw) @ _matrix(xyz, xyzw)
        assert base_in_map[:2, 3] == pytest.approx([state["x"], state["y"]], abs=1e-9)
        assert _angle(math.atan2(base_in_map[1, 0], base_in_map[0, 0]) - state["yaw"]) == pytest.approx(0, abs=1e-9)
        moved += math.hypot(ox, oy) > 0.1
    assert moved > 0  # the node drove: the transforms are not the start pose over and over


def test_a_late_reader_gets_tf_static_with_each_cameras_pose_as_the_model_has_it(session):
    """The reader that joins at 2 s gets the one /tf_static message (transient-local) stamped at the trial's first
    cycle: each camera's optical frame (x right, y down, z forward) on its camera's link, and the fixed joints
    above it, place the camera as runtime.model does."""
    seen, log, _ = session
    assert seen["late_at"] > LATE_S
    stamps = {row[0] for row in seen["static"]}
    assert len(stamps) == 1 and stamps <= {round(m.t * 1e9) for m in log.messages["/clock"][:2]}
    static = {child: (parent, _matrix(xyz, xyzw)) for _, parent, child, xyz, xyzw in seen["static"]}
    model = build_model(assembly_robot("commbot"))
    placed = forward_kinematics(model, create_data(model), np.zeros(model.nq))
    index = {("base_link" if link.parent < 0 else link.name): k for k, link in enumerate(model.links)}
    # the optical frame in the camera's body, by REP-103: its x is the body's -y, its y the body's -z, its z the x
    optical_in_body = np.eye(4)
    optical_in_body[:3, :3] = np.array([[0, -1, 0], [0, 0, -1], [1, 0, 0]]).T
    for camera in CAMERAS:
        body, _ = static[f"{camera}_optical_frame"]
        assert body.startswith("camera_") and body in index
        frame, chained = f"{camera}_optical_frame", np.eye(4)
        while frame in static:  # up the fixed joints to the first frame a moving joint (or nothing) holds
            frame, step = static[frame][0], static[frame][1]
            chained = step @ chained
        expected = np.linalg.inv(placed[index[frame]].homogeneous) @ placed[index[body]].homogeneous \
            @ optical_in_body
        assert chained == pytest.approx(expected, abs=1e-9)


def test_without_tf2_msgs_or_cyclonedds_the_bridge_says_so_in_one_line(ros_python, tmp_path):
    """In ROS's Python with cyclonedds made unimportable (a package of that name that will not import, first on
    the path), the bridge's choice of /tf publisher is none, said in one line naming both packages."""
    from hil.trial.ros_link.launch import BRIDGE_NODE

    (tmp_path / "cyclonedds").mkdir()
    (tmp_path / "cyclonedds" / "__init__.py").write_text('raise ModuleNotFoundError("no cyclonedds", '
                                                         'name="cyclonedds")\n')
    probe = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
             "import tf_out\n"
             "said = []\n"
             "class Log:\n"
             "    def warning(self, line): said.append(line)\n"
             "    info = warning\n"
             "print(repr(tf_out.open_tf(None, Log())), said)\n")
    done = subprocess.run([ros_python, "-c", probe, str(tmp_path), str(BRIDGE_NODE.parent)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip().splitlines()[-1]
    assert out.startswith("None [") and out.count("'") == 2, out
    assert "neither tf2_msgs nor cyclonedds imports here" in out and "/tf and /tf_static are not published" in out
