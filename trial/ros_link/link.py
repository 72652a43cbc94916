"""The trial's end of the ROS 2 bridge: the robot's state out after every bus cycle, commands in, checked.

:class:`RosLink` is handed to ``Trial.run`` as a recorder tap (it learns each cycle's trial time from the log's
``/clock``, so what ROS is told is stamped with the times the log has) and an after-cycle hook (``hooks``), as the
live Foxglove server is: it reads the robot and never changes it, so a trial that publishes to ROS runs exactly as
one that does not. Two ZeroMQ sockets bound on loopback (random ports unless given):

- **state** (PUB): one ``ros_state`` envelope (hil/bridge/envelope.py) per bus cycle: ``t`` (trial time, s),
  ``odom`` [x, y, yaw] and ``twist`` [v, w] from the base's odometry, ``ring`` (ranges in m or None, the cause of
  each failed reading, the sensors' angles, min and max range) and ``joints`` (blueprint names, positions,
  velocities); from what the log says beside the robot (this tap follows ``/robot/state``, ``/pedestrians``,
  ``/bus/stats`` and ``/robot/parts``): ``truth`` [x, y, yaw], the base's ground truth in the map when the log has
  it (the bridge's map -> odom), ``people`` (the newest /pedestrians' people, once) and ``diagnostics`` (the
  statuses of ros_side/bridge_node.py's :class:`Diagnostics`, after a bus report or a part event) and
  ``cameras`` (each camera whose image the log recorded this cycle: its frame's RGB and depth bytes, size,
  intrinsics, optical frame; so at the trial's ``camera_rate``, and never a frame the trial did not render); every
  :data:`DESCRIPTION_EVERY` cycles from the first, ``description``: the URDF and the fixed
  joints (description.py; the bridge publishes them once, transient-local, and again only if they change; sent
  again so that a bridge that connects late still gets them); ``ros_bye`` when the trial ends. A bridge that is slow or absent costs the trial nothing (PUB drops).
- **commands** (PULL): ``ros_cmd_vel`` envelopes ``{v, w}`` as the bridge got them from ``/cmd_vel``;
  ``ros_joint_positions`` ``{positions}`` (a ``Float64MultiArray``) and ``ros_joint_trajectory`` ``{joints,
  points: [{positions, t}], start}`` (a ``JointTrajectory``). :meth:`take_command` drains them without waiting and
  checks each with msgspec (finite, within :data:`MAX_SPEED_M_S`, :data:`MAX_TURN_RAD_S`,
  :data:`MAX_POSITION_RAD`): a refused one is one line on ``err`` and a ``/trial/refused`` message in the log; a
  refused ``/cmd_vel`` is returned as :data:`REFUSED` so the driver stops the base, a refused joint command
  changes no joint. Garbage on the socket is refused as a ``/cmd_vel`` (the base stops); nothing a peer sends
  raises into the trial. Good joint commands wait in :attr:`joint_commands` for the driver (joint_commands.py).
"""
from __future__ import annotations

import sys
from typing import Annotated, Any

import msgspec
import zmq
from msgspec import Meta, Struct

from hil.bridge.envelope import EnvelopeError, pack, unpack

from ..record.live_tap import LiveTap
from .ros_side.bridge_node import Diagnostics
from .ros_side.contacts import changed, contact_states, scenario_file, scenario_line, touch_markers, touch_points

STATE, BYE, CMD_VEL = "ros_state", "ros_bye", "ros_cmd_vel"  # ros_side/bridge_node.py has the same names
JOINT_POSITIONS, JOINT_TRAJECTORY = "ros_joint_positions", "ros_joint_trajectory"
FORWARD_TOPIC = "/forward_position_controller/commands"  # as ros2_control's forward command controller names it
TRAJECTORY_TOPIC = "/joint_trajectory_controller/joint_trajectory"  # as its joint trajectory controller does
TOPIC_OF = {CMD_VEL: "/cmd_vel", JOINT_POSITIONS: FORWARD_TOPIC, JOINT_TRAJECTORY: TRAJECTORY_TOPIC}
MAX_SPEED_M_S = 100.0  # |linear.x| above this is no command but a broken number (1e9): refused
MAX_TURN_RAD_S = 100.0  # |angular.z| likewise
MAX_POSITION_RAD = 1000.0  # a joint position beyond this is a broken number; the joint's own limits come after
MAX_TRAJECTORY_S = 86400.0  # a point's time_from_start beyond a day likewise
DESCRIPTION_EVERY = 50  # cycles between two copies of the robot's description in the state (1 s at 50 Hz)


class CmdVel(Struct, frozen=True):
    """What the bridge forwards of a Twist: linear.x (m/s) and angular.z (rad/s). Meta's bounds refuse NaN too."""

    v: Annotated[float, Meta(ge=-MAX_SPEED_M_S, le=MAX_SPEED_M_S)]
    w: Annotated[float, Meta(ge=-MAX_TURN_RAD_S, le=MAX_TURN_RAD_S)]


Position = Annotated[float, Meta(ge=-MAX_POSITION_RAD, le=MAX_POSITION_RAD)]


class JointPositions(Struct, frozen=True):
    """A Float64MultiArray's data: one position (rad) per joint, in the declared order (joint_commands.py)."""

    positions: list[Position]


class TrajectoryPoint(Struct, frozen=True):
    positions: list[Position]
    t: Annotated[float, Meta(ge=0.0, le=MAX_TRAJECTORY_S)]  # time_from_start, s
    velocities: list[Position] = []  # rad/s, one per joint or none (the bound: a broken number, as for positions)
    accelerations: list[Position] = []  # rad/s^2, likewise


class JointTrajectory(Struct, frozen=True):
    """A JointTrajectory: joint names, points, and the header's stamp (s; 0: start when it arrives)."""

    joints: list[str]
    points: list[TrajectoryPoint]
    start: Annotated[float, Meta(ge=0.0)] = 0.0


class JointCommand(Struct, frozen=True):
    """A checked joint command as the driver takes it: which topic, when it came, what it says."""

    topic: str
    t: float
    command: JointPositions | JointTrajectory


class _LoggedPose(Struct):
    """What the link reads of the log's /robot/state: x, y, yaw (ground truth when ``odometry`` is beside)."""

    x: float
    y: float
    yaw: float
    odometry: list[float] | None = None


class _LoggedSensors(Struct):
    """What the link reads of the log's /robot/sensors: the pressed contact zones (``sensor.zone``)."""

    contacts: list[str] = []


# the log's topics the link follows (recorder tap -> method) beside /clock
_FOLLOWED = {"/robot/state": "_follow_state", "/pedestrians": "_follow_people", "/bus/stats": "_follow_bus",
             "/robot/parts": "_follow_part", "/robot/model": "_follow_model", "/robot/sensors": "_follow_sensors",
             "/world/contacts": "_follow_touches", "/crowd/scenario": "_follow_scenario",
             "/crowd/script": "_follow_script"}
_TYPE_OF = {"/robot/state": _LoggedPose, "/robot/sensors": _LoggedSensors}
REFUSED = CmdVel(0.0, 0.0)  # returned (by identity) for a refused command: the base stops
_DECODE = msgspec.convert


class RosLink(LiveTap):
    """The sockets and the per-cycle state. ``Trial.run(out, taps=link.taps, hooks=link.hooks)``; ``close()``."""

    def __init__(self, host: str = "127.0.0.1", state_port: int = 0, command_port: int = 0, *,
                 err: Any = None):
        self.err = err if err is not None else sys.stderr
        self.context = zmq.Context()
        self.pub = self.context.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.SNDHWM, 100)  # ~2 s of cycles at 50 Hz for a bridge that lags; then dropped
        self.pull = self.context.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.setsockopt(zmq.RCVHWM, 1000)
        try:
            self.state_endpoint = _bind(self.pub, host, state_port)
            self.command_endpoint = _bind(self.pull, host, command_port)
        except BaseException:
            self.context.destroy(linger=0)
            raise
        self.rec: Any = None
        self.now_s: float | None = None  # the trial time of the log's last /clock (None: not recording)
        self._t0: float | None = None
        self.seq = 0
        self.received = 0
        self.refused = 0
        self._layout: dict[str, Any] | None = None
        self._parts: tuple[Any, Any] | None = None  # (base or None, ring or None), found at the first cycle
        self._description: dict[str, Any] | None = None
        self.joint_commands: list[JointCommand] = []  # checked, not yet taken by the driver
        # what the log says beside the robot (the tap): the base's ground truth, the people, the parts and buses
        self._truth: list[float] | None = None
        self._people: list[dict[str, Any]] | None = None  # the newest /pedestrians, not yet sent
        self.diagnostics = Diagnostics()
        self._diagnostics_due = False
        self._imaged: list[str] = []  # the cameras whose image the log recorded this cycle
        # contacts and the scenario (ros_side/contacts.py): the zones there are, the switches as last sent, the
        # people touching, the script's file and the line running
        self._zones: dict[str, list[str]] = {}
        self._switches: dict[str, bool] | None = None
        self._switches_due: dict[str, bool] = {}
        self._crowd: list[dict[str, Any]] = []  # the newest /pedestrians' people (kept: touches are placed by them)
        self._touched: set | None = None
        self._touches: list[dict[str, Any]] | None = None  # markers not yet sent
        self._script_file = "scenario.scn"
        self._lines: list[str] = []  # the scenario's lines that ran since the last cycle sent

    # --- as a recorder tap and a hook (LiveTap: taps, hooks, bind, write) ------------------------------------
    def __call__(self, topic: str, t_s: float, data: bytes, info: Any) -> None:
        if topic == "/clock":
            self.now_s = t_s
        elif topic.startswith("/foxglove/") and topic.endswith("/image"):  # the log recorded a camera's image
            self._imaged.append(topic[len("/foxglove/"):-len("/image")])
        elif topic in _FOLLOWED:
            try:
                getattr(self, _FOLLOWED[topic])(msgspec.json.decode(data, type=_TYPE_OF.get(topic, Any)))
            except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError, ValueError):
                pass  # the log's own messages, checked when written: nothing to publish of one that is not

    def _follow_state(self, state: _LoggedPose) -> None:
        """The base's ground truth in the map, when the log has it (x, y, yaw beside the odometry)."""
        self._truth = [state.x, state.y, state.yaw] if state.odometry is not None else None

    def _follow_people(self, message: dict[str, Any]) -> None:
        self._people = list(message["people"])
        self._crowd = self._people

    def _follow_model(self, model: dict[str, Any]) -> None:
        self._zones = {str(k): [str(z) for z in v] for k, v in (model.get("contacts") or {}).items()}

    def _follow_sensors(self, sensors: _LoggedSensors) -> None:
        """The switches (ros_side/contacts.py) that changed since they were last sent, kept until sent."""
        now = contact_states(self._zones, sensors.contacts)
        if not now:
            return
        self._switches_due.update(changed(self._switches, now))
        self._switches = now

    def _follow_touches(self, message: dict[str, Any]) -> None:
        robot_xy = self._truth[:2] if self._truth is not None else None
        points = touch_points(self._crowd, message.get("people") or [], robot_xy)
        markers, touched = touch_markers(points, self._touched)
        if markers or touched != self._touched:
            self._touches = markers if self._touches is None else self._touches + markers
        self._touched = touched

    def _follow_scenario(self, scenario: dict[str, Any]) -> None:
        self._script_file = scenario_file(scenario)

    def _follow_script(self, line: dict[str, Any]) -> None:
        self._lines.append(scenario_line(self._script_file, line))

    def _follow_bus(self, counters: dict[str, Any]) -> None:
        self.diagnostics.bus(counters)
        self._diagnostics_due = True

    def _follow_part(self, event: dict[str, Any]) -> None:
        self.diagnostics.part(event)
        self._diagnostics_due = True

    def trial_time(self, robot: Any) -> float:
        """The time the log gives this cycle; without a log, the robot's clock since the first cycle seen."""
        if self.now_s is not None:
            return self.now_s
        if self._t0 is None:
            self._t0 = robot.clock.now()
        return max(0.0, robot.clock.now() - self._t0)

    def after_cycle(self, robot: Any) -> None:
        """Publish the cycle's state (never waits: PUB drops what a slow subscriber cannot take)."""
        self.seq += 1
        try:
            self.pub.send(pack(STATE, self.state(robot), self.seq, self.trial_time(robot)), zmq.NOBLOCK)
        except zmq.Again:
            pass

    def state(self, robot: Any) -> dict[str, Any]:
        """The ``ros_state`` payload of the cycle that just ran."""
        out: dict[str, Any] = {"t": self.trial_time(robot), "odom": None, "twist": None, "ring": None}
        if self._parts is None:
            self._parts = _parts_of(robot)
        base, ring = self._parts
        if base is not None:
            out["odom"], out["twist"] = list(base.odometry), list(base.velocity)
        if ring is not None:
            out["ring"] = {"ranges": ring.ranges, "causes": ring.causes, **self._ring_layout(ring)}
        joints = robot.joints
        out["joints"] = {"name": list(joints.keys()), "position": [j.position for j in joints.values()],
                         "velocity": [j.velocity for j in joints.values()]}
        if self._truth is not None:
            out["truth"] = self._truth
        if self._people is not None:
            out["people"], self._people = self._people, None
        if self._imaged:
            out["cameras"] = [c for c in (_camera_frame(robot, name) for name in self._imaged) if c is not None]
            self._imaged = []
        if self._diagnostics_due:
            out["diagnostics"], self._diagnostics_due = self.diagnostics.statuses(), False
        if self._switches_due:
            out["switches"], self._switches_due = self._switches_due, {}
        if self._touches is not None:
            out["touches"], self._touches = self._touches, None
        if self._lines:
            out["scenario_lines"], self._lines = self._lines, []
        if self.seq % DESCRIPTION_EVERY == 1:
            if self._description is None:
                from .description import description_of_robot

                self._description = description_of_robot(robot)
            out["description"] = self._description
        return out

    def _ring_layout(self, ring: Any) -> dict[str, Any]:
        if self._layout is None:
            self._layout = {"angles": list(ring.angles), "min": ring.min_range, "max": ring.max_range}
        return self._layout

    # --- commands ----------------------------------------------------------------------------------------------
    def take_command(self, t_s: float) -> CmdVel | None:
        """The newest command that came since the last call (None: none came; :data:`REFUSED`: the newest was
        refused, or one before it was: a refused command is never overtaken silently within a cycle)."""
        newest: CmdVel | None = None
        refused = False
        while True:
            try:
                data = self.pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            self.received += 1
            kind, command = self._check(data, t_s)
            if kind != CMD_VEL:
                if command is not None:
                    self.joint_commands.append(JointCommand(TOPIC_OF[kind], t_s, command))
            elif command is None:
                refused = True
            else:
                newest, refused = command, False
        return REFUSED if refused else newest

    def take_joint_commands(self) -> list[JointCommand]:
        """The checked joint commands that came since the last call, oldest first."""
        taken, self.joint_commands = self.joint_commands, []
        return taken

    def _check(self, data: bytes, t_s: float) -> tuple[str, Any]:
        """(the envelope's type, the checked command or None when refused); garbage counts as a /cmd_vel."""
        kind = CMD_VEL
        try:
            envelope = unpack(data, tuple(TOPIC_OF))
            kind = envelope.type
            return kind, _DECODE(envelope.payload, _STRUCT_OF[kind])
        except (EnvelopeError, msgspec.ValidationError) as exc:
            self.refused += 1
            self.refuse(TOPIC_OF[kind], _shown(data), str(exc), t_s)
            return kind, None

    def refuse(self, topic: str, request: str, error: str, t_s: float) -> None:
        """One line on ``err`` and ``/trial/refused`` in the log, saying which topic, what and why."""
        then = "the base stops" if topic == "/cmd_vel" else "no joint moves for it"
        print(f"hil ros: t={t_s:.3f} s: {topic} {request} refused ({error}); {then}", file=self.err, flush=True)
        self.write("/trial/refused", t_s, {"request": f"{topic} {request}", "error": error,
                                           "by": f"ros {topic}"})

    def close(self) -> None:
        """Tell the bridge the trial ended (given 0.2 s to leave), then close the sockets."""
        try:
            self.pub.setsockopt(zmq.LINGER, 200)
            self.pub.send(pack(BYE, {}, self.seq + 1), zmq.NOBLOCK)
        except zmq.ZMQError:
            pass
        self.pull.close(linger=0)
        self.pub.close()
        self.context.term()


def _camera_frame(robot: Any, name: str) -> dict[str, Any] | None:
    """The frame of camera ``name`` the log just recorded (``Camera.observe``: this frame period's, made at most
    once a period for observers, and changing nothing the controller's frames use), as the bridge publishes it:
    RGB (rgb8) and depth (32FC1, NaN invalid) bytes, size, intrinsics, the optical frame; None when it gives
    none."""
    import numpy as np

    from .description import optical_frame

    try:
        frame = robot.sensors[name].observe()
    except Exception:  # noqa: BLE001 - a camera unplugged since: nothing to publish of it
        return None
    k = frame.intrinsics
    rgb, depth = frame.rgb, frame.depth
    return {"name": name, "frame_id": optical_frame(name), "width": int(k.width), "height": int(k.height),
            "k": [float(k.fx), float(k.fy), float(k.cx), float(k.cy)],
            "rgb": np.ascontiguousarray(rgb, dtype=np.uint8).tobytes() if rgb is not None else None,
            "depth": np.ascontiguousarray(depth, dtype="<f4").tobytes() if depth is not None else None}


def _parts_of(robot: Any) -> tuple[Any, Any]:
    """The robot's base (None without a drivable one) and the ring the log records (the first range ring)."""
    from hil.runtime.robot.base import BaseGeometryError
    from hil.runtime.robot.sensors import RangeRing

    try:
        base = robot.base
    except BaseGeometryError:
        base = None
    ring = robot.sensors.get("ring")
    if not isinstance(ring, RangeRing):
        ring = next((s for s in robot.sensors.values() if isinstance(s, RangeRing)), None)
    return base, ring


def _bind(socket: Any, host: str, port: int) -> str:
    if port:
        socket.bind(f"tcp://{host}:{port}")
        return f"tcp://{host}:{port}"
    chosen = socket.bind_to_random_port(f"tcp://{host}")
    return f"tcp://{host}:{chosen}"


_STRUCT_OF = {CMD_VEL: CmdVel, JOINT_POSITIONS: JointPositions, JOINT_TRAJECTORY: JointTrajectory}


def _shown(data: bytes) -> str:
    """A refused command as a person reads it: ``v=nan w=0`` when the envelope decodes, else its size."""
    try:
        payload = unpack(data, tuple(TOPIC_OF)).payload
        if isinstance(payload, dict):
            return (" ".join(f"{k}={v!r}" for k, v in payload.items()) or repr(payload))[:120]
        return repr(payload)[:120]
    except EnvelopeError:
        return f"({len(data)} bytes, not a command)"
