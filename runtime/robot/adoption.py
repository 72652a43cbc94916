"""Parts adopted while the robot runs (issue 26): a new ID on the bus, or another part at a known ID.

Found by presence.py (a broadcast ping every ``rescan_s``, or a lost ID answering with another descriptor). The
bus is scanned again as at open (runtime.scan: headers for every part, so the parents' port tables say where the
newcomer hangs; descriptors from the cache or read and checked), and the parts still lost are kept in the tree
where they were. Then what Robot.open builds is built again from the new tree: the model (so ``robot.model``
has the new part's bodies and mass), the drivers (a new part's driver code only when trusted, as at open; the
others keep theirs), the blueprint names (re-bound, so a name whose tree path now holds another part points to
it), the joints and sensors (the handles of unchanged parts are kept, so a controller's references stay good),
the base and the bus cycle. New joints are brought up as at open (mode, goal = present, torque on). A part that
fails its checks is quarantined, with its reason, as at open. One bus only: a `buses:` robot notes the newcomer
and leaves it alone (its robot-wide IDs come from merging every bus's scan).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..bus import BusError
from ..drivers import TrustStore, load_part_driver
from ..model import build_model
from ..scan import DescriptorCache, NoCache, VirtualRobot, scan_bus
from .part_events import CHANGED, NEW, QUARANTINED, PartEvent

if TYPE_CHECKING:
    from .presence import Presence
    from .robot import Robot


def adopt(robot: Robot, presence: Presence, bus: str, wire_ids: Sequence[int], changed: bool = False, *,
          builders: tuple = ()) -> None:
    """Scan again and rebuild for the parts at ``wire_ids`` (new IDs, or ``changed``: another part at known IDs).
    ``builders``: see :func:`_rebuild`."""
    if len(robot.buses) > 1:
        robot.notes.append(f"bus {bus}: new part(s) at id {', '.join(map(str, wire_ids))} left alone: parts are "
                           "adopted while running on one-bus robots only")
        robot.virtual.quarantined.update({i: f"id {i}: plugged in while running on a several-bus robot"
                                          for i in wire_ids})
        return
    old = robot.virtual
    prof = robot.profile
    cache = NoCache() if prof.no_cache else DescriptorCache(prof.cache_dir)
    try:
        scanned = scan_bus(robot.bus, cache)
    except BusError as exc:
        robot.notes.append(f"rescan for id {', '.join(map(str, wire_ids))} failed ({exc}); trying again later")
        return
    virtual = _with_lost(scanned, old, set(presence.lost))
    wanted = set(wire_ids)
    for wire in sorted(wanted & set(virtual.quarantined)):
        if wire not in old.quarantined:
            presence.record(PartEvent(QUARANTINED, wire, bus, robot.clock.now(), (), virtual.quarantined[wire]))
    changed_ids = {i for i in wanted if i in virtual.parts and i in old.parts
                   and (virtual.parts[i].sha256, virtual.parts[i].model_number)
                   != (old.parts[i].sha256, old.parts[i].model_number)}
    new_ids = {i for i in wanted if i in virtual.parts and i not in old.parts}
    _rebuild(robot, presence, virtual, changed_ids | new_ids, builders)
    for wire in sorted(new_ids | changed_ids):
        part = robot.virtual.parts[wire]
        kind = CHANGED if wire in changed_ids else NEW
        detail = (f"{part.descriptor.name} ({part.kind}) at {robot.virtual.path(wire)}, descriptor "
                  f"{part.sha256[:16] or 'from the catalog'}; adopted")
        driver = robot.drivers.get(wire)
        if driver is not None and driver.message:
            detail += f"; {driver.message}"
        presence._event(kind, wire, bus, detail)


def _with_lost(scanned: VirtualRobot, old: VirtualRobot, lost: set[int]) -> VirtualRobot:
    """The new scan with the lost parts put back where they were (their parents' port tables still list them,
    their children hang from them), so the tree, the model and the names keep them."""
    parts = dict(scanned.parts)
    for key in lost:
        if key in old.parts and key not in parts:
            parts[key] = old.parts[key]
    for key, part in list(parts.items()):
        before = old.parts.get(key)
        if part.parent_id is None and before is not None and before.parent_id in lost:
            parts[key] = replace(part, parent_id=before.parent_id, parent_port=before.parent_port)
    for key, part in list(parts.items()):
        kids = {port: child for port, child in part.children.items() if child in parts}
        for child_key, child in parts.items():
            if child.parent_id == key and child.parent_port is not None:
                kids[child.parent_port] = child_key
        parts[key] = replace(part, children=kids)
    problems = tuple(p for p in scanned.problems if not any(f"id {k}" in p for k in lost))
    root = old.root_id if old.root_id in parts else scanned.root_id
    quarantined = {**old.quarantined, **scanned.quarantined}
    return VirtualRobot(bus_url=scanned.bus_url, parts=parts, root_id=root, quarantined=quarantined,
                        problems=problems, buses=old.buses)


def _rebuild(robot: Robot, presence: Presence, virtual: VirtualRobot, fresh: set[int], builders: tuple) -> None:
    """Everything Robot.open built from the tree, again; handles of parts not in ``fresh`` kept. ``builders``:
    robot.py's (_make_joints, _make_sensors, _make_base, _make_cycle), handed in (robot.py imports this module)."""
    from .blueprint import resolve
    from .buses import MAIN_BUS
    from .names import NameMap
    _make_joints, _make_sensors, _make_base, _make_cycle = builders
    from .sensors import sensing_kind
    from .startup import bring_up

    prof = robot.profile
    model = build_model(virtual)
    trust = TrustStore.load(prof.trust_file)
    drivers = {pid: (robot.drivers[pid] if pid in robot.drivers and pid not in fresh
                     else load_part_driver(part.wire_id, part.descriptor, trust))
               for pid, part in virtual.parts.items()}
    blueprint = resolve(robot.semantics, virtual, lambda part: sensing_kind(part.descriptor) is not None, strict=False)
    joints = _make_joints(virtual, model, drivers, blueprint, robot.buses)
    sensors = _make_sensors(virtual, model, drivers, blueprint, robot.buses)
    old_joints = {(j.part_key, j.part_joint): j for j in robot.joints.values()}
    old_sensors = {s.part_key: s for s in robot.sensors.values()}
    kept_j, brought = {}, []
    for name, joint in joints.items():
        before = old_joints.get((joint.part_key, joint.part_joint))
        if before is not None and joint.part_key not in fresh:
            before.name, before.path = name, joint.path
            kept_j[name] = before
        else:
            kept_j[name] = joint
            brought.append(joint)
    kept_s = {}
    for name, sensor in sensors.items():
        before = old_sensors.get(sensor.part_key)
        if before is not None and sensor.part_key not in fresh:
            before.name = name
            sensor = before
        kept_s[name] = sensor
    robot.joints = NameMap("joint", kept_j, blueprint.aliases("joints"), blueprint.missing_joints)
    robot.sensors = NameMap("sensor", kept_s, blueprint.aliases("sensors"), blueprint.missing_sensors)
    robot.virtual, robot.model, robot.blueprint, robot.drivers = virtual, model, blueprint, drivers
    robot.__dict__.pop("dynamics", None)  # a cached_property of the old model
    halted = robot._base.halted if robot._base is not None else None
    odometry = robot._base.odometry if robot._base is not None else None
    if any(j.mode == "velocity" for j in brought) or robot._base is None:
        base, error = _make_base(model, robot.joints)
        if base is not None:
            robot._base, robot._base_error = base, error
            if odometry is not None:
                robot._base.reset_odometry(*odometry)
                robot._base.halt(halted)
        elif robot._base is not None:  # a wheel where no wheel can steer: the base keeps the wheels it had
            robot.notes.append(f"the new wheel part does not make a drivable base ({error}); the base keeps its "
                               "wheels")
    robot._cycle = _make_cycle(robot.buses, robot.joints, robot.sensors)
    presence.attach([(MAIN_BUS, robot.bus, robot._cycle)])
    if brought:
        from .cycle import BusCycle

        bring_up(robot.bus, brought, BusCycle(robot.bus, brought, brought))
        presence.snapshot([j.part_key for j in brought])
