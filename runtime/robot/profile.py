"""Profiles: which bus, which clock, which names (config/profiles/*.yaml).

A profile is what changes between running a controller on the real robot, on the virtual bus, or on a virtual
device in another process; the controller itself never does (the simulator-clock reference: one config switch chooses
the time source). Every key is checked before anything is opened, and every error gives file:line, so a typo cannot
half-start a robot.

    bus: sim://commbot?clock=sim         # a transport URL (runtime.transports); `hil run --bus` overrides it
    clock: sim                           # real | sim
    clock_endpoint: tcp://127.0.0.1:5757 # sim clock of a device in another process (`hil sim --clock sim`)
    camera_endpoint: tcp://127.0.0.1:5758  # its cameras' frames (`hil sim --camera-endpoint`; camera_remote.py)
    semantics: commbot                   # config/semantics/commbot.yaml, or a path relative to this file
    start_pose: [-18.0, 0.0, 0.0]        # odometry starts here (x m, y m, yaw rad in the map frame)
    crowd: {endpoint: tcp://127.0.0.1:5760, mode: realtime}   # virtual people on the ring (runtime/robot/overlay.py)
    cameras: {head_camera: "file:recordings/hall"}   # a camera's frames from this device instead (camera.py)

or, for one robot whose parts sit on several buses, ``buses:`` instead of ``bus:`` (runtime.robot.buses):

    buses:
      - {name: body, url: "sim://commbot_body"}
      - {name: arm, url: /dev/ttyUSB0, mount: {part: torso, port: shoulder_left}}
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hil.devices import config_path
from hil.devices.yaml_source import ConfigError, SourceDict, load_yaml_file

from .crowd_spec import CrowdSpec, parse_crowd, parse_start_pose
from .buses import BusSpec, check_clock, parse_buses

CLOCKS = ("real", "sim")
ENDPOINT_SCHEMES = ("tcp://", "ipc://")


@dataclass(frozen=True)
class Profile:
    """A validated profile. Paths are absolute; ``bus`` is None only when the caller must supply one."""

    source: str
    bus: str | None
    clock: str
    clock_endpoint: str | None = None
    camera_endpoint: str | None = None  # the served device's camera frames (runtime/robot/camera_remote.py)
    semantics: Path | None = None
    name: str = "controller"
    stall_timeout_s: float | None = None
    bus_timeout_s: float = 0.025
    bus_retries: int = 3
    cache_dir: Path | None = None
    no_cache: bool = False
    trust_file: Path | None = None
    description: str = ""
    keys_dir: Path | None = None  # CURVE keys (bridge/security.py) for clock_endpoint and the crowd link
    buses: tuple[BusSpec, ...] = ()  # from `buses:`, main bus first; () for a one-bus profile (`bus:`)
    start_pose: tuple[float, float, float] | None = None  # odometry reset at open (map frame), None: (0, 0, 0)
    crowd: CrowdSpec | None = None  # a real-time crowd overlaid on the ring (mixed trial), None: no crowd
    native: bool = False  # the controller is a native program under the time shim (runtime/native)
    calibration: Path | None = None  # CAL.yaml (hil calibrate): an in-process virtual twin's parts carry its numbers
    lost_after_misses: int = 3  # consecutive bus cycles a part may miss before it counts as lost (presence.py)
    rescan_s: float = 2.0  # clock seconds between broadcast pings for parts plugged in while running; 0: never
    cameras: tuple[tuple[str, str, int | None], ...] = ()  # (camera, device, line): its frames from the device

    def with_bus(self, url: str | None) -> Profile:
        """The same profile on another bus (``hil run --bus``); None keeps the profile's. With several buses
        the URL replaces the main bus's."""
        if url is None:
            return self
        buses = (replace(self.buses[0], url=url), *self.buses[1:]) if self.buses else ()
        return replace(self, bus=url, buses=buses)

    @property
    def multi_bus(self) -> bool:
        return len(self.buses) > 1

    def bus_urls(self) -> list[tuple[BusSpec, str]]:
        """Each bus of a `buses:` profile with the URL to open (an in-process world put on the profile's clock,
        as :meth:`bus_url` does for the main bus)."""
        return [(spec, replace(self, bus=spec.url).bus_url()) for spec in self.buses]

    def bus_url(self) -> str:
        """The bus URL to open, with an in-process sim:// world put on the profile's clock.

        ``clock: sim`` with ``sim://commbot`` means the world must wait for the lockstep master, so the URL gets
        ``clock=sim``; a URL that says the opposite of the profile is refused (the world would either run away
        from the controller or never move).
        """
        if not self.bus:
            raise ConfigError(self.source, None, "no bus: give `bus:` in the profile or --bus URL on the command line")
        if not self.bus.startswith("sim://"):
            return self.bus
        query = dict(parse_qsl(urlsplit(self.bus).query))
        world_clock = query.get("clock")
        if self.calibration is not None and "calibration" not in query:
            return replace(self, bus=_with_option(self.bus, "calibration", str(self.calibration)),
                           calibration=None).bus_url()
        if world_clock is None:
            return self.bus + ("&" if "?" in self.bus else "?") + f"clock={self.clock}"
        if world_clock != self.clock:
            raise ConfigError(self.source, None, f"bus {self.bus} runs its world on the {world_clock} clock but the "
                                                 f"profile says clock: {self.clock}; drop clock= from the URL or make "
                                                 "them agree")
        return self.bus


def _with_option(url: str, key: str, value: str) -> str:
    from urllib.parse import quote

    return url + ("&" if "?" in url else "?") + f"{key}={quote(value, safe='/:')}"


# key -> (types, what it must be); checked in this order
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "bus": ((str,), "a bus URL (sim://commbot, /dev/ttyUSB0, serial:///dev/ttyUSB0?baud=1000000, socket://host:port)"),
    "buses": ((list,), "a list of {name, url, mount} (one robot on several buses)"),
    "clock": ((str,), f"one of {', '.join(CLOCKS)}"),
    "clock_endpoint": ((str,), "a ZeroMQ endpoint such as tcp://127.0.0.1:5757"),
    "camera_endpoint": ((str,), "a ZeroMQ endpoint such as tcp://127.0.0.1:5758 (hil sim --camera-endpoint)"),
    "semantics": ((str,), "a name under config/semantics/ or a path to a YAML file"),
    "name": ((str,), "the controller's name on the clock"),
    "stall_timeout_s": ((int, float), "a number of seconds > 0"),
    "bus_timeout_ms": ((int, float), "a number of milliseconds > 0"),
    "bus_retries": ((int,), "an integer >= 0"),
    "cache_dir": ((str,), "a directory for the descriptor cache"),
    "no_cache": ((bool,), "true or false"),
    "trust_file": ((str,), "a path to the driver-code trust file"),
    "description": ((str,), "free text"),
    "start_pose": ((list,), "[x, y, yaw] in m, m, rad (the map frame): where odometry starts"),
    "crowd": ((dict,), "a mapping {endpoint: tcp://..., mode: realtime} (virtual people on the ring)"),
    "keys": ((str,), "a key directory made by `hil keys DIR` (CURVE for clock_endpoint and crowd)"),
    "native": ((bool,), "true or false: the controller is a native program (as hil run --native)"),
    "calibration": ((str,), "a CAL.yaml written by `hil calibrate` (the virtual twin's parts carry its numbers)"),
    "lost_after_misses": ((int,), "an integer >= 1: bus cycles a part may miss before it counts as lost"),
    "rescan_s": ((int, float), "a number of seconds >= 0 between looks for new parts (0: never)"),
    "cameras": ((dict,), "a mapping camera name -> device (file:PATH, realsense[:SERIAL], uvc:VID:PID, a path)"),
}


MAX_STALL_TIMEOUT_S = 3600.0  # a lockstep participant silent for an hour is gone, not slow
MAX_BUS_TIMEOUT_MS = 10_000.0  # a reply 10 s late is no reply (a process peer gets PEER_PROCESS_LATENCY_S on top)
MAX_BUS_RETRIES = 100
MAX_LOST_AFTER_MISSES = 1000  # a part silent for 1000 cycles is gone
MAX_RESCAN_S = 3600.0
_BOUNDS = {  # key -> (low, whether low itself is allowed, high, the bound's name in errors)
    "stall_timeout_s": (0.0, False, MAX_STALL_TIMEOUT_S, "MAX_STALL_TIMEOUT_S"),
    "bus_timeout_ms": (0.0, False, MAX_BUS_TIMEOUT_MS, "MAX_BUS_TIMEOUT_MS"),
    "bus_retries": (0, True, MAX_BUS_RETRIES, "MAX_BUS_RETRIES"),
    "lost_after_misses": (1, True, MAX_LOST_AFTER_MISSES, "MAX_LOST_AFTER_MISSES"),
    "rescan_s": (0.0, True, MAX_RESCAN_S, "MAX_RESCAN_S"),
}


def load_profile(profile: str | Path | Mapping[str, Any], *, bus: str | None = None) -> Profile:
    """Read and validate a profile (a YAML file, a name under config/profiles/, or a dict).

    ``bus`` overrides the profile's bus; a profile without a bus is valid only when one is given here.
    """
    if isinstance(profile, Mapping):
        doc, base = profile, Path.cwd()
        source = getattr(profile, "source", "<profile dict>")
    else:
        path = resolve_profile_path(profile)
        doc, base, source = load_yaml_file(path, "profile"), path.parent, str(path)
        if doc is None:
            raise ConfigError(source, None, "the profile is empty; it needs at least bus: and clock:")
    if not isinstance(doc, Mapping):
        raise ConfigError(source, getattr(doc, "line", None), f"a profile is a mapping of keys, not {type(doc).__name__}")
    return _validate(doc, source, base, bus)


def resolve_profile_path(profile: str | Path) -> Path:
    """A path to a file, or a bare name on the config search path (``virtual``: ./config/profiles/virtual.yaml,
    then $HIL_PATH, then hil's own; devices.config_path). An unknown name lists the known profiles."""
    return config_path.resolve(profile, "profiles", "profile")


def _line(doc: Mapping, key: str | None) -> int | None:
    if isinstance(doc, SourceDict):
        return doc.line_of(key) if key is not None else doc.line
    return None


def _validate(doc: Mapping, source: str, base: Path, bus_override: str | None) -> Profile:
    def error(key: str | None, message: str) -> ConfigError:
        return ConfigError(source, _line(doc, key), message)

    for key in doc:
        if key not in _FIELDS:
            import difflib

            close = difflib.get_close_matches(str(key), list(_FIELDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(_FIELDS)}"
            raise error(key, f"unknown key {key!r}{hint}")
    for key, (types, what) in _FIELDS.items():
        if key in doc:
            value = doc[key]
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                raise error(key, f"{key} must be {what}, not {type(value).__name__} {value!r}")
    if "clock" not in doc:
        raise error(None, f"missing key 'clock' (one of {', '.join(CLOCKS)}: where the controller's time comes from)")
    clock = doc["clock"]
    if clock not in CLOCKS:
        raise error("clock", f"clock must be one of {', '.join(CLOCKS)}, not {clock!r}")
    buses: tuple[BusSpec, ...] = ()
    if "buses" in doc:
        if "bus" in doc:
            raise error("buses", "give either bus: (one bus) or buses: (several), not both")
        buses = parse_buses(doc["buses"], source, _line(doc, "buses"))
        check_clock(buses, clock)
        if bus_override is not None:
            buses = (replace(buses[0], url=bus_override), *buses[1:])
    bus = bus_override if bus_override is not None else (buses[0].url if buses else doc.get("bus"))
    if bus is None:
        raise error(None, "missing key 'bus' (a transport URL such as sim://commbot or /dev/ttyUSB0); "
                          "give it here or with `hil run --bus URL`")
    if not bus.strip():
        raise error("bus", "bus must not be empty")
    endpoint = doc.get("clock_endpoint")
    if endpoint is not None:
        if clock != "sim":
            raise error("clock_endpoint", "clock_endpoint is the simulator's clock; it needs clock: sim")
        if not endpoint.startswith(ENDPOINT_SCHEMES):
            raise error("clock_endpoint", f"clock_endpoint must start with {' or '.join(ENDPOINT_SCHEMES)}, "
                                          f"not {endpoint!r}")
    camera_endpoint = doc.get("camera_endpoint")
    if camera_endpoint is not None:
        if not camera_endpoint.startswith(ENDPOINT_SCHEMES):
            raise error("camera_endpoint", f"camera_endpoint must start with {' or '.join(ENDPOINT_SCHEMES)}, "
                                           f"not {camera_endpoint!r}")
        if bus.startswith("sim://"):
            raise error("camera_endpoint", "camera_endpoint is for a device served by `hil sim` in another "
                                           f"process; the bus {bus} is a world in this process, whose cameras "
                                           "render here")
    for key, (low, low_ok, high, bound) in _BOUNDS.items():
        value = doc.get(key)
        if value is not None and not ((value >= low if low_ok else value > low) and value <= high):  # NaN too
            raise error(key, f"{key} must be {'>=' if low_ok else '>'} {low:g} and at most {bound}={high:g}, "
                             f"not {value!r}")
    _check_urls(doc, buses, source, bus_override)
    start_pose = parse_start_pose(doc["start_pose"], source, _line(doc, "start_pose")) if "start_pose" in doc else None
    crowd = parse_crowd(doc["crowd"], source, _line(doc, "crowd"), clock) if "crowd" in doc else None
    keys_dir = _path(doc.get("keys"), base)
    if keys_dir is not None:
        if endpoint is None and crowd is None and camera_endpoint is None:
            raise error("keys", "keys secures the links to other processes (clock_endpoint, camera_endpoint, "
                                "crowd); this profile has none of them")
        if not keys_dir.is_dir():
            raise error("keys", f"keys: no such key directory {keys_dir} (create one with `hil keys DIR`)")
    calibration = _path(doc.get("calibration"), base)
    if calibration is not None:
        from hil.devices.calibration import load_calibration

        if not calibration.is_file():
            raise error("calibration", f"calibration file {calibration} does not exist (write one with "
                                       "`hil calibrate ring` or `hil calibrate fit`)")
        load_calibration(calibration)  # its own errors name its file:line
    cameras = _cameras(doc["cameras"], base, source) if "cameras" in doc else ()
    semantics = None
    if "semantics" in doc:
        semantics = _semantics_path(doc["semantics"], base, source, _line(doc, "semantics"))
        if not semantics.is_file():
            raise error("semantics", f"semantics file {semantics} does not exist")
    return Profile(
        source=source, bus=bus, clock=clock, clock_endpoint=endpoint, camera_endpoint=camera_endpoint,
        semantics=semantics,
        name=doc.get("name", "controller"), stall_timeout_s=_float(doc.get("stall_timeout_s")),
        bus_timeout_s=float(doc.get("bus_timeout_ms", 25.0)) / 1000.0, bus_retries=int(doc.get("bus_retries", 3)),
        cache_dir=_path(doc.get("cache_dir"), base), no_cache=bool(doc.get("no_cache", False)),
        trust_file=_path(doc.get("trust_file"), base), description=doc.get("description", ""), buses=buses,
        start_pose=start_pose, crowd=crowd, keys_dir=keys_dir, native=bool(doc.get("native", False)),
        calibration=calibration,
        lost_after_misses=int(doc.get("lost_after_misses", 3)), rescan_s=float(doc.get("rescan_s", 2.0)),
        cameras=cameras)


def _cameras(node: Mapping, base: Path, source: str) -> tuple[tuple[str, str, int | None], ...]:
    """``cameras:`` checked: each a camera name -> a device string; a recording's path is made absolute (relative
    to this file) and must exist. Whether the robot has such a camera is checked when it opens."""
    from hil.devices.descriptor.camera import device_kind

    out = []
    for name, device in node.items():
        line = _line(node, name)
        if not isinstance(name, str) or not isinstance(device, str):
            raise ConfigError(source, line, f"cameras: {name!r}: give a camera name and a device string, not "
                                            f"{device!r}")
        try:
            kind, rest = device_kind(device)
        except ValueError as exc:
            raise ConfigError(source, line, f"cameras: {name}: {exc}") from None
        if kind == "file":
            path = _path(rest, base)
            if not path.exists():
                raise ConfigError(source, line, f"cameras: {name}: no such recording {path}")
            device = f"file:{path}"
        out.append((name, device, line))
    return tuple(out)


def _check_urls(doc: Mapping, buses: tuple[BusSpec, ...], source: str, bus_override: str | None) -> None:
    """Every sim:// bus the file names, checked now (options, pose): a bad option is the profile's line, not an
    error at open that names no file. A --bus override is checked when it is opened (it is not in the file)."""
    from ..transports import TransportError
    from ..transports.sim import check_sim_url

    named = [(spec.url, spec.line) for spec in buses] if buses else [(doc.get("bus"), _line(doc, "bus"))]
    for index, (url, line) in enumerate(named):
        if bus_override is not None and index == 0:
            continue
        if isinstance(url, str) and url.startswith("sim://"):
            try:
                check_sim_url(url)
            except TransportError as exc:
                raise ConfigError(source, line, f"bus: {exc}") from None


def _semantics_path(value: str, base: Path, source: str, line: int | None) -> Path:
    """A bare name is a semantics file on the config search path; anything else is a path relative to the
    profile."""
    if config_path.looks_like_path(value, (".yaml", ".yml")):
        return _path(value, base)
    found = config_path.find(value, "semantics")
    if found is None:
        raise ConfigError(source, line, f"semantics: no semantics file named {value!r}; known: "
                                        f"{', '.join(config_path.known('semantics')) or '(none)'}")
    return found


def _path(value: str | None, base: Path) -> Path | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def profile_security(profile: Profile):
    """The profile's ``keys:`` as a client :class:`bridge.security.Security`, or None; bad keys raise
    SecurityError naming the file (before anything connects)."""
    if profile.keys_dir is None:
        return None
    from hil.bridge.security import Security

    security = Security.load(profile.keys_dir)
    security.check_client()
    return security
