"""The ``buses:`` key of a profile: one robot whose parts sit on several buses.

    buses:
      - name: body                                  # the main bus: the one without a mount (its root is the robot's)
        url: sim://commbot_body
      - name: arm
        url: /dev/ttyUSB0
        mount: {part: torso, port: shoulder_left}   # where this bus's root part plugs in

``mount.part`` names a part on another bus: a tree path of the merged robot (``torso``), a blueprint name of the
profile's semantics (``shoulders``), or ``BUS:ID`` (``body:6``); ``mount.port`` is a port name or its index in
the part's port list. Everything that can be checked without a bus is checked here, before anything is opened,
with file:line: names, URLs used twice, exactly one main bus, mounts on unknown buses, mount cycles, two buses
on one port. What needs the scan (does the part exist, is the port free) is checked by runtime.robot.multibus.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from hil.devices.yaml_source import ConfigError, SourceDict, SourceList

from ..scan.merge import MAIN_BUS as MAIN_BUS  # the name of the one bus of a `bus:` profile

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
BUS_ID_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-]*):(\d+)$")
BUS_KEYS = ("name", "url", "mount")
MOUNT_KEYS = ("part", "port")


@dataclass(frozen=True)
class MountSpec:
    """Where a bus's root part attaches: ``part`` as written, and for ``BUS:ID`` the bus and ID."""

    part: str
    port: str | int
    bus: str | None = None
    device_id: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class BusSpec:
    name: str
    url: str
    mount: MountSpec | None
    source: str
    line: int | None = None

    def error(self, message: str) -> ConfigError:
        """An error about this bus's mount, at the mount's line (the bus's line if it has none)."""
        line = self.mount.line if self.mount is not None and self.mount.line else self.line
        return ConfigError(self.source, line, f"bus {self.name}: {message}")


def parse_buses(value: object, source: str, line: int | None) -> tuple[BusSpec, ...]:
    """The validated bus list, main bus first (then in file order)."""
    if not isinstance(value, list) or not value:
        raise ConfigError(source, line, "buses must be a non-empty list of {name, url, mount} mappings")
    specs = [_parse_bus(item, source, _item_line(value, i, line)) for i, item in enumerate(value)]
    _check_unique(specs)
    main = _check_one_root(specs, source, line)
    _check_mounts(specs)
    return (main, *[s for s in specs if s is not main])


def check_clock(specs: tuple[BusSpec, ...], clock: str) -> None:
    """Under the sim clock only the main bus's in-process world follows the lockstep master; an in-process
    world on another bus would stand still, so it is refused here rather than found frozen later."""
    if clock != "sim":
        return
    for spec in specs[1:]:
        if spec.url.startswith("sim://"):
            raise ConfigError(spec.source, spec.line, f"bus {spec.name}: {spec.url} would be a second in-process "
                              "world, which the sim clock does not step (only the main bus's world is the clock "
                              "master); serve it in another process (`hil sim ... --pty`) or use clock: real")


def _item_line(items: object, index: int, default: int | None) -> int | None:
    return items.line_of(index) if isinstance(items, SourceList) else default


def _line(doc: Mapping, key: str | None, default: int | None) -> int | None:
    if isinstance(doc, SourceDict):
        return doc.line_of(key) if key is not None else doc.line
    return default


def _parse_bus(item: object, source: str, line: int | None) -> BusSpec:
    if not isinstance(item, Mapping):
        raise ConfigError(source, line, f"each bus is a mapping of name, url and mount, not {type(item).__name__}")
    line = _line(item, None, line)
    for key in item:
        if key not in BUS_KEYS:
            raise ConfigError(source, _line(item, key, line), f"unknown bus key {key!r}; known: {', '.join(BUS_KEYS)}")
    name, url = item.get("name"), item.get("url")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(source, _line(item, "name", line), f"a bus needs a name (letters, digits, _ and -, "
                                                             f"starting with a letter), not {name!r}")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(source, _line(item, "url", line), f"bus {name}: url must be a bus URL such as "
                                                            f"sim://commbot_body or /dev/ttyUSB0, not {url!r}")
    mount = _parse_mount(item["mount"], name, source, _line(item, "mount", line)) if "mount" in item else None
    return BusSpec(name, url, mount, source, line)


def _parse_mount(mount: object, bus: str, source: str, line: int | None) -> MountSpec:
    if not isinstance(mount, Mapping):
        raise ConfigError(source, line, f"bus {bus}: mount must be a mapping {{part: ..., port: ...}}")
    line = _line(mount, None, line)
    for key in mount:
        if key not in MOUNT_KEYS:
            raise ConfigError(source, line, f"bus {bus}: unknown mount key {key!r}; known: {', '.join(MOUNT_KEYS)}")
    part, port = mount.get("part"), mount.get("port")
    if not isinstance(part, str) or not part.strip():
        raise ConfigError(source, line, f"bus {bus}: mount.part must name a part on another bus (a tree path, a "
                                        f"blueprint name or BUS:ID), not {part!r}")
    if isinstance(port, bool) or not isinstance(port, (str, int)) or (isinstance(port, int) and port < 0):
        raise ConfigError(source, line, f"bus {bus}: mount.port must be a port name or an index >= 0, not {port!r}")
    match = BUS_ID_RE.match(part)
    if match:
        return MountSpec(part, port, match.group(1), int(match.group(2)), line)
    return MountSpec(part, port, line=line)


def _check_unique(specs: list[BusSpec]) -> None:
    names: dict[str, BusSpec] = {}
    devices: dict[str, BusSpec] = {}
    for spec in specs:
        if spec.name in names:
            raise ConfigError(spec.source, spec.line, f"bus name {spec.name!r} is already used on line "
                                                      f"{names[spec.name].line}")
        names[spec.name] = spec
        try:
            device = _device_of(spec.url)
        except ValueError as exc:  # urlsplit: sim://[ is no URL
            raise ConfigError(spec.source, spec.line, f"bus {spec.name}: {spec.url!r} is not a URL: {exc}") from None
        if device in devices:
            other = devices[device]
            raise ConfigError(spec.source, spec.line, f"bus {spec.name}: {spec.url} is the same device as bus "
                                                      f"{other.name} on line {other.line}; one bus, one URL")
        devices[device] = spec


def _device_of(url: str) -> str:
    """What a URL opens, so that /dev/pts/3 and serial:///dev/pts/3?baud=1000000 count as the same port."""
    if url.startswith("sim://"):
        return "sim://" + urlsplit(url).netloc + urlsplit(url).path
    if url.startswith("serial://"):
        return urlsplit(url).path
    return url.split("?", 1)[0]


def _check_one_root(specs: list[BusSpec], source: str, line: int | None) -> BusSpec:
    roots = [s for s in specs if s.mount is None]
    if not roots:
        raise ConfigError(source, line, "no main bus: exactly one bus must have no mount (its root part is the "
                                        "robot's root); every bus here has one")
    if len(roots) > 1:
        listed = ", ".join(f"{s.name} (line {s.line})" for s in roots)
        raise ConfigError(source, roots[1].line, f"two roots: buses {listed} have no mount; exactly one bus is the "
                                                 "main bus, give the others a mount {part, port}")
    return roots[0]


def _check_mounts(specs: list[BusSpec]) -> None:
    by_name = {s.name: s for s in specs}
    taken: dict[tuple[str, str | int], BusSpec] = {}
    for spec in specs:
        mount = spec.mount
        if mount is None:
            continue
        if mount.bus is not None:
            if mount.bus not in by_name:
                raise spec.error(f"mount.part {mount.part!r} names bus {mount.bus!r}, which is not in this profile "
                                 f"(buses: {', '.join(by_name)})")
            if mount.bus == spec.name:
                raise spec.error(f"mount.part {mount.part!r} is on this bus itself; a bus mounts on another bus")
        key = (mount.part, mount.port)
        if key in taken:
            other = taken[key]
            raise spec.error(f"port {mount.port!r} of {mount.part} is already occupied by bus {other.name} "
                             f"(line {other.mount.line})")
        taken[key] = spec
    for spec in specs:
        _check_no_cycle(spec, by_name)


def _check_no_cycle(start: BusSpec, by_name: dict[str, BusSpec]) -> None:
    chain, spec = [start.name], start
    while spec.mount is not None and spec.mount.bus is not None:
        spec = by_name[spec.mount.bus]
        if spec.name in chain:
            loop = " -> ".join(chain[chain.index(spec.name):] + [spec.name])
            raise start.error(f"mount cycle: {loop}; the mounts must form a tree under the main bus")
        chain.append(spec.name)
