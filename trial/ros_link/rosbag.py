"""``hil log rosbag DIR``: a trial's log as a rosbag2 (MCAP storage, ROS 2 CDR) that ``ros2 bag play`` replays.

The bag holds the topics the bridge publishes live (ros_side/bridge_node.py), made from the log alone, with the
same conversions (the ring's layout and REP-117 from the bridge's own functions) and the same frames:

======================  ==========================  ========================================================
topic                   type                        from the log
======================  ==========================  ========================================================
/clock                  rosgraph_msgs/Clock         /clock
/odom                   nav_msgs/Odometry           /robot/state: ``odometry`` (odom -> base_link), vx and w
/tf                     tf2_msgs/TFMessage          the same pose, odom -> base_link; map -> odom from the
                                                    ground truth (x, y, yaw beside ``odometry``)
/scan                   sensor_msgs/LaserScan       /robot/sensors ``ring`` and ``ring_cause``, /robot/model's
                                                    ring (directions, min and max range), in base_link
/joint_states           sensor_msgs/JointState      /robot/state ``joints`` (positions; the log has no
                                                    joint velocities, so none are given)
/robot_description      std_msgs/String             /robot/model, once (transient local: a late subscriber
                                                    of ``ros2 bag play`` still gets it)
/tf_static              tf2_msgs/TFMessage          /robot/model's fixed joints and the cameras' optical
                                                    frames (/foxglove/tf), once (transient local)
/people/markers         visualization_msgs/         /pedestrians: one cylinder per person, DELETE when one
                        MarkerArray                 leaves (in map)
/people/ground_truth    sensor_msgs/PointCloud2     /pedestrians: id, x, y, vx, vy, radius (in map)
/diagnostics            diagnostic_msgs/            /bus/stats and /robot/parts, one array at each time
                        DiagnosticArray
/cmd_vel                geometry_msgs/Twist         /ros/cmd_vel, as applied: at each change and every cycle
                                                    while it says move
/forward_position_      std_msgs/Float64MultiArray  /ros/joint_command: the joint commands the trial took,
controller/commands                                 as the node sent them (positions in the declared order)
/joint_trajectory_      trajectory_msgs/            /ros/joint_command: the trajectory, stamped with its
controller/             JointTrajectory             start, its points' positions and time_from_start
joint_trajectory
/NAME/image_raw/        sensor_msgs/CompressedImage /foxglove/NAME/image: each camera's JPEG, as
compressed                                          image_transport's compressed transport names it
/NAME/depth/image_raw   sensor_msgs/Image           /foxglove/NAME/depth (32FC1, when the trial recorded it)
/NAME/camera_info       sensor_msgs/CameraInfo      /foxglove/NAME/calibration
/SENSOR, /SENSOR/ZONE   std_msgs/Bool               /robot/sensors ``contacts`` and /robot/model's zones: each
                                                    contact switch at the first cycle and when it changes
                                                    (ros_side/contacts.py)
/contacts               visualization_msgs/         /world/contacts with /pedestrians and the ground truth: a
                        MarkerArray                 sphere per person touching the robot (in map)
/scenario/line          std_msgs/String             /crowd/script: FILE:LINE: TEXT of each line as it ran
======================  ==========================  ========================================================

Every message is stamped, and recorded, at the log's trial time (the bag's time starts at 0, as the trial's
clock does: replay it with ``ros2 bag play --clock`` or with /clock, and ``use_sim_time``).
The messages are written with ``rosbags`` (pure Python: no ROS install is needed to write one).
"""
from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..record.log import read_log
from ..record.repair import log_path
from .description import ROOT_FRAME, description_of_log, optical_frame
from .ros_side.contacts import (CONTACTS_TOPIC, SCENARIO_LINE_TOPIC, changed, contact_states, scenario_file,
                                scenario_line, touch_marker_array, touch_markers, touch_points)
from .ros_side.bridge_node import (FORWARD_TOPIC, MAP_FRAME, TRAJECTORY_TOPIC, PEOPLE_MARKERS, PEOPLE_TRUTH, Diagnostics, diagnostic_array,
                                   camera_topics, map_to_odom, marker_array, people_cloud_message, people_markers,
                                   scan_layout, scan_ranges, stamp_of)

LOG_OPTICAL = "_optical"  # a camera's frame in the log: NAME_optical (trial/record/camera_log.py)

ODOM_FRAME = "odom"
CAMERA_LOG_TOPIC = re.compile(r"^/foxglove/[A-Za-z0-9_.-]+/(image|depth|calibration)$")  # camera_log.py's
RELIABLE, BEST_EFFORT, LATCHED = "reliable", "best_effort", "transient_local"
TOPICS: dict[str, tuple[str, str]] = {  # topic -> (type, QoS offered), as the bridge publishes them
    "/clock": ("rosgraph_msgs/msg/Clock", RELIABLE),
    "/odom": ("nav_msgs/msg/Odometry", RELIABLE),
    "/tf": ("tf2_msgs/msg/TFMessage", RELIABLE),
    "/scan": ("sensor_msgs/msg/LaserScan", BEST_EFFORT),
    "/joint_states": ("sensor_msgs/msg/JointState", RELIABLE),
    "/robot_description": ("std_msgs/msg/String", LATCHED),
    "/tf_static": ("tf2_msgs/msg/TFMessage", LATCHED),
    PEOPLE_MARKERS: ("visualization_msgs/msg/MarkerArray", RELIABLE),
    PEOPLE_TRUTH: ("sensor_msgs/msg/PointCloud2", RELIABLE),
    "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", RELIABLE),
    "/cmd_vel": ("geometry_msgs/msg/Twist", RELIABLE),
    FORWARD_TOPIC: ("std_msgs/msg/Float64MultiArray", RELIABLE),
    TRAJECTORY_TOPIC: ("trajectory_msgs/msg/JointTrajectory", RELIABLE),
    CONTACTS_TOPIC: ("visualization_msgs/msg/MarkerArray", RELIABLE),
    SCENARIO_LINE_TOPIC: ("std_msgs/msg/String", LATCHED),
}
SWITCH_TYPE = "std_msgs/msg/Bool"  # each contact sensor's and zone's topic (ros_side/contacts.py), transient local


class RosbagError(ValueError):
    """A log that cannot become a bag, or a bag folder that exists: the message is the one line to show."""


def write_rosbag(log_file: str | Path, out: str | Path) -> dict[str, int]:
    """Write the bag folder ``out`` (it must not exist) from the trial log ``log_file``; messages per topic."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    out = Path(out)
    if out.exists():
        raise RosbagError(f"{out}: exists; give another --out (a bag is never written over)")
    log = read_log(log_file)
    store = get_typestore(Stores.ROS2_JAZZY)
    counts = {topic: 0 for topic in TOPICS}
    writer = Writer(out, version=9, storage_plugin=StoragePlugin.MCAP)
    try:
        with writer:
            connections = {topic: writer.add_connection(topic, kind, typestore=store,
                                                        offered_qos_profiles=[_qos(qos)])
                           for topic, (kind, qos) in TOPICS.items()}
            for topic, t_s, message in messages_of(log.messages, _Maker(store)):
                if topic not in connections:  # a camera's, named by the camera, or a contact switch
                    qos = LATCHED if message.__msgtype__ == SWITCH_TYPE else BEST_EFFORT
                    connections[topic] = writer.add_connection(topic, message.__msgtype__, typestore=store,
                                                               offered_qos_profiles=[_qos(qos)])
                data = store.serialize_cdr(message, connections[topic].msgtype)
                writer.write(connections[topic], round(t_s * 1e9), bytes(data))
                counts[topic] = counts.get(topic, 0) + 1
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-written is left to be mistaken for a bag
        raise
    return counts


def messages_of(messages: dict[str, list[Any]], make: _Maker) -> Iterator[tuple[str, float, Any]]:
    """(topic, trial time, ROS message) of a log's messages (``TrialLog.messages``), in time order."""
    model = messages.get("/robot/model")
    ring = model[0].data.get("ring") if model else None
    if model:
        yield from _description(model[0].t, model[0].data, make, _optical_frames(messages))
    sensors = {round(m.t * 1e9): m.data for m in messages.get("/robot/sensors", ())}
    states = {round(m.t * 1e9): m.data for m in messages.get("/robot/state", ())}
    layout = _ring_layout(ring) if ring else None
    world = _World(messages, make, states)
    zones = (model[0].data.get("contacts") if model else None) or {}
    switches: dict[str, bool] | None = None
    for clock in messages.get("/clock", ()):
        t = clock.t
        stamp = make.stamp(t)
        yield from world.until(t)
        yield "/clock", t, make("rosgraph_msgs/msg/Clock", clock=stamp)
        yield from world.command(t)
        state = states.get(round(t * 1e9))
        if state is not None:
            yield from _odometry(t, stamp, state, make)
            yield "/joint_states", t, make("sensor_msgs/msg/JointState", header=make.header(stamp, ""),
                                           name=list(state.get("joints", {})),
                                           position=np.array(list(state.get("joints", {}).values()), dtype=float))
        reading = sensors.get(round(t * 1e9))
        if reading is not None and layout is not None:
            yield "/scan", t, _scan(stamp, reading, layout, make)
        if reading is not None:  # the contact switches that changed (all of them at the first cycle)
            now = contact_states(zones, reading.get("contacts") or [])
            for topic, pressed in changed(switches, now).items():
                yield topic, t, make(SWITCH_TYPE, data=bool(pressed))
            switches = now if now else switches


def _description(t: float, model: dict[str, Any], make: _Maker,
                 optical: list[dict[str, Any]]) -> Iterator[tuple[str, float, Any]]:
    described = description_of_log(model, optical=optical)
    yield "/robot_description", t, make("std_msgs/msg/String", data=described["urdf"])
    stamp = make.stamp(t)
    transforms = [make.transform(stamp, s["parent"], s["child"], s["xyz"], s["xyzw"])
                  for s in described["static"]]
    yield "/tf_static", t, make("tf2_msgs/msg/TFMessage", transforms=transforms)


def _odometry(t: float, stamp: Any, state: dict[str, Any], make: _Maker) -> Iterator[tuple[str, float, Any]]:
    x, y, yaw = state.get("odometry") or (state["x"], state["y"], state["yaw"])
    xyzw = [0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]
    pose = make("geometry_msgs/msg/Pose", position=make("geometry_msgs/msg/Point", x=x, y=y, z=0.0),
                orientation=make("geometry_msgs/msg/Quaternion", x=xyzw[0], y=xyzw[1], z=xyzw[2], w=xyzw[3]))
    twist = make("geometry_msgs/msg/Twist", linear=make("geometry_msgs/msg/Vector3", x=float(state["vx"])),
                 angular=make("geometry_msgs/msg/Vector3", z=float(state["w"])))
    yield "/odom", t, make("nav_msgs/msg/Odometry", header=make.header(stamp, ODOM_FRAME), child_frame_id=ROOT_FRAME,
                           pose=make("geometry_msgs/msg/PoseWithCovariance", pose=pose),
                           twist=make("geometry_msgs/msg/TwistWithCovariance", twist=twist))
    transforms = [make.transform(stamp, ODOM_FRAME, ROOT_FRAME, [x, y, 0.0], xyzw)]
    if state.get("odometry"):  # x, y, yaw are the world's ground truth: map -> odom
        mx, my, myaw = map_to_odom([state["x"], state["y"], state["yaw"]], state["odometry"])
        transforms.append(make.transform(stamp, MAP_FRAME, ODOM_FRAME, [mx, my, 0.0],
                                         [0.0, 0.0, math.sin(myaw / 2), math.cos(myaw / 2)]))
    yield "/tf", t, make("tf2_msgs/msg/TFMessage", transforms=transforms)


class _World:
    """What the log says beside the robot's cycles, in time order: the people (/pedestrians: the markers and the
    ground truth), the diagnostics (/bus/stats and /robot/parts, one DiagnosticArray per time they have, as the
    bridge publishes one per cycle) and the /cmd_vel the trial applied (/ros/cmd_vel)."""

    def __init__(self, messages: dict[str, list[Any]], make: _Maker, states: dict[int, dict[str, Any]]):
        self.make = make
        self.states = states
        cameras = [topic for topic in messages if CAMERA_LOG_TOPIC.match(topic)]
        scenario = messages.get("/crowd/scenario")
        self.script_file = scenario_file(scenario[0].data) if scenario else "scenario.scn"
        self.crowd: list[dict[str, Any]] = []
        self.touched: set | None = None
        self.events = sorted([(m.t, 0, "people", m.data) for m in messages.get("/pedestrians", ())] +
                             [(m.t, 0.5, "touch", m.data) for m in messages.get("/world/contacts", ())] +
                             [(m.t, 0.5, "line", m.data) for m in messages.get("/crowd/script", ())] +
                             [(m.t, 1, "bus", m.data) for m in messages.get("/bus/stats", ())] +
                             [(m.t, 1, "part", m.data) for m in messages.get("/robot/parts", ())] +
                             [(m.t, 2, topic, m.data) for topic in cameras for m in messages[topic]] +
                             [(m.t, 3, "joints", m.data) for m in messages.get("/ros/joint_command", ())],
                             key=lambda e: (e[0], e[1]))
        self.next = 0
        self.shown: set | None = None
        self.diagnostics = Diagnostics()
        self.commands = [(m.t, float(m.data["v"]), float(m.data["w"])) for m in messages.get("/ros/cmd_vel", ())]
        self.applied = (0.0, 0.0)
        self.next_command = 0

    def until(self, t: float) -> Iterator[tuple[str, float, Any]]:
        """The people and diagnostics of the log up to trial time ``t``."""
        while self.next < len(self.events) and self.events[self.next][0] <= t + 1e-9:
            at = self.events[self.next][0]
            stamp = self.make.stamp(at)
            diagnosed = False
            while self.next < len(self.events) and self.events[self.next][0] == at:
                _, _, kind, data = self.events[self.next]
                self.next += 1
                if kind == "touch":
                    yield from self._touches(at, stamp, data)
                elif kind == "line":
                    yield SCENARIO_LINE_TOPIC, at, self.make("std_msgs/msg/String",
                                                             data=scenario_line(self.script_file, data))
                elif kind == "people":
                    self.crowd = list(data["people"])
                    markers, self.shown = people_markers(data["people"], self.shown)
                    yield PEOPLE_MARKERS, at, marker_array(self.make, stamp, markers)
                    yield PEOPLE_TRUTH, at, people_cloud_message(self.make, stamp, data["people"])
                elif kind.startswith("/"):
                    for topic, message in _camera_messages(kind, bytes(data), self.make):
                        yield topic, at, message
                elif kind == "joints":
                    yield from _joint_command(at, data, self.make)
                else:
                    diagnosed = True
                    getattr(self.diagnostics, kind)(data)
            if diagnosed:
                yield "/diagnostics", at, diagnostic_array(self.make, stamp, self.diagnostics.statuses())

    def _touches(self, at: float, stamp: Any, data: dict[str, Any]) -> Iterator[tuple[str, float, Any]]:
        """/contacts of one /world/contacts, as the bridge publishes it (when it changes anything)."""
        state = self.states.get(round(at * 1e9))
        robot_xy = (state["x"], state["y"]) if state is not None and state.get("odometry") else None
        markers, touched = touch_markers(touch_points(self.crowd, data.get("people") or [], robot_xy), self.touched)
        if markers or touched != self.touched:
            yield CONTACTS_TOPIC, at, touch_marker_array(self.make, stamp, markers, MAP_FRAME)
        self.touched = touched

    def command(self, t: float) -> Iterator[tuple[str, float, Any]]:
        """/cmd_vel as the trial applied it: at each change, and every cycle while the base is told to move (a
        replay into a trial keeps its watchdog fed, as the node that drove it did)."""
        changed = False
        while self.next_command < len(self.commands) and self.commands[self.next_command][0] <= t + 1e-9:
            self.applied = self.commands[self.next_command][1:]
            self.next_command += 1
            changed = True
        if changed or self.applied != (0.0, 0.0):
            v, w = self.applied
            yield "/cmd_vel", t, self.make("geometry_msgs/msg/Twist", linear=self.make("geometry_msgs/msg/Vector3", x=v),
                                           angular=self.make("geometry_msgs/msg/Vector3", z=w))


def _optical_frames(messages: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The cameras' optical frames as the log's /foxglove/tf places them at t = 0 (camera_log.py writes them
    there once, beside the links' frames, as ``NAME_optical``; parent and child of each, the rotation the optical
    convention's), as static transforms to the graph's ``NAME_optical_frame``."""
    from ..record.camera_log import OPTICAL_XYZW
    from ..view.camera_panel import protobuf_fields, protobuf_items

    out = []
    for message in (m for m in messages.get("/foxglove/tf", ()) if m.t == 0.0):  # the camera log's, at 0
        for number, transform in protobuf_items(bytes(message.data)):
            fields = protobuf_fields(transform) if number == 1 else {}
            child = fields.get(3, b"").decode("utf-8", "replace")
            if child.endswith(LOG_OPTICAL):
                camera = child[:-len(LOG_OPTICAL)]
                out.append({"camera": camera, "parent": fields.get(2, b"").decode("utf-8", "replace"),
                            "child": optical_frame(camera), "xyz": [0.0, 0.0, 0.0], "xyzw": list(OPTICAL_XYZW)})
    return out


def _graph_frame(log_frame: str) -> str:
    """A camera frame of the log (``NAME_optical``) as the graph names it (``NAME_optical_frame``)."""
    return optical_frame(log_frame[:-len(LOG_OPTICAL)]) if log_frame.endswith(LOG_OPTICAL) else log_frame


def _camera_messages(topic: str, data: bytes, make: _Maker) -> Iterator[tuple[str, Any]]:
    """The ROS messages of one of the log's camera messages (protobuf, trial/record/camera_log.py): the JPEG as
    ``/NAME/image_raw/compressed`` (sensor_msgs/CompressedImage, as image_transport names it), the depth as
    ``/NAME/depth/image_raw`` (32FC1, the log's bytes), the calibration as ``/NAME/camera_info``."""
    from ..view.camera_panel import protobuf_fields

    name, kind = topic[len("/foxglove/"):].rsplit("/", 1)
    image, depth, info = camera_topics(name)
    fields = protobuf_fields(data)
    stamp = protobuf_fields(fields.get(1, b""))
    header = make("std_msgs/msg/Header", stamp=make("builtin_interfaces/msg/Time", sec=int(stamp.get(1, 0)),
                                                    nanosec=int(stamp.get(2, 0))),
                  frame_id=_graph_frame(fields.get({"image": 4, "depth": 7, "calibration": 9}[kind], b"").decode()))
    if kind == "image":
        yield image + "/compressed", make("sensor_msgs/msg/CompressedImage", header=header,
                                          format=fields.get(3, b"jpeg").decode(), data=make.u8(fields.get(2, b"")))
    elif kind == "depth":
        yield depth, make("sensor_msgs/msg/Image", header=header, width=int(fields.get(2, 0)),
                          height=int(fields.get(3, 0)), encoding=fields.get(4, b"").decode(),
                          step=int(fields.get(5, 0)), data=make.u8(fields.get(6, b"")))
    else:
        yield info, make("sensor_msgs/msg/CameraInfo", header=header, width=int(fields.get(2, 0)),
                         height=int(fields.get(3, 0)), distortion_model=fields.get(4, b"").decode(),
                         d=np.frombuffer(fields.get(5, b""), "<f8").astype(np.float64),
                         k=np.frombuffer(fields.get(6, bytes(72)), "<f8").astype(np.float64),
                         r=np.frombuffer(fields.get(7, bytes(72)), "<f8").astype(np.float64),
                         p=np.frombuffer(fields.get(8, bytes(96)), "<f8").astype(np.float64))


def _joint_command(t: float, command: dict[str, Any], make: _Maker) -> Iterator[tuple[str, float, Any]]:
    """A joint command the trial took (/ros/joint_command) as the node sent it: a Float64MultiArray of the
    positions in the declared order, or a JointTrajectory stamped with its start (trial time) and its points (a
    log written before trajectories logged their points has none to give: left out)."""
    if command.get("topic") == FORWARD_TOPIC:
        yield FORWARD_TOPIC, t, make("std_msgs/msg/Float64MultiArray",
                                     data=np.array(command["positions"], dtype=np.float64))
    elif command.get("topic") == TRAJECTORY_TOPIC and "times" in command:
        n = len(command["times"])
        velocities = command.get("velocities") or [[]] * n
        accelerations = command.get("accelerations") or [[]] * n
        points = [make("trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array(row, dtype=np.float64),
                       velocities=np.array(velocity, dtype=np.float64),
                       accelerations=np.array(acceleration, dtype=np.float64),
                       time_from_start=make("builtin_interfaces/msg/Duration", sec=stamp_of(at)[0],
                                            nanosec=stamp_of(at)[1]))
                  for at, row, velocity, acceleration in zip(command["times"], command["positions"], velocities,
                                                             accelerations)]
        yield TRAJECTORY_TOPIC, t, make("trajectory_msgs/msg/JointTrajectory",
                                        header=make.header(make.stamp(command["start"]), ""),
                                        joint_names=list(command["joints"]), points=points)


def _ring_layout(ring: dict[str, Any]) -> tuple[float, float, list[int], float, float]:
    """(angle_min, increment, bins, min, max) of the log's ring: its rays' directions in the base frame."""
    rotation = ring.get("in_base", {}).get("rotation") or [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    turn = math.atan2(rotation[1][0], rotation[0][0])  # the ring frame's heading in base_link
    first, step, bins = scan_layout([turn + float(a) for a in ring["yaw"]])
    return first, step, bins, float(ring["min_range_m"]), float(ring["max_range_m"])


def _scan(stamp: Any, reading: dict[str, Any], layout: tuple, make: _Maker) -> Any:
    first, step, bins, low, high = layout
    ranges = reading.get("ring") or []
    causes = reading.get("ring_cause") or [None if r is not None else "unknown" for r in ranges]
    out = scan_ranges(ranges, causes, bins)
    return make("sensor_msgs/msg/LaserScan", header=make.header(stamp, ROOT_FRAME), angle_min=first,
                angle_max=first + step * (len(out) - 1), angle_increment=step, range_min=low, range_max=high,
                ranges=np.array(out, dtype=np.float32))


class _Maker:
    """ROS messages of the rosbags type store, every field not given at its default (0, '', empty)."""

    def __init__(self, store: Any):
        self.store = store

    def __call__(self, typename: str, **given: Any) -> Any:
        _, fields = self.store.fielddefs[typename]
        values = {name: given[name] if name in given else self._default(kind, spec) for name, (kind, spec) in fields}
        return self.store.types[typename](**values)

    def _default(self, kind: int, spec: Any) -> Any:
        from rosbags.interfaces import Nodetype

        if kind == Nodetype.NAME:
            return self(spec)
        if kind == Nodetype.BASE:
            return "" if spec[0] in ("string", "wstring") else (False if spec[0] == "bool" else 0)
        (inner_kind, inner), size = spec
        if inner_kind == Nodetype.BASE and inner[0] not in ("string", "wstring"):
            return np.zeros(size if kind == Nodetype.ARRAY else 0, dtype=_DTYPES.get(inner[0], np.float64))
        return [self._default(inner_kind, inner) for _ in range(size if kind == Nodetype.ARRAY else 0)]

    @staticmethod
    def u8(data: bytes) -> Any:
        return np.frombuffer(data, dtype=np.uint8)

    @staticmethod
    def byte(value: int) -> int:
        return int(value)

    @staticmethod
    def f64(values: list) -> Any:
        return np.array(values, dtype=np.float64)

    def stamp(self, t_s: float) -> Any:
        sec, nanosec = stamp_of(t_s)
        return self("builtin_interfaces/msg/Time", sec=sec, nanosec=nanosec)

    def header(self, stamp: Any, frame: str) -> Any:
        return self("std_msgs/msg/Header", stamp=stamp, frame_id=frame)

    def transform(self, stamp: Any, parent: str, child: str, xyz: list[float], xyzw: list[float]) -> Any:
        x, y, z = (float(v) for v in xyz)
        qx, qy, qz, qw = (float(v) for v in xyzw)
        return self("geometry_msgs/msg/TransformStamped", header=self.header(stamp, parent), child_frame_id=child,
                    transform=self("geometry_msgs/msg/Transform",
                                   translation=self("geometry_msgs/msg/Vector3", x=x, y=y, z=z),
                                   rotation=self("geometry_msgs/msg/Quaternion", x=qx, y=qy, z=qz, w=qw)))


_DTYPES = {"float32": np.float32, "float64": np.float64, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
           "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
           "byte": np.uint8, "char": np.uint8}


def _qos(kind: str) -> Any:
    """The QoS profile the bag records as offered (``ros2 bag play`` offers the same when it replays)."""
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness, QosReliability,
                                    QosTime)

    never = QosTime(0, 0)
    reliability = QosReliability.BEST_EFFORT if kind == BEST_EFFORT else QosReliability.RELIABLE
    durability = QosDurability.TRANSIENT_LOCAL if kind == LATCHED else QosDurability.VOLATILE
    return Qos(QosHistory.KEEP_LAST, 1 if kind == LATCHED else 10, reliability, durability, never, never,
               QosLiveliness.AUTOMATIC, never, False)


# --- hil log rosbag (wired in cli.py) -------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    """``hil log rosbag LOG [--out BAG_DIR]``: 0, or 2 with one line saying what is wrong."""
    try:
        import rosbags  # noqa: F401
    except ImportError:
        print("hil log rosbag: needs the rosbags package: pip install 'hil[rosbag]'", file=sys.stderr)
        return 2
    source = log_path(args.log)
    if not source.is_file():
        print(f"hil log rosbag: {source}: no trial log there", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else source.parent / "rosbag"
    try:
        counts = write_rosbag(source, out)
    except (OSError, ValueError) as exc:  # RosbagError, not an MCAP file, a folder that cannot be made
        print(f"hil log rosbag: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: " + ", ".join(f"{topic} {n}" for topic, n in counts.items()) +
          f" (replay: ros2 bag play {out} --clock)")
    return 0
