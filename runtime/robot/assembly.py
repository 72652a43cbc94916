"""The robot assembled in one place: from a scanned robot to the model and the handles a controller drives.

Opening a robot (``Robot.open``) and adopting a part plugged in while it runs (runtime/robot/adoption.py) both
call :func:`assemble`, so a part found at open and the same part found later become the same joints, sensors,
base and bus cycle. What comes out is an :class:`Assembly`: a frozen record the Robot holds whole and replaces
whole (``Robot.swap_assembly``), so a controller never sees a robot half rebuilt.

Order of the work, each step from the one before: the model (runtime.model, from the scanned tree); the drivers
(a part's driver code only when trusted; parts kept from a previous assembly keep theirs); the blueprint names
bound to the tree; the joint and sensor handles (a previous assembly's handles of unchanged parts are kept, so
a controller's references stay good); the differential base made from the wheel joints; one bus cycle per bus.
No bus traffic happens here: bringing new joints up is the caller's (startup.bring_up), after assembling.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass
from types import MappingProxyType

from ..bus import BusHost
from ..drivers import PartDriver, TrustStore, load_part_driver
from ..model import Model, build_model, create_data, forward_kinematics
from ..scan import ScannedPart, VirtualRobot
from .base import BaseGeometryError, DifferentialBase, wheel_geometry
from .blueprint import Blueprint, resolve
from .buses import MAIN_BUS
from .camera import CAMERA, Camera, camera_sensor
from .cycle import BusCycle, BusGroup, MultiCycle
from .joints import POSITION, VELOCITY, Joint
from .names import NameMap
from .semantics import Semantics
from .sensors import SensorHandle, make_sensor, sensing_kind


@dataclass(frozen=True, eq=False)
class Assembly:
    """Everything built from one scan of the robot. Its fields are never reassigned and its maps are read-only;
    the handles in it are live (their readings and targets change every bus cycle)."""

    virtual: VirtualRobot  # the scanned tree (with the parts lost while running kept where they were)
    model: Model  # the immutable kinematic and inertial model of that tree
    drivers: Mapping[int, PartDriver]  # robot-wide part ID -> its driver (read-only)
    blueprint: Blueprint  # the names bound to the tree
    joints: NameMap[Joint]
    sensors: NameMap[SensorHandle]
    base: DifferentialBase | None  # None when the wheels cannot make one (base_error says why)
    base_error: str
    cycle: BusCycle | MultiCycle  # one BusCycle for one bus, a MultiCycle of one per bus for several
    notes: tuple[str, ...]  # what assembling noticed: quarantined parts, scan problems, drivers not run, names

    def groups(self) -> tuple[BusGroup, ...]:
        """The joints and cycle of each bus (a one-bus cycle is one group): bring-up and wind-down go per bus."""
        if isinstance(self.cycle, MultiCycle):
            return self.cycle.groups
        return (BusGroup(MAIN_BUS, self.cycle.bus, list(self.joints.values()), self.cycle),)

    def bind_names(self) -> None:
        """Give every handle the name (and tree path) this assembly binds it to: a kept handle whose part now
        sits elsewhere, or whose blueprint name re-bound, answers to the new one. Robot.swap_assembly calls it,
        so the old names hold until the swap."""
        for name, joint in self.joints.items():
            joint.name, joint.path = name, self.virtual.path(joint.part_key)
        for name, sensor in self.sensors.items():
            sensor.name = name


def assemble(virtual: VirtualRobot, semantics: Semantics | None, trust: TrustStore, hosts: Mapping[str, BusHost],
             *, previous: Assembly | None = None, fresh: Set[int] = frozenset()) -> Assembly:
    """The assembly of ``virtual`` on the opened ``hosts`` (bus name -> host, main first).

    ``previous``: the assembly this one replaces (a part adopted while running). Its drivers and handles are
    kept for every part not in ``fresh`` (robot-wide IDs of the parts new or changed since), names that no longer
    fit the part at their path become missing instead of an error, and its base's odometry carries over. Raises
    (ModelError, DriverCodeError, ConfigError at open) without touching ``previous``."""
    model = build_model(virtual)
    drivers = _drivers(virtual, trust, previous, fresh)
    blueprint = resolve(semantics, virtual, _senses, strict=previous is None)
    joints = _joints(virtual, drivers, blueprint, hosts, previous, fresh)
    sensors = _sensors(virtual, model, drivers, blueprint, hosts, previous, fresh)
    base, base_error, base_notes = _base(model, joints, previous)
    cycle = _cycle(hosts, joints, sensors)
    notes = _notes(virtual, drivers, blueprint) + base_notes
    return Assembly(virtual, model, MappingProxyType(drivers), blueprint, joints, sensors, base, base_error, cycle,
                    tuple(notes))


def _senses(part: ScannedPart) -> bool:
    return sensing_kind(part.descriptor) is not None


def cameras_of(virtual: VirtualRobot, semantics: Semantics | None) -> list[tuple[str, int, str]]:
    """Every camera of ``virtual`` as (its name, its part's robot-wide ID, its body), named as :func:`assemble`
    names ``robot.sensors`` (the semantics file's name, else the part's tree path): the optical frames of a
    robot's URDF (``hil urdf``, runtime.model.urdf) and of its ROS images then agree."""
    blueprint = resolve(semantics, virtual, _senses)
    out = []
    for name, binding in blueprint.sensors.items():
        desc = virtual.parts[binding.part_id].descriptor
        if sensing_kind(desc) == CAMERA:  # the handle make_sensor gives such a part is its Camera
            out.append((name, binding.part_id, camera_sensor(desc).body))
    return out


def _drivers(virtual: VirtualRobot, trust: TrustStore, previous: Assembly | None,
             fresh: Set[int]) -> dict[int, PartDriver]:
    kept = previous.drivers if previous is not None else {}
    return {pid: (kept[pid] if pid in kept and pid not in fresh else load_part_driver(part.wire_id, part.descriptor,
                                                                                      trust))
            for pid, part in virtual.parts.items()}


def _joints(virtual: VirtualRobot, drivers: Mapping[int, PartDriver], blueprint: Blueprint,
            hosts: Mapping[str, BusHost], previous: Assembly | None, fresh: Set[int]) -> NameMap[Joint]:
    kept = {(j.part_key, j.part_joint): j for j in previous.joints.values()} if previous is not None else {}
    joints: dict[str, Joint] = {}
    for name, binding in blueprint.joints.items():
        part = virtual.parts[binding.part_id]
        desc_joint = next(j for j in part.descriptor.moving_joints if j.name == binding.joint)
        registers = {role: part.descriptor.register(reg) for role, reg in desc_joint.registers.items()}
        if "present_position" not in registers:
            continue  # a joint the bus cannot report is not the controller's to drive
        before = kept.get((part.id, desc_joint.name))
        if before is not None and part.id not in fresh:
            joints[name] = before
            continue
        mode = VELOCITY if part.kind == "wheel" else POSITION
        bus = part.bus or MAIN_BUS
        joints[name] = Joint(name, part.wire_id, desc_joint.name, virtual.path(part.id), drivers[part.id], registers,
                             desc_joint.limits, desc_joint.type, mode, part_key=part.id, bus=bus, host=hosts[bus])
    return NameMap("joint", joints, blueprint.aliases("joints"), blueprint.missing_joints)


def _sensors(virtual: VirtualRobot, model: Model, drivers: Mapping[int, PartDriver], blueprint: Blueprint,
             hosts: Mapping[str, BusHost], previous: Assembly | None, fresh: Set[int]) -> NameMap[SensorHandle]:
    kept = {s.part_key: s for s in previous.sensors.values()} if previous is not None else {}
    placements = forward_kinematics(model, create_data(model), model.neutral())
    sensors: dict[str, SensorHandle] = {}
    for name, binding in blueprint.sensors.items():
        part = virtual.parts[binding.part_id]
        before = kept.get(part.id)
        if before is not None and part.id not in fresh:
            sensors[name] = before
            continue
        yaws = {}
        for index, link in enumerate(model.links):
            if link.bus_id == part.id:
                rot = placements[index].rotation
                yaws[link.body] = math.atan2(rot[1, 0], rot[0, 0])
        sensor = make_sensor(name, part.wire_id, virtual.path(part.id), part.descriptor, drivers[part.id], yaws)
        sensor.part_key, sensor.bus = part.id, part.bus or MAIN_BUS
        sensor.host = hosts[sensor.bus]
        sensors[name] = sensor
    return NameMap("sensor", sensors, blueprint.aliases("sensors"), blueprint.missing_sensors)


def _base(model: Model, joints: NameMap[Joint],
          previous: Assembly | None) -> tuple[DifferentialBase | None, str, list[str]]:
    """The base, its error when there is none, and a note when a new wheel leaves the previous base as it was.
    A previous base is rebuilt only when a wheel joint is new (or it had none); the new one goes on from the
    old one's odometry, halted as it was."""
    if previous is None:
        return (*_make_base(model, joints), [])
    old = previous.base
    kept = {id(j) for j in previous.joints.values()}
    if old is not None and not any(j.mode == VELOCITY and id(j) not in kept for j in joints.values()):
        return old, previous.base_error, []
    base, error = _make_base(model, joints)
    if base is None:
        if old is None:
            return None, error, []
        return old, previous.base_error, [f"the new wheel part does not make a drivable base ({error}); the base "
                                          "keeps its wheels"]
    if old is not None:
        base.reset_odometry(*old.odometry)
        base.halt(old.halted)
    return base, error, []


def _make_base(model: Model, joints: NameMap[Joint]) -> tuple[DifferentialBase | None, str]:
    wheels = [j for j in joints.values() if j.mode == VELOCITY]
    if not wheels:
        return None, "it has no wheel parts"
    placements = forward_kinematics(model, create_data(model), model.neutral())
    try:
        return DifferentialBase([wheel_geometry(model, placements, j) for j in wheels]), ""
    except BaseGeometryError as exc:
        return None, str(exc)


def _cycle(hosts: Mapping[str, BusHost], joints: NameMap[Joint],
           sensors: NameMap[SensorHandle]) -> BusCycle | MultiCycle:
    """One BusCycle for one bus; a MultiCycle of one BusCycle per bus for several."""
    if len(hosts) == 1:
        host = next(iter(hosts.values()))
        return BusCycle(host, [*joints.values(), *_on_bus(sensors)], list(joints.values()))
    groups = []
    for name, host in hosts.items():
        on_bus = [j for j in joints.values() if j.bus == name]
        readers = [*on_bus, *(s for s in _on_bus(sensors) if s.bus == name)]
        groups.append(BusGroup(name, host, on_bus, BusCycle(host, readers, on_bus)))
    return MultiCycle(groups)


def _on_bus(sensors: NameMap[SensorHandle]) -> list[SensorHandle]:
    """The sensors the bus cycle reads (a camera's pixels come beside the bus: runtime/robot/camera.py)."""
    return [s for s in sensors.values() if not isinstance(s, Camera)]


def _notes(virtual: VirtualRobot, drivers: Mapping[int, PartDriver], blueprint: Blueprint) -> list[str]:
    notes = [f"quarantined: {why}" for why in virtual.quarantined.values()]
    notes += [f"scan: {problem}" for problem in virtual.problems]
    notes += [d.message for d in drivers.values() if d.message]
    notes += blueprint.problems
    return notes
