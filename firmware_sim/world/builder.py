"""The robot in the world, built straight from its parts' descriptors and port tables (not from a URDF file):
the same data the host reads over the bus, so the simulated robot is the robot the host believes it has.

One pybullet multibody: every body of every part (the root part's base body is the multibody's base), parts
joined by fixed joints at the mount transforms (runtime.model's rule: the child's parent connector coincides
with the parent's port), part joints revolute (with limits), continuous (revolute without limits), prismatic
(with limits) or fixed. Bodies joined by fixed joints are merged into one pybullet link (merge.py; the
``merge_fixed=False`` world keeps one link per body); every query above speaks of part bodies: ``link_pose``
applies a body's offset in its link, ``bodies_at``/``body_hit``/``touched`` attribute a link's contacts, ray
hits and pixels to the body touched, nearest its collision shapes.

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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pybullet as p

from hil.devices.descriptor import JointLimits, PartDescriptor
from hil.devices.surfaces import load_surfaces

from ..sensors.geometry import signed_distance
from .frames import IDENTITY, Frame, compose, frame_of, inverse, principal_axes, rotation_matrix
from .merge import LinkGroup, group_links
from .shapes import collision_shape, lowest_z, visual_shape
from .tree import LinkSpec, PartLike, RobotBuildError, link_specs, part_nodes
from .world import World

JOINT_TYPES = {"revolute": p.JOINT_REVOLUTE, "continuous": p.JOINT_REVOLUTE, "prismatic": p.JOINT_PRISMATIC,
               "fixed": p.JOINT_FIXED}
LIMITED = ("revolute", "prismatic")


@dataclass(frozen=True)
class RobotLink:
    """One body of one part and the pybullet link that carries it: ``index`` (-1 for the base; bodies merged into
    one link share it, see merge.py), ``parent`` the index of the link that link hangs from (None for the base's
    bodies), ``mass`` the body's own, ``inertial`` the carrying link's CoM frame (principal axes) in that link's
    frame, ``offset`` the body's frame in that link's frame (IDENTITY for the body the link is built on)."""

    index: int
    part_id: int
    body: str
    parent: int | None
    mass: float
    inertial: Frame
    offset: Frame = IDENTITY


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
        self.parts = parts  # the descriptors whose bodies the links carry: the shapes (a swap keeps the old ones)
        self.links = links
        self.moving_joints = joints
        self._links: dict[tuple[int, str], RobotLink] = {}
        self._bodies_at: dict[int, tuple[RobotLink, ...]] = {}
        self.relink(links)
        self._joints = {(j.part_id, j.name): j for j in joints}
        self._by_index = {j.index: j for j in joints}
        self.stand_height = 0.0  # base frame height that puts the lowest collision point on the floor at q = 0
        self._contacts_at = -1  # world step of the cached contact points
        self._contacts: tuple = ()
        self._by_body: dict[tuple[int, str], list] = {}  # this step's contact points per body (body_contacts)
        self._attributed = False
        self._touched_links: frozenset[int] | None = None  # this step's link indices with contacts (touched_links)
        self.mirrors: list[RobotBody] = []  # parts of other buses given bodies here (world/mirror.py), mount order
        self._hit_shapes = {index: _hit_shapes(bodies, parts) for index, bodies in self._bodies_at.items()
                            if len(bodies) > 1}
        self._in_com: np.ndarray | None = None  # per body of links: its frame in its link's CoM frame (4x4)

    def relink(self, links: tuple[RobotLink, ...]) -> None:
        """The links (and the lookups made from them) replaced by ``links`` of the same bodies at the same indices:
        a part whose mass changed (embodied/reembody.py) carries new numbers, not new shapes."""
        self.links = links
        self._links = {(link.part_id, link.body): link for link in links}
        carried: dict[int, list[RobotLink]] = {}
        for link in links:
            carried.setdefault(link.index, []).append(link)
        self._bodies_at = {index: tuple(bodies) for index, bodies in carried.items()}

    def replace_joint(self, old: RobotJoint, new: RobotJoint) -> None:
        """``old`` (a moving joint) is now ``new``: the same pybullet joint under a swapped part's name and numbers
        (embodied/reembody.py)."""
        self.moving_joints = tuple(new if j.index == old.index else j for j in self.moving_joints)
        self._joints.pop((old.part_id, old.name), None)
        self._joints[(new.part_id, new.name)] = new
        self._by_index[new.index] = new

    def forget_contacts(self) -> None:
        """Drop the contact points cached for the current step: the world's steps were set back (a rewind), so a
        step number no longer names the same step."""
        self._contacts_at = -1

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

    def bodies_at(self, index: int) -> tuple[RobotLink, ...]:
        """The part bodies pybullet link ``index`` carries (one unless fixed bodies were merged into it)."""
        try:
            return self._bodies_at[index]
        except KeyError:
            raise KeyError(f"the robot has no pybullet link {index}") from None

    def body_hit(self, index: int, point_world) -> RobotLink:
        """The body of pybullet link ``index`` whose collision shapes lie nearest ``point_world`` (a contact point,
        a ray hit, a pixel's surface point): the part that was touched, on a link that carries several. Smallest
        signed distance over each body's shapes (sensors.geometry, as the contact sensors classify their zones);
        ties go to the body built first; bodies without collision shapes are chosen only if no body has any."""
        bodies = self.bodies_at(index)
        if len(bodies) == 1:
            return bodies[0]
        return bodies[self._nearest(index, inverse(self._frame_of(index)), point_world)]

    def _nearest(self, index: int, to_link: Frame, point_world) -> int:
        local = compose(to_link, (tuple(point_world), IDENTITY[1]))[0]
        best, best_d = 0, math.inf
        for k, (rot_t, origin, shapes) in enumerate(self._hit_shapes[index]):
            if not shapes:
                continue
            in_body = rot_t @ (np.asarray(local) - origin)
            d = min(signed_distance(shape, in_body) for shape in shapes)
            if d < best_d:
                best, best_d = k, d
        return best

    # --- contacts ----------------------------------------------------------------------------------------------
    def contact_points(self) -> tuple:
        """pybullet's contact points of the whole robot (bodyA = the robot) after the current step, read once per
        step however many sensors ask (four contact sensors and the pedestrian check did one query each)."""
        if self._contacts_at != self.world.steps:
            self._contacts = p.getContactPoints(bodyA=self.body_id, physicsClientId=self.client)
            self._contacts_at = self.world.steps
            self._by_body = {}
            self._attributed = False
            self._touched_links = None
        return self._contacts

    def touched_links(self) -> frozenset[int]:
        """The pybullet link indices something touches after the current step (from the step's one contact query):
        a body whose link is not among them is touched by nothing, which a sensor can tell without the attribution
        of :meth:`touched` (the wheels meet the floor every step; a bumper rarely meets anything)."""
        contacts = self.contact_points()
        if self._touched_links is None:
            self._touched_links = frozenset([c[3] for c in contacts])
        return self._touched_links

    def body_contacts(self, part_id: int, body: str) -> list:
        """This step's contact points on one part body (pybullet's tuples, from the one query of
        :meth:`contact_points`), each attributed to the body it touched (:meth:`body_hit`) once per step."""
        touched = self.touched()
        if (part_id, body) not in touched:
            self.link(part_id, body)  # KeyError for a body the robot does not have
            return []
        return touched[(part_id, body)]

    def touched(self) -> dict[tuple[int, str], list]:
        """(part ID, body) -> this step's contact points on that body, for the bodies something touches: one
        contact query and one attribution per step for every sensor, check and log that asks."""
        contacts = self.contact_points()
        if not self._attributed:
            by_body: dict[tuple[int, str], list] = {}
            frames: dict[int, Frame] = {}
            for c in contacts:
                index = c[3]
                bodies = self._bodies_at[index]
                if len(bodies) == 1:
                    hit = bodies[0]
                else:
                    if index not in frames:
                        frames[index] = inverse(self._frame_of(index))
                    hit = bodies[self._nearest(index, frames[index], c[5])]
                by_body.setdefault((hit.part_id, hit.body), []).append(c)
            self._by_body, self._attributed = by_body, True
        return self._by_body

    def all_contact_points(self) -> tuple:
        """The contact points of the robot and of its mirrored parts (bodyA = the robot or a mirror): who touches
        the robot anywhere, for checks that look at bodyB only (the pedestrians')."""
        if not self.mirrors:
            return self.contact_points()
        return sum((m.contact_points() for m in self.mirrors), self.contact_points())

    # --- poses -------------------------------------------------------------------------------------------------
    def base_pose(self) -> Frame:
        """The base body's frame in the world (pybullet reports the base's CoM frame; this is the link frame)."""
        com = p.getBasePositionAndOrientation(self.body_id, physicsClientId=self.client)
        return compose(com, inverse(self.links[0].inertial))

    def _frame_of(self, index: int) -> Frame:
        """The world frame of pybullet link ``index`` (its own frame, not its CoM frame), in double precision from
        pybullet's CoM frame (getLinkState's own link frame goes through single precision)."""
        if index == -1:
            return self.base_pose()
        inertial = self._bodies_at[index][0].inertial
        state = p.getLinkState(self.body_id, index, computeForwardKinematics=True, physicsClientId=self.client)
        return compose((state[0], state[1]), inverse(inertial))

    def link_pose(self, part_id: int, body: str) -> Frame:
        """A body's frame (as its descriptor defines it, not its CoM frame) in the world: its pybullet link's frame
        with the body's offset in it applied (merged bodies share a link)."""
        link = self.link(part_id, body)
        frame = self._frame_of(link.index)
        return frame if link.offset == IDENTITY else compose(frame, link.offset)

    def link_matrices(self) -> np.ndarray:
        """Every body of :attr:`links`, in that order, as its 4x4 world frame (what :meth:`link_pose` gives one by
        one), from one getLinkStates call and one batched product: a camera frame needs all ~60 of them, and
        per body that was ~0.1 ms of Python each. Not cached: bodies move without a step too (place, a restore)."""
        if self._in_com is None:
            self._carriers = sorted(i for i in self._bodies_at if i >= 0)
            slot = {-1: 0, **{index: k + 1 for k, index in enumerate(self._carriers)}}
            self._slot = np.array([slot[link.index] for link in self.links])
            self._in_com = np.stack([_matrix4(compose(inverse(self._bodies_at[link.index][0].inertial
                                                              if link.index >= 0 else self.links[0].inertial),
                                                      link.offset)) for link in self.links])
        base = p.getBasePositionAndOrientation(self.body_id, physicsClientId=self.client)
        states = p.getLinkStates(self.body_id, self._carriers, computeForwardKinematics=True,
                                 physicsClientId=self.client) if self._carriers else ()
        positions = np.array([base[0], *(s[0] for s in states)], float)
        quats = np.array([base[1], *(s[1] for s in states)], float)
        com = np.zeros((len(positions), 4, 4))
        com[:, :3, :3] = _rotations(quats)
        com[:, :3, 3] = positions
        com[:, 3, 3] = 1.0
        return com[self._slot] @ self._in_com

    def total_mass(self) -> float:
        """The multibody's mass as pybullet has it (sum over the base and every link), plus its mirrors'."""
        own = sum(p.getDynamicsInfo(self.body_id, index, physicsClientId=self.client)[0] for index in self._bodies_at)
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
                link_friction: Mapping[tuple[int, str], float] | None = None, merge_fixed: bool = True) -> RobotBody:
    """Build the robot of ``parts`` (part firmware: descriptors + port tables) in ``world`` and stand it on the
    floor at ``base_xy_yaw`` (x, y in m, yaw in rad). ``link_friction`` maps (part ID, body) to a lateral
    contact friction coefficient (pybullet's default 0.5 elsewhere). ``merge_fixed``: each chain of bodies joined
    by fixed joints is one pybullet link (merge.py; False: one link per body). Raises RobotBuildError when the
    parts do not form one tree."""
    root, nodes = part_nodes(parts)
    specs = link_specs(root, nodes)
    friction = dict(link_friction or {})
    _check_friction(specs, friction)
    groups = group_links(specs, merge_fixed, friction)
    body_id, links = _create(world, specs, groups)
    joints = _moving_joints(specs, groups)
    robot = RobotBody(world, body_id, root, {i: n.descriptor for i, n in nodes.items()}, links, joints)
    _set_dynamics(robot, specs, groups, joints, friction)
    robot.stand_height = -_lowest_point(robot, specs)
    robot.place(*base_xy_yaw)
    return robot


def _check_surfaces(specs: list[LinkSpec]) -> None:
    """Every body's surface one the surface table knows (read only when some body names one)."""
    named = [s for s in specs if s.body.surface is not None]
    if not named:
        return
    table = load_surfaces()
    for spec in named:
        if spec.body.surface not in table.laws:
            raise RobotBuildError(f"part {spec.part_id} body {spec.body.name!r}: unknown surface "
                                  f"{spec.body.surface!r}; known surfaces: {', '.join(table.names)}")


def _check_friction(specs: list[LinkSpec], friction: Mapping[tuple[int, str], float]) -> None:
    unknown = set(friction) - {(s.part_id, s.body.name) for s in specs}
    if unknown:
        raise RobotBuildError(f"link_friction names bodies the robot does not have: {sorted(unknown)}")


def _hit_shapes(bodies: Iterable[RobotLink], parts: Mapping[int, PartDescriptor]) -> list:
    """Per body of a merged link: (rotation^T, origin) of its offset and its collision shapes, for body_hit."""
    out = []
    for link in bodies:
        origin, quat = link.offset
        out.append((rotation_matrix(quat).T, np.asarray(origin, dtype=float),
                    tuple(parts[link.part_id].body(link.body).collisions)))
    return out


def _inertial(group: LinkGroup) -> tuple[Frame, tuple[float, float, float]]:
    moments, orientation = principal_axes(group.inertia.inertia)
    return (tuple(float(v) for v in group.inertia.com), orientation), moments


MAX_LINKS = 127  # pybullet's createMultiBody keeps at most this many links besides the base (silently drops the rest)


def _shapes(world: World, specs: list[LinkSpec], group: LinkGroup) -> tuple[int, int]:
    """(collision shape, visual shape) of a group: every member's shapes at their poses in the group's frame."""
    cols, col_frames, vis, vis_frames = [], [], [], []
    for k, offset in zip(group.members, group.offsets):
        body = specs[k].body
        for shape in body.collisions:
            cols.append(shape)
            col_frames.append(frame_of(shape.pose) if offset == IDENTITY else compose(offset, frame_of(shape.pose)))
        for shape in body.visuals:
            vis.append(shape)
            vis_frames.append(frame_of(shape.pose) if offset == IDENTITY else compose(offset, frame_of(shape.pose)))
    return (collision_shape(world.client, cols, world.meshes, col_frames),
            visual_shape(world.client, vis, world.meshes, vis_frames))


def _create(world: World, specs: list[LinkSpec], groups: list[LinkGroup]) -> tuple[int, tuple[RobotLink, ...]]:
    if len(groups) - 1 > MAX_LINKS:
        parts = len({s.part_id for s in specs})
        raise RobotBuildError(f"a robot of {parts} parts has {len(groups)} links; pybullet builds one multibody of "
                              f"at most {MAX_LINKS + 1} links (MAX_LINKS), so this robot cannot be embodied in a "
                              f"world: serve it without one (hil sim --no-world, sim://...?world=0)")
    _check_surfaces(specs)
    c = world.client
    inertial = [_inertial(g)[0] for g in groups]
    shapes = [_shapes(world, specs, g) for g in groups]
    rest = groups[1:]
    body_id = p.createMultiBody(
        baseMass=groups[0].inertia.mass, baseCollisionShapeIndex=shapes[0][0], baseVisualShapeIndex=shapes[0][1],
        basePosition=IDENTITY[0], baseOrientation=IDENTITY[1],
        baseInertialFramePosition=inertial[0][0], baseInertialFrameOrientation=inertial[0][1],
        linkMasses=[g.inertia.mass for g in rest], linkCollisionShapeIndices=[s[0] for s in shapes[1:]],
        linkVisualShapeIndices=[s[1] for s in shapes[1:]], linkPositions=[g.joint_frame[0] for g in rest],
        linkOrientations=[g.joint_frame[1] for g in rest], linkInertialFramePositions=[f[0] for f in inertial[1:]],
        linkInertialFrameOrientations=[f[1] for f in inertial[1:]],
        linkParentIndices=[g.parent for g in rest],  # group k is link k-1, and createMultiBody counts the base as 0
        linkJointTypes=[JOINT_TYPES[g.joint.type] if g.joint else p.JOINT_FIXED for g in rest],
        linkJointAxis=[g.joint.axis if g.joint else (0.0, 0.0, 1.0) for g in rest], physicsClientId=c)
    if body_id < 0:
        raise RobotBuildError(f"pybullet refused the multibody of {len(groups)} links")
    _check_numbering(c, body_id, specs, groups)
    for k, group in enumerate(groups):  # a group is one surface (merge.py): the sensors see it per link
        world.set_surface(body_id, k - 1, specs[group.members[0]].body.surface)
    placed: dict[int, RobotLink] = {}
    for k, g in enumerate(groups):
        for member, offset in zip(g.members, g.offsets):
            spec = specs[member]
            placed[member] = RobotLink(k - 1, spec.part_id, spec.body.name, g.parent - 1 if k else None,
                                       spec.body.inertial.mass, inertial[k], offset)
    return body_id, tuple(placed[k] for k in range(len(specs)))


def _check_numbering(client: int, body_id: int, specs: list[LinkSpec], groups: list[LinkGroup]) -> None:
    """pybullet numbers links its own way (tree.depth_first); make sure it agreed with ours, link by link."""
    for k, group in enumerate(groups[1:], start=1):
        info = p.getJointInfo(body_id, k - 1, physicsClientId=client)
        mass = p.getDynamicsInfo(body_id, k - 1, physicsClientId=client)[0]
        if info[16] != group.parent - 1 or mass != group.inertia.mass:
            spec = specs[group.members[0]]
            raise RobotBuildError(f"pybullet numbered the links differently from the builder at link {k - 1} "
                                  f"(part {spec.part_id} body {spec.body.name!r})")


def _moving_joints(specs: list[LinkSpec], groups: list[LinkGroup]) -> tuple[RobotJoint, ...]:
    out = []
    for k, g in enumerate(groups):
        if g.joint is not None and g.joint.type != "fixed":
            j = g.joint
            out.append(RobotJoint(k - 1, specs[g.members[0]].part_id, j.name, j.type, j.limits, j.damping,
                                  j.friction, bool(j.registers)))
    return tuple(out)


def _set_dynamics(robot: RobotBody, specs: list[LinkSpec], groups: list[LinkGroup], joints: tuple[RobotJoint, ...],
                  friction: Mapping[tuple[int, str], float]) -> None:
    """Inertia, friction (a group's members share one: merge.py), limits, damping, released motors."""
    c, body = robot.client, robot.body_id
    p.changeDynamics(body, -1, linearDamping=0.0, angularDamping=0.0, physicsClientId=c)  # whole multibody
    for k, group in enumerate(groups):
        p.changeDynamics(body, k - 1, localInertiaDiagonal=_inertial(group)[1], physicsClientId=c)
        root = specs[group.members[0]]
        if (root.part_id, root.body.name) in friction:
            p.changeDynamics(body, k - 1, lateralFriction=float(friction[(root.part_id, root.body.name)]),
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


def _matrix4(frame: Frame) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = rotation_matrix(frame[1])
    out[:3, 3] = frame[0]
    return out


def _rotations(quats: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotation matrices of (N, 4) xyzw unit quaternions (double precision, as frames.compose does)."""
    x, y, z, w = quats.T
    out = np.empty((len(quats), 3, 3))
    out[:, 0, 0] = 1 - 2 * (y * y + z * z)
    out[:, 0, 1] = 2 * (x * y - z * w)
    out[:, 0, 2] = 2 * (x * z + y * w)
    out[:, 1, 0] = 2 * (x * y + z * w)
    out[:, 1, 1] = 1 - 2 * (x * x + z * z)
    out[:, 1, 2] = 2 * (y * z - x * w)
    out[:, 2, 0] = 2 * (x * z - y * w)
    out[:, 2, 1] = 2 * (y * z + x * w)
    out[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return out
