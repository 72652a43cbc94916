"""``sim://NAME``: the virtual bus device in this process, no serial port in between.

NAME is an assembly under config/robots/ (or a path to one). Query options switch on wire timing and faults:
``sim://servo_chain?baud=1000000&latency_ms=1&bitflip=1e-4&drop=0.01&seed=3``. An assembly of self-describing
parts lives in a pybullet world (``world=0`` turns it off): ``clock=real|sim``, ``map=lab``, ``watchdog_ms=500``,
``seed`` also seeds the sensors, ``gui=1`` opens the pybullet viewer (needs a display), ``pose=x,y,yaw`` places the robot (m, m, rad), ``crowd=tcp://...`` connects a
served crowd (``hil crowd --serve``) whose people walk in the world, ``crowd_timeout`` (s, default 10) is how
long the world waits for it, ``keys=DIR`` CURVE-encrypts that link with a key directory of ``hil keys`` (for a
crowd served with ``--keys``; bad keys fail here, before the world is built), ``crowd_mode=realtime`` streams
with a crowd served ``--realtime`` instead of ticking it (needs ``clock=real``; ``crowd_timeout`` is then the
silence after which the link counts as lost). Calls go straight into the
device, so the transport knows when no more bytes can come (:attr:`idle`) and never waits for a timeout in vain.
This is the one place the host imports firmware_sim, and it does so lazily.
"""
from __future__ import annotations

from time import sleep as wall_sleep  # wall time even under runtime.clock.patch
from urllib.parse import parse_qs, urlsplit

from .base import Transport, TransportError

_OPTIONS = {"baud": int, "latency_ms": float, "bitflip": float, "drop": float, "seed": int, "return_delay": int,
            "world": int, "clock": str, "map": str, "watchdog_ms": float, "pose": str, "crowd": str,
            "crowd_timeout": float, "keys": str, "gui": int,
            "crowd_mode": str}


_KIND = {int: "an integer", float: "a number", str: "a string"}


class SimTransport(Transport):
    def __init__(self, url: str, device=None):
        from firmware_sim import FaultInjector, VirtualBusDevice, WireTiming, load_assembly

        self.url = url
        name, options = parse_sim_url(url)
        self.baud = options.get("baud")
        if device is None:
            timing = WireTiming.parse(options.get("baud"), options.get("latency_ms"),
                                      return_delay=bool(options.get("return_delay", 1)))
            faults = None
            if any(k in options for k in ("bitflip", "drop", "seed")):
                faults = FaultInjector(seed=options.get("seed", 0), bit_flip_rate=options.get("bitflip", 0.0),
                                       drop_rate=options.get("drop", 0.0))
            security = _security(url, options)
            assembly = load_assembly(name)
            self.embodied = None
            if options.get("world", 1) and all(hasattr(part, "descriptor") for part in assembly.parts):
                from firmware_sim.embodied import embody

                self.embodied = embody(assembly, clock=options.get("clock", "real"), map_name=options.get("map"),
                                       gui=bool(options.get("gui", 0)),
                                       seed=options.get("seed", 0), watchdog_s=options.get("watchdog_ms", 500.0) / 1000,
                                       timing=timing, faults=faults, base_xy_yaw=_pose(url, options.get("pose")),
                                       crowd_endpoint=options.get("crowd"),
                                       crowd_timeout_s=options.get("crowd_timeout", 10.0), security=security,
                                       crowd_mode=options.get("crowd_mode", "lockstep"))
                device = self.embodied.device
            else:
                device = VirtualBusDevice(assembly.parts, timing=timing, faults=faults)
        self.device = device
        self._pending = b""

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


def _sleep(seconds: float) -> None:
    if seconds > 0:
        wall_sleep(seconds)


def _sleep_until(deadline: float, clock) -> None:
    from firmware_sim.timing import sleep_until

    sleep_until(deadline, clock)


def _security(url: str, options: dict):
    """The crowd link's keys (``keys=DIR``), loaded and checked up front: a bad key directory names its file."""
    if "keys" not in options:
        return None
    if not options.get("crowd"):
        raise TransportError(0, f"{url}: keys= secures the crowd link: it needs crowd=tcp://...")
    from bridge.security import Security

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
    if len(values) not in (2, 3):
        raise TransportError(0, f"{url}: pose={text!r}: expected x,y or x,y,yaw (numbers)")
    return values[0], values[1], values[2] if len(values) == 3 else 0.0


def parse_sim_url(url: str) -> tuple[str, dict]:
    parts = urlsplit(url)
    name = parts.netloc + parts.path
    if not name:
        raise TransportError(0, f"{url}: sim:// needs an assembly name, e.g. sim://servo_chain")
    options = {}
    for key, values in parse_qs(parts.query).items():
        if key not in _OPTIONS:
            raise TransportError(0, f"{url}: unknown option {key!r}; known: {', '.join(_OPTIONS)}")
        try:
            options[key] = _OPTIONS[key](values[-1])
        except ValueError:
            raise TransportError(0, f"{url}: option {key}={values[-1]!r} is not {_KIND[_OPTIONS[key]]}") from None
    return name, options


def open_transport(url: str, **options) -> SimTransport:
    return SimTransport(url, device=options.get("device"))
