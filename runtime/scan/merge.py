"""One virtual robot from several buses: each bus scanned on its own, its root hung from a port of a part on
another bus (the profile's ``mount``).

Part IDs are per bus, so two buses may both have an ID 1. The merged robot keys its parts by a robot-wide ID,
``bus index * 256 + bus ID`` (the main bus has index 0, so its parts keep their IDs), and every part remembers
its bus name and its ID on that bus (:attr:`ScannedPart.bus`, :attr:`ScannedPart.wire_id`). Tree paths continue
through a mount: an arm on its own bus mounted on ``torso``'s ``shoulder_left`` port has the paths it would have
on the torso's bus, so semantics files written for the one-bus robot name it unchanged.
"""
from __future__ import annotations

from dataclasses import replace

from .robot import ScannedPart, VirtualRobot

BUS_KEY_STRIDE = 256  # bus IDs are 0..252, so index * 256 + ID never collides
MAIN_BUS = "main"  # the name of the one bus of a one-bus scan or a `bus:` profile


class MountError(ValueError):
    """A bus cannot be hung where its mount says (no such port, the parent connector, an occupied port)."""


def robot_key(bus_index: int, device_id: int) -> int:
    """The robot-wide ID of part ``device_id`` on the bus at ``bus_index`` (0 = the main bus)."""
    return bus_index * BUS_KEY_STRIDE + device_id


def rekey(robot: VirtualRobot, bus: str, bus_index: int) -> VirtualRobot:
    """``robot`` (one bus's scan) with robot-wide IDs; each part keeps its bus name and bus ID."""
    key = {pid: robot_key(bus_index, pid) for pid in robot.parts}

    def moved(part: ScannedPart) -> ScannedPart:
        parent = key.get(part.parent_id) if part.parent_id is not None else None
        return replace(part, id=key[part.id], parent_id=parent, bus=bus, address=part.id,
                       children={port: key[c] for port, c in part.children.items() if c in key})

    prefix = f"bus {bus}: "
    return VirtualRobot(
        bus_url=robot.bus_url, parts={key[pid]: moved(p) for pid, p in robot.parts.items()},
        root_id=key[robot.root_id] if robot.root_id is not None else None,
        quarantined={robot_key(bus_index, pid): prefix + why for pid, why in robot.quarantined.items()},
        problems=tuple(prefix + p for p in robot.problems), buses={bus: robot.bus_url})


def port_name(part: ScannedPart, port: str | int) -> str:
    """A port of ``part`` by name or by index in its descriptor's port list (the CPC port table's order)."""
    names = [p.name for p in part.descriptor.ports]
    if isinstance(port, int):
        if not 0 <= port < len(names):
            raise MountError(f"port index {port} is out of range: part {_label(part)} has {len(names)} ports "
                             f"({', '.join(names)})")
        return names[port]
    if port not in names:
        raise MountError(f"part {_label(part)} has no port {port!r}; its ports: {', '.join(names)}")
    return port


def attach(base: VirtualRobot, sub: VirtualRobot, parent_key: int, port: str | int) -> VirtualRobot:
    """``sub``'s root hung from ``port`` of part ``parent_key`` of ``base`` (both already re-keyed).

    Refuses a port the parent connector, or one that already holds a part (in the port table the scan read, or
    from an earlier mount): a connector holds one plug."""
    if sub.root_id is None:
        raise MountError(f"bus {_bus_name(sub)} ({sub.bus_url}) has no root part to mount")
    parent = base.parts[parent_key]
    name = port_name(parent, port)
    spec = next(p for p in parent.descriptor.ports if p.name == name)
    if spec.parent:
        raise MountError(f"port {name!r} of part {_label(parent)} is its parent connector; nothing can hang from it")
    if name in parent.children:
        held = base.parts.get(parent.children[name])
        what = _label(held) if held is not None else f"id {parent.children[name]}"
        raise MountError(f"port {name!r} of part {_label(parent)} is already occupied by {what}")
    parts = dict(base.parts)
    parts[parent_key] = replace(parent, children={**parent.children, name: sub.root_id})
    for key, part in sub.parts.items():
        if key in parts:
            raise MountError(f"robot-wide ID {key} is used twice (bus {part.bus} and bus {parts[key].bus})")
        parts[key] = part
    root = sub.parts[sub.root_id]
    parts[sub.root_id] = replace(root, parent_id=parent_key, parent_port=name)
    return VirtualRobot(bus_url=base.bus_url, parts=parts, root_id=base.root_id,
                        quarantined={**base.quarantined, **sub.quarantined}, problems=base.problems + sub.problems,
                        buses={**base.buses, **sub.buses})


def _label(part: ScannedPart) -> str:
    where = f"{part.bus}:{part.wire_id}" if part.bus else f"id {part.id}"
    return f"{where} ({part.descriptor.name})"


def _bus_name(robot: VirtualRobot) -> str:
    return next(iter(robot.buses), "?")
