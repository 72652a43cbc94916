"""Semantics files (config/semantics/*.yaml): blueprint names for the parts a scan finds.

A scan knows parts by bus ID, serial and tree path; a controller wants ``left_arm.elbow``. The file says which
is which, by *tree path* (port names from the root, as ``VirtualRobot.path`` prints them: ``torso/neck``), so the
same file fits every robot built the same way, or by *serial*, for one physical part wherever it is plugged:

    joints:
      head.neck_yaw: torso/neck                  # the part's one moving joint
      left_arm.hand: torso/.../hand:finger       # PATH:JOINT when the part has several (or to be explicit)
      spare.pan: serial:0123456789abcdef         # serial:HEX[:JOINT]
    sensors:
      ring: ring                                 # a sensing part (range ring, contact sensor)

This module only parses and checks the file's shape (errors give file:line); matching against a scanned robot
is runtime.robot.blueprint.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hil.devices.yaml_source import ConfigError, SourceDict, load_yaml_file

SECTIONS = ("joints", "sensors")
TOP_KEYS = ("robot", "description", *SECTIONS)
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
SEGMENT_RE = re.compile(r"^[A-Za-z0-9_\-]+$")


@dataclass(frozen=True)
class Target:
    """Where a name points: a tree path or a serial, and optionally one joint of that part."""

    path: str | None = None
    serial: int | None = None
    joint: str | None = None

    def __str__(self) -> str:
        where = self.path if self.path is not None else f"serial:{self.serial:016x}"
        return where + (f":{self.joint}" if self.joint else "")


@dataclass(frozen=True)
class Entry:
    name: str
    target: Target
    source: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def error(self, message: str) -> ConfigError:
        return ConfigError(self.source, self.line, f"{self.name}: {message}")


@dataclass(frozen=True)
class Semantics:
    source: str
    robot: str | None
    joints: tuple[Entry, ...]
    sensors: tuple[Entry, ...]


def load_semantics(path: str | Path) -> Semantics:
    """Parse a semantics file; raises ConfigError (file:line) on anything it cannot use."""
    path = Path(path)
    doc = load_yaml_file(path, "semantics")
    source = str(path)
    if doc is None:
        return Semantics(source, None, (), ())
    if not isinstance(doc, SourceDict):
        raise ConfigError(source, getattr(doc, "line", None), "a semantics file is a mapping with joints: and sensors:")
    for key in doc:
        if key not in TOP_KEYS:
            raise doc.error(key, f"unknown key {key!r}; known: {', '.join(TOP_KEYS)}")
    robot = doc.get("robot")
    if robot is not None and not isinstance(robot, str):
        raise doc.error("robot", f"robot must be a name, not {robot!r}")
    sections = {name: _section(doc, name, source) for name in SECTIONS}
    return Semantics(source, robot, sections["joints"], sections["sensors"])


def _section(doc: SourceDict, section: str, source: str) -> tuple[Entry, ...]:
    body = doc.get(section)
    if body is None:
        return ()
    if not isinstance(body, SourceDict):
        raise doc.error(section, f"{section} must map names to tree paths or serials, not {type(body).__name__}")
    entries: list[Entry] = []
    seen: dict[Target, Entry] = {}
    for name, value in body.items():
        line = body.line_of(name)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ConfigError(source, line, f"{section}: {name!r} is not a name (letters, digits and _, "
                                            "dotted: left_arm.elbow)")
        target = parse_target(value, source, line, name)
        if section == "sensors" and target.joint is not None:
            raise ConfigError(source, line, f"{name}: a sensor names a part, not a joint ({value!r})")
        entry = Entry(name, target, source, line)
        if target in seen:
            raise entry.error(f"{target} is already named {seen[target].name!r} on line {seen[target].line}")
        seen[target] = entry
        entries.append(entry)
    return tuple(entries)


def parse_target(value: object, source: str, line: int, name: str) -> Target:
    """``PATH[:JOINT]`` or ``serial:HEX[:JOINT]``."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(source, line, f"{name}: expected a tree path (torso/neck) or serial:HEX, not {value!r}")
    text = value.strip()
    if text.startswith("serial:"):
        rest = text[len("serial:"):]
        serial_text, _, joint = rest.partition(":")
        try:
            serial = int(serial_text, 16)
        except ValueError:
            raise ConfigError(source, line, f"{name}: {serial_text!r} is not a hexadecimal serial number") from None
        if not 0 <= serial < 1 << 64:
            raise ConfigError(source, line, f"{name}: serial {serial_text} does not fit in 64 bits")
        return Target(serial=serial, joint=_joint(joint, source, line, name))
    path, _, joint = text.partition(":")
    segments = path.split("/")
    if not all(SEGMENT_RE.match(s) for s in segments):
        raise ConfigError(source, line, f"{name}: {path!r} is not a tree path (port names joined by /, e.g. "
                                        "torso/shoulder_left/horn/mount; `root` for the root part)")
    return Target(path=path, joint=_joint(joint, source, line, name))


def _joint(text: str, source: str, line: int, name: str) -> str | None:
    if not text:
        return None
    if not SEGMENT_RE.match(text):
        raise ConfigError(source, line, f"{name}: {text!r} is not a joint name")
    return text
