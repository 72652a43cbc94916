"""Mirrored parts: parts that live on another bus (a real arm on a serial port, say) given bodies in this world, so
that its geometry, mass and contacts are where the real parts are (several buses in one robot).

A mirror is a second multibody built by the builder from the parts' descriptors and port tables -- the same data
the host read from the real parts -- with its root body fixed to the carrier link (the body of the part whose port
the mounted bus hangs from) by a pybullet JOINT_FIXED constraint at the mount transform (runtime.model's rule: the
root's parent connector coincides with the port). The alternative, rebuilding the robot's one multibody with the
extra links, would renumber the links of every part that comes after the mount (pybullet numbers depth-first) under
firmware that holds joint indices, and would drop the motor commands in force; a constraint adds bodies without
touching the robot.

- Frames. createConstraint takes the joint frame in each side's *centre of mass* frame (getConstraintInfo's
  ``jointPivotInParent``/``InChild``), so the mount transform is expressed from the carrier link's inertial frame
  to the mirror base's inertial frame. The mirror is placed at its mount before the constraint exists, so the
  constraint starts satisfied; :meth:`MirrorBody.replace` puts it back there after the robot is moved.
- Collisions. A multibody does not collide with itself (the builder does not ask for self-collision); the mirror
  is part of the robot, so it collides with neither the robot's links nor other mirrors' (a mirrored shoulder
  pressing on the torso would otherwise read as a touch on the body's contact sensors). It does collide with
  everything else: the floor, the walls, the pedestrians, and the ring's rays hit it.
- Joints. No firmware drives a mirrored joint: :meth:`MirrorBody.set_positions` resets each joint to the value
  read from the real part (resetJointState) and holds it there with a position motor limited to the joint's effort
  limit until the next reading, so the mirror follows the real joints at the host's bus rate and gravity does not
  swing it in between. Velocities are reset to 0: the reading is a pose, the world does not extrapolate it.
"""
from __future__ import annotations

from collections.abc import Mapping

import pybullet as p

from hil.devices.descriptor import PartDescriptor

from .builder import RobotBody, _create, _moving_joints, _set_dynamics
from .frames import Frame, compose, inverse
from .merge import group_links
from .tree import PartNode, RobotBuildError, link_specs, mount_frame, walk

HOLD_FORCE_FLOOR_NM = 1.0  # position motor force for a mirrored joint whose descriptor gives no effort limit
CONSTRAINT_MAX_FORCE_N = 1e5  # the mount is rigid: far above any load a robot's arm puts on it


class MirrorBody(RobotBody):
    """The multibody of one bus's mirrored parts, fixed to a link of the robot (or of another mirror).

    Parts are keyed by the IDs the caller gives them (the host's robot-wide IDs, so they never collide with the
    robot's own bus IDs); ``carrier`` is the body whose link carries it, ``mount`` = (part ID, port name) there."""

    def __init__(self, *args, carrier: RobotBody, mount: tuple[int, str], mount_body: str, constraint: int,
                 name: str, mount_frame: Frame, **kwargs):
        super().__init__(*args, **kwargs)
        self.carrier, self.mount, self.mount_body = carrier, mount, mount_body
        self.constraint = constraint
        self.name = name
        self.mount_frame = mount_frame  # the mirror's base frame in the carrier's port body frame

    def mount_pose(self) -> Frame:
        """Where the mirror's base body frame belongs in the world: the carrier's port body frame, then the mount."""
        return compose(self.carrier.link_pose(self.mount[0], self.mount_body), self.mount_frame)

    def replace(self) -> None:
        """Put the mirror back at its mount, at rest (after the robot was placed elsewhere)."""
        frame = self.mount_pose()
        com = compose(frame, self.links[0].inertial)
        p.resetBasePositionAndOrientation(self.body_id, com[0], com[1], physicsClientId=self.client)
        p.resetBaseVelocity(self.body_id, (0, 0, 0), (0, 0, 0), physicsClientId=self.client)

    def set_positions(self, positions: Mapping[tuple[int, str], float]) -> None:
        """Reset the named joints ((part ID, joint name) -> rad or m) to the given positions and hold them there.
        Every key must name a moving joint of this mirror (KeyError otherwise, before anything is applied)."""
        joints = [(self.joint(*key), float(q)) for key, q in positions.items()]
        for joint, q in joints:
            p.resetJointState(self.body_id, joint.index, q, 0.0, physicsClientId=self.client)
            force = joint.limits.effort if joint.limits.effort > 0 else HOLD_FORCE_FLOOR_NM
            p.setJointMotorControl2(self.body_id, joint.index, p.POSITION_CONTROL, targetPosition=q, force=force,
                                    physicsClientId=self.client)


def build_mirror(carrier: RobotBody, parts: Mapping[int, PartDescriptor], children: Mapping[int, Mapping[str, int]],
                 root: int, mount: tuple[int, str], *, name: str = "", others: tuple[RobotBody, ...] = (),
                 merge_fixed: bool = True) -> MirrorBody:
    """The mirror of ``parts`` (ID -> descriptor; ``children``: ID -> {own port name: child ID}, only among
    ``parts``; ``root`` hangs from port ``mount[1]`` of part ``mount[0]`` of ``carrier``) in the carrier's world.
    ``others``: the robot's other bodies (the robot, earlier mirrors), which the mirror must not collide with.
    Raises RobotBuildError for a tree that does not hold together or a mount the carrier does not have."""
    where = f"mirror {name!r}: " if name else "mirror: "
    mount_id, port = mount
    if mount_id not in carrier.parts:
        raise RobotBuildError(f"{where}the mount part {mount_id} is not a part of the world's robot")
    carrier_desc = carrier.parts[mount_id]
    port_spec = next((q for q in carrier_desc.ports if q.name == port), None)
    if port_spec is None or port_spec.parent:
        what = "is its parent connector" if port_spec is not None else "does not exist"
        raise RobotBuildError(f"{where}port {port!r} of part {mount_id} ({carrier_desc.name}) {what}")
    nodes = _nodes(parts, children, root, where)
    specs = link_specs(root, nodes)
    groups = group_links(specs, merge_fixed)
    world = carrier.world
    body_id, links = _create(world, specs, groups)
    try:
        joints = _moving_joints(specs, groups)
        mirror = MirrorBody(world, body_id, root, dict(parts), links, joints, carrier=carrier, mount=mount,
                            mount_body=port_spec.body, constraint=-1, name=name,
                            mount_frame=mount_frame(carrier_desc, port, parts[root]))
        _set_dynamics(mirror, specs, groups, joints, {})
        mirror.replace()
        mirror.constraint = _fix(carrier, mirror)
        _no_collisions(mirror, (carrier, *others))
    except BaseException:
        p.removeBody(body_id, physicsClientId=world.client)
        world.forget_body(body_id)
        raise
    return mirror


def _nodes(parts: Mapping[int, PartDescriptor], children: Mapping[int, Mapping[str, int]], root: int,
           where: str) -> dict[int, PartNode]:
    if root not in parts:
        raise RobotBuildError(f"{where}the root part {root} is not among the parts")
    nodes = {}
    for pid, desc in parts.items():
        kids = dict(children.get(pid, {}))
        ports = {q.name: q for q in desc.ports}
        for port, child in kids.items():
            if port not in ports or ports[port].parent:
                raise RobotBuildError(f"{where}part {pid} ({desc.name}) has no child port {port!r}")
            if child not in parts:
                raise RobotBuildError(f"{where}part {pid} port {port!r} holds part {child}, which is not among "
                                      "the parts")
        order = [q.name for q in desc.ports]
        nodes[pid] = PartNode(pid, desc, dict(sorted(kids.items(), key=lambda kv: order.index(kv[0]))))
    reached = {node.id for node, _ in walk(root, nodes)}
    if reached != set(parts):
        raise RobotBuildError(f"{where}parts {', '.join(map(str, sorted(set(parts) - reached)))} do not hang from "
                              f"the root {root}")
    return nodes


def _fix(carrier: RobotBody, mirror: MirrorBody) -> int:
    """A JOINT_FIXED constraint from the carrier link's inertial frame to the mirror base's inertial frame."""
    link = carrier.link(mirror.mount[0], mirror.mount_body)
    mount = compose(link.offset, mirror.mount_frame)  # mirror base frame in the carrier's pybullet link frame
    in_parent = compose(inverse(link.inertial), mount)  # ... and in that link's CoM frame
    in_child = inverse(mirror.links[0].inertial)  # mirror base frame in its own CoM frame
    cid = p.createConstraint(carrier.body_id, link.index, mirror.body_id, -1, p.JOINT_FIXED, (0.0, 0.0, 0.0),
                             parentFramePosition=in_parent[0], childFramePosition=in_child[0],
                             parentFrameOrientation=in_parent[1], childFrameOrientation=in_child[1],
                             physicsClientId=carrier.client)
    if cid < 0:
        raise RobotBuildError(f"pybullet refused the constraint fixing mirror {mirror.name!r} to its mount")
    p.changeConstraint(cid, maxForce=CONSTRAINT_MAX_FORCE_N, physicsClientId=carrier.client)
    return cid


def _no_collisions(mirror: MirrorBody, others: tuple[RobotBody, ...]) -> None:
    c = mirror.client
    for other in others:  # per pybullet link (merged bodies share one), so each pair once
        for a in sorted({link.index for link in mirror.links}):
            for b in sorted({link.index for link in other.links}):
                p.setCollisionFilterPair(mirror.body_id, other.body_id, a, b, 0, physicsClientId=c)
