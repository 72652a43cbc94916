"""Parts adopted while the robot runs: a new ID on the bus, or another part at a known ID.

Found by presence.py (a broadcast ping every ``rescan_s``, or a lost ID answering with another descriptor). The
bus is scanned again as at open (runtime.scan: headers for every part, so the parents' port tables say where the
newcomer hangs; descriptors from the cache or read and checked), and the parts still lost are kept in the tree
where they were. Then the robot is assembled again from the new tree by the function Robot.open uses
(runtime.robot.assembly.assemble), with the current assembly as the previous one: unchanged parts keep their
drivers and handles (a controller's references stay good), a new part's driver code runs only when trusted, the
blueprint names re-bind. New joints are brought up as at open (mode, goal = present, torque on), and only then
does the robot swap its assembly, whole.

Nothing is half-applied: a newcomer that cannot be assembled (a trusted driver that fails to load, a model that
cannot be built) or brought up (it stops answering) leaves the robot's assembly as it was. The first is
refused for good (a "quarantined" part event, with its reason); the second is tried again at the next rescan.
A part that fails the scan's checks is quarantined by the scan, as at open. One bus only: a `buses:` robot
notes the newcomer and leaves it alone (its robot-wide IDs come from merging every bus's scan).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hil.devices.protocol import ProtocolError

from ..bus import BusError
from ..drivers import TrustStore
from ..drivers.part_driver import DriverCodeError
from ..scan import DescriptorCache, NoCache, VirtualRobot, scan_bus
from .assembly import Assembly, assemble
from .cycle import BusCycle
from .part_events import CHANGED, NEW, QUARANTINED, PartEvent
from .startup import bring_up

if TYPE_CHECKING:
    from .presence import Presence
    from .view import RobotView

REFUSED = (DriverCodeError, ValueError)  # a newcomer that cannot be assembled: ModelError, ConfigError, ...


def adopt(robot: RobotView, presence: Presence, bus: str, wire_ids: Sequence[int]) -> bool:
    """Scan again and assemble anew for the parts at ``wire_ids`` (new IDs, or known IDs where another part
    answers now). True when the robot now runs on the new assembly."""
    ids = ", ".join(map(str, wire_ids))
    if len(robot.buses) > 1:
        presence.refuse(wire_ids, "plugged in while running on a several-bus robot")
        robot.note(f"bus {bus}: new part(s) at id {ids} left alone: parts are adopted while running on one-bus "
                   "robots only")
        return False
    old = robot.assembly
    prof = robot.profile
    cache = NoCache() if prof.no_cache else DescriptorCache(prof.cache_dir)
    try:
        scanned = scan_bus(robot.bus, cache)
    except BusError as exc:
        robot.note(f"rescan for id {ids} failed ({exc}); trying again later")
        return False
    wanted = set(wire_ids)
    virtual = _with_lost(scanned, old.virtual, set(presence.lost) - wanted)  # a changed part is found, not lost
    for wire in sorted(wanted & set(virtual.quarantined)):
        if wire not in old.virtual.quarantined:
            presence.record(PartEvent(QUARANTINED, wire, bus, robot.clock.now(), (), virtual.quarantined[wire]))
    changed_ids = {i for i in wanted if i in virtual.parts and i in old.virtual.parts
                   and (virtual.parts[i].sha256, virtual.parts[i].model_number)
                   != (old.virtual.parts[i].sha256, old.virtual.parts[i].model_number)}
    new_ids = {i for i in wanted if i in virtual.parts and i not in old.virtual.parts}
    fresh = changed_ids | new_ids
    try:
        new = assemble(virtual, robot.semantics, TrustStore.load(prof.trust_file), robot.buses, previous=old,
                       fresh=fresh)
        brought = _bring_up(robot, old, new)
    except REFUSED as exc:
        for wire in sorted(fresh):
            presence.record(PartEvent(QUARANTINED, wire, bus, robot.clock.now(), (), f"id {wire}: not adopted: {exc}"))
        presence.refuse(sorted(fresh), str(exc))
        return False
    except (BusError, ProtocolError) as exc:
        robot.note(f"id {ids}: could not be brought up ({exc}); the robot runs on as it was, trying again later")
        return False
    presence.forget_lost(wanted)  # found answering: adopted, or quarantined by the scan
    presence.attach(new)
    robot.swap_assembly(new)
    for note in new.notes:
        if note not in old.notes:
            robot.note(note)
    if brought:
        presence.snapshot([j.part_key for j in brought])
    for wire in sorted(fresh):
        _announce(robot, presence, bus, wire, CHANGED if wire in changed_ids else NEW)
    return True


def _bring_up(robot: RobotView, old: Assembly, new: Assembly) -> list:
    """Bring the new assembly's new joints up (their handles are not in ``old``): mode, goal = present, torque on."""
    kept = {id(j) for j in old.joints.values()}
    brought = [j for j in new.joints.values() if id(j) not in kept]
    if brought:
        bring_up(robot.bus, brought, BusCycle(robot.bus, brought, brought))
    return brought


def _announce(robot: RobotView, presence: Presence, bus: str, wire: int, kind: str) -> None:
    part = robot.virtual.parts[wire]
    detail = (f"{part.descriptor.name} ({part.kind}) at {robot.virtual.path(wire)}, descriptor "
              f"{part.sha256[:16] or 'from the catalog'}; adopted")
    driver = robot.drivers.get(wire)
    if driver is not None and driver.message:
        detail += f"; {driver.message}"
    presence.event(kind, wire, bus, detail)


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
