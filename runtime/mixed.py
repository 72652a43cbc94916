"""Mixed trials (issue 8 a, DESIGN "What it is for" 3): a physical robot among virtual pedestrians.

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
inside :class:`CrowdOverlay`, so a profile without ``crowd:`` never loads pybullet through it.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devices.map_format import resolve_map
from devices.yaml_source import ConfigError

if TYPE_CHECKING:
    from .robot import Robot
    from .robot.sensors import RangeRing

log = logging.getLogger("hil.mixed")

MODES = ("realtime",)
ENDPOINT_SCHEMES = ("tcp://", "ipc://")
DEFAULT_TIMEOUT_S = 2.0  # silence (wall time) after which the crowd counts as lost; also the wait at open
ROBOT_RADIUS_M = 0.3  # the commbot's footprint, as the world tells the crowd (firmware_sim crowd_bridge)


class CrowdOverlayError(RuntimeError):
    """The overlay cannot start (no crowd answered, no ring to overlay); the text names what and where."""


@dataclass(frozen=True)
class CrowdSpec:
    """The profile's ``crowd:`` block, validated."""

    endpoint: str
    mode: str = "realtime"
    ring: str = "ring"  # the ring sensor's blueprint name
    seed: int = 0  # of the shadow ring's generator
    timeout_s: float = DEFAULT_TIMEOUT_S
    robot_radius_m: float = ROBOT_RADIUS_M
    pose: str = "odometry"  # or the endpoint of an external pose source (bridge/pose_stream.py)
    map: str | None = None  # the resolved path of the map whose walls hide virtual people (never echo), or None


_CROWD_KEYS: dict[str, str] = {
    "endpoint": "the real-time crowd's control endpoint (tcp://host:port or ipc://path)",
    "mode": f"one of {', '.join(MODES)}",
    "ring": "the blueprint name of the range ring the virtual people are overlaid on",
    "seed": "an integer >= 0 (the shadow ring's noise and dropout)",
    "timeout_s": "a number of seconds > 0",
    "robot_radius_m": "a number of metres > 0",
    "pose": "odometry (the wheels) or the endpoint of an external pose source publishing map-frame poses "
            "(tcp://host:port or ipc://path; bridge/pose_stream.py)",
    "map": "a map under config/maps/ (arcade) or a map file: its walls hide the virtual people behind them",
}


def parse_crowd(value: Any, source: str, line: int | None, clock: str) -> CrowdSpec:
    """The ``crowd:`` block of a profile; every error is a ConfigError with file:line."""
    def line_of(key: str | None) -> int | None:
        if key is not None and hasattr(value, "line_of"):
            return value.line_of(key)
        return getattr(value, "line", None) or line

    def error(key: str | None, message: str) -> ConfigError:
        return ConfigError(source, line_of(key), f"crowd: {message}")

    if not isinstance(value, Mapping):
        raise ConfigError(source, line, f"crowd must be a mapping such as {{endpoint: tcp://127.0.0.1:5760, "
                                        f"mode: realtime}}, not {type(value).__name__} {value!r}")
    for key in value:
        if key not in _CROWD_KEYS:
            raise error(key, f"unknown key {key!r}; known: {', '.join(_CROWD_KEYS)}")
    endpoint = value.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint.startswith(ENDPOINT_SCHEMES):
        raise error("endpoint" if "endpoint" in value else None,
                    f"endpoint must be {_CROWD_KEYS['endpoint']}, not {endpoint!r}")
    mode = value.get("mode", "realtime")
    if mode == "lockstep":
        raise error("mode", "mode lockstep is the simulated world's (sim://...?crowd=EP): a physical robot cannot "
                            "wait for the crowd, so a mixed trial streams: mode: realtime")
    if mode not in MODES:
        raise error("mode", f"mode must be {_CROWD_KEYS['mode']}, not {mode!r}")
    if clock != "real":
        raise error(None, f"a real-time crowd needs clock: real, not clock: {clock} (the crowd is paced to wall time)")
    ring = value.get("ring", "ring")
    if not isinstance(ring, str) or not ring:
        raise error("ring", f"ring must be {_CROWD_KEYS['ring']}, not {ring!r}")
    seed = value.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise error("seed", f"seed must be {_CROWD_KEYS['seed']}, not {seed!r}")
    numbers = {}
    for key, default in (("timeout_s", DEFAULT_TIMEOUT_S), ("robot_radius_m", ROBOT_RADIUS_M)):
        number = value.get(key, default)
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not (math.isfinite(number)
                                                                                   and number > 0):
            raise error(key, f"{key} must be {_CROWD_KEYS[key]}, not {number!r}")
        numbers[key] = float(number)
    pose = value.get("pose", "odometry")
    if not isinstance(pose, str) or not (pose == "odometry" or pose.startswith(ENDPOINT_SCHEMES)):
        raise error("pose", f"pose must be {_CROWD_KEYS['pose']}, not {pose!r}")
    world_map = _crowd_map(value.get("map"), error) if "map" in value else None
    return CrowdSpec(endpoint=endpoint, mode=mode, ring=ring, seed=seed, pose=pose, map=world_map, **numbers)


def _crowd_map(name: Any, error) -> str:
    """``crowd: {map: ...}``: resolved (an unknown name or a missing file names the profile's line) and read with
    the shared wall format (a bad map file names its own line), without importing the world."""
    from devices.map_format import parse_walls
    from devices.yaml_source import load_yaml_file, require

    if not isinstance(name, str) or not name:
        raise error("map", f"map must be {_CROWD_KEYS['map']}, not {name!r}")
    try:
        path = resolve_map(name)
    except ConfigError as exc:
        raise error("map", f"map {name!r}: {exc.message}") from None
    if not path.is_file():
        raise error("map", f"map {name!r}: no such map file")
    doc = load_yaml_file(path)
    require(doc, "name", str, "map")
    parse_walls(doc)
    return str(path)


def parse_start_pose(value: Any, source: str, line: int | None) -> tuple[float, float, float]:
    """``start_pose: [x, y, yaw]`` (m, m, rad in the map frame): where odometry starts."""
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in value)):
        raise ConfigError(source, line, f"start_pose must be [x, y, yaw] (three finite numbers: m, m, rad in the "
                                        f"map frame), not {value!r}")
    return float(value[0]), float(value[1]), float(value[2])


class CrowdOverlay:
    """The virtual people of a real-time crowd, overlaid on one range ring of an opened robot. Made by
    :func:`attach_crowd_overlay`; :meth:`after_cycle` runs after every bus cycle; :meth:`close` says bye."""

    def __init__(self, robot: Robot, spec: CrowdSpec):
        from bridge.realtime import LinkError, RealtimeCrowdLink
        from firmware_sim.shadow import ShadowWorld

        from .robot.robot import profile_security
        from .robot.sensors import RangeRing

        self.spec = spec
        self.ring: RangeRing = _ring(robot, spec.ring, RangeRing)
        sensor, ring_in_base = _ring_geometry(robot, self.ring)
        world_map = None
        if spec.map is not None:
            from firmware_sim.world import load_map

            world_map = load_map(spec.map)
        self.shadow = ShadowWorld(sensor, ring_in_base, seed=spec.seed, world_map=world_map)
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
            from bridge.pose_stream import PoseSubscriber

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

    def after_cycle(self, robot: Robot) -> None:
        """One exchange after a bus cycle: publish the pose, take the newest intents, cast when the ring would."""
        from bridge.realtime import LOST

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
            self.cast_time_s, self.cast_world_t = now, self.world_t
            self.casts += 1

    def _take(self, payload: dict, now: float) -> None:
        from bridge.crowd_link import intents_time, parse_people
        from bridge.envelope import EnvelopeError
        from firmware_sim.shadow import Person

        try:
            people = {person.id: person._asdict() for person in parse_people(payload)}
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
            self.shadow.close()


def zmq_errors() -> tuple[type[BaseException], ...]:
    import zmq

    return (zmq.ZMQError,)


def attach_crowd_overlay(robot: Robot, spec: CrowdSpec) -> CrowdOverlay:
    """Overlay the crowd at ``spec.endpoint`` on the robot's ring, from the next bus cycle on."""
    overlay = CrowdOverlay(robot, spec)
    robot.after_cycle.append(overlay.after_cycle)
    return overlay


def _ring(robot: Robot, name: str, ring_type: type) -> RangeRing:
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


def _ring_geometry(robot: Robot, ring: RangeRing):
    """The ring part's descriptor Sensor and the ring body's frame in the base frame (model FK at q = 0)."""
    from .model import create_data, forward_kinematics

    part = robot.virtual.parts[ring.part_key]
    sensor = next(s for s in part.descriptor.sensors if s.kind == "range_ring" and s.params.get("registers"))
    model = robot.model
    placements = forward_kinematics(model, create_data(model), model.neutral())
    index = next(i for i, link in enumerate(model.links) if link.bus_id == part.id and link.body == sensor.body)
    frame = placements[index]
    return sensor, (frame.translation, frame.rotation)
