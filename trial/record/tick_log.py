"""What a trial writes after every bus cycle, behind the controller's back (every entry point: ``hil trial``,
``hil demo``, ``hil run --record``, the pytest plugin, sweeps).

:class:`TickLog` is a ``robot.after_cycle`` hook: after every bus cycle (``robot.loop``'s ticks, or a script's own
``robot.cycle()`` calls) it writes one message set to ``DIR/trial.mcap`` (topics.py):

- ``/clock``; ``/robot/state`` when the robot has a drivable base: x, y, yaw from the world's ground truth when
  there is an in-process world (trial/world.py WorldProbe), else odometry; ``odometry`` (what the robot
  believed) beside it, vx, w, the joints by name, and ``mode`` when the controller sets ``robot.mode``;
  ``/robot/joints`` (joints only) for a robot with no base;
- ``/robot/sensors``: the ring as the controller read it, plus ``ring_real`` and ``ring_virtual`` when a crowd
  overlay (a mixed trial, runtime/robot/overlay.py) adds virtual people to it; the pressed zones of every
  contact sensor as ``sensor.zone``;
- with people: ``/pedestrians`` (the world's people as they are: actual states, every crowd period of trial
  time; in a mixed trial whenever the overlay placed its virtual people anew), ``/world/contacts`` (who touched
  the robot since the previous message, from the physics engine) and ``/crowd/script`` (each staged line when it
  ran);
- ``/camera/people`` for each new frame of a virtual camera (made for the controller or the recording): the
  people it showed and their pixels (camera_people.py), the failure analysis' camera evidence;
- ``/robot/parts`` when a part is lost, back, new, changed or quarantined (runtime/robot/presence.py), and
  ``/robot/model`` again after a new or changed part;
- ``/bus/stats`` once a second of log time for every bus (``bus`` says which); latency percentiles only on the
  real clock (they are wall time, which would make a simulated trial's log differ run to run);
- ``/trial/meta``, ``/map``, ``/robot/model`` (the robot from its descriptors: robot_model.py) and, with a
  scenario, ``/crowd/scenario`` once, at t = 0;
- beside them the Foxglove channels (foxglove.py), made from these messages by a recorder listener.

Message times are trial time: the robot's clock minus its reading when the recording started (0 for a sim
clock), so under the simulator's clock the same trial gives the same bytes.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from hil.devices.map_format import parse_walls, point, resolve_map
from hil.devices.yaml_source import load_yaml_mapping, require

from .recorder import TrialRecorder

BUS_STATS_EVERY_S = 1.0
PEOPLE_EVERY_S = 0.1  # the crowd's period: people are written at most this often (a 50 Hz controller need not
# write 50 people 50 times a second)
ROBOT_RADIUS_M = 0.3  # the commbot's footprint (as the world and the crowd take it)


def map_message(name_or_path: str, start: tuple[float, ...] | None = None) -> dict[str, Any]:
    """The ``/map`` message of a map under config/maps/ (or a map file): walls, places, entrances (``at``
    points), no goal; ``start`` [x, y] when given. ConfigError (file:line) for a bad map."""
    path = resolve_map(name_or_path)
    doc = load_yaml_mapping(path, "map", "map")
    name = require(doc, "name", str, "map")
    walls = parse_walls(doc)
    places = require(doc, "places", dict, "map") if "places" in doc else {}
    entrances: dict[str, list[float]] = {}
    for key, entrance in (require(doc, "entrances", dict, "map") if "entrances" in doc else {}).items():
        if isinstance(entrance, dict) and "at" in entrance:
            entrances[str(key)] = list(point(entrance, "at", f"entrance {key!r}"))
    message: dict[str, Any] = {"name": name, "walls": [[*w.start, *w.end] for w in walls],
                               "places": {k: list(point(places, k, f"place {k!r}")) for k in places},
                               "entrances": entrances, "goal": None}
    if start is not None:
        message["start"] = [float(start[0]), float(start[1])]
    return message


class TickLog:
    """Records an opened robot's every bus cycle into ``out_dir/trial.mcap``: :meth:`attach` hooks it to the
    robot, :meth:`close` writes the last bus statistics and the file's footer (safe to call twice). ``probe``: the
    ground truth of an in-process world (trial/world.py), or None."""

    def __init__(self, out_dir: str | os.PathLike[str], robot: Any, meta: dict[str, Any],
                 map_msg: dict[str, Any] | None = None, probe: Any = None, listeners: tuple = (),
                 extra: tuple[tuple[str, dict[str, Any]], ...] = (), camera_rate: float = 2.0,
                 camera_depth: bool = False, taps: tuple = ()):
        from hil.runtime.robot.sensors import ContactSensor, RangeRing

        self.robot = robot
        self.probe = probe
        self.overlay = getattr(robot, "overlay", None)
        self.ring = self.overlay.ring if self.overlay is not None else _first_ring(robot, RangeRing)
        self.contacts = [(name, s) for name, s in robot.sensors.items() if isinstance(s, ContactSensor)]
        try:
            robot.base  # noqa: B018 - only whether it has one
            self.has_base = True
        except Exception:  # noqa: BLE001 - BaseGeometryError: no drivable base
            self.has_base = False
        self.real_clock = getattr(robot.clock, "kind", None) == "real"
        self.t0 = robot.clock.now()  # trial time 0
        self.t = 0.0  # trial time of the last message set
        self.sets = 0
        self.people_seen = 0  # /pedestrians messages with anybody in them
        self._next_stats_s = 0.0
        self._next_people_s = 0.0
        # the overlay's people last written (by identity: the overlay replaces the dict when it places people
        # anew); its empty dict before the crowd's first word is not worth a message
        self._people: Any = self.overlay.people if self.overlay is not None else None
        self._closed = False
        self._parts_written = len(getattr(robot, "part_events", ()))
        self.rec = TrialRecorder(out_dir)
        try:
            for tap in taps:  # a live Foxglove server: it sees the t = 0 messages too
                self.rec.add_tap(tap)
            from .foxglove import FoxgloveChannels
            from .robot_model import robot_model_message

            # the Foxglove channels first, then whoever watches (a live viewer): both see every message
            self.rec.listeners.extend((FoxgloveChannels(self.rec), *listeners))
            radius = self.overlay.spec.robot_radius_m if self.overlay is not None else ROBOT_RADIUS_M
            self.rec.write("/trial/meta", 0.0, {"robot_radius": radius, "clock_start_s": self.t0, **meta})
            if map_msg is not None:
                self.rec.write("/map", 0.0, map_msg)
            self.rec.write("/robot/model", 0.0, robot_model_message(robot))
            for topic, payload in extra:  # the scenario's lines (trial/run.py)
                self.rec.write(topic, 0.0, payload)
            from .camera_faults import CameraFaults
            from .camera_log import CameraLog

            self.camera_faults = CameraFaults(self.rec, robot)  # camera_faults.py
            self._write_faults(0.0)
            self.cameras = CameraLog(self.rec, robot, camera_rate, camera_depth)  # camera_log.py
            from .camera_people import CameraPeople

            self.camera_people = CameraPeople(self.rec, robot)  # who each new frame showed
        except BaseException:
            self.rec.close()
            raise

    @property
    def path(self) -> Path:
        return self.rec.path

    def attach(self) -> TickLog:
        """Record from the next bus cycle on (after the hooks already there: the overlay's cast comes first)."""
        self.robot.after_cycle.append(self.after_cycle)
        return self

    def pose(self) -> tuple[float, float, float]:
        """Where the robot is: the world's ground truth when there is one, else what odometry says."""
        return self.probe.robot_pose() if self.probe is not None else self.robot.base.odometry

    def after_cycle(self, robot: Any) -> None:
        """One message set for the bus cycle that just ran."""
        t = max(0.0, robot.clock.now() - self.t0)
        self.t = t
        rec = self.rec
        rec.write("/clock", t, {"t": t})
        joints = {name: joint.position for name, joint in robot.joints.items()}
        if self.has_base:
            base = robot.base
            odometry = base.odometry
            x, y, yaw = self.pose() if self.probe is not None else odometry
            vel = base.velocity
            state = {"x": x, "y": y, "yaw": yaw, "vx": vel.v, "w": vel.w, "joints": joints,
                     "odometry": list(odometry)}
            if getattr(robot, "mode", None) is not None:
                state["mode"] = str(robot.mode)
            rec.write("/robot/state", t, state)
        else:
            rec.write("/robot/joints", t, {"joints": joints})
        sensors: dict[str, Any] = {"ring": self.ring.ranges if self.ring is not None else [],
                                   "contacts": [f"{name}.{zone}" for name, sensor in self.contacts
                                                for zone, on in sensor.pressed.items() if on]}
        if self.ring is not None:
            sensors["ring_cause"] = self.ring.causes  # why each of the part's own readings failed (null: valid)
        if self.overlay is not None:
            sensors["ring_real"] = self.ring.real_ranges
            sensors["ring_virtual"] = list(self.ring.virtual_ranges or [None] * len(self.ring.angles))
            sensors["ring_virtual_cause"] = list(self.ring.virtual_causes or [None] * len(self.ring.angles))
        rec.write("/robot/sensors", t, sensors)
        self._write_parts(t)
        self._write_people(t)
        self.cameras.after_cycle(t)
        self.camera_people.after_cycle(t)
        self.camera_faults.after_cycle(t)  # after the recording's read: the frame it made counts now
        if t >= self._next_stats_s - 1e-9:
            self._write_stats(t)
            self._next_stats_s = (math.floor(t / BUS_STATS_EVERY_S + 1e-9) + 1) * BUS_STATS_EVERY_S
        self.sets += 1

    def _write_parts(self, t: float) -> None:
        """``/robot/parts``: each part lost, back, new, changed or quarantined since the last cycle (presence.py);
        a new or changed part changes the robot, so ``/robot/model`` is written again with it."""
        events = getattr(self.robot, "part_events", ())
        if len(events) <= self._parts_written:
            return
        fresh = events[self._parts_written:]
        self._parts_written = len(events)
        for event in fresh:
            self.rec.write("/robot/parts", t, {**event.as_dict(), "time_s": t})
        if any(e.kind in ("new", "changed") for e in fresh):
            from .robot_model import robot_model_message

            self.rec.write("/robot/model", t, robot_model_message(self.robot))

    def _write_people(self, t: float) -> None:
        rec = self.rec
        if self.probe is not None and self.probe.crowd is not None:
            if t < self._next_people_s - 1e-9:
                return
            people, touched, lines = self.probe.people()
            rec.write("/pedestrians", t, {"people": people})
            rec.write("/world/contacts", t, {"people": touched})
            for line in lines:
                rec.write("/crowd/script", t, line)
            self.people_seen += bool(people)
            self._next_people_s = (math.floor(t / PEOPLE_EVERY_S + 1e-6) + 1) * PEOPLE_EVERY_S
        elif self.overlay is not None and self.overlay.people is not self._people:
            self._people = self.overlay.people
            rec.write("/pedestrians", t, {"people": [_person(pid, p) for pid, p in sorted(self._people.items())],
                                          "crowd_t": self.overlay.crowd_time_s})
            self.people_seen += bool(self._people)

    def _write_faults(self, t: float) -> None:
        """The rings' cause counters (one bus read each), when the ring declares them, and the depth cameras'
        invalid pixels by cause over the frames handed out so far (camera_faults.py)."""
        from hil.runtime.robot.sensors import RangeRing

        counts = {}
        for name, sensor in self.robot.sensors.items():
            if isinstance(sensor, RangeRing):
                found = ring_fault_counters(self.robot, sensor)
                if found is not None:
                    counts[name] = found
        cameras, seen = self.camera_faults.counters()
        counts.update(cameras)
        if counts:
            self.rec.write("/robot/sensor_faults", t, {"sensors": counts, **({"frames": seen} if seen else {})})

    def _write_stats(self, t: float) -> None:
        for name, stats in self.robot.bus_stats.items():
            counters = stats.as_dict()
            if not self.real_clock:
                counters = {k: v for k, v in counters.items() if not k.startswith("latency")}
            self.rec.write("/bus/stats", t, {"bus": name, **counters})

    def close(self) -> None:
        """The buses' final counters (at the last message set's time), then the footer. Never raises for the
        statistics: the log must close whatever happened to the run."""
        if self._closed:
            return
        self._closed = True
        if self.after_cycle in self.robot.after_cycle:
            self.robot.after_cycle.remove(self.after_cycle)
        try:
            if self.sets:
                self._write_last_lines(self.t)
                self.camera_faults.after_cycle(self.t)
                self.camera_people.after_cycle(self.t)
                self._write_faults(self.t)
                self._write_stats(self.t)
        except Exception:  # noqa: BLE001, S110 - a bus that failed its stats must not cost the log its footer
            pass
        finally:
            self.rec.close()


    def _write_last_lines(self, t: float) -> None:
        """The staged lines the world heard of since the last people message (a scenario's ``end`` line ends the
        run before the next one): the log keeps every line that ran."""
        if self.probe is not None and self.probe.crowd is not None:
            with self.probe.embodied.device.lock:
                lines = self.probe.crowd.take_script_events()
            for line in lines:
                self.rec.write("/crowd/script", t, line)


def ring_fault_counters(robot: Any, ring: Any) -> dict[str, int] | None:
    """A ring part's invalid-reading counters by cause, read over its bus (None: it declares none)."""
    desc = robot.virtual.parts[ring.part_key].descriptor
    sensor = next((s for s in desc.sensors if s.kind == "range_ring" and s.params.get("invalid_counters")), None)
    if sensor is None or ring.host is None:
        return None
    import copy

    # a diagnostic read, kept out of the bus statistics: they count the controller's traffic, and a trial resumed
    # from a saved state (trial/state) must log the same counters as the original from there on
    stats = ring.host.stats
    before = copy.deepcopy(stats.__dict__)
    out = {}
    try:
        for cause, register in sorted(sensor.params["invalid_counters"].items()):
            spec = desc.register(register)
            out[cause] = int.from_bytes(ring.host.read(ring.part_id, spec.address, spec.size), "little")
    finally:
        stats.__dict__.update(before)
    return out


def _first_ring(robot: Any, ring_type: type) -> Any:
    ring = robot.sensors.get("ring")
    if isinstance(ring, ring_type):
        return ring
    return next((s for s in robot.sensors.values() if isinstance(s, ring_type)), None)


def _person(pid: int, person: dict[str, Any]) -> dict[str, Any]:
    """One virtual person for /pedestrians, from the crowd's intent (bridge Person fields)."""
    out = {"id": int(pid), "x": float(person["x"]), "y": float(person["y"]),
           "vx": float(person.get("vx", 0.0)), "vy": float(person.get("vy", 0.0))}
    if "type" in person:
        out["type"] = str(person["type"])
    if "radius" in person:
        out["radius"] = float(person["radius"])
    if "height" in person:
        out["height"] = float(person["height"])
    for label in ("doing", "name"):  # what the crowd says each does, and a script's names (the viewer's colours)
        if label in person:
            out[label] = str(person[label])
    gx, gy = person.get("gx"), person.get("gy")
    out["gaze"] = [float(gx), float(gy)] if gx is not None and gy is not None else None
    return out

