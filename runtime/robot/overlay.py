"""Mixed trials (DESIGN "What it is for" 3): a physical robot among virtual pedestrians.

The controller runs unchanged on the real robot; the profile adds a crowd::

    clock: real
    start_pose: [-18.0, 0.0, 0.0]                   # the robot's pose in the map at the start (odometry reset)
    crowd: {endpoint: tcp://127.0.0.1:5760, mode: realtime, map: arcade}   # map: optional

and :class:`CrowdOverlay` does the rest after every bus cycle (the robot's ``after_cycle`` hook):

1. publish the robot's pose (wheel odometry, in the map frame since ``start_pose``, or the newest pose of an
   external source, ``crowd: {pose: tcp://...}``: bridge/pose_stream.py) and velocity to the crowd as
   the robot's state, on the real-time link (bridge/realtime.py; the crowd runs paced to wall time:
   ``hil crowd --serve EP --realtime``). The people's actual states are not sent back: there is no physics for
   them on this side, the crowd's own state *is* their actual state, and echoing it would only set them back
   by the link's latency;
2. take the crowd's newest intents (never waiting) and place the virtual people in a shadow world
   (firmware_sim/shadow.py: capsules, no floor, since the real ring sees the real room; with ``map:`` the map's
   walls too, which only hide the people behind them and never echo themselves);
3. at the ring's update rate, cast the ring's rays there with the ring's own sensor model, and hand the virtual
   readings to the ring handle: ``ring.ranges`` is then, per sensor, the nearer of the real and the virtual echo
   (runtime/robot/sensors.py ``merge_ranges``), while ``ring.real_ranges`` and ``ring.virtual_ranges`` stay
   available (and are what a trial log records separately).

If the crowd falls silent the link is ``lost`` (logged once); the virtual people stay where they were last seen
and the robot goes on; a crowd that comes back as a new process replaces them. A crowd that is not there at all
when the robot opens is an error naming its endpoint.

This is the second place where the runtime touches firmware_sim (after the sim:// transport): imported lazily
inside :class:`CrowdOverlay`, so a profile without ``crowd:`` never loads pybullet through it. The profile's
``crowd:`` block itself is parsed in runtime/robot/crowd_spec.py.
"""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from .crowd_spec import CrowdSpec

if TYPE_CHECKING:
    from .view import RobotView
    from .sensors import RangeRing

log = logging.getLogger("hil.mixed")


class CrowdOverlayError(RuntimeError):
    """The overlay cannot start (no crowd answered, no ring to overlay); the text names what and where."""


class CrowdOverlay:
    """The virtual people of a real-time crowd, overlaid on one range ring of an opened robot. Made by
    :func:`attach_crowd_overlay`; :meth:`after_cycle` runs after every bus cycle; :meth:`close` says bye."""

    def __init__(self, robot: RobotView, spec: CrowdSpec):
        from hil.bridge.realtime import LinkError, RealtimeCrowdLink
        from hil.firmware_sim.shadow import ShadowWorld

        from .profile import profile_security
        from .sensors import RangeRing

        self.spec = spec
        self.ring: RangeRing = _ring(robot, spec.ring, RangeRing)
        sensor, ring_in_base = ring_geometry(robot, self.ring)
        sensor = twin_sensor(robot, self.ring, sensor)
        world_map = None
        if spec.map is not None:
            from hil.firmware_sim.world import load_map

            world_map = load_map(spec.map)
        self.shadow = ShadowWorld(sensor, ring_in_base, seed=spec.seed, world_map=world_map,
                                  walls_echo=spec.walls == "echo")
        self.period_s = self.shadow.model.config.update_period_s
        try:
            security = profile_security(robot.profile)
            self.link = RealtimeCrowdLink(spec.endpoint, timeout_s=spec.timeout_s, security=security,
                                          name=f"{robot.profile.name} (mixed)")
        except BaseException:
            self.shadow.close()
            raise
        try:
            self.link.connect(spec.timeout_s)
        except LinkError as exc:
            self.link.close()
            self.shadow.close()
            raise CrowdOverlayError(f"{robot.profile.source}: crowd: {exc}") from None
        self.session = self.link.session
        self.pose_source = None  # an external pose source (bridge/pose_stream.py) instead of odometry
        if spec.pose != "odometry":
            from hil.bridge.pose_stream import PoseSubscriber

            try:
                self.pose_source = PoseSubscriber(spec.pose, security=security)
            except zmq_errors() as exc:
                self.link.close()
                self.shadow.close()
                raise CrowdOverlayError(f"{robot.profile.source}: crowd: pose {spec.pose!r}: {exc}") from None
        self.pose_from = "odometry"  # where the last published pose came from: odometry | external
        self.people: dict[int, dict] = {}  # id -> the crowd's last word on that person (x, y, vx, vy, radius...)
        self.crowd_time_s: float | None = None
        self.pose: tuple[float, float, float] = tuple(robot.base.odometry)  # type: ignore[assignment]
        self.published_t: float | None = None  # clock time of the pose last published
        self.intents_time_s: float | None = None  # clock time at which the newest intents were taken
        self.world_t: float | None = None  # the publish time of the pose those intents were stepped with
        self.cast_time_s: float | None = None  # clock time of the last cast
        self.cast_world_t: float | None = None  # ... and the publish time of the pose its people reacted to
        self.casts = 0
        self._due_s = -math.inf
        self.ring.virtual_ranges = [None] * len(self.ring.angles)
        self._closed = False

    def after_cycle(self, robot: RobotView) -> None:
        """One exchange after a bus cycle: publish the pose, take the newest intents, cast when the ring would."""
        from hil.bridge.realtime import LOST

        base = robot.base
        x, y, yaw = base.odometry
        v = base.velocity.v
        if self.pose_source is not None:  # the localization system's pose wins once there is one
            external = self.pose_source.latest()
            if external is not None:
                x, y, yaw = external.x, external.y, external.yaw
                self.pose_from = "external"
        now = robot.clock.now()
        self.pose, self.published_t = (x, y, yaw), now
        self.link.publish(now, {"x": x, "y": y, "yaw": yaw, "vx": v * math.cos(yaw), "vy": v * math.sin(yaw),
                                "radius": self.spec.robot_radius_m}, [])
        payload = self.link.poll()
        if self.link.session != self.session:  # a new crowd process: its ids mean other people
            self.people, self.session = {}, self.link.session
            self.shadow.set_people([])
        if payload is not None and self.link.state != LOST:
            self._take(payload, now)
        if now >= self._due_s:  # the ring measures at its update rate, as the real part does
            self._due_s += self.period_s
            if self._due_s <= now:  # slots missed (a slow tick): the next one is a period from now
                self._due_s = now + self.period_s
            reading = self.shadow.cast(x, y, yaw)
            self.ring.virtual_ranges = list(reading.range_m)
            self.ring.virtual_causes = list(reading.cause)
            self.cast_time_s, self.cast_world_t = now, self.world_t
            self.casts += 1

    def _take(self, payload: dict, now: float) -> None:
        from hil.bridge.crowd_link import intents_time, parse_people, people_labels
        from hil.bridge.envelope import EnvelopeError
        from hil.firmware_sim.shadow import Person

        try:
            parsed = parse_people(payload)
            doing, names = people_labels(payload, "doing", parsed), people_labels(payload, "names", parsed)
            people = {person.id: {**person._asdict(), "doing": doing.get(person.id, "walking"),
                                  "name": names.get(person.id, "")} for person in parsed}
            shadow = [Person(pid, float(person["x"]), float(person["y"]), float(person["radius"]),
                             float(person["height"])) for pid, person in people.items()]
            crowd_time = intents_time(payload)
            self.shadow.set_people(shadow)
        except (EnvelopeError, KeyError, TypeError, ValueError) as exc:
            self.link.drop(f"intents: malformed people ({type(exc).__name__}: {exc})")
            return
        self.people, self.crowd_time_s, self.intents_time_s = people, crowd_time, now
        world_t = payload.get("world_t")  # the crowd echoes the t of the world message it last applied
        self.world_t = float(world_t) if isinstance(world_t, (int, float)) and not isinstance(world_t, bool) else None

    def readings(self) -> dict:
        """This tick's readings for a trial log, real and virtual kept apart: {t_crowd, pose, real, virtual,
        merged, people}."""
        return {"t_crowd": self.crowd_time_s, "pose": list(self.pose), "real": self.ring.real_ranges,
                "virtual": list(self.ring.virtual_ranges or ()), "merged": self.ring.ranges,
                "people": [{"id": pid, "x": person["x"], "y": person["y"]} for pid, person in self.people.items()]}

    def counters(self) -> dict:
        """Link state and counters (bridge.realtime) plus the shadow's casts and people."""
        return {**self.link.counters_dict(), "casts": self.casts, "people": len(self.people)}

    def close(self) -> None:
        """Say bye to the crowd (it stops serving), drop the overlay from the ring, close the shadow world."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.pose_source is not None:
                self.pose_source.close()
            self.link.close()
        finally:
            self.ring.virtual_ranges = None
            self.ring.virtual_causes = None
            self.shadow.close()


def zmq_errors() -> tuple[type[BaseException], ...]:
    import zmq

    return (zmq.ZMQError,)


def attach_crowd_overlay(robot: RobotView, spec: CrowdSpec) -> CrowdOverlay:
    """Overlay the crowd at ``spec.endpoint`` on the robot's ring, from the next bus cycle on."""
    overlay = CrowdOverlay(robot, spec)
    robot.after_cycle.append(overlay.after_cycle)
    return overlay


def _ring(robot: RobotView, name: str, ring_type: type) -> RangeRing:
    try:
        ring = robot.sensors[name]
    except KeyError as exc:
        raise CrowdOverlayError(f"{robot.profile.source}: crowd: ring {name!r}: {exc}") from None
    if not isinstance(ring, ring_type):
        raise CrowdOverlayError(f"{robot.profile.source}: crowd: sensor {name!r} is a {type(ring).__name__}, not a "
                                "range ring: virtual people can only be overlaid on range readings")
    try:
        robot.base  # noqa: B018 - the pose comes from the base's odometry
    except Exception as exc:  # noqa: BLE001 - BaseGeometryError says why
        raise CrowdOverlayError(f"{robot.profile.source}: crowd: {exc}") from None
    return ring


def twin_sensor(robot: RobotView, ring: RangeRing, sensor):
    """The shadow ring's sensor: the scanned descriptor's (which carries what the part stores, ``hil calibrate
    --write-parts``), with the profile's ``calibration:`` (CAL.yaml) on top where it names this part: the twin
    measures with the real part's numbers. An entry for another part changes nothing here."""
    path = getattr(robot.profile, "calibration", None)
    if path is None:
        return sensor
    from dataclasses import replace

    from hil.devices.calibration import load_calibration

    part = robot.virtual.parts[ring.part_key]
    entries = [e for e in load_calibration(path).for_part(part.descriptor, part.serial_number)
               if e.sensor == sensor.name]
    if not entries:
        log.warning("%s: calibration %s names no entry for part %s (%s serial %s): the shadow ring keeps the "
                    "descriptor's numbers", robot.profile.source, path, part.id, part.descriptor.name,
                    part.serial_number)
        return sensor
    params = dict(sensor.params)
    for entry in entries:
        params.update(entry.params)
    return replace(sensor, params=params)


def ring_geometry(robot: RobotView, ring: RangeRing):
    """The ring part's descriptor Sensor and the ring body's frame in the base frame (model FK at q = 0)."""
    from ..model import create_data, forward_kinematics

    part = robot.virtual.parts[ring.part_key]
    sensor = next(s for s in part.descriptor.sensors if s.kind == "range_ring" and s.params.get("registers"))
    model = robot.model
    placements = forward_kinematics(model, create_data(model), model.neutral())
    index = next(i for i, link in enumerate(model.links) if link.bus_id == part.id and link.body == sensor.body)
    frame = placements[index]
    return sensor, (frame.translation, frame.rotation)
