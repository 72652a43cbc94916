"""The *virtual robot* (the modular-robot reference): the parts found on the bus, their descriptors, and the tree they
form.

Built by :func:`runtime.scan.scan_bus`; consumed by the robot model (runtime.model) and everything above it.
Immutable: a rescan builds a new one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from hil.devices.descriptor import PartDescriptor


@dataclass(frozen=True)
class ScannedPart:
    id: int
    model_number: int
    firmware_version: int
    descriptor: PartDescriptor
    sha256: str  # hex SHA-256 of the descriptor bytes ("" for plain servos described by the catalog)
    serial_number: int | None  # None for plain servos (no CPC block)
    self_describing: bool
    parent_id: int | None = None
    parent_port: str | None = None  # name of the parent's port this part hangs from
    children: dict[str, int] = field(default_factory=dict)  # own port name -> child ID
    # A robot merged from several buses (runtime.scan.merge) keys its parts by a robot-wide ``id``; then ``bus``
    # names the bus the part is on and ``address`` is its ID on that bus. One bus: "" and None (id = address).
    bus: str = ""
    address: int | None = None

    @property
    def kind(self) -> str:
        return self.descriptor.kind

    @property
    def wire_id(self) -> int:
        """The ID to address this part with on its own bus."""
        return self.id if self.address is None else self.address


@dataclass(frozen=True)
class VirtualRobot:
    bus_url: str
    parts: dict[int, ScannedPart]  # by bus ID, quarantined parts excluded
    root_id: int | None
    quarantined: dict[int, str] = field(default_factory=dict)  # bus ID -> why
    problems: tuple[str, ...] = ()  # what the scan noticed (dangling ports, detached parts, ...)
    buses: dict[str, str] = field(default_factory=dict)  # bus name -> URL when merged from several buses

    def walk(self) -> Iterator[tuple[ScannedPart, int]]:
        """Parts depth-first from the root, with their depth; children in port order."""
        if self.root_id is None:
            return
        stack = [(self.parts[self.root_id], 0)]
        while stack:
            part, depth = stack.pop()
            yield part, depth
            ports = [p.name for p in part.descriptor.ports]
            kids = sorted(part.children.items(), key=lambda kv: ports.index(kv[0]), reverse=True)
            stack.extend((self.parts[c], depth + 1) for _, c in kids if c in self.parts)

    def path(self, part_id: int) -> str:
        """Tree path of a part: the port names from the root, e.g. ``torso/shoulder_left/horn``."""
        names = []
        part = self.parts[part_id]
        while part.parent_id is not None:
            names.append(part.parent_port or "?")
            part = self.parts[part.parent_id]
        return "/".join(reversed(names)) or "root"

    @property
    def servo_joints(self) -> list[tuple[ScannedPart, str]]:
        """(part, joint name) of every moving joint driven by a servo part (wheels are counted apart)."""
        return [(p, j.name) for p, _ in self.walk() if p.kind in ("servo_joint", "gripper")
                for j in p.descriptor.moving_joints]

    @property
    def dof(self) -> int:
        return len(self.servo_joints)
