"""The parts of a robot as the world sees them: each part's descriptor and port table, the tree they form, and
the list of links (one per body of every part) in the order the multibody is built.

This reads exactly what the host's scan reads from the bus -- the descriptor a self-describing part stores and
the port table in its CPC block (the child's bus ID per port, 0xFF for none); a plain Dynamixel carries neither,
so its descriptor comes from the catalog by model number and it is always a leaf. The order is the host model's
(runtime.model): parts depth-first from the root with children in port order, and inside a part its bodies
depth-first along its joints in descriptor order, so a link's parent always comes first.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from hil.devices.catalog import plain_servo
from hil.devices.control_table.cpc import NO_PART, PORT_TABLE_ADDRESS
from hil.devices.descriptor import Body, Joint, PartDescriptor

from .frames import IDENTITY, Frame, compose, frame_of, inverse


class RobotBuildError(ValueError):
    """The parts do not form one robot the world can build (no root, a dangling port, an unknown model...)."""


class PartLike(Protocol):
    """What the world needs of a part's firmware: its bus ID, model number and control-table memory (a
    self-describing part also has ``.descriptor``; see firmware_sim.cpc_part)."""

    id: int
    model_number: int


@dataclass(frozen=True)
class PartNode:
    id: int
    descriptor: PartDescriptor
    children: dict[str, int] = field(default_factory=dict)  # own port name -> child bus ID, in port order


@dataclass(frozen=True)
class LinkSpec:
    """One body of one part, placed in its parent link: ``joint_frame`` is the joint frame in the parent body's
    frame at q = 0 (a part joint's pose, or the mount transform between two parts), ``joint`` the part joint that
    moves it (None for the base and for mounts, which are fixed). ``parent`` indexes the list of specs."""

    part_id: int
    body: Body
    parent: int
    joint: Joint | None
    joint_frame: Frame


def descriptor_of(part: PartLike) -> PartDescriptor:
    desc = getattr(part, "descriptor", None)
    if desc is not None:
        return desc
    desc = plain_servo(part.model_number)
    if desc is None:
        raise RobotBuildError(f"part {part.id}: no descriptor and no catalog entry for model number "
                              f"{part.model_number}")
    return desc


def port_children(part: PartLike, desc: PartDescriptor) -> dict[str, int]:
    """Port name -> child ID from the part's CPC port table (empty for a plain servo, which has none)."""
    if getattr(part, "descriptor", None) is None:
        return {}
    table = part.memory.data[PORT_TABLE_ADDRESS:PORT_TABLE_ADDRESS + len(desc.ports)]
    return {port.name: table[k] for k, port in enumerate(desc.ports) if table[k] != NO_PART}


def part_nodes(parts: Iterable[PartLike]) -> tuple[int, dict[int, PartNode]]:
    """(root ID, nodes by ID); refuses what does not make one tree."""
    nodes: dict[int, PartNode] = {}
    for part in parts:
        if part.id in nodes:
            raise RobotBuildError(f"two parts have bus ID {part.id}")
        desc = descriptor_of(part)
        nodes[part.id] = PartNode(part.id, desc, port_children(part, desc))
    parent_of = _check_ports(nodes)
    roots = sorted(set(nodes) - set(parent_of))
    if len(roots) != 1:
        what = "every part hangs from another (a cycle)" if not roots else \
            f"parts {', '.join(map(str, roots))} hang from no port; the world builds one robot from one tree"
        raise RobotBuildError(f"no single root part: {what}")
    unreached = set(nodes) - {node.id for node, _ in walk(roots[0], nodes)}
    if unreached:
        raise RobotBuildError(f"parts {', '.join(map(str, sorted(unreached)))} form a cycle detached from the root "
                              f"{roots[0]}")
    return roots[0], nodes


def _check_ports(nodes: dict[int, PartNode]) -> dict[int, tuple[int, str]]:
    parent_of: dict[int, tuple[int, str]] = {}
    for node in nodes.values():
        for port, child in node.children.items():
            where = f"part {node.id} ({node.descriptor.name}) port {port!r}"
            if next(p for p in node.descriptor.ports if p.name == port).parent:
                raise RobotBuildError(f"{where} is its parent connector, yet its port table lists part {child} there")
            if child not in nodes:
                raise RobotBuildError(f"{where} lists part {child}, which is not among the parts")
            if child in parent_of:
                other = parent_of[child]
                raise RobotBuildError(f"{where} and part {other[0]} port {other[1]!r} both claim part {child}")
            parent_of[child] = (node.id, port)
    return parent_of


def walk(root: int, nodes: dict[int, PartNode]) -> list[tuple[PartNode, tuple[int, str] | None]]:
    """Parts depth-first from ``root`` (children in port order), each with (parent ID, port) or None."""
    out: list[tuple[PartNode, tuple[int, str] | None]] = []
    stack: list[tuple[int, tuple[int, str] | None]] = [(root, None)]
    seen: set[int] = set()
    while stack:
        part_id, connection = stack.pop()
        if part_id in seen:
            raise RobotBuildError(f"part {part_id} is reached twice from the root")
        seen.add(part_id)
        node = nodes[part_id]
        out.append((node, connection))
        order = [p.name for p in node.descriptor.ports]
        for port, child in sorted(node.children.items(), key=lambda kv: order.index(kv[0]), reverse=True):
            stack.append((child, (part_id, port)))
    return out


def mount_frame(parent: PartDescriptor, port: str, child: PartDescriptor) -> Frame:
    """The child's base body frame in the frame of the parent body carrying ``port``: the child's parent connector
    coincides with the port, so T = T(port) * inverse(T(child's parent connector)) (the modular-robot reference)."""
    port_pose = next(p for p in parent.ports if p.name == port).pose
    return compose(frame_of(port_pose), inverse(frame_of(child.parent_port.pose)))


def link_specs(root: int, nodes: dict[int, PartNode]) -> list[LinkSpec]:
    """Every body of every part, base first, in the order pybullet numbers a multibody's links (see
    :func:`depth_first`)."""
    return depth_first(_specs_by_part(root, nodes))


def depth_first(specs: list[LinkSpec]) -> list[LinkSpec]:
    """``specs`` in depth-first preorder, children in their given order.

    pybullet builds a multibody through its URDF converter, which numbers links depth-first from the base
    whatever order createMultiBody was given them in; the part-by-part order is not depth-first when a part
    branches inside (a port on one branch, a body on another), so the builder reorders first and the indices
    it computes are the ones pybullet uses."""
    children: dict[int, list[int]] = {}
    for k, spec in enumerate(specs):
        children.setdefault(spec.parent, []).append(k)
    order: list[int] = []
    stack = [0]
    while stack:
        k = stack.pop()
        order.append(k)
        stack.extend(reversed(children.get(k, [])))
    new_index = {old: new for new, old in enumerate(order)}
    return [replace(specs[k], parent=new_index.get(specs[k].parent, -1)) for k in order]


def _specs_by_part(root: int, nodes: dict[int, PartNode]) -> list[LinkSpec]:
    """Every body of every part, part by part from the root (as runtime.model orders them)."""
    specs: list[LinkSpec] = []
    index: dict[tuple[int, str], int] = {}
    for node, connection in walk(root, nodes):
        desc = node.descriptor
        for body_name, joint in desc.body_order():
            if joint is not None:
                parent, frame = index[(node.id, joint.parent)], frame_of(joint.pose)
            elif connection is not None:
                parent_desc = nodes[connection[0]].descriptor
                port_body = next(p.body for p in parent_desc.ports if p.name == connection[1])
                parent, frame = index[(connection[0], port_body)], mount_frame(parent_desc, connection[1], desc)
            else:
                parent, frame = -1, IDENTITY
            index[(node.id, body_name)] = len(specs)
            specs.append(LinkSpec(node.id, desc.body(body_name), parent, joint, frame))
    return specs
