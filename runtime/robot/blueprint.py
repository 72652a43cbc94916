"""The blueprint robot (DESIGN "The runtime" item 4): semantic names bound to the parts a scan found.

Every moving joint and every sensing part gets a name: the one the semantics file gives it, else its tree path
(``torso/neck:horn`` for a joint, ``torso`` for a sensing part). A name whose part is missing from the scan (a
quarantined or unplugged part) is not an error here -- the rest of the robot still comes up -- but asking for
it says why it is missing; a name that cannot be right for any scan (a bracket named as a joint, a joint the part
does not have, two names for one joint) is a ConfigError with the semantics file's line.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hil.devices.yaml_source import ConfigError

from ..scan.robot import ScannedPart, VirtualRobot
from .semantics import Entry, Semantics, Target


@dataclass(frozen=True)
class JointBinding:
    name: str
    part_id: int
    joint: str  # the joint's name in the part's descriptor
    default_name: str  # tree path + ":" + joint


@dataclass(frozen=True)
class SensorBinding:
    name: str
    part_id: int
    default_name: str  # tree path


@dataclass
class Blueprint:
    joints: dict[str, JointBinding] = field(default_factory=dict)  # primary name -> binding, tree order
    sensors: dict[str, SensorBinding] = field(default_factory=dict)
    missing_joints: dict[str, str] = field(default_factory=dict)  # name -> why it is not there
    missing_sensors: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def aliases(self, which: str) -> dict[str, str]:
        bindings = self.joints if which == "joints" else self.sensors
        return {b.default_name: name for name, b in bindings.items() if b.default_name != name}


def joint_default_name(robot: VirtualRobot, part_id: int, joint: str) -> str:
    return f"{robot.path(part_id)}:{joint}"


def resolve(semantics: Semantics | None, robot: VirtualRobot,
            is_sensing: Callable[[ScannedPart], bool], strict: bool = True) -> Blueprint:
    """Bind names to the scanned robot: the semantics file's where given, tree paths elsewhere. ``strict=False``
    (a part swapped while running, runtime/robot/adoption.py): a name that does not fit the part now at its path
    is missing, with the reason, instead of a ConfigError."""
    parts = [p for p, _ in robot.walk()]
    by_path = {robot.path(p.id): p for p in parts}
    by_serial = {p.serial_number: p for p in parts if p.serial_number is not None}
    out = Blueprint()
    joint_names: dict[tuple[int, str], Entry] = {}
    sensor_names: dict[int, Entry] = {}
    for entry in semantics.joints if semantics else ():
        part = _find(entry.target, by_path, by_serial)
        if part is None:
            out.missing_joints[entry.name] = _missing(entry)
            out.problems.append(f"{entry.where}: joint {entry.name}: no part at {entry.target} in this scan")
            continue
        try:
            key = (part.id, _joint_of(entry, part))
        except ConfigError as exc:
            if strict:
                raise
            out.missing_joints[entry.name] = f"does not fit the part now at {entry.target}: {exc}"
            out.problems.append(str(exc))
            continue
        _claim(joint_names, key, entry, "joint")
    for entry in semantics.sensors if semantics else ():
        part = _find(entry.target, by_path, by_serial)
        if part is None:
            out.missing_sensors[entry.name] = _missing(entry)
            out.problems.append(f"{entry.where}: sensor {entry.name}: no part at {entry.target} in this scan")
            continue
        if not is_sensing(part) and not strict:
            out.missing_sensors[entry.name] = f"the part now at {entry.target} has no sensor to read"
            continue
        if not is_sensing(part):
            raise entry.error(f"{entry.target} is part id {part.id} ({part.descriptor.name}, {part.kind}), which has "
                              "no sensor to read (a range ring, a contact sensor or a camera)")
        _claim(sensor_names, part.id, entry, "sensor")
    for part in parts:
        for joint in part.descriptor.moving_joints:
            default = joint_default_name(robot, part.id, joint.name)
            entry = joint_names.get((part.id, joint.name))
            name = entry.name if entry else default
            out.joints[name] = JointBinding(name, part.id, joint.name, default)
        if is_sensing(part):
            default = robot.path(part.id)
            entry = sensor_names.get(part.id)
            name = entry.name if entry else default
            out.sensors[name] = SensorBinding(name, part.id, default)
    return out


def _find(target: Target, by_path: dict[str, ScannedPart], by_serial: dict[int, ScannedPart]) -> ScannedPart | None:
    return by_path.get(target.path) if target.path is not None else by_serial.get(target.serial)


def _missing(entry: Entry) -> str:
    return (f"is named in {entry.where} as {entry.target}, but the scan found no part there "
            "(unplugged, quarantined, or the semantics file is for another robot)")


def _joint_of(entry: Entry, part: ScannedPart) -> str:
    moving = [j.name for j in part.descriptor.moving_joints]
    what = f"{entry.target} is part id {part.id} ({part.descriptor.name}, {part.kind})"
    if entry.target.joint is not None:
        if entry.target.joint not in moving:
            has = f"its moving joints: {', '.join(moving)}" if moving else "it has no moving joint"
            raise entry.error(f"{what}, which has no moving joint {entry.target.joint!r}; {has}")
        return entry.target.joint
    if not moving:
        raise entry.error(f"{what}, which has no moving joint")
    if len(moving) > 1:
        raise entry.error(f"{what}, which has several moving joints ({', '.join(moving)}); "
                          f"write {entry.target}:JOINT")
    return moving[0]


def _claim(claimed: dict, key, entry: Entry, kind: str) -> None:
    previous = claimed.get(key)
    if previous is not None:
        raise ConfigError(entry.source, entry.line, f"{entry.name}: the same {kind} is already named "
                                                    f"{previous.name!r} on line {previous.line}")
    claimed[key] = entry
