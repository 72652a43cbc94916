"""What the ROS 2 bridge says of the world around the robot, with a real rclpy node (Fast DDS) in a process of its
own against the real ``hil trial --ros`` (tests/ros_helpers.py runs them): the people as
``visualization_msgs/MarkerArray`` on ``/people/markers`` and as ground truth on ``/people/ground_truth``
(sensor_msgs/PointCloud2), and ``/diagnostics``. One trial in the lab with a busy crowd (people come through the
door and leave again within seconds) and one node that listens to everything until the trial's clock stops; each
test checks what the node received against the trial's log.
"""
from __future__ import annotations

import json
import math
import subprocess
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from ros_helpers import NODE_COMMON, decoded_bag, hil_log_rosbag, ros_env, ros_python, run_with_node  # noqa: F401

# what the node (and the bag's reader) keeps of each message, as plain JSON: both run in ROS's Python
ROWS = '''
def ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec

def marker_rows(msg):
    return [[ns(m.header.stamp), m.header.frame_id, m.ns, m.id, m.type, m.action, m.pose.position.x,
             m.pose.position.y, m.pose.position.z, m.scale.x, m.scale.y, m.scale.z] for m in msg.markers]

def cloud_row(msg):
    return [ns(msg.header.stamp), msg.header.frame_id, msg.width, msg.height, msg.point_step, msg.is_bigendian,
            [[f.name, f.offset, f.datatype, f.count] for f in msg.fields], bytes(msg.data).hex()]

def diagnostic_row(msg):
    return [ns(msg.header.stamp), [[s.level[0] if isinstance(s.level, bytes) else s.level, s.name, s.message,
                                    s.hardware_id, {kv.key: kv.value for kv in s.values}] for s in msg.status]]

def twist_row(msg):
    return [msg.linear.x, msg.angular.z]

def image_row(msg):
    return [ns(msg.header.stamp), msg.header.frame_id, msg.width, msg.height, msg.encoding, msg.step,
            bytes(msg.data).hex()]

def info_row(msg):
    return [ns(msg.header.stamp), msg.header.frame_id, msg.width, msg.height, msg.distortion_model, list(msg.k),
            list(msg.p)]
'''
LISTENER = NODE_COMMON + ROWS + '''
DRIVE_S = 2.0
CAMERAS = ("head_camera", "right_camera")
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import PointCloud2
from visualization_msgs.msg import MarkerArray
markers, clouds, diagnostics = [], [], []
on_markers = lambda msg: markers.append(marker_rows(msg))
on_cloud = lambda msg: clouds.append(cloud_row(msg))
on_diagnostics = lambda msg: diagnostics.append(diagnostic_row(msg))

node.create_subscription(MarkerArray, "/people/markers", on_markers, 500)  # deep: a busy machine drops none
node.create_subscription(PointCloud2, "/people/ground_truth", on_cloud, 500)
node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 500)
from sensor_msgs.msg import CameraInfo, Image
cameras = {}  # topic -> rows (the pixels of the first two frames only: the JSON stays small)
# sensor data's best effort, kept 50 deep: a node the machine holds back loses no frame from its own queue
deep_sensor_data = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)

def on_camera(topic, row):
    rows = cameras.setdefault(topic, [])
    rows.append(row if len(rows) < 2 or "image_raw" not in topic else row[:-1])

for camera in CAMERAS:
    for kind, topic, rowed in ((Image, f"/{camera}/image_raw", image_row),
                               (Image, f"/{camera}/depth/image_raw", image_row),
                               (CameraInfo, f"/{camera}/camera_info", info_row)):
        node.create_subscription(kind, topic, lambda m, t=topic, r=rowed: on_camera(t, r(m)), deep_sensor_data)
from geometry_msgs.msg import Twist
cmd_vel = node.create_publisher(Twist, "/cmd_vel", 10)
turning, still = Twist(), Twist()
turning.linear.x, turning.angular.z = 0.2, 0.5
began = time.monotonic()
while not clock_stopped() and time.monotonic() - began < 90:  # until the trial's clock stops
    rclpy.spin_once(node, timeout_sec=0.02)
    cmd_vel.publish(turning if 0 < sim_now() < DRIVE_S else still)  # drive a curve, then stand
finish(markers=markers, clouds=clouds, diagnostics=diagnostics, cameras=cameras)
'''
DURATION_S = 4.0
LOST_PART = "head.neck_pitch"
CLOUD_TYPES = {7: "<f4", 8: "<f8", 6: "<u4", 5: "<i4"}  # sensor_msgs/PointField's datatypes used here


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("ros_world")


TRIAL_FILE = f"""\
controller: ros            # ROS 2 nodes drive: the node below
map: lab
crowd: weekday
crowd_scale: 100           # people come through the door and leave within seconds
seed: 1
duration: {DURATION_S:g}
camera_rate: 2             # the cameras recorded (and so published) twice a trial second
camera_depth: true
faults:
  - {{at: 1, unplug: {LOST_PART}}}
  - {{at: 2.5, plug: {LOST_PART}}}
"""


@pytest.fixture(scope="module")
def session(folder, ros_env, ros_python):
    """(what the node saw, the trial's log, the trial's stderr): a trial file with ``controller: ros``, the lab,
    a weekday crowd 100 times as busy, the neck's pitch servo unplugged from 1 s to 2.5 s."""
    (folder / "world.yaml").write_text(TRIAL_FILE)
    return run_with_node(folder, ros_env, ros_python, LISTENER, "--ros-rtf", "4", target=str(folder / "world.yaml"))


@pytest.fixture(scope="module")
def bag(session, folder):
    """The same trial's log written as a rosbag2 by ``hil log rosbag``, read back with rosbags."""
    status, out, err = hil_log_rosbag(str(folder / "trial"), "--out", str(folder / "bag"))
    assert status == 0, out + err
    return decoded_bag(folder / "bag")


def _people(log) -> list[tuple[int, list[dict]]]:
    return [(round(m.t * 1e9), m.data["people"]) for m in log.messages["/pedestrians"]]


def test_people_markers_follow_the_crowd_and_delete_who_left(session):
    """One MarkerArray per /pedestrians message, at its time, in the map frame: a cylinder per person whose id is
    the person's (so it moves rather than multiplies), where the log has the person; a DELETE for each person
    gone since the message before; the first starts with a DELETEALL."""
    seen, log, _ = session
    people = _people(log)
    got = seen["markers"]
    assert len(people) > 20 and len(got) == len(people)
    before: set[int] = set()
    deleted = 0
    for k, ((t, persons), markers) in enumerate(zip(people, got)):
        assert all(m[0] == t and m[1] == "map" for m in markers)  # (none while nobody is or was there)
        if k == 0:
            assert markers[0][5] == 3  # DELETEALL
            markers = markers[1:]
        added = {m[3]: m for m in markers if m[5] == 0}
        assert set(added) == {p["id"] for p in persons}
        for person in persons:
            m = added[person["id"]]
            assert (m[2], m[4]) == ("people", 3)  # namespace, CYLINDER
            assert (m[6], m[7]) == (person["x"], person["y"])
            assert m[9] == m[10] == pytest.approx(2 * person.get("radius", 0.25))
            assert m[8] == pytest.approx(m[11] / 2)  # standing on the floor
        gone = sorted(m[3] for m in markers if m[5] == 2)
        assert gone == sorted(before - set(added))
        deleted += len(gone)
        before = set(added)
    assert deleted > 0, "nobody left during the trial: the DELETE was not exercised"


def test_ground_truth_cloud_holds_every_persons_position_and_velocity(session):
    """/people/ground_truth, read by the fields the message itself declares, gives each person's id, x, y, vx, vy
    and radius exactly as the log has them."""
    seen, log, _ = session
    people = _people(log)
    assert len(seen["clouds"]) == len(people)
    for (t, persons), (stamp, frame, width, height, step, big, fields, data) in zip(people, seen["clouds"]):
        assert (stamp, frame, width, height, big) == (t, "map", len(persons), 1, False)
        dtype = np.dtype({"names": [f[0] for f in fields], "offsets": [f[1] for f in fields],
                          "formats": [CLOUD_TYPES[f[2]] for f in fields], "itemsize": step})
        points = np.frombuffer(bytes.fromhex(data), dtype=dtype)
        assert [int(i) for i in points["id"]] == [p["id"] for p in persons]
        for point, person in zip(points, persons):
            assert [float(point[k]) for k in ("x", "y", "vx", "vy")] == [person[k] for k in ("x", "y", "vx", "vy")]
            assert float(point["radius"]) == person.get("radius", 0.25) and float(point["z"]) == 0.0


def test_diagnostics_give_the_bus_statistics_and_the_lost_part_as_the_log_does(session):
    """A DiagnosticArray at each /bus/stats of the log written during the run (once a second; the final counters,
    written as the trial closes, come after its last cycle) and at each /robot/parts event: the bus status holds
    the log's counters; while the unplugged servo is lost its part status is ERROR, and so is the parts' summary;
    once it is back both are OK."""
    seen, log, _ = session
    stats = log.messages["/bus/stats"][:-1]
    events = log.messages["/robot/parts"]
    assert [e.data["kind"] for e in events] == ["lost", "back"]
    got = seen["diagnostics"]
    assert len(stats) >= 4
    assert [t for t, _ in got] == sorted({round(m.t * 1e9) for m in [*stats, *events]})
    by_time = {t: {s[1]: s for s in statuses} for t, statuses in got}
    for logged in stats:
        level, _, message, hardware, values = by_time[round(logged.t * 1e9)]["hil: bus main"]
        assert hardware == "bus main" and f"{logged.data['transactions']} transactions" in message
        assert values == {k: str(v) for k, v in logged.data.items() if k != "bus"}
        assert level == (0 if logged.data["failures"] == 0 else 1)
    part = events[0].data["part_id"]
    for t, statuses in by_time.items():
        lost = events[0].t * 1e9 <= t < events[1].t * 1e9
        summary = statuses["hil: parts"]
        assert summary[0] == (2 if lost else 0), (t, summary)
        assert summary[2] == (f"lost: {part}" if lost else "every part answers")
        if t >= events[0].t * 1e9:
            level, _, message, hardware, values = statuses[f"hil: part {part}"]
            assert level == (2 if lost else 0) and message.startswith("lost" if lost else "back")
            assert hardware == f"bus main id {part}" and LOST_PART in values["names"].split(",")

DESERIALIZE = ROWS + '''
import json, sys
from rclpy.serialization import deserialize_message
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from sensor_msgs.msg import PointCloud2
from visualization_msgs.msg import MarkerArray

raw = json.load(open(sys.argv[1]))
kinds = {"/people/markers": (MarkerArray, marker_rows), "/people/ground_truth": (PointCloud2, cloud_row),
         "/diagnostics": (DiagnosticArray, diagnostic_row), "/cmd_vel": (Twist, twist_row)}
json.dump({topic: [kinds[topic][1](deserialize_message(bytes.fromhex(data), kinds[topic][0])) for data in items]
           for topic, items in raw.items()}, open(sys.argv[2], "w"))
'''


def test_cameras_publish_the_frames_the_log_recorded(session):
    """Each camera's image_raw (rgb8), depth/image_raw (32FC1, NaN invalid) and camera_info, in its optical frame,
    at the times the log recorded its images (camera_rate 2 Hz; best effort, so a busy machine may lose some): the
    RGB is what the log's JPEG shows (within JPEG's loss), the depth exactly the log's depth, K and P the log's
    calibration."""
    from hil.trial.view.camera_panel import decode_depth, decode_rgb, protobuf_fields

    seen, log, _ = session
    for camera in ("head_camera", "right_camera"):
        images = {round(m.t * 1e9): m.data for m in log.messages[f"/foxglove/{camera}/image"]}
        depths = {round(m.t * 1e9): m.data for m in log.messages[f"/foxglove/{camera}/depth"]}
        calibration = protobuf_fields(log.messages[f"/foxglove/{camera}/calibration"][0].data)
        assert len(images) >= 7  # 2 Hz for 4 s
        rgb, depth, info = (seen["cameras"][f"/{camera}/{kind}"] for kind in ("image_raw", "depth/image_raw",
                                                                                 "camera_info"))
        assert min(len(rgb), len(depth), len(info)) >= 3  # of 8 (best effort: a loaded machine drops some)
        assert {row[0] for row in rgb + depth + info} <= set(images)
        assert {row[1] for row in rgb + depth + info} == {f"{camera}_optical_frame"}
        for stamp, _, width, height, encoding, step, data in rgb[:2]:
            assert (encoding, step) == ("rgb8", 3 * width)
            got = np.frombuffer(bytes.fromhex(data), np.uint8).reshape(height, width, 3).astype(int)
            logged = decode_rgb(images[stamp]).astype(int)
            assert got.shape == logged.shape and np.abs(got - logged).mean() < 4.0  # JPEG at quality 85
        for stamp, _, width, height, encoding, step, data in depth[:2]:
            assert (encoding, step) == ("32FC1", 4 * width)
            got = np.frombuffer(bytes.fromhex(data), "<f4").reshape(height, width)
            np.testing.assert_array_equal(got, decode_depth(depths[stamp]))  # NaN where the log has NaN
            assert np.isnan(got).any() and np.isfinite(got).any()
        k = np.frombuffer(calibration[6], "<f8")
        p = np.frombuffer(calibration[8], "<f8")
        for _, _, width, height, model, got_k, got_p in info:
            assert (width, height, model) == (calibration[2], calibration[3], "plumb_bob")
            assert got_k == list(k) and got_p == list(p)


# --- the same in the trial's rosbag2 (hil log rosbag), checked against the log ---------------------------------
def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def test_bag_has_the_people_as_the_log_does(session, bag):
    _, log, _ = session
    people = _people(log)
    assert [t for t, _ in bag["/people/markers"]] == [t for t, _ in people]
    before: set[int] = set()
    deleted = 0
    for (t, persons), (_, array), (_, cloud) in zip(people, bag["/people/markers"], bag["/people/ground_truth"]):
        added = {m.id: m for m in array.markers if m.action == 0}
        assert set(added) == {p["id"] for p in persons}
        assert all(_ns(m.header.stamp) == t and m.header.frame_id == "map" for m in array.markers)
        for person in persons:
            position = added[person["id"]].pose.position
            assert (position.x, position.y) == (person["x"], person["y"])
        gone = {m.id for m in array.markers if m.action == 2}
        assert gone == before - set(added)
        deleted += len(gone)
        before = set(added)
        dtype = np.dtype({"names": [f.name for f in cloud.fields], "offsets": [f.offset for f in cloud.fields],
                          "formats": [CLOUD_TYPES[f.datatype] for f in cloud.fields], "itemsize": cloud.point_step})
        points = np.frombuffer(cloud.data.tobytes(), dtype=dtype)
        assert [(int(p["id"]), float(p["vx"]), float(p["vy"])) for p in points] == [
            (p["id"], p["vx"], p["vy"]) for p in persons]
    assert deleted > 0


def test_bag_has_the_diagnostics_and_map_to_odom_from_ground_truth(session, bag):
    """One DiagnosticArray per /bus/stats (the final counters too) and /robot/parts event; /tf carries map -> odom, which composed with
    odom -> base_link puts the base where the world's ground truth has it."""
    _, log, _ = session
    stats = log.messages["/bus/stats"]
    events = log.messages["/robot/parts"]
    assert [t for t, _ in bag["/diagnostics"]] == sorted({round(m.t * 1e9) for m in [*stats, *events]})
    arrays = {t: array for t, array in bag["/diagnostics"]}
    for logged in stats:
        bus = next(s for s in arrays[round(logged.t * 1e9)].status if s.name == "hil: bus main")
        assert {kv.key: kv.value for kv in bus.values} == {k: str(v) for k, v in logged.data.items() if k != "bus"}
    states = log.messages["/robot/state"]
    assert len(bag["/tf"]) == len(states)
    moved = 0.0
    for (_, tf), state in zip(bag["/tf"], states):
        frames = {(t.header.frame_id, t.child_frame_id): t.transform for t in tf.transforms}
        assert set(frames) == {("odom", "base_link"), ("map", "odom")}
        total = _matrix(frames[("map", "odom")]) @ _matrix(frames[("odom", "base_link")])
        truth = state.data
        assert total[:2, 2] == pytest.approx([truth["x"], truth["y"]], abs=1e-9)
        assert math.atan2(total[1, 0], total[0, 0]) == pytest.approx(truth["yaw"], abs=1e-9)
        moved = max(moved, math.hypot(truth["x"] - states[0].data["x"], truth["y"] - states[0].data["y"]))
    assert moved > 0.2  # the node drove it


def test_bag_replays_the_cmd_vel_the_trial_applied(session, bag):
    """/cmd_vel as the trial applied it: 0.2 m/s and 0.5 rad/s every cycle from the first applied command to the
    stop, then one stop (so a replay feeds a trial's watchdog as the node did)."""
    _, log, _ = session
    applied = log.messages["/ros/cmd_vel"]
    start, stop = applied[0].t, next(m.t for m in applied if m.data["v"] == 0.0)
    assert (applied[0].data["v"], applied[0].data["w"]) == (0.2, 0.5)
    got = bag["/cmd_vel"]
    clock = [round(m.t * 1e9) for m in log.messages["/clock"] if start - 1e-9 <= m.t <= stop + 1e-9]
    assert [t for t, _ in got] == clock
    assert [(m.linear.x, m.angular.z) for _, m in got] == [(0.2, 0.5)] * (len(clock) - 1) + [(0.0, 0.0)]


def _matrix(transform) -> np.ndarray:
    q, p = transform.rotation, transform.translation
    yaw = 2 * math.atan2(q.z, q.w)
    return np.array([[math.cos(yaw), -math.sin(yaw), p.x], [math.sin(yaw), math.cos(yaw), p.y], [0, 0, 1]])


def test_bag_reads_back_with_rclpy_as_the_node_heard_it_live(session, folder, ros_python, tmp_path):
    """The bag's people, diagnostics and commands deserialized by rclpy in ROS's Python: message for message what
    the node received from the bridge (the diagnostics' final report aside, which only the bag has), and /cmd_vel
    what the node sent."""
    from rosbags.rosbag2 import Reader

    raw: dict[str, list[str]] = {}
    with Reader(folder / "bag") as reader:
        for connection, _, data in reader.messages():
            if connection.topic in ("/people/markers", "/people/ground_truth", "/diagnostics", "/cmd_vel"):
                raw.setdefault(connection.topic, []).append(bytes(data).hex())
    (tmp_path / "raw.json").write_text(json.dumps(raw))
    (tmp_path / "read.py").write_text(textwrap.dedent(DESERIALIZE))
    done = subprocess.run([ros_python, str(tmp_path / "read.py"), str(tmp_path / "raw.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "out.json").read_text())
    seen, _, _ = session
    assert got["/people/markers"] == seen["markers"]
    assert got["/people/ground_truth"] == seen["clouds"]
    assert got["/diagnostics"][:-1] == seen["diagnostics"]
    assert {tuple(row) for row in got["/cmd_vel"]} == {(0.2, 0.5), (0.0, 0.0)}


def test_bag_has_the_cameras_as_the_log_recorded_them(session, bag):
    """Each camera's JPEG as /NAME/image_raw/compressed, its depth as /NAME/depth/image_raw and its calibration as
    /NAME/camera_info, byte for byte the log's, at the log's times in the optical frame; /tf_static places each
    optical frame on its camera's link as the log's /foxglove/tf does (z forward along the body's x)."""
    from hil.trial.view.camera_panel import decode_depth, protobuf_fields

    _, log, _ = session
    [(_, static)] = bag["/tf_static"]
    optical = {t.child_frame_id: t for t in static.transforms if t.child_frame_id.endswith("_optical_frame")}
    assert set(optical) == {"head_camera_optical_frame", "right_camera_optical_frame"}
    [(_, description)] = bag["/robot_description"]
    urdf = {j.get("name"): j for j in ET.fromstring(description.data).iter("joint")}
    links = {link.get("name") for link in ET.fromstring(description.data).iter("link")}
    for camera in ("head_camera", "right_camera"):
        placed = optical[f"{camera}_optical_frame"]
        assert placed.header.frame_id.startswith("camera_") and placed.header.frame_id in links
        q = placed.transform.rotation
        z_axis = [2 * (q.x * q.z + q.y * q.w), 2 * (q.y * q.z - q.x * q.w), 1 - 2 * (q.x ** 2 + q.y ** 2)]
        assert z_axis == pytest.approx([1.0, 0.0, 0.0])
        joint = urdf[f"{camera}_optical_joint"]  # the bag's URDF has the same frame, on the same link
        assert (joint.get("type"), joint.find("parent").get("link"), joint.find("child").get("link")) == \
            ("fixed", placed.header.frame_id, f"{camera}_optical_frame")
        assert [float(v) for v in joint.find("origin").get("rpy").split()] == \
            pytest.approx([-math.pi / 2, 0.0, -math.pi / 2])
        images = log.messages[f"/foxglove/{camera}/image"]
        got = bag[f"/{camera}/image_raw/compressed"]
        assert [t for t, _ in got] == [round(m.t * 1e9) for m in images]
        for (t, message), logged in zip(got, images):
            assert _ns(message.header.stamp) == t and message.header.frame_id == f"{camera}_optical_frame"
            assert message.format == "jpeg" and message.data.tobytes() == protobuf_fields(logged.data)[2]
        depths = log.messages[f"/foxglove/{camera}/depth"]
        got = bag[f"/{camera}/depth/image_raw"]
        assert len(got) == len(depths)
        for (_, message), logged in zip(got, depths):
            pixels = message.data.view("<f4").reshape(message.height, message.width)
            np.testing.assert_array_equal(pixels, decode_depth(logged.data))
        calibration = protobuf_fields(log.messages[f"/foxglove/{camera}/calibration"][0].data)
        infos = bag[f"/{camera}/camera_info"]
        assert len(infos) == len(images)
        assert list(infos[0][1].k) == list(np.frombuffer(calibration[6], "<f8"))
        assert (infos[0][1].width, infos[0][1].height) == (calibration[2], calibration[3])
