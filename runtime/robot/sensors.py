"""Sensing parts as the controller sees them: the range ring in metres, contact sensors as named zones.

What a sensor reports and how to read it comes from the part's descriptor: the ring's registers, its no-target
code and its ray directions; a contact sensor's register and which bit is which zone. Nothing here knows the
commbot; any part that declares such a sensor gets a handle.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from hil.devices.descriptor import PartDescriptor, RegisterSpec, Sensor

from ..drivers import PartDriver
from .camera import CAMERA, Camera, camera_sensor

RANGE_RING = "range_ring"
CONTACT = "contact"


def sensing_kind(desc: PartDescriptor) -> str | None:
    """The kind of readable sensor a part carries (range_ring or contact on the bus, or a camera beside it), None
    if it has none."""
    for sensor in desc.sensors:
        if sensor.kind == RANGE_RING and sensor.params.get("registers"):
            return RANGE_RING
    for sensor in desc.sensors:
        if sensor.kind == CONTACT and sensor.params.get("register"):
            return CONTACT
    if camera_sensor(desc) is not None:
        return CAMERA
    return None


class _RegisterBlock:
    """Registers read together in one slot of the cycle's bulk read."""

    def __init__(self, name: str, part_id: int, path: str, driver: PartDriver, specs: list[RegisterSpec]):
        self.name, self.part_id, self.path = name, part_id, path  # part_id: the part's ID on its bus
        self.part_key = part_id  # robot-wide ID (VirtualRobot / Model); Robot.open sets it and the bus
        self.bus = ""  # the bus's name in the profile
        self.host = None  # the BusHost of that bus
        self._driver = driver
        self._specs = specs
        self._raw: list[int | None] = [None] * len(specs)
        self.available = True  # False while its part is lost (runtime/robot/presence.py): its values read None

    def set_available(self, available: bool) -> None:
        """Lost (False): forget the last reading, so the values read None until the part answers again."""
        self.available = available
        if not available:
            self._raw = [None] * len(self._specs)

    def read_spans(self) -> list[tuple[int, int]]:
        return [(s.address, s.size) for s in self._specs]

    def update(self, block: bytes, base: int) -> None:
        self._raw = [int.from_bytes(block[s.address - base:s.address - base + s.size], "little", signed=s.signed)
                     for s in self._specs]


UNKNOWN_CAUSE = "unknown"


class RangeRing(_RegisterBlock):
    """A ring of range sensors: ``ranges`` in metres (None where the sensor had no valid echo), ``angles`` the
    direction of each sensor in the robot's base frame (rad, 0 = forward +x, counter-clockwise)."""

    def __init__(self, name: str, part_id: int, path: str, driver: PartDriver, sensor: Sensor,
                 specs: list[RegisterSpec], angles: tuple[float, ...]):
        super().__init__(name, part_id, path, driver, specs)
        params = sensor.params
        self.no_target_raw: int = int(params.get("no_target_raw", (1 << (8 * specs[0].size)) - 1))
        # register value -> why the reading failed: the part's per-cause codes (``invalid_raw``) where it has
        # them; a part without them says only "no target" (UNKNOWN_CAUSE unless it has codes)
        codes = params.get("invalid_raw") or {}
        self.cause_of_raw: dict[int, str] = {int(v): str(k) for k, v in codes.items()}
        self.cause_of_raw[self.no_target_raw] = "no_hit" if codes else UNKNOWN_CAUSE
        self.min_range: float = float(params.get("min_range_m", 0.0))
        self.max_range: float = float(params.get("max_range_m", math.inf))
        self.angles = angles
        # what a shadow world of virtual people reads for each sensor (runtime/robot/overlay.py); None: no overlay
        self.virtual_ranges: list[float | None] | None = None
        self.virtual_causes: list[str | None] | None = None  # ...and why each of those had no echo

    def __repr__(self) -> str:
        shown = ", ".join("-" if r is None else f"{r:.2f}" for r in self.ranges)
        return f"RangeRing({self.name!r}, id {self.part_id}, ranges [{shown}] m)"

    @property
    def raw(self) -> list[int | None]:
        """The registers as read (None before the first bus cycle)."""
        return list(self._raw)

    @property
    def ranges(self) -> list[float | None]:
        """Metres per sensor, through the part's driver; None for the no-target code (nothing valid seen). In a
        mixed trial (a crowd overlay, runtime/robot/overlay.py) the nearer of the real and the virtual echo."""
        real = self.real_ranges
        return real if self.virtual_ranges is None else merge_ranges(real, self.virtual_ranges)

    @property
    def real_ranges(self) -> list[float | None]:
        """What the part itself measured (metres, None = no target), without any virtual people."""
        invalid = self.cause_of_raw
        return [None if r is None or r in invalid else self._driver.to_si(s.name, r)
                for s, r in zip(self._specs, self._raw)]

    @property
    def causes(self) -> list[str | None]:
        """Why each sensor's own reading failed (no_hit, range, angle, noise; ``unknown`` for a part that has no
        per-cause codes), None where it is valid or not yet read."""
        invalid = self.cause_of_raw
        return [None if r is None else invalid.get(r) for r in self._raw]

    def nearest(self, lo_rad: float, hi_rad: float) -> float | None:
        """The shortest valid range among the sensors pointing between ``lo_rad`` and ``hi_rad`` (base frame,
        angles wrapped to -pi..pi), None when none of them sees anything."""
        found = [r for a, r in zip(self.angles, self.ranges) if r is not None and lo_rad <= _wrap(a) <= hi_rad]
        return min(found) if found else None


class ContactSensor(_RegisterBlock):
    """Contact zones of one part: ``pressed`` maps zone name -> bool; ``mask`` is the contact register's bits."""

    def __init__(self, name: str, part_id: int, path: str, driver: PartDriver, specs: list[RegisterSpec],
                 zones: dict[str, tuple[str, int]]):
        super().__init__(name, part_id, path, driver, specs)
        self.zones = zones  # zone -> (register name, bit)

    def __repr__(self) -> str:
        return f"ContactSensor({self.name!r}, id {self.part_id}, pressed {self.pressed})"

    @property
    def masks(self) -> dict[str, int]:
        """register name -> bit mask as read (0 before the first bus cycle)."""
        return {s.name: r or 0 for s, r in zip(self._specs, self._raw)}

    @property
    def mask(self) -> int:
        """The contact register's bit mask (the bits of every register, in declaration order, if several)."""
        out, shift = 0, 0
        for spec, raw in zip(self._specs, self._raw):
            out |= (raw or 0) << shift
            shift += 8 * spec.size
        return out

    @property
    def pressed(self) -> dict[str, bool | None]:
        """zone -> pressed; None for every zone while the part is lost (unknown, not "not pressed")."""
        if not self.available:
            return dict.fromkeys(self.zones)
        masks = self.masks
        return {zone: bool(masks[register] >> bit & 1) for zone, (register, bit) in self.zones.items()}

    @property
    def any(self) -> bool | None:
        """Whether any zone is pressed; None while the part is lost."""
        return any(self.masks.values()) if self.available else None


SensorHandle = RangeRing | ContactSensor | Camera


def make_sensor(name: str, part_id: int, path: str, desc: PartDescriptor, driver: PartDriver,
                body_yaw: dict[str, float]) -> SensorHandle:
    """The handle for a sensing part; ``body_yaw`` is the yaw of each of its bodies in the robot's base frame
    (from the model's forward kinematics at q = 0)."""
    kind = sensing_kind(desc)
    if kind == RANGE_RING:
        sensor = next(s for s in desc.sensors if s.kind == RANGE_RING and s.params.get("registers"))
        specs = [desc.register(r) for r in sensor.params["registers"]]
        yaws = sensor.params.get("yaw_deg") or [0.0] * len(specs)
        angles = tuple(_wrap(body_yaw.get(sensor.body, 0.0) + math.radians(float(y))) for y in yaws)
        return RangeRing(name, part_id, path, driver, sensor, specs, angles)
    if kind == CONTACT:
        registers: list[str] = []
        zones: dict[str, tuple[str, int]] = {}
        for sensor in desc.sensors:
            if sensor.kind != CONTACT or not sensor.params.get("register"):
                continue
            register = sensor.params["register"]
            if register not in registers:
                registers.append(register)
            for zone in sensor.params.get("zones") or [{"name": sensor.name, "bit": 0}]:
                zones[str(zone.get("name", sensor.name))] = (register, int(zone.get("bit", 0)))
        return ContactSensor(name, part_id, path, driver, [desc.register(r) for r in registers], zones)
    if kind == CAMERA:
        return Camera(name, part_id, path, desc, camera_sensor(desc))
    raise ValueError(f"part id {part_id} ({desc.name}) has no sensor the runtime can read")


def merge_ranges(real: Sequence[float | None], virtual: Sequence[float | None]) -> list[float | None]:
    """Per sensor, the nearer echo wins: a real and a virtual obstacle in one beam answer with the first echo to
    come back, i.e. the shorter range; None (no target) only when neither side saw anything."""
    if len(real) != len(virtual):
        raise ValueError(f"merge_ranges: {len(real)} real readings but {len(virtual)} virtual ones")
    return [v if r is None else r if v is None else min(r, v) for r, v in zip(real, virtual)]


def _wrap(angle: float) -> float:
    return math.atan2(math.sin(angle), math.cos(angle))
