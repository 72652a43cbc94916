"""``hil log rosbag``: a trial's log as a rosbag2 (MCAP storage, ROS 2 CDR), read back two ways.

A real trial runs (a Python controller in the lab, facing a wall, so the ring has echoes and misses), the
``hil log rosbag`` command (hil's command line, called in this process: starting hil again would only add its
start-up) writes its bag, and the bag is read with ``rosbags`` here and, message for message, with rclpy's
``deserialize_message`` in ROS's own Python (the registry's ROS 2 wheels). Every value is checked against the
trial's log as hil's log reader gives it, not against the converter's own functions.
"""
from __future__ import annotations

import json
import math
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hil.trial.record import read_log

from ros_helpers import decoded_bag, hil_log_rosbag, ros_python  # noqa: F401 (fixtures)

ROS_TYPES = {"/clock": "rosgraph_msgs.msg:Clock", "/odom": "nav_msgs.msg:Odometry",
             "/scan": "sensor_msgs.msg:LaserScan", "/joint_states": "sensor_msgs.msg:JointState",
             "/robot_description": "std_msgs.msg:String"}  # tf2_msgs has no wheel: /tf, /tf_static via rosbags

DESERIALIZE = '''
import importlib, json, sys
from rclpy.serialization import deserialize_message

raw, types = json.load(open(sys.argv[1])), json.loads(sys.argv[3])

def ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec

def plain(topic, m):
    if topic == "/clock":
        return ns(m.clock)
    if topic == "/odom":
        p, t = m.pose.pose, m.twist.twist
        return [ns(m.header.stamp), m.header.frame_id, m.child_frame_id, p.position.x, p.position.y,
                p.orientation.z, p.orientation.w, t.linear.x, t.angular.z]
    if topic == "/scan":
        return [ns(m.header.stamp), m.header.frame_id, m.angle_min, m.angle_increment, m.range_min, m.range_max,
                list(m.ranges)]
    if topic == "/joint_states":
        return [ns(m.header.stamp), list(m.name), list(m.position)]
    return m.data

out = {}
for topic, items in raw.items():
    module, name = types[topic].split(":")
    kind = getattr(importlib.import_module(module), name)
    out[topic] = [[t, plain(topic, deserialize_message(bytes.fromhex(data), kind))] for t, data in items]
json.dump(out, open(sys.argv[2], "w"))
'''


@pytest.fixture(scope="module")
def trial_and_bag(tmp_path_factory):
    """A 1.5 s trial 1.5 m from the lab's east wall, and its bag written by the command line."""
    from hil.trial.run import Trial

    folder = tmp_path_factory.mktemp("rosbag")
    result = Trial("examples/wander_avoid.py", map="lab", duration=1.5, seed=4, start=(2.5, 0.0, 0.0),
                   camera_rate=0).run(folder / "trial")
    assert result.status == "ok", result.error
    status, out, err = hil_log_rosbag(str(folder / "trial"), "--out", str(folder / "bag"))
    assert status == 0, out + err
    assert "wrote" in out
    return read_log(folder / "trial" / "trial.mcap"), folder / "bag"


def _bag_messages(bag: Path) -> dict[str, list[tuple[int, bytes]]]:
    from rosbags.rosbag2 import Reader

    out: dict[str, list[tuple[int, bytes]]] = {}
    with Reader(bag) as reader:
        for connection, timestamp, raw in reader.messages():
            assert connection.msgtype.count("/") == 2 and connection.ext.serialization_format == "cdr"
            out.setdefault(connection.topic, []).append((timestamp, bytes(raw)))
    return out


def _expected_scan(log, t_ns: int) -> dict[float, float]:
    """The ring's reading at ``t_ns`` by direction in base_link (rad), by REP-117, from the log itself."""
    ring = log.messages["/robot/model"][0].data["ring"]
    reading = next(m.data for m in log.messages["/robot/sensors"] if round(m.t * 1e9) == t_ns)
    out = {}
    for yaw, value, cause in zip(ring["yaw"], reading["ring"], reading["ring_cause"]):
        angle = math.atan2(math.sin(yaw), math.cos(yaw))
        out[angle] = value if value is not None else (math.inf if cause == "no_hit" else math.nan)
    return out


def _check_scan(expected: dict[float, float], angle_min: float, step: float, ranges: list[float]) -> None:
    for angle, want in expected.items():
        got = ranges[round((angle - angle_min) / step)]
        assert angle_min + round((angle - angle_min) / step) * step == pytest.approx(angle, abs=1e-6)
        if math.isnan(want):
            assert math.isnan(got)
        else:
            assert got == pytest.approx(want, rel=1e-6)  # float32 in the message


def test_bag_reads_back_with_rosbags_as_the_log_says(trial_and_bag):
    log, bag = trial_and_bag
    got = decoded_bag(bag)
    clock = [round(m.t * 1e9) for m in log.messages["/clock"]]
    states = log.messages["/robot/state"]
    assert [t for t, _ in got["/clock"]] == clock
    assert [m.clock.sec * 10**9 + m.clock.nanosec for _, m in got["/clock"]] == clock
    assert len(got["/odom"]) == len(got["/tf"]) == len(got["/joint_states"]) == len(states) == len(clock)
    for (t, odom), (_, tf), (_, joints), state in zip(got["/odom"], got["/tf"], got["/joint_states"], states):
        x, y, yaw = state.data["odometry"]
        assert t == round(state.t * 1e9)
        assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_link")
        assert (odom.pose.pose.position.x, odom.pose.pose.position.y) == (x, y)
        q = odom.pose.pose.orientation
        assert 2 * math.atan2(q.z, q.w) == pytest.approx(yaw, abs=1e-12)
        assert (odom.twist.twist.linear.x, odom.twist.twist.angular.z) == (state.data["vx"], state.data["w"])
        transform, placed = tf.transforms  # odom -> base_link; map -> odom (tests/test_ros_world.py checks it)
        assert (transform.header.frame_id, transform.child_frame_id) == ("odom", "base_link")
        assert (placed.header.frame_id, placed.child_frame_id) == ("map", "odom")
        assert (transform.transform.translation.x, transform.transform.translation.y) == (x, y)
        assert dict(zip(joints.name, joints.position)) == state.data["joints"]
    hits = misses = 0
    for t, scan in got["/scan"]:
        expected = _expected_scan(log, t)
        _check_scan(expected, scan.angle_min, scan.angle_increment, list(scan.ranges))
        hits += sum(math.isfinite(v) for v in expected.values())
        misses += sum(v == math.inf for v in expected.values())
    assert len(got["/scan"]) == len(log.messages["/robot/sensors"])
    assert hits > 10 and misses > 10  # the wall was seen, and open space too


def test_description_names_the_blueprints_joints_and_places_the_cameras(trial_and_bag):
    """/robot_description's moving joints are the names /joint_states uses; /tf_static holds every fixed joint,
    each camera's among them, as the log's model places it; both are recorded transient-local."""
    import yaml

    log, bag = trial_and_bag
    got = decoded_bag(bag)
    [(_, description)] = got["/robot_description"]
    urdf = ET.fromstring(description.data)
    moving = {j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"}
    assert moving == set(log.messages["/robot/state"][0].data["joints"])
    assert "left_arm.elbow" in moving
    assert urdf.find("link").get("name") == "base_link"
    [(_, static)] = got["/tf_static"]
    by_child = {t.child_frame_id: t for t in static.transforms}
    model = log.messages["/robot/model"][0].data["links"]
    cameras = [entry for entry in model if entry["name"].startswith("camera_")]
    assert len(cameras) == 2
    for entry in cameras:
        transform = by_child[entry["name"]]
        assert transform.header.frame_id == model[entry["parent"]]["name"]
        moved = transform.transform.translation
        assert [moved.x, moved.y, moved.z] == pytest.approx(entry["joint"]["xyz"], abs=1e-12)
        urdf_joint = next(j for j in urdf.iter("joint") if j.find("child").get("link") == entry["name"])
        assert [float(v) for v in urdf_joint.find("origin").get("rpy").split()] == \
            pytest.approx(entry["joint"]["rpy"], abs=1e-9)
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap"
    offered = info["topics_with_message_count"]
    durability = {t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"] for t in offered}
    assert durability["/robot_description"][0]["durability"] == "transient_local"
    assert durability["/tf_static"][0]["durability"] == "transient_local"
    assert durability["/scan"][0]["reliability"] == "best_effort"


def test_bag_reads_back_with_rclpy_message_for_message(trial_and_bag, ros_python, tmp_path):
    """Every CDR message of the bag, deserialized by rclpy in ROS's Python, equals the log's values."""
    log, bag = trial_and_bag
    raw = {topic: [[t, data.hex()] for t, data in items] for topic, items in _bag_messages(bag).items()
           if topic in ROS_TYPES}
    (tmp_path / "raw.json").write_text(json.dumps(raw))
    (tmp_path / "read.py").write_text(textwrap.dedent(DESERIALIZE))
    done = subprocess.run([ros_python, str(tmp_path / "read.py"), str(tmp_path / "raw.json"),
                           str(tmp_path / "out.json"), json.dumps(ROS_TYPES)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "out.json").read_text())
    assert [v for _, v in got["/clock"]] == [round(m.t * 1e9) for m in log.messages["/clock"]]
    states = log.messages["/robot/state"]
    assert len(got["/odom"]) == len(got["/joint_states"]) == len(states)
    for (_, odom), (_, joints), state in zip(got["/odom"], got["/joint_states"], states):
        x, y, yaw = state.data["odometry"]
        assert odom[:5] == [round(state.t * 1e9), "odom", "base_link", x, y]
        assert 2 * math.atan2(odom[5], odom[6]) == pytest.approx(yaw, abs=1e-12)
        assert odom[7:] == [state.data["vx"], state.data["w"]]
        assert joints[0] == round(state.t * 1e9) and dict(zip(joints[1], joints[2])) == state.data["joints"]
    assert len(got["/scan"]) == len(log.messages["/robot/sensors"])
    for _, (stamp, frame, angle_min, step, low, high, ranges) in got["/scan"]:
        assert frame == "base_link" and (low, high) == pytest.approx((0.03, 4.0))
        _check_scan(_expected_scan(log, stamp), angle_min, step, ranges)
    [(_, urdf)] = got["/robot_description"]
    assert "left_arm.elbow" in {j.get("name") for j in ET.fromstring(urdf).iter("joint")}


def test_bad_input_is_one_line_and_writes_nothing(trial_and_bag, tmp_path):
    """A bag folder that exists, a file that is no log, a folder without one: exit 2, one line, no bag."""
    _, bag = trial_and_bag
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"not an mcap file at all")
    cases = [([str(bag.parent / "trial"), "--out", str(bag)], "exists"),
             ([str(junk), "--out", str(tmp_path / "b1")], "not an MCAP file"),
             ([str(tmp_path), "--out", str(tmp_path / "b2")], "no trial log there")]
    for argv, says in cases:
        status, _, err = hil_log_rosbag(*argv)
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "b1").exists() and not (tmp_path / "b2").exists()
