"""Opening a robot whose parts sit on several buses (a `buses:` profile, runtime.robot.buses).

Each bus is opened and scanned on its own (IDs are per wire), re-keyed robot-wide (runtime.scan.merge), and
hung from the part and port its mount names, in the order the mounts can be resolved: a mount may name a part
on a bus that is itself mounted. What only the scan can tell (the part exists, the port is a child port and
free) fails here with the profile's file:line, and with every bus closed again by the caller's ExitStack.

When the main bus is an in-process world (``sim://``), :func:`mirror_other_buses` gives the other buses' parts
bodies in that world (their descriptors as read from the real parts, hung at their mounts) and adds an
``after_cycle`` hook that writes the real joints' positions into them after every bus cycle, so the world's
geometry, mass and contacts stay the real robot's. The world is reached only through the transport's
``embodied`` object: firmware_sim is never imported here.
"""
from __future__ import annotations

import difflib
import math
from contextlib import ExitStack
from typing import TYPE_CHECKING, NamedTuple

from ..bus import BusError, BusHost
from ..model.model import descriptor_of
from ..scan import DescriptorCache, MountError, NoCache, VirtualRobot, attach, rekey, scan_bus
from ..scan.scanner import Progress
from ..transports import open_transport
from ..transports.base import TransportError
from .buses import MAIN_BUS, BusSpec
from .profile import Profile
from .semantics import Semantics, load_semantics

if TYPE_CHECKING:
    from .view import RobotView


class ProfileScan(NamedTuple):
    hosts: dict[str, BusHost]  # name -> open host, main bus first ("main" for a one-bus profile)
    virtual: VirtualRobot  # every bus's parts in one tree
    semantics: Semantics | None  # the profile's, loaded (mounts may name its blueprint names)


def scan_profile(profile: Profile, undo: ExitStack, cache: DescriptorCache | None = None,
                 progress: Progress | None = None) -> ProfileScan:
    """Open every bus of ``profile`` (each host registered with ``undo``), scan each alone and merge them: what
    Robot.open does before it builds anything, and all that ``hil scan/urdf --profile`` do. ``cache`` replaces
    the profile's descriptor cache (its ``cache_dir``/``no_cache``)."""
    hosts = open_hosts(profile, undo)
    if cache is None:
        cache = NoCache() if profile.no_cache else DescriptorCache(profile.cache_dir)
    semantics = load_semantics(profile.semantics) if profile.semantics else None
    return ProfileScan(hosts, scan_robot(profile, hosts, cache, semantics, progress), semantics)


def open_hosts(profile: Profile, undo: ExitStack) -> dict[str, BusHost]:
    """A BusHost per bus, main bus first; each registered with ``undo`` so a failure closes them all. A bus of
    a `buses:` profile that cannot be opened is named, with its line."""
    hosts: dict[str, BusHost] = {}
    urls = profile.bus_urls() if profile.buses else [(None, profile.bus_url())]
    for spec, url in urls:
        try:
            transport = open_transport(url)
        except TransportError as exc:
            if spec is None:
                raise
            where = f"{spec.source}:{spec.line}" if spec.line else spec.source
            raise TransportError(f"{where}: bus {spec.name}: {exc.strerror or exc}") from exc
        host = BusHost(transport, timeout_s=profile.bus_timeout_s, retries=profile.bus_retries)
        undo.callback(host.close)
        hosts[spec.name if spec is not None else MAIN_BUS] = host
    return hosts


def scan_robot(profile: Profile, hosts: dict[str, BusHost], cache: DescriptorCache,
               semantics: Semantics | None, progress: Progress | None = None) -> VirtualRobot:
    """The one virtual robot of every bus: the main bus's tree with the other buses hung from their mounts."""
    if not profile.buses:
        return _scan_one(hosts[MAIN_BUS], cache, None, progress)
    scans = {spec.name: rekey(_scan_one(hosts[spec.name], cache, spec, progress), spec.name, index)
             for index, spec in enumerate(profile.buses)}
    merged = scans[profile.buses[0].name]
    pending = list(profile.buses[1:])
    while pending:
        ready = [(spec, key) for spec in pending if (key := _mount_key(spec, merged, semantics)) is not None]
        if not ready:
            raise _unresolved(pending[0], merged)
        for spec, key in ready[:1]:  # one at a time: a later mount may name a part of this bus
            try:
                merged = attach(merged, scans[spec.name], key, spec.mount.port)
            except MountError as exc:
                raise spec.error(str(exc)) from None
            pending.remove(spec)
    return merged


def _scan_one(host: BusHost, cache: DescriptorCache, spec: BusSpec | None,
              progress: Progress | None = None) -> VirtualRobot:
    if progress is not None and spec is not None:
        inner = progress

        def progress(stage: str, done: int, total: int) -> None:
            inner(f"{spec.name} {stage}", done, total)  # "reading arm descriptors: ..."
    virtual = scan_bus(host, cache, progress=progress)
    if virtual.root_id is None:
        why = "; ".join(virtual.quarantined.values()) or "no part answered"
        where = host.transport.url
        if spec is not None:
            where = f"bus {spec.name} ({where})"
            where = f"{spec.source}:{spec.line}: {where}" if spec.line else where
        raise BusError(f"{where}: no robot to open ({why})")
    return virtual


def _mount_key(spec: BusSpec, merged: VirtualRobot, semantics: Semantics | None) -> int | None:
    """The robot-wide ID of the part ``spec`` mounts on, None while it is not (yet) in the merged tree."""
    mount = spec.mount
    if mount.bus is not None:
        if mount.bus not in merged.buses:
            return None  # that bus is not attached yet
        for key, part in merged.parts.items():
            if part.bus == mount.bus and part.wire_id == mount.device_id:
                return key
        ids = sorted(p.wire_id for p in merged.parts.values() if p.bus == mount.bus)
        raise spec.error(f"mount.part {mount.part}: bus {mount.bus} has no part with ID {mount.device_id} "
                         f"(its IDs: {', '.join(map(str, ids))})")
    by_path = {merged.path(p.id): p.id for p, _ in merged.walk()}
    if mount.part in by_path:
        return by_path[mount.part]
    entry = _blueprint_entry(semantics, mount.part)
    if entry is None:
        return None
    if entry.target.path is not None:
        return by_path.get(entry.target.path)
    return next((p.id for p, _ in merged.walk() if p.serial_number == entry.target.serial), None)


def _blueprint_entry(semantics: Semantics | None, name: str):
    if semantics is None:
        return None
    return next((e for e in (*semantics.joints, *semantics.sensors) if e.name == name), None)


def _unresolved(spec: BusSpec, merged: VirtualRobot):
    paths = [merged.path(p.id) for p, _ in merged.walk()]
    close = difflib.get_close_matches(spec.mount.part, paths, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return spec.error(f"mount.part {spec.mount.part!r} is no part of the robot scanned so far (buses "
                      f"{', '.join(merged.buses)}): not a tree path, a blueprint name of the semantics, or BUS:ID"
                      f"{hint}")


def mirror_other_buses(robot: RobotView) -> list[str]:
    """Mirror every bus but the main one into the main bus's in-process world, if it has one (else nothing).

    Buses are mirrored in tree order, so a bus mounted on a part of another non-main bus finds its carrier already
    mirrored. Returns the names of the mirrored buses. After this, each bus cycle ends with the mirrored joints
    set to the positions just read (joints the scan bound without a present position are left to their gear
    friction); the first write happens here, from the readings of the bring-up."""
    embodied = getattr(robot.bus.transport, "embodied", None)
    if embodied is None or not robot.profile.buses or len(robot.buses) < 2:
        return []
    virtual, main = robot.virtual, robot.profile.buses[0].name
    mounted = [part for part, _ in virtual.walk()
               if part.bus != main and part.parent_id is not None and virtual.parts[part.parent_id].bus != part.bus]
    names = []
    for root in mounted:
        on_bus = _subtree(virtual, root.id)
        parts = {pid: descriptor_of(virtual.parts[pid]) for pid in on_bus}  # plain servos: the catalog's
        children = {pid: {port: c for port, c in virtual.parts[pid].children.items() if c in on_bus}
                    for pid in on_bus}
        embodied.mirror_parts(root.bus, parts, children, root.id, (root.parent_id, root.parent_port))
        names.append(root.bus)
    joints = [j for j in robot.joints.values() if j.bus != main]
    if not joints:
        return names

    def write_mirror(robot: RobotView) -> None:
        positions = {(j.part_key, j.part_joint): j.position for j in joints if math.isfinite(j.position)}
        if positions:
            embodied.set_mirrored_positions(positions)

    write_mirror(robot)
    robot.after_cycle.append(write_mirror)
    return names


def _subtree(virtual: VirtualRobot, root: int) -> set[int]:
    """The parts of ``root``'s bus that hang from ``root`` (a bus mounted further down is its own mirror)."""
    bus, out, stack = virtual.parts[root].bus, set(), [root]
    while stack:
        pid = stack.pop()
        out.add(pid)
        stack.extend(c for c in virtual.parts[pid].children.values()
                     if c in virtual.parts and virtual.parts[c].bus == bus)
    return out
