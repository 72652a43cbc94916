"""The pybullet world (firmware_sim.world): the robot built from its parts' descriptors against the URDF the host
writes from a bus scan, the floor and the map's walls, the step clock, determinism, and map errors.

Two robots: the commbot (config/robots/commbot.yaml, 40 parts, 59 bodies, 19 moving joints) and a test chain
that exercises what the commbot does not have: a bracket with off-diagonal inertia and offset, turned
connectors, a branch, a prismatic, a fixed and a passive continuous joint, mesh and capsule shapes, and a plain
XM430 (catalog descriptor, no port table) as a leaf. The host side of each comparison is the real path:
the parts served by the virtual bus device, scanned by runtime.scan over the in-process transport, modelled by
runtime.model and written by to_urdf, loaded by pybullet in a second DIRECT client.

Tolerances (measured figures in brackets):
- link frames against pybullet's report of the URDF (getLinkState's worldLinkFrame, which pybullet computes in
  single precision): 1e-6 m and 1e-6 in quaternion components [2.4e-7 commbot, 2.0e-7 chain];
- link frames against the host model's own forward kinematics (double precision throughout): 1e-9
  [8.5e-16, 5.0e-16];
- inertia per link: 1e-12 relative to its largest entry [0 commbot, 3e-16 chain]; masses 1e-12 relative;
- standing: base within 2 mm of its start in height and xy, roll and pitch within 0.2 degrees, servo joints
  within 0.01 rad of their hold position after 2 s [settles 1e-5 m into the floor, 4e-8 m drift, 3e-6 degrees,
  2.5e-5 rad];
- joint friction and damping: the flywheel's speed after 1 s within 0.1 % (Coulomb) and 0.2 % (viscous, which
  pybullet integrates explicitly) of the closed form [7e-6, 5.5e-4 relative];
- walls: ray distances 1e-6 m.
"""
from __future__ import annotations

import math

import numpy as np
import pybullet as p
import pytest

from hil.devices.catalog import load_part
from hil.devices.control_table import XM430_W350
from hil.devices.descriptor import (
    descriptor_from_dict,
    descriptor_sha256,
    encode_descriptor,
)
from hil.devices.yaml_source import ConfigError
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.firmware_sim.servo import ServoFirmware
from hil.firmware_sim.world import RobotBuildError, World, build_robot, load_map
from hil.firmware_sim.world.frames import compose, inverse, rotation_matrix
from hil.runtime.bus import BusHost
from hil.runtime.model import SE3, build_model, create_data, forward_kinematics, to_urdf
from hil.runtime.scan import NoCache, scan_bus
from hil.runtime.transports import open_transport
from hil.runtime.transports.sim import SimTransport

from model_helpers import BRACKET, SLIDER, TETRA  # the branched test chain's parts (one definition)

URDF_POSE_ATOL = 1e-6
MODEL_POSE_ATOL = 1e-9
N_CONFIGS = 6

# --- the test chain ------------------------------------------------------------------------------------------------

# (bus ID, descriptor or catalog name, parent ID, parent's port); parents first; "XM430-W350" is a plain servo
CHAIN = [(1, "cpc_servo", None, None), (2, BRACKET, 1, "horn"), (3, "cpc_servo", 2, "out"), (4, SLIDER, 3, "horn"),
         (5, "cpc_servo", 4, "end"), (6, "XM430-W350", 5, "horn"), (7, "cpc_servo", 2, "side"),
         (8, "cpc_servo", 7, "horn")]


def chain_parts() -> list:
    """The chain as virtual-device firmware: compiled descriptors and port tables in CPC blocks."""
    children: dict[int, dict[str, int]] = {}
    for bus_id, _, parent, port in CHAIN:
        if parent is not None:
            children.setdefault(parent, {})[port] = bus_id
    parts = []
    for bus_id, spec, _, _ in CHAIN:
        if spec == "XM430-W350":
            parts.append(ServoFirmware(XM430_W350, bus_id))
            continue
        desc = load_part(spec) if isinstance(spec, str) else spec
        data = encode_descriptor(desc)
        parts.append(build_cpc_part(desc, data, descriptor_sha256(data), bus_id, 1000 + bus_id,
                                    children.get(bus_id, {})))
    return parts


# --- the host's side: scan -> model -> URDF -> pybullet ------------------------------------------------------------

class HostUrdf:
    """The host model of a bus and its URDF loaded (floating base) in its own DIRECT client."""

    def __init__(self, transport, directory):
        with BusHost(transport) as bus:
            robot = scan_bus(bus, NoCache())
        assert not robot.quarantined and not robot.problems
        self.model = build_model(robot)
        path = directory / "robot.urdf"
        path.write_text(to_urdf(self.model, mesh_dir=directory / "meshes"))
        self.client = p.connect(p.DIRECT)
        flags = p.URDF_USE_INERTIA_FROM_FILE | p.URDF_MAINTAIN_LINK_ORDER
        self.body = p.loadURDF(str(path), flags=flags, physicsClientId=self.client)
        infos = [p.getJointInfo(self.body, j, physicsClientId=self.client)
                 for j in range(p.getNumJoints(self.body, physicsClientId=self.client))]
        self.link_index = {info[12].decode(): info[0] for info in infos}
        self.link_index[p.getBodyInfo(self.body, physicsClientId=self.client)[0].decode()] = -1
        self.joint_index = {info[1].decode(): info[0] for info in infos}

    def close(self) -> None:
        p.disconnect(self.client)

    def set_base(self, link_frame) -> None:
        """Put the URDF's base link frame where ``link_frame`` is (pybullet places a base by its CoM frame)."""
        info = p.getDynamicsInfo(self.body, -1, physicsClientId=self.client)
        com = compose(link_frame, (info[3], info[4]))
        p.resetBasePositionAndOrientation(self.body, com[0], com[1], physicsClientId=self.client)

    def link_frame(self, name: str):
        link = self.link_index[name]
        if link == -1:
            com = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
            info = p.getDynamicsInfo(self.body, -1, physicsClientId=self.client)
            return compose(com, inverse((info[3], info[4])))
        state = p.getLinkState(self.body, link, computeForwardKinematics=True, physicsClientId=self.client)
        return state[4], state[5]


@pytest.fixture(scope="module")
def commbot_host(tmp_path_factory):
    host = HostUrdf(open_transport("sim://commbot"), tmp_path_factory.mktemp("commbot"))
    yield host
    host.close()


@pytest.fixture(scope="module")
def chain_host(tmp_path_factory):
    host = HostUrdf(SimTransport("sim://chain", device=VirtualBusDevice(chain_parts())),
                    tmp_path_factory.mktemp("chain"))
    yield host
    host.close()


@pytest.fixture
def world():
    with World() as w:
        yield w


def commbot(world: World, **kwargs):
    return build_robot(world, load_assembly("commbot").parts, **kwargs)


def frame_error(a, b) -> float:
    """Largest difference between two frames: position (m) and quaternion components (sign-aligned)."""
    qa, qb = np.array(a[1]), np.array(b[1])
    if qa @ qb < 0:
        qb = -qb
    return float(max(np.max(np.abs(np.subtract(a[0], b[0]))), np.max(np.abs(qa - qb))))


def se3_frame(m: SE3):
    from hil.firmware_sim.world.frames import quaternion_from_matrix
    return tuple(m.translation), quaternion_from_matrix(m.rotation)


def random_q(robot, rng):
    q = {}
    for j in robot.moving_joints:
        lo, hi = (j.limits.lower, j.limits.upper) if j.type != "continuous" else (-2 * math.pi, 2 * math.pi)
        q[(j.part_id, j.name)] = float(rng.uniform(lo, hi))
    return q


def hold(robot, targets=None) -> None:
    """Servo joints held by POSITION_CONTROL (wheels stay released): what a powered robot does."""
    for j in robot.moving_joints:
        if robot.parts[j.part_id].kind != "wheel":
            target = (targets or {}).get((j.part_id, j.name), 0.0)
            p.setJointMotorControl2(robot.body_id, j.index, p.POSITION_CONTROL, targetPosition=target,
                                    force=j.limits.effort, physicsClientId=robot.client)


# --- structure and inertia ---------------------------------------------------------------------------------------

def test_commbot_is_one_multibody_with_every_body_and_the_descriptors_mass(world):
    """Unmerged (one pybullet link per body); tests/test_world_merged.py checks the merged world against it."""
    parts = load_assembly("commbot").parts
    robot = build_robot(world, parts, merge_fixed=False)
    descriptors = [fw.descriptor for fw in parts]
    assert len(robot.links) == sum(len(d.bodies) for d in descriptors) == 59
    assert p.getNumJoints(robot.body_id, physicsClientId=world.client) == len(robot.links) - 1
    expected = sum(b.inertial.mass for d in descriptors for b in d.bodies)
    assert robot.total_mass() == pytest.approx(expected, rel=1e-12)
    assert len(robot.moving_joints) == 19 and all(j.actuated for j in robot.moving_joints)
    assert robot.link_index(1, "chassis") == -1 and robot.root_id == 1 and robot.links[0].parent is None
    for link in robot.links[1:]:  # the builder's numbering is pybullet's
        assert p.getJointInfo(robot.body_id, link.index, physicsClientId=world.client)[16] == link.parent < link.index
    wheel = robot.joint(2, "wheel")
    assert wheel.type == "continuous" and wheel.index == robot.link_index(2, "wheel") == robot.joint_index(2, "wheel")
    info = p.getJointInfo(robot.body_id, wheel.index, physicsClientId=world.client)
    assert info[2] == p.JOINT_REVOLUTE
    housing = robot.link_index(2, "housing")
    assert p.getJointInfo(robot.body_id, housing, physicsClientId=world.client)[2] == p.JOINT_FIXED
    with pytest.raises(KeyError, match="no moving joint"):
        robot.joint_index(1, "wheel")
    with pytest.raises(KeyError, match="no link"):
        robot.link_index(2, "tyre")


@pytest.mark.parametrize("which", ["commbot", "chain"])
def test_every_link_has_the_descriptors_mass_com_and_full_inertia(world, which):
    parts = load_assembly("commbot").parts if which == "commbot" else chain_parts()
    robot = build_robot(world, parts, merge_fixed=False)  # per body; the composites: tests/test_world_merged.py
    for link in robot.links:
        body = robot.parts[link.part_id].body(link.body)
        mass, _, diagonal, com, orientation = p.getDynamicsInfo(robot.body_id, link.index,
                                                                physicsClientId=world.client)[:5]
        rot = rotation_matrix(orientation)
        tensor = rot @ np.diag(diagonal) @ rot.T
        expected = np.array(body.inertial.inertia)
        assert mass == pytest.approx(body.inertial.mass, rel=1e-12)
        np.testing.assert_allclose(com, body.inertial.com, atol=1e-15)
        np.testing.assert_allclose(tensor, expected, rtol=0, atol=1e-12 * np.max(np.abs(expected)))


# --- kinematics against the host's URDF ------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["commbot", "chain"])
def test_link_frames_match_the_host_urdf_and_model_at_random_configurations(world, which, request):
    host = request.getfixturevalue(f"{which}_host")
    robot = build_robot(world, load_assembly("commbot").parts if which == "commbot" else chain_parts(),
                        base_xy_yaw=(0.7, -1.2, 0.9))
    names = {(link.bus_id, link.body): link.name for link in host.model.links}
    assert set(names) == {(link.part_id, link.body) for link in robot.links}
    data = create_data(host.model)
    rng = np.random.default_rng(11)
    worst_urdf = worst_model = 0.0
    for _ in range(N_CONFIGS):
        q = random_q(robot, rng)
        for j in robot.moving_joints:
            p.resetJointState(robot.body_id, j.index, q[(j.part_id, j.name)], physicsClientId=robot.client)
        for mj in host.model.moving_joints:
            p.resetJointState(host.body, host.joint_index[mj.name], q[(mj.bus_id, mj.part_joint)],
                              physicsClientId=host.client)
        base = robot.base_pose()
        host.set_base(base)
        forward_kinematics(host.model, data, [q[(mj.bus_id, mj.part_joint)] for mj in host.model.moving_joints])
        for k, link in enumerate(host.model.links):
            ours = robot.link_pose(link.bus_id, link.body)
            worst_urdf = max(worst_urdf, frame_error(ours, host.link_frame(link.name)))
            worst_model = max(worst_model, frame_error(ours, compose(base, se3_frame(data.oMi[k]))))
    assert worst_urdf < URDF_POSE_ATOL
    assert worst_model < MODEL_POSE_ATOL
    print(f"{which}: max link frame error vs pybullet's URDF {worst_urdf:.2e}, vs host model {worst_model:.2e}")


def test_joint_limits_hold_and_continuous_joints_have_none(world):
    robot = commbot(world)
    hold(robot)
    elbow, wheel = robot.joint(16, "horn"), robot.joint(2, "wheel")
    p.setJointMotorControl2(robot.body_id, elbow.index, p.POSITION_CONTROL, targetPosition=elbow.limits.upper + 1.0,
                            force=elbow.limits.effort, physicsClientId=world.client)
    p.resetJointState(robot.body_id, wheel.index, 10.0, physicsClientId=world.client)  # beyond any revolute range
    world.advance_to(1.5)
    angle = p.getJointState(robot.body_id, elbow.index, physicsClientId=world.client)[0]
    assert elbow.limits.upper - 0.05 < angle < elbow.limits.upper + 1e-3
    assert p.getJointState(robot.body_id, wheel.index, physicsClientId=world.client)[0] > 9.0


def test_joint_friction_and_damping_come_from_the_descriptor(world):
    """A flywheel on a vertical passive joint of a heavy base: Coulomb friction slows it linearly (F / I), viscous
    damping exponentially (D / I); pybullet's default motor would stop it at once."""
    def spinner(name: str, damping: float, friction: float):
        desc = descriptor_from_dict({
            "schema": 1, "name": name, "kind": "link",
            "bodies": [{"name": "base", "mass": 200.0, "com": [0, 0, 0.05],
                        "inertia": {"ixx": 50, "iyy": 50, "izz": 50},
                        "collisions": [{"box": [1.0, 1.0, 0.1], "xyz": [0, 0, 0.05]}]},
                       {"name": "flywheel", "mass": 1.0, "com": [0, 0, 0],
                        "inertia": {"ixx": 0.01, "iyy": 0.01, "izz": 0.02}}],
            "joints": [{"name": "spin", "type": "continuous", "parent": "base", "child": "flywheel", "xyz": [0, 0, 0.2],
                        "damping": damping, "friction": friction, "limits": {"effort": 1, "velocity": 100}}],
            "ports": [{"name": "mount", "body": "base", "parent": True}]})
        data = encode_descriptor(desc)
        part = build_cpc_part(desc, data, descriptor_sha256(data), 1, 1)
        robot = build_robot(world, [part], base_xy_yaw=(3.0 * damping, 0, 0))
        p.resetJointState(robot.body_id, robot.joint_index(1, "spin"), 0.0, targetVelocity=10.0,
                          physicsClientId=world.client)
        assert not robot.joint(1, "spin").actuated
        return robot

    coulomb, viscous = spinner("coulomb", 0.0, 0.02), spinner("viscous", 0.01, 0.0)
    world.advance_to(1.0)
    w_coulomb = p.getJointState(coulomb.body_id, 0, physicsClientId=world.client)[1]
    w_viscous = p.getJointState(viscous.body_id, 0, physicsClientId=world.client)[1]
    assert w_coulomb == pytest.approx(10.0 - 0.02 / 0.02 * 1.0, rel=1e-3)  # measured 8.99994 rad/s
    assert w_viscous == pytest.approx(10.0 * math.exp(-0.01 / 0.02 * 1.0), rel=2e-3)  # 6.0620 vs 6.0653: explicit


# --- on the floor -----------------------------------------------------------------------------------------------

def floor_contacts(robot, world, distance: float):
    return p.getClosestPoints(robot.body_id, world.floor_id, distance, physicsClientId=world.client)


def test_wheels_and_caster_touch_the_floor_and_nothing_else(world):
    robot = commbot(world, base_xy_yaw=(1.0, 2.0, 0.5))
    base = robot.base_pose()
    assert base[0][2] == pytest.approx(0.0, abs=1e-9)  # the carriage's frame origin is on the floor by design
    wheels = {robot.link_index(2, "wheel"), robot.link_index(3, "wheel")}
    caster = -1  # a sphere of the chassis
    at_start = floor_contacts(robot, world, 1e-3)
    assert {c[3] for c in at_start} == wheels | {caster}
    assert min(c[8] for c in at_start) > -1e-6  # touching, not sunk in
    hold(robot)
    world.advance_to(0.5)
    settled = floor_contacts(robot, world, 2e-3)
    assert {c[3] for c in settled} == wheels | {caster}
    to_base = inverse(robot.base_pose())
    for c in settled:
        if c[3] == caster:
            x, y, _ = compose(to_base, (c[5], (0, 0, 0, 1)))[0]
            assert x == pytest.approx(-0.27, abs=5e-3) and y == pytest.approx(0.0, abs=5e-3)
    assert min(c[8] for c in floor_contacts(robot, world, 0.1) if c[3] not in wheels | {caster}) > 0.03


SHAPE_KINDS = [{"box": [0.2, 0.1, 0.05]}, {"cylinder": [0.05, 0.3]}, {"capsule": [0.04, 0.2]}, {"sphere": [0.07]},
               {"mesh": TETRA}]


def surface_samples(kind: str, size, n: int = 20000) -> np.ndarray:
    """Points of a shape in its own frame among which its lowest point lies: box corners, cylinder rims (dense),
    mesh vertices, and for spheres and capsules a dense random sample of their spheres."""
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    if kind == "box":
        return np.array([[sx * size[0] / 2, sy * size[1] / 2, sz * size[2] / 2]
                         for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    if kind == "cylinder":
        return np.concatenate([np.stack([size[0] * np.cos(t), size[0] * np.sin(t), np.full(n, h)], axis=1)
                               for h in (-size[1] / 2, size[1] / 2)])
    if kind == "mesh":
        return np.array(TETRA["vertices"], dtype=float)
    u = np.random.default_rng(0).normal(size=(n * 10, 3))
    sphere = size[0] * u / np.linalg.norm(u, axis=1, keepdims=True)
    half = size[1] / 2 if kind == "capsule" else 0.0
    return np.concatenate([sphere + (0, 0, half), sphere - (0, 0, half)])


@pytest.mark.parametrize("shape", SHAPE_KINDS, ids=lambda s: next(iter(s)))
def test_any_part_stands_with_its_lowest_point_on_the_floor(world, shape):
    """A body whose only shape sits 0.3 m below its frame, turned: the builder lifts it exactly onto the floor."""
    kind = next(iter(shape))
    placed = dict(shape, xyz=[0.1, -0.05, -0.3], rpy=[0.3, 0.7, 0.2])
    desc = descriptor_from_dict({"schema": 1, "name": "block", "kind": "link", "bodies": [
        {"name": "b", "mass": 1.0, "com": [0, 0, 0], "inertia": {"ixx": 0.01, "iyy": 0.01, "izz": 0.01},
         "collisions": [placed]}], "ports": [{"name": "mount", "body": "b", "parent": True}]})
    data = encode_descriptor(desc)
    robot = build_robot(world, [build_cpc_part(desc, data, descriptor_sha256(data), 1, 1)], base_xy_yaw=(1, 2, 0.8))
    assert robot.stand_height > 0.25
    shape_frame = compose(robot.base_pose(), ((0.1, -0.05, -0.3), p.getQuaternionFromEuler((0.3, 0.7, 0.2))))
    points = surface_samples(kind, shape[kind]) @ rotation_matrix(shape_frame[1]).T + shape_frame[0]
    sampled = 1e-5 if kind in ("sphere", "capsule") else 1e-6  # random sphere samples miss the pole by ~1e-6 m
    assert abs(points[:, 2].min()) < sampled
    # pybullet's own distance query agrees to its shape margins (0.4 mm for a tilted cylinder, 1 mm for a hull)
    assert abs(min(c[8] for c in floor_contacts(robot, world, 0.05))) < 1.5e-3
    robot.place(-1.0, 0.5, 2.5)
    assert robot.base_pose()[0][2] == robot.stand_height


def test_held_robot_stands_still_for_two_seconds(world):
    robot = commbot(world)
    hold(robot)
    start = robot.base_pose()
    world.advance_to(2.0)
    (x, y, z), quat = robot.base_pose()
    roll, pitch, _ = p.getEulerFromQuaternion(quat)
    assert all(math.isfinite(v) for v in (x, y, z, *quat))
    assert abs(z - start[0][2]) < 2e-3 and math.hypot(x - start[0][0], y - start[0][1]) < 2e-3
    assert abs(roll) < math.radians(0.2) and abs(pitch) < math.radians(0.2)
    linear, angular = p.getBaseVelocity(robot.body_id, physicsClientId=world.client)
    assert np.linalg.norm(linear) < 1e-3 and np.linalg.norm(angular) < 1e-2
    servo = {k: v for k, v in robot.joint_positions().items() if robot.parts[k[0]].kind != "wheel"}
    assert len(servo) == 17 and max(abs(v) for v in servo.values()) < 0.01


# --- the map -------------------------------------------------------------------------------------------------------

def ray_hit(world, start, end):
    hit = p.rayTest(start, end, physicsClientId=world.client)[0]
    return hit[0], hit[2] * math.dist(start, end)


def test_walls_stand_where_the_map_says(world):
    lab = load_map("lab")
    ids = world.add_map(lab)
    assert len(ids) == len(lab.walls) == 6 and set(world.walls) == set(ids)
    for body, wall in zip(ids, lab.walls):  # from 0.5 m off each wall's midpoint, square to it, at half height
        (mx, my), normal = wall.midpoint, (-math.sin(wall.yaw), math.cos(wall.yaw))
        for side in (1, -1):
            start = (mx + side * 0.5 * normal[0], my + side * 0.5 * normal[1], wall.height / 2)
            hit, distance = ray_hit(world, start, (mx, my, wall.height / 2))
            assert hit == body, (wall.name, side)
            assert distance == pytest.approx(0.5 - wall.thickness / 2, abs=1e-6)
        above = wall.height + 0.05
        over = ray_hit(world, (mx + 0.5 * normal[0], my + 0.5 * normal[1], above), (mx, my, above))
        assert over[0] == -1, wall.name
    cx, cy = lab.place("centre")
    z = 1.0
    assert ray_hit(world, (cx, cy, z), (cx - 10, cy, z))[1] == pytest.approx(4 - 0.05, abs=1e-6)  # west
    assert ray_hit(world, (cx, cy, z), (cx, cy + 10, z))[1] == pytest.approx(3 - 0.05, abs=1e-6)  # north
    assert ray_hit(world, (cx, cy, z), (cx, cy - 10, z))[1] == pytest.approx(3 - 0.05, abs=1e-6)  # south
    assert ray_hit(world, (cx, cy, z), (cx + 10, cy, z))[0] == -1  # out through the doorway
    assert ray_hit(world, (0, -2, 0.6), (10, -2, 0.6))[1] == pytest.approx(1.5 - 0.04, abs=1e-6)  # the partition
    assert ray_hit(world, (0, -2, 1.3), (3, -2, 1.3))[0] == -1  # over it (1.2 m high)
    with pytest.raises(KeyError, match="places: "):
        lab.place("kitchen")


BAD_MAPS = [
    ("name: x\n", 1, "missing field 'walls'"),
    ("name: x\nwalls:\n  - {from: [0, 0], to: [0, 0]}\n", 3, "the same point"),
    ("name: x\nwalls:\n  - {from: [0, 0], to: [1, 0]}\n  - {from: [0, 0], to: [1, 0],\n     thickness: -0.1}\n", 5,
     "wall #2: thickness must be a number > 0"),
    ("name: x\nwalls:\n  - from: [0, 0, 1]\n    to: [1, 0]\n", 3, "wall #1: from must be [x, y]"),
    ("name: x\nwalls:\n  - {from: [0, 0], to: [1, 0], colour: red}\n", 3, "unknown field 'colour'"),
    ("name: x\nwalls: []\nplaces:\n  door: [1]\n", 4, "place 'door': door must be [x, y]"),
    ("name: x\nwalls: []\nrooms: 3\n", 3, "unknown field 'rooms'"),
    ("name: x\ndefaults: {height: 0}\nwalls: []\n", 2, "defaults: height must be a number > 0"),
    ("name: x\nwalls:\n  - [0, 0, 1, 0]\n", 3, "wall #1 must be a mapping"),
    ("name: x\nwalls: [\n", None, "YAML syntax"),
    ("- just a list\n", 1, "a map must be a mapping"),
]


@pytest.mark.parametrize("text, line, fragment", BAD_MAPS)
def test_bad_map_yaml_names_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_map(path)
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}:" if line else f"{path}:")
    if line is None:
        assert err.value.line is not None


def test_unknown_map_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="known: .*lab"):
        load_map("atlantis")


# --- time, hooks, determinism ----------------------------------------------------------------------------------------

def test_time_is_counted_in_steps_and_advance_to_takes_the_right_count():
    with World(time_step_s=0.001) as w:
        assert w.time_s == 0.0 and w.time_step_s == 0.001
        assert w.advance_to(0.3) == 300  # 0.3 / 0.001 is 299.99999999999994 in floating point
        assert w.steps == 300 and w.time_s == 300 * 0.001
        assert w.advance_to(0.3) == 0 and w.advance_to(0.1) == 0  # not ahead: nothing
        assert w.advance_to(0.3005) == 0  # half a step is not a step
        assert w.advance_to(0.301) == 1
        assert w.advance_to(1.0) == 699 and w.steps == 1000
    with World() as w:
        assert w.time_step_s == 1 / 240
        assert w.advance_to(1.0) == 240 and w.advance_to(2.5) == 360 and w.steps == 600


def test_hooks_run_around_each_physics_step_in_order():
    with World(time_step_s=0.01) as w:
        seen = []
        ball = p.createMultiBody(1.0, p.createCollisionShape(p.GEOM_SPHERE, radius=0.1, physicsClientId=w.client),
                                 basePosition=(0, 0, 5), physicsClientId=w.client)
        height = lambda: p.getBasePositionAndOrientation(ball, physicsClientId=w.client)[0][2]
        w.add_pre_step(lambda world: seen.append(("pre", world.time_s, height())))
        post = w.add_post_step(lambda world: seen.append(("post", world.time_s, height())))
        w.step()
        w.step()
        w.remove_hook(post)
        w.step()
    assert [(kind, round(t, 9)) for kind, t, _ in seen] == [("pre", 0.0), ("post", 0.01), ("pre", 0.01),
                                                             ("post", 0.02), ("pre", 0.02)]
    assert seen[0][2] == 5.0 and seen[1][2] < 5.0 and seen[2][2] == seen[1][2]  # physics ran between pre and post
    assert w.closed


def state_of(robot) -> tuple:
    c, b = robot.client, robot.body_id
    indices = list(range(p.getNumJoints(b, physicsClientId=c)))
    links = p.getLinkStates(b, indices, computeLinkVelocity=True, physicsClientId=c)
    joints = p.getJointStates(b, indices, physicsClientId=c)
    return (p.getBasePositionAndOrientation(b, physicsClientId=c), p.getBaseVelocity(b, physicsClientId=c),
            tuple(tuple(s[:2] + s[6:8]) for s in links), tuple(tuple(s[:2]) for s in joints))


def test_two_worlds_built_and_stepped_alike_are_bit_identical():
    """Driven wheels, swinging arms and a wall to hit: any nondeterminism in contacts or solver order shows."""
    worlds = [World(), World()]
    try:
        robots, walls_hit = [], set()
        for w in worlds:
            w.add_map(load_map("lab"))
            robots.append(commbot(w, base_xy_yaw=(3.3, 1.0, 0.3)))
        worlds[0].add_post_step(lambda w: walls_hit.update(
            w.walls[c[2]].name for c in p.getContactPoints(robots[0].body_id, physicsClientId=w.client)
            if c[2] in w.walls))
        rng = np.random.default_rng(5)
        for k in range(10):
            targets = random_q(robots[0], rng)
            for robot in robots:
                hold(robot, targets)
                for wheel, sign in ((2, 1), (3, -1)):  # both forward (the right wheel's axle points along -y)
                    p.setJointMotorControl2(robot.body_id, robot.joint_index(wheel, "wheel"), p.VELOCITY_CONTROL,
                                            targetVelocity=sign * 6.0, force=10.0, physicsClientId=robot.client)
            for _ in range(60):  # interleaved, step by step
                for w in worlds:
                    w.step()
            assert state_of(robots[0]) == state_of(robots[1]), f"diverged in round {k}"
        assert walls_hit == {"east_upper"}  # it drove into the wall north of the doorway
    finally:
        for w in worlds:
            w.close()


# --- what cannot be built --------------------------------------------------------------------------------------

def test_parts_that_are_not_one_tree_are_refused():
    with World() as w:
        with pytest.raises(RobotBuildError, match="parts 1, 2, 3.* hang from no port"):
            build_robot(w, load_assembly("servo_chain").parts)
        parts = [fw for fw in load_assembly("commbot").parts if fw.id != 6]
        with pytest.raises(RobotBuildError, match="port 'torso' lists part 6, which is not among the parts"):
            build_robot(w, parts)
        with pytest.raises(RobotBuildError, match="link_friction names"):
            commbot(w, link_friction={(1, "caster"): 0.01})
        robot = commbot(w, link_friction={(1, "chassis"): 0.01})
        assert p.getDynamicsInfo(robot.body_id, -1, physicsClientId=w.client)[1] == pytest.approx(0.01)
