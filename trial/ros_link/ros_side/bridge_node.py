"""hil's ROS 2 bridge node: a running trial's robot on the ROS 2 graph, in a process of ROS's own Python.

Run by ``hil trial --ros`` (trial/ros_link/launch.py) with the Python where rclpy imports -- a sourced ROS 2
install or a venv of the registry's ROS wheels -- so this file imports nothing of hil: only rclpy, the message
packages, pyzmq and msgpack. It talks to the trial over two ZeroMQ sockets on loopback (trial/ros_link/link.py):

- **state** (SUB, the trial's PUB): one envelope per bus cycle with the trial time, the odometry, the ring and
  the joints. Published as ``/clock`` (rosgraph_msgs/Clock), ``/odom`` (nav_msgs/Odometry, odom -> base_link),
  ``/tf`` (odom -> base_link: rclpy's where tf2_msgs imports, else Cyclone DDS's; ros_side/tf_out.py), ``/scan``
  (sensor_msgs/LaserScan: REP-117, +inf for no return, NaN for an invalid reading) and ``/joint_states`` (the
  blueprint's names), every header stamped with the trial's simulator time, so nodes with ``use_sim_time`` live
  on the trial's clock. The robot's description, when the state carries it, as ``/robot_description``
  (std_msgs/String: the URDF, joints named by the blueprint) and ``/tf_static`` (its fixed joints, likewise),
  both transient-local and published again only when they change. What the trial's log says beside the robot,
  when the state carries it:
  ``/people/markers`` (visualization_msgs/MarkerArray: one cylinder per person, DELETE when one leaves),
  ``/people/ground_truth`` (sensor_msgs/PointCloud2: id, x, y, vx, vy, radius), both in ``map``; ``/diagnostics``
  (diagnostic_msgs/DiagnosticArray: the buses' statistics, the parts lost or quarantined); ``map`` -> ``odom`` on
  ``/tf`` from the base's ground truth; each camera's recorded frame as ``/NAME/image_raw`` (rgb8),
  ``/NAME/depth/image_raw`` (32FC1) and ``/NAME/camera_info``, best effort; the contact switches (``/bumper``,
  ``/bumper/left``, ... std_msgs/Bool), the people touching the robot (``/contacts``) and the scenario's line
  (``/scenario/line``), made by contacts.py beside this file. The conversions are plain functions below, shared
  with trial/ros_link/rosbag.py, which builds the same messages with rosbags.
- **commands** (PUSH, the trial's PULL): every ``/cmd_vel`` (geometry_msgs/Twist, or TwistStamped when the
  publishers on the topic use that type) forwarded as it came, NaN and all: the trial checks it, applies it within
  the wheels' limits and keeps the watchdog (trial/ros_link/drive.py), so what reaches the robot is decided and
  recorded in one place. Joint commands likewise: ``/forward_position_controller/commands``
  (std_msgs/Float64MultiArray, positions in the declared order) and
  ``/joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory, where it imports).

QoS: ``/scan`` best effort (sensor data, as Nav2's costmaps and RViz take it); ``/tf`` reliable, depth 100 (tf2's);
``/clock``, ``/odom``, ``/joint_states``, the people and ``/diagnostics`` reliable, depth 10 (a best-effort
publisher would match no reliable subscriber: tf2's listener and Nav2 take these reliably; a reliable publisher
also serves best-effort subscribers); ``/cmd_vel`` reliable.

Without rclpy (or pyzmq, msgpack) it prints one line saying what to install or source and exits with status 3.
A state it cannot publish is logged (once per kind of error) and dropped: nothing the trial sends stops it.
"""
from __future__ import annotations

import argparse
import os
import math
import signal
import sys
import threading
import time

try:  # contacts and the scenario's line (a module beside this file: imported as a package's or as the script's)
    from .contacts import CONTACTS_TOPIC, SCENARIO_LINE_TOPIC, shape_markers, touch_marker_array
except ImportError:
    from contacts import CONTACTS_TOPIC, SCENARIO_LINE_TOPIC, shape_markers, touch_marker_array

ENVELOPE_VERSION = 2  # hil.bridge.envelope.VERSION: the envelope {v, type, seq, t, payload} of every hil socket
STATE, BYE, CMD_VEL = "ros_state", "ros_bye", "ros_cmd_vel"
JOINT_POSITIONS, JOINT_TRAJECTORY = "ros_joint_positions", "ros_joint_trajectory"
FORWARD_TOPIC = "/forward_position_controller/commands"
TRAJECTORY_TOPIC = "/joint_trajectory_controller/joint_trajectory"
TWIST = "geometry_msgs/msg/Twist"
TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
WAITING_EVERY_S = 5.0  # wall seconds between two "waiting for node" lines (--wait-for)
NO_RCLPY = 3  # exit status: rclpy (or pyzmq, msgpack) does not import in this Python
NO_RETURN_CAUSES = ("no_hit", "unknown")  # the ring said "no target": +inf by REP-117 (other causes: NaN)


# --- conversions, plain Python (tests/test_ros_bridge.py checks them without ROS) ------------------------------
def scan_layout(angles: list[float]) -> tuple[float, float, list[int]]:
    """(angle_min, increment, bin of each sensor) of a LaserScan holding a ring whose sensors point at ``angles``
    (rad, base frame): the directions wrapped to [-pi, pi) and sorted; the increment is the smallest gap between
    two of them, so a ring with uneven gaps gets empty bins (NaN: no sensor looks there)."""
    wrapped = [math.atan2(math.sin(a), math.cos(a)) for a in angles]
    order = sorted(range(len(wrapped)), key=lambda k: wrapped[k])
    if len(order) < 2:
        return (wrapped[0] if wrapped else 0.0), 0.0, [0] * len(wrapped)
    gaps = [wrapped[order[k + 1]] - wrapped[order[k]] for k in range(len(order) - 1)]
    step = min(g for g in gaps if g > 1e-9) if any(g > 1e-9 for g in gaps) else 0.0
    first = wrapped[order[0]]
    bins = [round((w - first) / step) if step else 0 for w in wrapped]
    return first, step, bins


def scan_ranges(ranges: list, causes: list, bins: list[int]) -> list[float]:
    """The LaserScan's ranges (REP-117): a reading in metres as it is; no return (``no_hit``, or a part without
    per-cause codes that said "no target") +inf; any other failed reading (out of range, angle, noise) NaN; a
    bin no sensor fills NaN."""
    out = [math.nan] * (max(bins) + 1 if bins else 0)
    for value, cause, slot in zip(ranges, causes, bins):
        if value is not None:
            out[slot] = float(value)
        elif cause in NO_RETURN_CAUSES:
            out[slot] = math.inf
    return out


def twist_values(msg) -> tuple[float, float]:
    """(v, w) of a Twist or a TwistStamped: linear.x and angular.z, as they came (the trial checks them)."""
    twist = getattr(msg, "twist", msg)
    return float(twist.linear.x), float(twist.angular.z)


def trajectory_payload(msg) -> dict:
    """What the trial takes of a JointTrajectory: names, points (positions, velocities and accelerations as given,
    time_from_start in s), the stamp."""
    stamp = msg.header.stamp
    return {"joints": list(msg.joint_names), "start": stamp.sec + stamp.nanosec * 1e-9,
            "points": [{"positions": [float(p) for p in point.positions],
                        "velocities": [float(v) for v in point.velocities],
                        "accelerations": [float(a) for a in point.accelerations],
                        "t": point.time_from_start.sec + point.time_from_start.nanosec * 1e-9}
                       for point in msg.points]}


def stamp_of(t_s: float) -> tuple[int, int]:
    """(sec, nanosec) of a trial time in seconds."""
    ns = max(0, round(t_s * 1e9))
    return ns // 1_000_000_000, ns % 1_000_000_000


def map_to_odom(truth: list, odom: list) -> tuple[float, float, float]:
    """(x, y, yaw) of map -> odom: where the odometry's frame lies in the map, given the base's ground truth in
    the map (map -> base_link) and its odometry (odom -> base_link): truth composed with the odometry's inverse."""
    x, y, yaw = (float(a) for a in truth)
    ox, oy, oyaw = (float(a) for a in odom)
    turn = math.atan2(math.sin(yaw - oyaw), math.cos(yaw - oyaw))
    c, s = math.cos(turn), math.sin(turn)
    return x - (c * ox - s * oy), y - (s * ox + c * oy), turn


# the people: /people/markers (visualization_msgs/MarkerArray, for RViz) and /people/ground_truth
# (sensor_msgs/PointCloud2, for nodes allowed to see it), both in the map frame, from the log's /pedestrians
ADD, DELETE, DELETEALL = 0, 2, 3  # visualization_msgs/Marker's actions
CYLINDER = 3  # visualization_msgs/Marker's type
PERSON_RADIUS_M, PERSON_HEIGHT_M = 0.25, 1.7  # when /pedestrians gives none (its schema's default radius)
PEOPLE_NS = "people"
PERSON_RGBA = (0.95, 0.55, 0.1, 0.8)
FLOAT64, UINT32 = 8, 6  # sensor_msgs/PointField's datatypes
CLOUD_FIELDS = (("x", 0, FLOAT64), ("y", 8, FLOAT64), ("z", 16, FLOAT64), ("vx", 24, FLOAT64),
                ("vy", 32, FLOAT64), ("radius", 40, FLOAT64), ("id", 48, UINT32))
CLOUD_POINT_STEP = 56  # bytes per person: the fields above, little-endian, 4 bytes of padding at the end
_CLOUD_POINT = "<6dI4x"


def marker_id(person_id) -> int:
    """A person's marker id: its id in the crowd (stable while the person is there), within int32."""
    return int(person_id) & 0x7FFFFFFF


def people_markers(people: list, shown: set | None) -> tuple[list[dict], set]:
    """The markers of one /pedestrians message, as plain dicts: one cylinder per person (namespace ``people``,
    id: the person's, so RViz moves a person's marker rather than drawing another), then a DELETE for each person
    shown before and gone now; the first message (``shown`` None) starts with a DELETEALL, so a viewer that
    outlived an earlier trial drops its people. Returns (markers, the ids shown now)."""
    markers: list[dict] = [{"action": DELETEALL, "id": 0}] if shown is None else []
    now: set = set()
    for person in people:
        pid = marker_id(person["id"])
        radius = float(person.get("radius") or PERSON_RADIUS_M)
        height = float(person.get("height") or PERSON_HEIGHT_M)
        markers.append({"action": ADD, "id": pid, "x": float(person["x"]), "y": float(person["y"]),
                        "z": height / 2, "diameter": 2 * radius, "height": height})
        now.add(pid)
    markers.extend({"action": DELETE, "id": gone} for gone in sorted((shown or set()) - now))
    return markers, now


def people_cloud(people: list) -> bytes:
    """/people/ground_truth's data: one point per person (:data:`CLOUD_FIELDS`: x, y, z = 0 in the map, vx, vy in
    m/s, radius in m as float64; id as uint32), little-endian, :data:`CLOUD_POINT_STEP` bytes each."""
    import struct

    return b"".join(struct.pack(_CLOUD_POINT, float(p["x"]), float(p["y"]), 0.0, float(p["vx"]), float(p["vy"]),
                                float(p.get("radius") or PERSON_RADIUS_M), int(p["id"]) & 0xFFFFFFFF)
                    for p in people)


# /diagnostics (diagnostic_msgs/DiagnosticArray) from the log's /bus/stats and /robot/parts
OK, WARN, ERROR = 0, 1, 2  # diagnostic_msgs/DiagnosticStatus's levels
PART_LEVEL = {"lost": ERROR, "quarantined": WARN, "back": OK, "new": OK, "changed": OK}
BUS_TROUBLE = ("failures", "timeouts", "crc_errors", "malformed")  # a rise of one since the last report: WARN


class Diagnostics:
    """The robot's health as ``/diagnostics`` says it, kept from the log's messages: :meth:`bus` takes a
    ``/bus/stats`` payload, :meth:`part` a ``/robot/parts`` one; :meth:`statuses` is every status now, as plain
    dicts (level, name, message, hardware_id, values [(key, value)]): one per bus (its counters; WARN when a
    failure, timeout, CRC error or malformed reply was counted since its previous report), one for the parts
    (ERROR while one is lost, WARN when one is quarantined) and one per part that had an event (its last)."""

    def __init__(self) -> None:
        self.buses: dict[str, tuple[int, dict]] = {}
        self.parts: dict[int, dict] = {}

    def bus(self, counters: dict) -> None:
        name = str(counters.get("bus", "main"))
        before = self.buses.get(name, (OK, {}))[1]
        rose = [k for k in BUS_TROUBLE if (counters.get(k) or 0) > (before.get(k) or 0)]
        self.buses[name] = (WARN if rose else OK, dict(counters))

    def part(self, event: dict) -> None:
        self.parts[int(event["part_id"])] = dict(event)

    def statuses(self) -> list[dict]:
        out = []
        for name, (level, counters) in sorted(self.buses.items()):
            said = (f"{counters.get('transactions', 0)} transactions, {counters.get('retries', 0)} retries, "
                    f"{counters.get('timeouts', 0)} timeouts, {counters.get('failures', 0)} failed")
            out.append({"level": level, "name": f"hil: bus {name}", "hardware_id": f"bus {name}",
                        "message": said, "values": [(k, _shown_value(v)) for k, v in sorted(counters.items())
                                                    if k != "bus"]})
        lost = sorted(i for i, e in self.parts.items() if e.get("kind") == "lost")
        refused = sorted(i for i, e in self.parts.items() if e.get("kind") == "quarantined")
        level = ERROR if lost else WARN if refused else OK
        said = "; ".join(part for part in (f"lost: {', '.join(map(str, lost))}" if lost else "",
                                           f"quarantined: {', '.join(map(str, refused))}" if refused else "")
                         if part) or "every part answers"
        out.append({"level": level, "name": "hil: parts", "hardware_id": "", "message": said,
                    "values": [("lost", ",".join(map(str, lost))), ("quarantined", ",".join(map(str, refused)))]})
        for pid, event in sorted(self.parts.items()):
            kind = str(event.get("kind", ""))
            out.append({"level": PART_LEVEL.get(kind, WARN), "name": f"hil: part {pid}",
                        "hardware_id": f"bus {event.get('bus', 'main')} id {pid}",
                        "message": f"{kind}: {event.get('detail', '')}".rstrip(": "),
                        "values": [("kind", kind), ("since_s", _shown_value(event.get("time_s"))),
                                   ("names", ",".join(str(n) for n in event.get("names") or ()))]})
        return out


# --- the messages of the conversions above, built alike by rclpy (here) and by rosbags (trial/ros_link/rosbag.py):
# ``make("pkg/msg/Type", **fields)`` makes a message, ``make.u8(bytes)`` a uint8[] and ``make.byte(n)`` a byte
MAP_FRAME = "map"
PEOPLE_MARKERS, PEOPLE_TRUTH = "/people/markers", "/people/ground_truth"


class RosMessages:
    """``make`` with rclpy's message classes."""

    def __call__(self, typename: str, **fields):
        import importlib

        package, _, name = typename.split("/")
        return getattr(importlib.import_module(f"{package}.msg"), name)(**fields)

    @staticmethod
    def u8(data: bytes):
        import array

        return array.array("B", data)

    @staticmethod
    def byte(value: int) -> bytes:
        return bytes([value])

    @staticmethod
    def f64(values: list) -> list:
        return [float(v) for v in values]


def marker_array(make, stamp, markers: list[dict]):
    """A visualization_msgs/MarkerArray of :func:`people_markers`' markers, in the map frame."""
    return shape_markers(make, stamp, [{**m, "scale": (m["diameter"], m["diameter"], m["height"])}
                                       if m["action"] == ADD else m for m in markers],
                         ns=PEOPLE_NS, shape=CYLINDER, rgba=PERSON_RGBA, frame=MAP_FRAME)


def people_cloud_message(make, stamp, people: list):
    """/people/ground_truth: a sensor_msgs/PointCloud2 of :func:`people_cloud`, one point per person."""
    fields = [make("sensor_msgs/msg/PointField", name=name, offset=offset, datatype=kind, count=1)
              for name, offset, kind in CLOUD_FIELDS]
    return make("sensor_msgs/msg/PointCloud2", header=make("std_msgs/msg/Header", stamp=stamp, frame_id=MAP_FRAME),
                height=1, width=len(people), fields=fields, is_bigendian=False, point_step=CLOUD_POINT_STEP,
                row_step=CLOUD_POINT_STEP * len(people), data=make.u8(people_cloud(people)), is_dense=True)


def diagnostic_array(make, stamp, statuses: list[dict]):
    """A diagnostic_msgs/DiagnosticArray of :meth:`Diagnostics.statuses`."""
    return make("diagnostic_msgs/msg/DiagnosticArray", header=make("std_msgs/msg/Header", stamp=stamp, frame_id=""),
                status=[make("diagnostic_msgs/msg/DiagnosticStatus", level=make.byte(s["level"]), name=s["name"],
                             message=s["message"], hardware_id=s["hardware_id"],
                             values=[make("diagnostic_msgs/msg/KeyValue", key=k, value=v) for k, v in s["values"]])
                        for s in statuses])


def camera_topics(name: str) -> tuple[str, str, str]:
    """(image, depth, camera_info) topics of camera ``name``: ``/NAME/image_raw``, ``/NAME/depth/image_raw``,
    ``/NAME/camera_info``, NAME with anything a ROS name cannot hold made ``_``."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "camera"
    if safe[0].isdigit():
        safe = "camera_" + safe
    return f"/{safe}/image_raw", f"/{safe}/depth/image_raw", f"/{safe}/camera_info"


def camera_messages(make, stamp, camera: dict) -> tuple:
    """(Image rgb8 or None, Image 32FC1 or None, CameraInfo) of one camera frame (the link's ``cameras``
    entries), stamped, in the camera's optical frame; CameraInfo: the pinhole K and P, plumb_bob, no distortion."""
    width, height = int(camera["width"]), int(camera["height"])
    header = make("std_msgs/msg/Header", stamp=stamp, frame_id=camera["frame_id"])
    rgb = make("sensor_msgs/msg/Image", header=header, height=height, width=width, encoding="rgb8",
               is_bigendian=0, step=3 * width, data=make.u8(camera["rgb"])) if camera.get("rgb") else None
    depth = make("sensor_msgs/msg/Image", header=header, height=height, width=width, encoding="32FC1",
                 is_bigendian=0, step=4 * width, data=make.u8(camera["depth"])) if camera.get("depth") else None
    fx, fy, cx, cy = (float(v) for v in camera["k"])
    info = make("sensor_msgs/msg/CameraInfo", header=header, height=height, width=width,
                distortion_model="plumb_bob", d=make.f64([0.0] * 5),
                k=make.f64([fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]),
                r=make.f64([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
                p=make.f64([fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]))
    return rgb, depth, info


def _shown_value(value) -> str:
    """A KeyValue's value: numbers as Python writes them, None as ''."""
    return "" if value is None else str(value)


# --- the node ---------------------------------------------------------------------------------------------------
def _imports():
    """The ROS side's modules, or SystemExit(NO_RCLPY) with one line saying what is missing."""
    try:
        import msgpack
        import zmq
    except ImportError as exc:
        print(f"hil ros: this Python ({sys.executable}) lacks {exc.name}: pip install pyzmq msgpack (or apt install "
              "python3-zmq python3-msgpack beside a sourced ROS 2)", file=sys.stderr, flush=True)
        raise SystemExit(NO_RCLPY) from None
    try:
        import rclpy  # noqa: F401
        from geometry_msgs.msg import Twist  # noqa: F401
        from nav_msgs.msg import Odometry  # noqa: F401
        from rosgraph_msgs.msg import Clock  # noqa: F401
        from sensor_msgs.msg import JointState, LaserScan  # noqa: F401
        from std_msgs.msg import String  # noqa: F401
    except ImportError as exc:
        print(f"hil ros: rclpy or a message package does not import in {sys.executable} ({exc}): source a ROS 2 "
              "install (source /opt/ros/jazzy/setup.bash) or pip install 'hil[ros]' into a venv and give its python",
              file=sys.stderr, flush=True)
        raise SystemExit(NO_RCLPY) from None
    return zmq, msgpack


class Bridge:
    """The node and its two sockets. ``run()`` until the trial says bye, the process is told to stop, or the
    trial's state stops for ``--quiet-limit`` seconds of wall time."""

    def __init__(self, args: argparse.Namespace):
        zmq, msgpack = _imports()
        import rclpy
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

        self.msgpack = msgpack
        self.args = args
        rclpy.init(args=None)
        self.rclpy = rclpy
        self.node = rclpy.create_node(args.node_name)
        self.log = self.node.get_logger()
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState, LaserScan

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.clock_pub = self.node.create_publisher(Clock, "/clock", reliable)
        self.odom_pub = self.node.create_publisher(Odometry, "/odom", reliable)
        self.scan_pub = self.node.create_publisher(LaserScan, "/scan", qos_profile_sensor_data)
        self.joints_pub = self.node.create_publisher(JointState, "/joint_states", reliable)
        try:
            from .tf_out import open_tf
        except ImportError:  # run as a script (launch.py starts this file by its path)
            from tf_out import open_tf
        self.tf_out = open_tf(self.node, self.log)  # tf2_msgs via rclpy, else Cyclone DDS, else None
        from sensor_msgs.msg import PointCloud2

        self.markers_pub = self._optional_publisher("visualization_msgs", "MarkerArray", PEOPLE_MARKERS, reliable)
        self.truth_pub = self.node.create_publisher(PointCloud2, PEOPLE_TRUTH, reliable)
        self.diagnostics_pub = self._optional_publisher("diagnostic_msgs", "DiagnosticArray", "/diagnostics",
                                                        reliable)
        self.people_shown: set | None = None
        self.messages = RosMessages()
        self.camera_pubs: dict[str, tuple] = {}
        self.contact_pubs: dict[str, object] = {}  # the switches', /contacts' and /scenario/line's, made when needed
        self.failed: set[str] = set()  # the kinds of state that failed to publish (each said once)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        from std_msgs.msg import String

        self.description_pub = self.node.create_publisher(String, "/robot_description", latched)
        self.described: str | None = None
        self.command_qos = reliable
        self.cmd_type: str | None = None
        self.cmd_sub = None
        self._subscribe_cmd_vel(TWIST_STAMPED if args.cmd_vel_stamped else TWIST)
        self.node.create_timer(0.5, self._follow_cmd_vel_type)  # Nav2 sends either type: take the publishers'
        self._subscribe_joint_commands(reliable)
        self.context = zmq.Context()
        self.state = self.context.socket(zmq.SUB)
        self.state.setsockopt(zmq.LINGER, 0)
        self.state.setsockopt(zmq.SUBSCRIBE, b"")
        self.state.connect(args.state)
        self.commands = self.context.socket(zmq.PUSH)
        self.commands.setsockopt(zmq.LINGER, 0)
        self.commands.setsockopt(zmq.SNDHWM, 1000)
        self.commands.connect(args.commands)
        self.zmq = zmq
        self._command_lock = threading.Lock()  # the executor's callbacks may run on several threads
        self.seq = 0
        self.done = threading.Event()
        # wakes the executor's wait when the bridge is to stop, so it stops at once, not at the wait's timeout
        self.wake = self.node.create_guard_condition(lambda: None)
        self.layout: tuple | None = None

    def _optional_publisher(self, package: str, name: str, topic: str, qos):
        """A publisher of ``package/msg/name`` where that package imports (a sourced ROS install has every one;
        the registry's wheels those of the ``ros`` extra): None else, said once."""
        try:
            kind = getattr(__import__(f"{package}.msg", fromlist=[name]), name)
        except (ImportError, AttributeError):
            self.log.warning(f"{package} does not import here: {topic} is not published")
            return None
        return self.node.create_publisher(kind, topic, qos)

    # --- commands: ROS -> trial ---------------------------------------------------------------------------------
    def _subscribe_cmd_vel(self, type_name: str) -> None:
        from geometry_msgs.msg import Twist, TwistStamped

        if self.cmd_sub is not None:
            self.node.destroy_subscription(self.cmd_sub)
        kind = TwistStamped if type_name == TWIST_STAMPED else Twist
        self.cmd_sub = self.node.create_subscription(kind, "/cmd_vel", self._on_cmd_vel, self.command_qos)
        self.cmd_type = type_name

    def _follow_cmd_vel_type(self) -> None:
        """Subscribe /cmd_vel with the type its publishers use (one topic has one type in DDS)."""
        types = {info.topic_type for info in self.node.get_publishers_info_by_topic("/cmd_vel")}
        wanted = next((t for t in (TWIST, TWIST_STAMPED) if t in types), None)
        if wanted is not None and wanted != self.cmd_type and len(types & {TWIST, TWIST_STAMPED}) == 1:
            self.log.info(f"/cmd_vel: its publishers send {wanted}; subscribing with that type")
            self._subscribe_cmd_vel(wanted)

    def _subscribe_joint_commands(self, qos) -> None:
        """Float64MultiArray positions and JointTrajectory, as ros2_control's controllers take them (where
        trajectory_msgs imports)."""
        from std_msgs.msg import Float64MultiArray

        self.node.create_subscription(Float64MultiArray, FORWARD_TOPIC, lambda msg: self._forward(
            JOINT_POSITIONS, {"positions": [float(p) for p in msg.data]}), qos)
        try:
            from trajectory_msgs.msg import JointTrajectory
        except ImportError:
            self.log.warning(f"trajectory_msgs does not import here: {TRAJECTORY_TOPIC} is not taken")
            return
        self.node.create_subscription(JointTrajectory, TRAJECTORY_TOPIC, lambda msg: self._forward(
            JOINT_TRAJECTORY, trajectory_payload(msg)), qos)

    def _on_cmd_vel(self, msg) -> None:
        v, w = twist_values(msg)
        self._forward(CMD_VEL, {"v": v, "w": w})

    def _forward(self, kind: str, payload: dict) -> None:
        """A command to the trial as it came (the trial checks it), never waiting."""
        with self._command_lock:
            self.seq += 1
            data = self.msgpack.packb({"v": ENVELOPE_VERSION, "type": kind, "seq": self.seq, "t": 0.0,
                                       "payload": payload}, use_bin_type=True)
            try:
                self.commands.send(data, self.zmq.NOBLOCK)
            except self.zmq.Again:  # the trial is not taking commands (gone, or far behind): drop, never block
                pass

    # --- state: trial -> ROS ------------------------------------------------------------------------------------
    def pump_state(self) -> None:
        """Receive the trial's state and publish it until bye (its own thread: the executor spins the other)."""
        poller = self.zmq.Poller()
        poller.register(self.state, self.zmq.POLLIN)
        quiet_ms = 0.0
        while not self.done.is_set():
            if not poller.poll(100):
                quiet_ms += 100
                if self.args.quiet_limit > 0 and quiet_ms >= self.args.quiet_limit * 1000:
                    self.log.warning(f"no state from the trial for {self.args.quiet_limit:g} s: stopping")
                    break
                continue
            quiet_ms = 0.0
            try:
                doc = self.msgpack.unpackb(self.state.recv(), raw=False)
                kind = doc["type"]
                if doc.get("v") != ENVELOPE_VERSION:
                    raise ValueError(f"envelope version {doc.get('v')!r}, this bridge speaks {ENVELOPE_VERSION}")
            except Exception as exc:  # noqa: BLE001 - a bad message is logged and dropped
                self.log.error(f"dropped a state message: {type(exc).__name__}: {exc}")
                continue
            if kind == BYE:
                self.log.info("the trial ended")
                break
            if kind == STATE:
                try:
                    self.publish(doc["payload"])
                except Exception as exc:  # noqa: BLE001 - a state the bridge cannot publish is said, not fatal
                    if type(exc).__name__ not in self.failed:
                        self.failed.add(type(exc).__name__)
                        self.log.error(f"a state message was not (wholly) published: {type(exc).__name__}: {exc}")
        self.stop()

    def stop(self) -> None:
        """End :meth:`run` (from any thread, or a signal handler; once: the node may be gone after)."""
        if self.done.is_set():
            return
        self.done.set()
        self.wake.trigger()

    def publish(self, state: dict) -> None:
        from builtin_interfaces.msg import Time
        from rosgraph_msgs.msg import Clock

        sec, nanosec = stamp_of(state["t"])
        stamp = Time(sec=sec, nanosec=nanosec)
        self.clock_pub.publish(Clock(clock=stamp))
        if state.get("odom") is not None:
            self._publish_odom(stamp, state["odom"], state["twist"], state.get("truth"))
        if state.get("people") is not None:
            self._publish_people(stamp, state["people"])
        for camera in state.get("cameras") or ():
            self._publish_camera(stamp, camera)
        if state.get("diagnostics") is not None and self.diagnostics_pub is not None:
            self.diagnostics_pub.publish(diagnostic_array(self.messages, stamp, state["diagnostics"]))
        if state.get("ring") is not None:
            self._publish_scan(stamp, state["ring"])
        if state.get("description") is not None:
            self._publish_description(stamp, state["description"])
        if any(state.get(k) is not None for k in ("switches", "touches", "scenario_lines")):
            self._publish_contacts_and_script(stamp, state)
        joints = state.get("joints")
        if joints:
            from sensor_msgs.msg import JointState

            msg = JointState(name=list(joints["name"]), position=[float(p) for p in joints["position"]],
                             velocity=[float(v) for v in joints["velocity"]])
            msg.header.stamp = stamp
            self.joints_pub.publish(msg)

    def _publish_contacts_and_script(self, stamp, state: dict) -> None:
        """The contact switches that changed (std_msgs/Bool each, transient-local: a late node gets the state
        now), the people touching the robot (/contacts, where visualization_msgs imports) and the scenario's line
        now running (/scenario/line, transient-local); contacts.py says what each is. The publishers are made
        the first time each is needed."""
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, String

        # depth 10: a press as short as a cycle reaches a node that lags a moment; a node that starts later gets
        # the last changes, the newest of which is the state now
        latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        pubs = self.contact_pubs
        for topic, pressed in (state.get("switches") or {}).items():
            if topic not in pubs:
                pubs[topic] = self.node.create_publisher(Bool, topic, latched)
            pubs[topic].publish(Bool(data=bool(pressed)))
        if state.get("touches") is not None:
            if CONTACTS_TOPIC not in pubs:
                pubs[CONTACTS_TOPIC] = self._optional_publisher(
                    "visualization_msgs", "MarkerArray", CONTACTS_TOPIC,
                    QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
            if pubs[CONTACTS_TOPIC] is not None:
                pubs[CONTACTS_TOPIC].publish(touch_marker_array(self.messages, stamp, state["touches"], MAP_FRAME))
        for line in state.get("scenario_lines") or ():  # each line that ran, in order (the newest is kept)
            if SCENARIO_LINE_TOPIC not in pubs:
                pubs[SCENARIO_LINE_TOPIC] = self.node.create_publisher(String, SCENARIO_LINE_TOPIC, latched)
            pubs[SCENARIO_LINE_TOPIC].publish(String(data=line))

    def _publish_description(self, stamp, description: dict) -> None:
        """/robot_description and /tf_static, once (transient-local keeps them for late subscribers)."""
        from std_msgs.msg import String

        if description["urdf"] == self.described:
            return
        self.described = description["urdf"]
        self.description_pub.publish(String(data=description["urdf"]))
        if self.tf_out is not None:
            self.tf_out.send_static([(stamp.sec, stamp.nanosec, fixed["parent"], fixed["child"], fixed["xyz"],
                                      fixed["xyzw"]) for fixed in description["static"]])

    def _publish_camera(self, stamp, camera: dict) -> None:
        """/NAME/image_raw, /NAME/depth/image_raw and /NAME/camera_info, best effort (sensor data)."""
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CameraInfo, Image

        name = camera["name"]
        if name not in self.camera_pubs:
            image, depth, info = camera_topics(name)
            self.camera_pubs[name] = tuple(self.node.create_publisher(kind, topic, qos_profile_sensor_data)
                                           for kind, topic in ((Image, image), (Image, depth), (CameraInfo, info)))
        for publisher, message in zip(self.camera_pubs[name], camera_messages(self.messages, stamp, camera)):
            if message is not None:
                publisher.publish(message)

    def _publish_people(self, stamp, people: list) -> None:
        """/people/markers (where visualization_msgs imports) and /people/ground_truth, in the map frame."""
        markers, self.people_shown = people_markers(people, self.people_shown)
        if self.markers_pub is not None:
            self.markers_pub.publish(marker_array(self.messages, stamp, markers))
        self.truth_pub.publish(people_cloud_message(self.messages, stamp, people))

    def _publish_odom(self, stamp, odom: list, twist: list, truth: list | None = None) -> None:
        from nav_msgs.msg import Odometry

        x, y, yaw = (float(a) for a in odom)
        msg = Odometry()
        msg.header.stamp = stamp
        msg.header.frame_id, msg.child_frame_id = self.args.odom_frame, self.args.base_frame
        msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
        msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        msg.twist.twist.linear.x, msg.twist.twist.angular.z = float(twist[0]), float(twist[1])
        self.odom_pub.publish(msg)
        if self.tf_out is not None:
            transforms = [(stamp.sec, stamp.nanosec, self.args.odom_frame, self.args.base_frame, (x, y, 0.0),
                           (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)))]
            if truth is not None:  # map -> odom from the world's ground truth
                mx, my, myaw = map_to_odom(truth, odom)
                transforms.append((stamp.sec, stamp.nanosec, MAP_FRAME, self.args.odom_frame, (mx, my, 0.0),
                                   (0.0, 0.0, math.sin(myaw / 2), math.cos(myaw / 2))))
            self.tf_out.send(transforms)

    def _publish_scan(self, stamp, ring: dict) -> None:
        from sensor_msgs.msg import LaserScan

        angles = ring["angles"]
        if self.layout is None or self.layout[0] != angles:
            self.layout = (angles, *scan_layout(angles))
        _, first, step, bins = self.layout
        ranges = scan_ranges(ring["ranges"], ring["causes"], bins)
        msg = LaserScan(angle_min=first, angle_max=first + step * (len(ranges) - 1), angle_increment=step,
                        time_increment=0.0, scan_time=float(ring.get("period", 0.0)),
                        range_min=float(ring["min"]), range_max=float(ring["max"]), ranges=ranges)
        msg.header.stamp = stamp
        msg.header.frame_id = self.args.base_frame
        self.scan_pub.publish(msg)

    # --- running ------------------------------------------------------------------------------------------------
    def wait_for_nodes(self, names: list[str]) -> bool:
        """Hold the trial at its start until every node named is on the graph (a stack launched beside the trial
        sees its first /clock), saying what it waits for every :data:`WAITING_EVERY_S` wall seconds; False when
        told to stop first. A name may carry its namespace (/ns/name) or not (any namespace)."""
        missing = list(names)
        said_at = None
        while missing and not self.done.is_set():
            graph = self.node.get_node_names_and_namespaces()  # one look at the graph a round
            present = {name for name, _ in graph} | {f"{ns.rstrip('/')}/{name}" for name, ns in graph}
            missing = [name for name in missing if name not in present]
            if missing and (said_at is None or time.monotonic() - said_at >= WAITING_EVERY_S):
                said_at = time.monotonic()
                print(f"hil ros: waiting for node {', '.join(missing)} on the graph (ROS_DOMAIN_ID="
                      f"{os.environ.get('ROS_DOMAIN_ID', '0')}); the trial starts when it is there", flush=True)
            if missing:
                self.done.wait(0.05)
        return not self.done.is_set()

    def run(self) -> None:
        from rclpy.executors import SingleThreadedExecutor

        pump = threading.Thread(target=self.pump_state, name="hil-ros-state", daemon=True)
        pump.start()
        executor = SingleThreadedExecutor()
        executor.add_node(self.node)
        self.log.info(f"bridging {self.args.state} (state) and {self.args.commands} (commands)")
        try:
            while not self.done.is_set():
                executor.spin_once(timeout_sec=0.1)
        finally:
            self.done.set()
            pump.join(timeout=2.0)
            executor.shutdown()
            if self.tf_out is not None:
                self.tf_out.close()
            self.node.destroy_node()
            self.state.close()
            self.commands.close()
            self.context.term()
            if self.rclpy.ok():
                self.rclpy.shutdown()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hil-ros-bridge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", required=True, help="the trial's state PUB (tcp://127.0.0.1:PORT)")
    parser.add_argument("--commands", required=True, help="the trial's command PULL (tcp://127.0.0.1:PORT)")
    parser.add_argument("--node-name", default="hil_bridge")
    parser.add_argument("--odom-frame", default="odom")
    parser.add_argument("--base-frame", default="base_link")
    parser.add_argument("--cmd-vel-stamped", action="store_true",
                        help="subscribe /cmd_vel as TwistStamped from the start (default: Twist until the "
                             "publishers on the topic are seen to use TwistStamped)")
    parser.add_argument("--quiet-limit", type=float, default=0.0,
                        help="stop when the trial sends nothing for this many wall seconds (0: never)")
    parser.add_argument("--wait-for", action="append", default=[], metavar="NODE",
                        help="say ready only once a node of this name is on the graph (repeat for more)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bridge = Bridge(args)
    signal.signal(signal.SIGTERM, lambda *_: bridge.stop())
    signal.signal(signal.SIGINT, lambda *_: bridge.stop())
    if not bridge.wait_for_nodes(args.wait_for):
        return 0
    print("hil ros: bridge ready", flush=True)
    bridge.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
