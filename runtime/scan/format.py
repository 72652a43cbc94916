"""How a scanned robot is shown: a tree for people, JSON for programs (`hil scan [--json]`)."""
from __future__ import annotations

import json

from .robot import VirtualRobot


def robot_json(robot: VirtualRobot) -> dict:
    """Every part: id, serial, model, kind, parent id and port, descriptor sha256, joint names."""
    ordered = [p for p, _ in robot.walk()] + [p for i, p in sorted(robot.parts.items())
                                               if i not in {q.id for q, _ in robot.walk()}]
    return {
        "bus": robot.bus_url,
        "root_id": robot.root_id,
        "dof": robot.dof,
        "parts": [{"id": p.id, "serial": p.serial_number, "model": p.model_number, "name": p.descriptor.name,
                   "kind": p.kind, "parent_id": p.parent_id, "parent_port": p.parent_port, "sha256": p.sha256,
                   "self_describing": p.self_describing, "joints": [j.name for j in p.descriptor.moving_joints]}
                  for p in ordered],
        "quarantined": {str(i): why for i, why in sorted(robot.quarantined.items())},
        "problems": list(robot.problems),
    }


def robot_json_text(robot: VirtualRobot) -> str:
    return json.dumps(robot_json(robot), indent=2)


def robot_tree_text(robot: VirtualRobot) -> str:
    wheels = sum(len(p.descriptor.moving_joints) for p in robot.parts.values() if p.kind == "wheel")
    lines = [f"{robot.bus_url}: {len(robot.parts)} parts, {robot.dof} DoF"
             + (f" (+{wheels} wheels)" if wheels else "")]
    for part, depth in robot.walk():
        joints = ", ".join(j.name for j in part.descriptor.moving_joints)
        port = f"{part.parent_port}: " if part.parent_port else ""
        ident = f"serial {part.serial_number:016x}" if part.serial_number is not None else "plain Dynamixel"
        lines.append(f"{'  ' * depth}{port}[{part.id}] {part.descriptor.name} ({part.kind})"
                     + (f" joints: {joints}" if joints else "") + f"  {ident}")
    for why in robot.quarantined.values():
        lines.append(f"QUARANTINED {why}")
    for problem in robot.problems:
        lines.append(f"problem: {problem}")
    return "\n".join(lines)
