"""Bringing the joints up, and leaving them, in a state that cannot hurt anyone.

Up: every joint in the operating mode the runtime commands it in (position for servos, velocity for wheels),
its goal set to where it is now (velocity 0 for wheels), and only then torque on -- so nothing jumps to a goal
left over from a previous run, and the head, which sags with torque off, is held where it stands. Down: wheels to
velocity 0, servos left holding their last target (an arm that goes limp can fall on someone), and servos a
controller switched to current mode back in position mode, holding where they are (a current left applied
would lift or drop the arm as soon as its load changes).

Switching a joint's mode while running (:func:`switch_mode`, ``robot.set_mode``) does the same in small: torque
off (the operating mode is in EEPROM), the mode, the new command (hold where it is; 0 A in current mode), torque
on -- four writes, between two bus cycles.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from hil.devices.control_table import (CURRENT_BASED_POSITION_MODE, CURRENT_MODE, EXTENDED_POSITION_MODE,
                                   POSITION_MODE, TABLES_BY_MODEL, TORQUE_CONSTANT_NM_PER_A, VELOCITY_MODE)

from ..bus import BusHost
from .cycle import BusCycle
from .joints import CURRENT, POSITION, VELOCITY, Joint, JointModeError

POSITION_MODES = (POSITION_MODE, EXTENDED_POSITION_MODE, CURRENT_BASED_POSITION_MODE)
MODE_FOR = {POSITION: POSITION_MODE, VELOCITY: VELOCITY_MODE, CURRENT: CURRENT_MODE}
ACCEPTED = {POSITION: POSITION_MODES, VELOCITY: (VELOCITY_MODE,), CURRENT: (CURRENT_MODE,)}
GOAL_ROLE = {POSITION: "goal_position", VELOCITY: "goal_velocity", CURRENT: "goal_current"}


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
    """Wheels to 0 now (one write); servos keep holding (those in current mode go back to position mode)."""
    for joint in joints:
        if joint.mode == VELOCITY:
            joint.target_velocity = 0.0
    cycle.write()
    switch_mode([j for j in joints if j.mode == CURRENT], POSITION, {})


def switch_mode(joints: Sequence[Joint], mode: str, model_numbers: Mapping[str, int]) -> None:
    """Put ``joints`` in ``mode`` (POSITION, VELOCITY or CURRENT) now, each holding where the last cycle read
    it (0 A in current mode). ``model_numbers`` (joint name -> the part's model number) gives a current-mode
    joint its motor's torque constant and the register that holds its current limit. Every joint is checked
    before anything is written."""
    if mode not in MODE_FOR:
        raise ValueError(f"mode must be one of {', '.join(MODE_FOR)}, not {mode!r}")
    for joint in joints:
        for role in ("torque_enable", "operating_mode", GOAL_ROLE[mode]):
            if joint.register(role) is None:
                raise JointModeError(f"joint {joint.name}: part id {joint.part_id} declares no {role} register, "
                                     f"so it cannot run in {mode} mode")
    for joint in joints:
        torque, operating = joint.register("torque_enable"), joint.register("operating_mode")
        host = joint.host
        host.write(joint.part_id, torque.address, bytes(torque.size))
        host.write(joint.part_id, operating.address, MODE_FOR[mode].to_bytes(operating.size, "little"))
        joint.mode = mode
        if mode == CURRENT:
            model = model_numbers.get(joint.name)
            joint.torque_constant = TORQUE_CONSTANT_NM_PER_A.get(model)
            joint.current_limit_a = _current_limit(joint, model)
        joint.hold_present()
        host.write(joint.part_id, *joint.command_write())
        joint.mark_written()
        host.write(joint.part_id, torque.address, (1).to_bytes(torque.size, "little"))


def _current_limit(joint: Joint, model: int | None) -> float | None:
    """The part's Current Limit (A), read from it, when its control table is one we know."""
    table = TABLES_BY_MODEL.get(model)
    if table is None or "current_limit" not in table:
        return None
    spec = joint.register("goal_current")
    raw = joint.host.read_register(joint.part_id, table["current_limit"])
    return abs(raw * spec.scale)


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
