"""Bringing the joints up, and leaving them, in a state that cannot hurt anyone.

Up: every joint in the operating mode the runtime commands it in (position for servos, velocity for wheels),
its goal set to where it is now (velocity 0 for wheels), and only then torque on -- so nothing jumps to a goal
left over from a previous run, and the head, which sags with torque off, is held where it stands. Down: wheels to
velocity 0, servos left holding their last target (an arm that goes limp can fall on someone).
"""
from __future__ import annotations

from devices.control_table import CURRENT_MODE, EXTENDED_POSITION_MODE, POSITION_MODE, VELOCITY_MODE

from ..bus import BusHost
from .cycle import BusCycle
from .joints import POSITION, VELOCITY, Joint

CURRENT_BASED_POSITION_MODE = 5
POSITION_MODES = (POSITION_MODE, EXTENDED_POSITION_MODE, CURRENT_BASED_POSITION_MODE)
MODE_FOR = {POSITION: POSITION_MODE, VELOCITY: VELOCITY_MODE}
ACCEPTED = {POSITION: POSITION_MODES, VELOCITY: (VELOCITY_MODE,)}


def bring_up(bus: BusHost, joints: list[Joint], cycle: BusCycle) -> list[str]:
    """Modes, goal = present, torque on. Returns what was changed (for the robot's notes)."""
    notes = _set_modes(bus, joints)
    cycle.read()
    for joint in joints:
        joint.hold_present()
    cycle.write()
    _group_write(bus, joints, "torque_enable", 1)
    return notes


def wind_down(bus: BusHost, joints: list[Joint], cycle: BusCycle) -> None:
    """Wheels to 0 now (one write); servos keep holding."""
    for joint in joints:
        if joint.mode == VELOCITY:
            joint.target_velocity = 0.0
    cycle.write()


def _set_modes(bus: BusHost, joints: list[Joint]) -> list[str]:
    with_mode = [j for j in joints if j.register("operating_mode") is not None]
    if not with_mode:
        return []
    items = [(j.part_id, j.register("operating_mode").address, j.register("operating_mode").size) for j in with_mode]
    raw = bus.bulk_read(items, fast=True)
    notes = []
    for joint in with_mode:
        spec = joint.register("operating_mode")
        if joint.part_id not in raw:
            continue  # a part that does not answer reads (status return level 0): leave its mode alone
        mode = int.from_bytes(raw[joint.part_id], "little")
        if mode in ACCEPTED[joint.mode]:
            continue
        torque = joint.register("torque_enable")
        if torque is not None:  # the mode is in EEPROM: writable only with torque off
            bus.write(joint.part_id, torque.address, bytes(torque.size))
        bus.write(joint.part_id, spec.address, MODE_FOR[joint.mode].to_bytes(spec.size, "little"))
        notes.append(f"joint {joint.name}: operating mode {_mode_name(mode)} -> {joint.mode}")
    return notes


def _group_write(bus: BusHost, joints: list[Joint], role: str, value: int) -> None:
    by_register: dict[tuple[int, int], dict[int, bytes]] = {}
    for joint in joints:
        spec = joint.register(role)
        if spec is not None:
            by_register.setdefault((spec.address, spec.size), {})[joint.part_id] = value.to_bytes(spec.size, "little")
    for (address, size), data in by_register.items():
        bus.sync_write(address, size, data)


def _mode_name(mode: int) -> str:
    names = {CURRENT_MODE: "current", VELOCITY_MODE: "velocity", POSITION_MODE: "position",
             EXTENDED_POSITION_MODE: "extended position", CURRENT_BASED_POSITION_MODE: "current-based position"}
    return names.get(mode, str(mode))
