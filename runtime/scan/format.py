"""How a scanned robot is shown: a tree for people, JSON for programs (`hil scan [--json]`).

A robot merged from several buses (`hil scan --profile`, runtime.scan.merge) shows each part as ``[BUS:ID]`` (its
bus and its ID on that bus, the form a profile's ``mount.part`` takes) and marks where each bus is mounted; a
one-bus scan shows ``[ID]`` as always.
"""
from __future__ import annotations

import json

from .merge import MAIN_BUS
from .robot import ScannedPart, VirtualRobot


def robot_json(robot: VirtualRobot, buses: bool | None = None) -> dict:
    """Every part: id (robot-wide when merged), bus and wire_id (its ID on that bus), tree path, serial, model,
    kind, parent id and port, descriptor sha256, joint names; with ``buses`` (default: when merged from several
    buses) every bus with its URL and mount (:func:`bus_table`)."""
    ordered = [p for p, _ in robot.walk()] + [p for i, p in sorted(robot.parts.items())
                                               if i not in {q.id for q, _ in robot.walk()}]
    in_tree = {p.id for p, _ in robot.walk()}
    table = {"buses": bus_table(robot)} if (bool(robot.buses) if buses is None else buses) else {}
    return {
        "bus": robot.bus_url,
        **table,
        "root_id": robot.root_id,
        "dof": robot.dof,
        "parts": [{"id": p.id, "bus": p.bus or MAIN_BUS, "wire_id": p.wire_id,
                   "path": robot.path(p.id) if p.id in in_tree else None,
                   "serial": p.serial_number, "model": p.model_number, "name": p.descriptor.name,
                   "kind": p.kind, "parent_id": p.parent_id, "parent_port": p.parent_port, "sha256": p.sha256,
                   "self_describing": p.self_describing, "joints": [j.name for j in p.descriptor.moving_joints]}
                  for p in ordered],
        "quarantined": {str(i): why for i, why in sorted(robot.quarantined.items())},
        "problems": list(robot.problems),
    }


def bus_table(robot: VirtualRobot) -> list[dict]:
    """Each bus (main first): name, URL, part count, and its mount (None for the main bus): the part it hangs
    from (robot-wide id, tree path, bus, wire_id) and the port."""
    urls = robot.buses or {MAIN_BUS: robot.bus_url}
    table = []
    for name, url in urls.items():
        on_bus = [p for p in robot.parts.values() if (p.bus or MAIN_BUS) == name]
        root = next((p for p in on_bus if _mounted(robot, p)), None)
        mount = None
        if root is not None:
            carrier = robot.parts[root.parent_id]
            mount = {"part_id": carrier.id, "path": robot.path(carrier.id), "bus": carrier.bus or MAIN_BUS,
                     "wire_id": carrier.wire_id, "name": carrier.descriptor.name, "port": root.parent_port}
        table.append({"name": name, "url": url, "parts": len(on_bus), "mount": mount})
    return table


def robot_json_text(robot: VirtualRobot, buses: bool | None = None) -> str:
    return json.dumps(robot_json(robot, buses), indent=2)


def robot_tree_text(robot: VirtualRobot, title: str | None = None) -> str:
    """The tree, one part a line; ``title`` heads it (default: the bus URL; with a title, or when merged from
    several buses, the buses are listed under it)."""
    wheels = sum(len(p.descriptor.moving_joints) for p in robot.parts.values() if p.kind == "wheel")
    merged = bool(robot.buses)
    lines = [f"{title or robot.bus_url}: {len(robot.parts)} parts, {robot.dof} DoF"
             + (f" (+{wheels} wheels)" if wheels else "") + (f", {len(robot.buses)} buses" if merged else "")]
    if merged or title:
        for bus in bus_table(robot):
            mount = bus["mount"]
            where = (f"mounted on {mount['path']} [{mount['bus']}:{mount['wire_id']}] port {mount['port']}"
                     if mount else "main bus")
            lines.append(f"bus {bus['name']}: {bus['url']}, {bus['parts']} parts, {where}")
    for part, depth in robot.walk():
        joints = ", ".join(j.name for j in part.descriptor.moving_joints)
        port = f"{part.parent_port}: " if part.parent_port else ""
        ident = f"serial {part.serial_number:016x}" if part.serial_number is not None else "plain Dynamixel"
        label = f"{part.bus}:{part.wire_id}" if part.bus else str(part.id)
        mount = f"  <- mount of bus {part.bus}" if _mounted(robot, part) else ""
        lines.append(f"{'  ' * depth}{port}[{label}] {part.descriptor.name} ({part.kind})"
                     + (f" joints: {joints}" if joints else "") + f"  {ident}{mount}")
    for why in robot.quarantined.values():
        lines.append(f"QUARANTINED {why}")
    for problem in robot.problems:
        lines.append(f"problem: {problem}")
    return "\n".join(lines)


def _mounted(robot: VirtualRobot, part: ScannedPart) -> bool:
    """``part`` hangs from a part on another bus: it is its bus's root, mounted there."""
    parent = robot.parts.get(part.parent_id) if part.parent_id is not None else None
    return parent is not None and parent.bus != part.bus
