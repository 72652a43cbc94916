"""``sim://NAME``: the virtual bus device in this process, no serial port in between.

NAME is an assembly under config/robots/ (or a path to one). Query options switch on wire timing and faults:
``sim://servo_chain?baud=1000000&latency_ms=1&bitflip=1e-4&drop=0.01&seed=3``. An assembly of self-describing
parts lives in a pybullet world (``world=0`` turns it off): ``clock=real|sim``, ``map=lab``, ``watchdog_ms=500``,
``seed`` also seeds the sensors, ``gui=1`` opens the pybullet viewer (needs a display), ``pose=x,y,yaw`` places the robot (m, m, rad), ``crowd=tcp://...`` connects a
served crowd (``hil crowd --serve``) whose people walk in the world, ``crowd_timeout`` (s, default 10) is how
long the world waits for it, ``keys=DIR`` CURVE-encrypts that link with a key directory of ``hil keys`` (for a
crowd served with ``--keys``; bad keys fail here, before the world is built), ``calibration=CAL.yaml`` builds the parts it names with its calibrated sensor numbers (devices/calibration.py),
``crowd_mode=realtime`` streams
with a crowd served ``--realtime`` instead of ticking it (needs ``clock=real``; ``crowd_timeout`` is then the
silence after which the link counts as lost), ``merge=0`` builds one pybullet link per body instead of merging
the bodies joined by fixed joints (firmware_sim/world/merge.py; for comparisons), ``chain_stops=1`` makes a fast
read's reply stop at the first silent part, as a real bus's chain does. Calls go straight into the
device, so the transport knows when no more bytes can come (:attr:`idle`) and never waits for a timeout in vain.
This is the one place the host imports firmware_sim, and it does so lazily.
"""
from __future__ import annotations

import difflib
import math
from time import sleep as wall_sleep  # wall time even under runtime.clock.patch
from urllib.parse import parse_qs, urlsplit

from .base import Transport, TransportError

_OPTIONS = {"baud": int, "latency_ms": float, "bitflip": float, "drop": float, "seed": int, "return_delay": int,
            "world": int, "clock": str, "map": str, "watchdog_ms": float, "pose": str, "crowd": str,
            "crowd_timeout": float, "keys": str, "gui": int,
            "crowd_mode": str, "merge": int, "calibration": str, "chain_stops": int}


_KIND = {int: "an integer", float: "a number", str: "a string"}
MAX_POSE_M = 1e5  # devices.map_format.MAX_COORDINATE_M: no map reaches farther
MAX_DURATION_OPTION_S = 3600.0  # latency, watchdog and crowd timeout of a virtual bus: an hour is already absurd


class SimTransport(Transport):
    def __init__(self, url: str, device=None):
        from hil.firmware_sim import FaultInjector, VirtualBusDevice, WireTiming, load_assembly

        self.url = url
        check_sim_url(url, assembly=device is None)  # a given device needs no assembly file
        name, options = parse_sim_url(url)
        self.baud = options.get("baud")
        if device is None:
            try:
                timing = WireTiming.parse(options.get("baud"), options.get("latency_ms"),
                                          return_delay=bool(options.get("return_delay", 1)))
            except ValueError as exc:
                raise TransportError(0, f"{url}: {exc}") from None
            faults = None
            if any(k in options for k in ("bitflip", "drop", "seed")):
                faults = FaultInjector(seed=options.get("seed", 0), bit_flip_rate=options.get("bitflip", 0.0),
                                       drop_rate=options.get("drop", 0.0))
            security = _security(url, options)
            assembly = _calibrate(url, load_assembly(name), options.get("calibration"))
            self.embodied = None
            if options.get("world", 1) and all(hasattr(part, "descriptor") for part in assembly.parts):
                from hil.firmware_sim.embodied import embody

                self.embodied = embody(assembly, clock=options.get("clock", "real"), map_name=options.get("map"),
                                       gui=bool(options.get("gui", 0)),
                                       seed=options.get("seed", 0), watchdog_s=options.get("watchdog_ms", 500.0) / 1000,
                                       timing=timing, faults=faults, base_xy_yaw=_pose(url, options.get("pose")),
                                       crowd_endpoint=options.get("crowd"),
                                       crowd_timeout_s=options.get("crowd_timeout", 10.0), security=security,
                                       crowd_mode=options.get("crowd_mode", "lockstep"),
                                       merge_fixed=bool(options.get("merge", 1)))
                device = self.embodied.device
            else:
                device = VirtualBusDevice(assembly.parts, timing=timing, faults=faults)
        if options.get("chain_stops"):
            device.chain_stops = True
        self.device = device
        self._pending = b""

    def camera_frame(self, part_id: int, sensor: str | None = None, observe: bool = False) -> dict:
        """A camera part's frame, rendered in this transport's world (firmware_sim/embodied/camera.py): the
        camera service beside the bus (images never go over it). ``observe``: for a recording (it changes
        nothing the controller's frames use)."""
        if getattr(self, "embodied", None) is None:
            raise TransportError(0, f"{self.url}: no world (world=0): nothing to render camera {part_id} in")
        return self.embodied.camera_frame(part_id, sensor, observe)

    def write(self, data: bytes) -> None:
        self.device.receive(bytes(data))

    def read(self, max_bytes: int, timeout_s: float) -> bytes:
        if not self._pending:
            release = self.device.next_release_s()
            if release is None:
                self.device.line_idle()  # nothing can come: the host waits out its timeout on a silent line
                return b""
            wait = release - self.device.clock()
            if wait > timeout_s:
                _sleep(timeout_s)
                return b""
            if wait > 0:
                _sleep_until(release, self.device.clock)
            self._pending = self.device.take_output(self.device.clock())
        out, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return out

    def discard_input(self) -> None:
        self._pending = b""
        self.device.take_output(self.device.clock())

    def close(self) -> None:
        if getattr(self, "embodied", None) is not None:
            self.embodied.close()

    @property
    def idle(self) -> bool:
        return not self._pending and self.device.next_release_s() is None


def _calibrate(url: str, assembly, path: str | None):
    """The assembly with a CAL.yaml's numbers in its parts (``calibration=PATH``: the virtual twin of a calibrated
    robot); an entry for a part this robot lacks is a warning on stderr, not applied."""
    if not path:
        return assembly
    import sys

    from hil.devices.calibration import load_calibration
    from hil.devices.yaml_source import ConfigError
    from hil.firmware_sim.assembly import calibrated

    try:
        assembly, _, warnings = calibrated(assembly, load_calibration(path))
    except (ConfigError, OSError) as exc:
        raise TransportError(0, f"{url}: calibration: {exc}") from None
    for warning in warnings:
        print(f"hil: warning: {warning}", file=sys.stderr)
    return assembly


def _sleep(seconds: float) -> None:
    if seconds > 0:
        wall_sleep(seconds)


def _sleep_until(deadline: float, clock) -> None:
    from hil.firmware_sim.timing import sleep_until

    sleep_until(deadline, clock)


def _security(url: str, options: dict):
    """The crowd link's keys (``keys=DIR``), loaded and checked up front: a bad key directory names its file."""
    if "keys" not in options:
        return None
    if not options.get("crowd"):
        raise TransportError(0, f"{url}: keys= secures the crowd link: it needs crowd=tcp://...")
    from hil.bridge.security import Security

    security = Security.load(options["keys"])
    security.check_client()
    return security


def _pose(url: str, text: str | None) -> tuple[float, float, float]:
    if not text:
        return (0.0, 0.0, 0.0)
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (2, 3) or not all(math.isfinite(v) and abs(v) <= MAX_POSE_M for v in values):
        raise TransportError(0, f"{url}: pose={text!r}: expected x,y or x,y,yaw (finite numbers within "
                                f"{MAX_POSE_M:g} m)")
    return values[0], values[1], values[2] if len(values) == 3 else 0.0


def parse_sim_url(url: str) -> tuple[str, dict]:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # sim://[x: an unclosed IPv6 bracket
        raise TransportError(0, f"{url}: not a URL: {exc}") from None
    name = parts.netloc + parts.path
    if not name:
        raise TransportError(0, f"{url}: sim:// needs an assembly name, e.g. sim://servo_chain")
    options = {}
    for key, values in parse_qs(parts.query).items():
        if key not in _OPTIONS:
            close = difflib.get_close_matches(key, _OPTIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise TransportError(0, f"{url}: unknown option {key!r}; {hint}known: {', '.join(_OPTIONS)}")
        try:
            options[key] = _OPTIONS[key](values[-1])
        except ValueError:
            raise TransportError(0, f"{url}: option {key}={values[-1]!r} is not {_KIND[_OPTIONS[key]]}") from None
    return name, options


CLOCK_VALUES = ("real", "sim")
CROWD_MODES = ("lockstep", "realtime", "pipelined")


def check_sim_url(url: str, assembly: bool = True) -> None:
    """Check a sim:// URL's name and options without building anything (a profile checks its buses at load, so a
    bad option is reported with the profile's file:line before any world exists); TransportError says what."""
    name, options = parse_sim_url(url)
    if assembly:
        _check_assembly_name(url, name)
    _pose(url, options.get("pose"))
    for key, allowed in (("clock", CLOCK_VALUES), ("crowd_mode", CROWD_MODES)):
        if key in options and options[key] not in allowed:
            raise TransportError(0, f"{url}: option {key}={options[key]!r} is not one of {', '.join(allowed)}")
    for key in ("bitflip", "drop"):
        if key in options and not 0.0 <= options[key] <= 1.0:
            raise TransportError(0, f"{url}: option {key}={options[key]!r} is a probability: 0..1")
    for key in ("watchdog_ms", "crowd_timeout"):
        if key in options and not 0.0 <= options[key] <= MAX_DURATION_OPTION_S * (1000 if "ms" in key else 1):
            raise TransportError(0, f"{url}: option {key}={options[key]!r} is outside 0..{MAX_DURATION_OPTION_S:g} s")


def _check_assembly_name(url: str, name: str) -> None:
    """The URL's assembly exists on the config search path (the file itself is read when the bus opens)."""
    from hil.devices import config_path
    from hil.devices.yaml_source import ConfigError

    try:
        config_path.resolve(name, "robots", "assembly")
    except ConfigError as exc:
        raise TransportError(0, f"{url}: {exc.message}") from None


def open_transport(url: str, **options) -> SimTransport:
    return SimTransport(url, device=options.get("device"))
