"""The robot in the world, built straight from its parts' descriptors and port tables (not from a URDF file):
the same data the host reads over the bus, so the simulated robot is the robot the host believes it has.

One pybullet multibody: every body of every part is a link (the root part's base body is the multibody's base),
parts are joined by fixed joints at the mount transforms (runtime.model's rule: the child's parent connector
coincides with the parent's port), part joints become revolute (with limits), continuous (revolute without
limits), prismatic (with limits) or fixed joints.

What pybullet needs beyond createMultiBody's arguments, and what this module does about it:
- Inertia. createMultiBody takes masses and inertial frames but computes the inertia from the collision shapes;
  each link's tensor is diagonalised (frames.principal_axes), the principal axes go into the inertial frame
  orientation and the principal moments are set with changeDynamics(localInertiaDiagonal).
- Frames. In pybullet 3.2.7, createMultiBody takes linkPositions/Orientations in the parent's *link* frame, as
  URDF does (checked against loadURDF of the same robot with offset, rotated inertial frames: identical joint
  frames and link poses; tests/test_world.py keeps checking it). getBasePositionAndOrientation and getLinkState's
  first pose are the CoM (inertial) frame; link_pose/base_pose convert to the link frame in double precision.
- Limits. createMultiBody takes none: revolute and prismatic limits are set with changeDynamics(jointLowerLimit,
  jointUpperLimit), which pybullet enforces (getJointInfo keeps reporting none); effort and velocity limits
  stay in RobotJoint for the firmware to apply to its motor commands. pybullet's own joint velocity clamp
  (100 rad/s) is left alone: a velocity limit is the motor's, not the joint's.
- Damping: changeDynamics(jointDamping) from the descriptor (a torque -damping * velocity every step). pybullet
  also damps every multibody link's own velocity by default (linear and angular damping 0.04, each applied as
  v * (0.04 + 0.04 |v|): a drag no part has, which took a third off a flywheel's speed in a second in the
  tests); it is set to zero, so the descriptors' damping and friction are the only losses in the joints.
- Motors and friction. pybullet gives every joint a default velocity motor holding it still. It is switched
  off: every moving joint is *released* -- a velocity motor with zero target and a maximum force equal to the
  descriptor's friction (pybullet's idiom for joint friction; zero friction leaves the joint free). Passive
  joints stay released for good. Actuated joints (those whose descriptor names registers, i.e. a servo or wheel
  drives them) are the firmware's: it commands them with setJointMotorControl2 (POSITION/VELOCITY_CONTROL
  replace the friction motor) and calls ``release`` again when its torque goes off. TORQUE_CONTROL adds to
  whatever motor is set, so a firmware in current mode releases first and friction keeps acting.
- Contact friction is pybullet's default per link (lateral 0.5) unless ``link_friction`` says otherwise: the
  descriptors carry no contact materials. The commbot's ball caster is a sphere of the chassis, so it slides
  with that friction instead of rolling; the 10 N m wheel motors still drive the held robot at the wheels'
  speed (0.60 m/s at 6 rad/s, measured), but a caller that wants a free-rolling caster gives the chassis a low
  friction, ``link_friction={(carriage_id, "chassis"): 0.0}``.
- Placement: the robot is put on the floor, with its lowest collision point at z = 0 (computed exactly from the
  shapes at q = 0), at ``base_xy_yaw``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pybullet as p

from devices.descriptor import JointLimits, PartDescriptor

from .frames import IDENTITY, Frame, compose, inverse, principal_axes
from .shapes import collision_shape, lowest_z, visual_shape
from .tree import LinkSpec, PartLike, RobotBuildError, link_specs, part_nodes
from .world import World

JOINT_TYPES = {"revolute": p.JOINT_REVOLUTE, "continuous": p.JOINT_REVOLUTE, "prismatic": p.JOINT_PRISMATIC,
               "fixed": p.JOINT_FIXED}
LIMITED = ("revolute", "prismatic")


@dataclass(frozen=True)
class RobotLink:
    """One body of one part as a pybullet link (``index`` -1 for the base, ``parent`` the index of the link it
    hangs from, None for the base); ``inertial`` is its CoM frame (principal axes) in the link frame."""

    index: int
    part_id: int
    body: str
    parent: int | None
    mass: float
    inertial: Frame


@dataclass(frozen=True)
class RobotJoint:
    """A moving joint: pybullet ``index`` (== the index of the link it carries), the part and the descriptor's
    joint name, its limits, damping and friction, and whether a part's firmware drives it."""

    index: int
    part_id: int
    name: str
    type: str
    limits: JointLimits
    damping: float
    friction: float
    actuated: bool


class RobotBody:
    """The robot's multibody in a world, with its links and moving joints named as the parts name them."""

    def __init__(self, world: World, body_id: int, root_id: int, parts: dict[int, PartDescriptor],
                 links: tuple[RobotLink, ...], joints: tuple[RobotJoint, ...]):
        self.world, self.client, self.body_id, self.root_id = world, world.client, body_id, root_id
        self.parts = parts
        self.links = links
        self.moving_joints = joints
        self._links = {(link.part_id, link.body): link for link in links}
        self._joints = {(j.part_id, j.name): j for j in joints}
        self._by_index = {j.index: j for j in joints}
        self.stand_height = 0.0  # base frame height that puts the lowest collision point on the floor at q = 0
        self._contacts_at = -1  # world step of the cached contact points
        self._contacts: tuple = ()
        self.mirrors: list[RobotBody] = []  # parts of other buses given bodies here (world/mirror.py), mount order

    # --- names -> indices ------------------------------------------------------------------------------------
    def link(self, part_id: int, body: str) -> RobotLink:
        try:
            return self._links[(part_id, body)]
        except KeyError:
            raise KeyError(f"no link for body {body!r} of part {part_id}") from None

    def link_index(self, part_id: int, body: str) -> int:
        """pybullet link index of a part's body (-1 for the base)."""
        return self.link(part_id, body).index

    def joint(self, part_id: int, name: str) -> RobotJoint:
        try:
            return self._joints[(part_id, name)]
        except KeyError:
            raise KeyError(f"part {part_id} has no moving joint {name!r}") from None

    def joint_index(self, part_id: int, name: str) -> int:
        return self.joint(part_id, name).index

    # --- contacts ----------------------------------------------------------------------------------------------
    def contact_points(self) -> tuple:
        """pybullet's contact points of the whole robot (bodyA = the robot) after the current step, read once per
        step however many sensors ask (four contact sensors and the pedestrian check did one query each)."""
        if self._contacts_at != self.world.steps:
            self._contacts = p.getContactPoints(bodyA=self.body_id, physicsClientId=self.client)
            self._contacts_at = self.world.steps
        return self._contacts

    def all_contact_points(self) -> tuple:
        """The contact points of the robot and of its mirrored parts (bodyA = the robot or a mirror): who touches
        the robot anywhere, for checks that look at bodyB only (the pedestrians')."""
        return sum((m.contact_points() for m in self.mirrors), self.contact_points())

    def touching_links(self) -> set[int]:
        """Link indices of the robot's links that touch something now."""
        return {c[3] for c in self.contact_points()}

    # --- poses -------------------------------------------------------------------------------------------------
    def base_pose(self) -> Frame:
        """The base body's frame in the world (pybullet reports the base's CoM frame; this is the link frame)."""
        com = p.getBasePositionAndOrientation(self.body_id, physicsClientId=self.client)
        return compose(com, inverse(self.links[0].inertial))

    def link_pose(self, part_id: int, body: str) -> Frame:
        """A body's frame (as its descriptor defines it, not its CoM frame) in the world, computed in double
        precision from pybullet's CoM frame (getLinkState's own link frame goes through single precision)."""
        link = self.link(part_id, body)
        if link.index == -1:
            return self.base_pose()
        state = p.getLinkState(self.body_id, link.index, computeForwardKinematics=True, physicsClientId=self.client)
        return compose((state[0], state[1]), inverse(link.inertial))

    def total_mass(self) -> float:
        """The multibody's mass as pybullet has it (sum over the base and every link), plus its mirrors'."""
        own = sum(p.getDynamicsInfo(self.body_id, link.index, physicsClientId=self.client)[0] for link in self.links)
        return own + sum(m.total_mass() for m in self.mirrors)

    # --- placement and joints ------------------------------------------------------------------------------------
    def place(self, x: float, y: float, yaw: float, z: float | None = None) -> None:
        """Put the base body frame at (x, y, z) with heading ``yaw``, zero roll and pitch, at rest; ``z`` None
        stands it on the floor (:attr:`stand_height`). Joint positions are left as they are."""
        z = self.stand_height if z is None else z
        frame = ((float(x), float(y), float(z)), tuple(p.getQuaternionFromEuler((0.0, 0.0, yaw))))
        com = compose(frame, self.links[0].inertial)
        p.resetBasePositionAndOrientation(self.body_id, com[0], com[1], physicsClientId=self.client)
        p.resetBaseVelocity(self.body_id, (0, 0, 0), (0, 0, 0), physicsClientId=self.client)
        for mirror in self.mirrors:  # in mount order: a mirror's carrier is back in place before it
            mirror.replace()

    def release(self, joint: RobotJoint | int) -> None:
        """Let a joint move under its own friction only (velocity motor, zero target, force = friction)."""
        info = joint if isinstance(joint, RobotJoint) else self._by_index.get(joint)
        if info is None:
            raise KeyError(f"pybullet joint {joint} is not a moving joint of this robot")
        p.setJointMotorControl2(self.body_id, info.index, p.VELOCITY_CONTROL, targetVelocity=0.0, force=info.friction,
                                physicsClientId=self.client)

    def joint_positions(self) -> dict[tuple[int, str], float]:
        """(part ID, joint name) -> position (rad or m) of every moving joint."""
        states = p.getJointStates(self.body_id, [j.index for j in self.moving_joints], physicsClientId=self.client)
        return {(j.part_id, j.name): s[0] for j, s in zip(self.moving_joints, states)}


def build_robot(world: World, parts: Iterable[PartLike], base_xy_yaw: tuple[float, float, float] = (0.0, 0.0, 0.0),
                link_friction: Mapping[tuple[int, str], float] | None = None) -> RobotBody:
    """Build the robot of ``parts`` (part firmware: descriptors + port tables) in ``world`` and stand it on the
    floor at ``base_xy_yaw`` (x, y in m, yaw in rad). ``link_friction`` maps (part ID, body) to a lateral
    contact friction coefficient (pybullet's default 0.5 elsewhere). Raises RobotBuildError when the parts do not
    form one tree."""
    root, nodes = part_nodes(parts)
    specs = link_specs(root, nodes)
    body_id, links = _create(world, specs)
    joints = _moving_joints(specs)
    robot = RobotBody(world, body_id, root, {i: n.descriptor for i, n in nodes.items()}, links, joints)
    _set_dynamics(robot, links, joints, specs, link_friction or {})
    robot.stand_height = -_lowest_point(robot, specs)
    robot.place(*base_xy_yaw)
    return robot


def _inertial(spec: LinkSpec) -> tuple[Frame, tuple[float, float, float]]:
    moments, orientation = principal_axes(spec.body.inertial.inertia)
    return (tuple(float(v) for v in spec.body.inertial.com), orientation), moments


MAX_LINKS = 127  # pybullet's createMultiBody keeps at most this many links besides the base (silently drops the rest)


def _create(world: World, specs: list[LinkSpec]) -> tuple[int, tuple[RobotLink, ...]]:
    if len(specs) - 1 > MAX_LINKS:
        parts = len({s.part_id for s in specs})
        raise RobotBuildError(f"a robot of {parts} parts has {len(specs)} bodies; pybullet builds one multibody of "
                              f"at most {MAX_LINKS + 1} bodies (MAX_LINKS), so this robot cannot be embodied in a "
                              f"world: serve it without one (hil sim --no-world, sim://...?world=0)")
    c, meshes = world.client, world.meshes
    inertial = [_inertial(s)[0] for s in specs]
    collisions = [collision_shape(c, s.body.collisions, meshes) for s in specs]
    visuals = [visual_shape(c, s.body.visuals, meshes) for s in specs]
    rest = specs[1:]
    body_id = p.createMultiBody(
        baseMass=specs[0].body.inertial.mass, baseCollisionShapeIndex=collisions[0], baseVisualShapeIndex=visuals[0],
        basePosition=IDENTITY[0], baseOrientation=IDENTITY[1],
        baseInertialFramePosition=inertial[0][0], baseInertialFrameOrientation=inertial[0][1],
        linkMasses=[s.body.inertial.mass for s in rest], linkCollisionShapeIndices=collisions[1:],
        linkVisualShapeIndices=visuals[1:], linkPositions=[s.joint_frame[0] for s in rest],
        linkOrientations=[s.joint_frame[1] for s in rest], linkInertialFramePositions=[f[0] for f in inertial[1:]],
        linkInertialFrameOrientations=[f[1] for f in inertial[1:]],
        linkParentIndices=[s.parent for s in rest],  # spec k is link k-1, and createMultiBody counts the base as 0
        linkJointTypes=[JOINT_TYPES[s.joint.type] if s.joint else p.JOINT_FIXED for s in rest],
        linkJointAxis=[s.joint.axis if s.joint else (0.0, 0.0, 1.0) for s in rest], physicsClientId=c)
    if body_id < 0:
        raise RobotBuildError(f"pybullet refused the multibody of {len(specs)} links")
    _check_numbering(c, body_id, specs)
    links = tuple(RobotLink(k - 1, s.part_id, s.body.name, s.parent - 1 if k else None, s.body.inertial.mass,
                            inertial[k])
                  for k, s in enumerate(specs))
    return body_id, links


def _check_numbering(client: int, body_id: int, specs: list[LinkSpec]) -> None:
    """pybullet numbers links its own way (tree.depth_first); make sure it agreed with ours, link by link."""
    for k, spec in enumerate(specs[1:], start=1):
        info = p.getJointInfo(body_id, k - 1, physicsClientId=client)
        mass = p.getDynamicsInfo(body_id, k - 1, physicsClientId=client)[0]
        if info[16] != spec.parent - 1 or mass != spec.body.inertial.mass:
            raise RobotBuildError(f"pybullet numbered the links differently from the builder at link {k - 1} "
                                  f"(part {spec.part_id} body {spec.body.name!r})")


def _moving_joints(specs: list[LinkSpec]) -> tuple[RobotJoint, ...]:
    return tuple(RobotJoint(k - 1, s.part_id, s.joint.name, s.joint.type, s.joint.limits, s.joint.damping,
                            s.joint.friction, bool(s.joint.registers))
                 for k, s in enumerate(specs) if s.joint is not None and s.joint.type != "fixed")


def _set_dynamics(robot: RobotBody, links: tuple[RobotLink, ...], joints: tuple[RobotJoint, ...],
                  specs: list[LinkSpec], friction: Mapping[tuple[int, str], float]) -> None:
    c, body = robot.client, robot.body_id
    unknown = set(friction) - {(link.part_id, link.body) for link in links}
    if unknown:
        raise RobotBuildError(f"link_friction names bodies the robot does not have: {sorted(unknown)}")
    p.changeDynamics(body, -1, linearDamping=0.0, angularDamping=0.0, physicsClientId=c)  # whole multibody
    for link, spec in zip(links, specs):
        p.changeDynamics(body, link.index, localInertiaDiagonal=_inertial(spec)[1], physicsClientId=c)
        if (link.part_id, link.body) in friction:
            p.changeDynamics(body, link.index, lateralFriction=float(friction[(link.part_id, link.body)]),
                             physicsClientId=c)
    for joint in joints:
        if joint.type in LIMITED:
            p.changeDynamics(body, joint.index, jointLowerLimit=joint.limits.lower, jointUpperLimit=joint.limits.upper,
                             physicsClientId=c)
        p.changeDynamics(body, joint.index, jointDamping=joint.damping, physicsClientId=c)
        robot.release(joint)


def _lowest_point(robot: RobotBody, specs: list[LinkSpec]) -> float:
    """The lowest z of any collision shape at the robot's current pose (0 when it has none)."""
    lows = [lowest_z(shape, robot.link_pose(s.part_id, s.body.name)) for s in specs for shape in s.body.collisions]
    return min(lows, default=0.0) - robot.base_pose()[0][2]
