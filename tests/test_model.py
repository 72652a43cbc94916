"""The robot model (runtime.model) against pybullet, an independent implementation of the same mechanics.

Two robots of tests/model_helpers.py, built as VirtualRobot objects straight from descriptors (the bus scan has
its own tests; one test here checks that a scanned bus gives the same model): "chain" (branched, with prismatic,
continuous and fixed joints, off-diagonal inertias and a plain XM430-W350) and "commbot". The algorithms tested
here are the fast ones (runtime.model.algorithms); tests/test_dynamics.py checks them against the reference
implementation and Pinocchio.

Tolerances. pybullet reads the URDF we write (floats in full precision) and its dynamics runs in double
precision, so the two sides differ by rounding only -- except where pybullet itself rounds, noted below.
- joint efforts: 1e-9 N m absolute (measured 3.6e-14 on the chain, 2.7e-11 on commbot with efforts up to
  ~3.6 N m); the brief allowed 1e-6 -- the tighter bound still leaves rounding room, while any modelling error
  (a wrong frame, a transposed rotation, a lost parallel-axis term) shows at 1e-4 N m and above;
- mass matrix: 1e-12 (measured 6.5e-13);
- inertial data per link: 1e-7 relative to the largest entry: pybullet re-diagonalises each tensor iteratively
  and keeps the principal frame with less precision (measured 9e-10 for the bracket's off-diagonal tensor,
  0 for diagonal ones); the whole-robot inertia, summed from pybullet's world-frame principal axes, agrees to
  3e-12 relative;
- CoM: 1e-10 m (measured 2.9e-13 m);
- link frames: 1e-6 m and 1e-6 in rotation-matrix entries: pybullet reports the URDF link frame (getLinkState
  worldLinkFrame*) with single-precision rounding (measured 1.0e-7 m at ~1 m from the base, 3.7e-7), although
  its dynamics is exact to 1e-11 -- which, through gravity and inertia, checks our kinematics far more tightly.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import xml.etree.ElementTree as ET

import numpy as np
import pybullet as p
import pytest

from hil.devices.control_table import XM430_W350
from hil.devices.descriptor import descriptor_sha256, encode_descriptor
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.firmware_sim.servo import ServoFirmware
from model_helpers import CHAIN, _descriptor, assembly_robot, random_state, virtual_robot
from hil.runtime.bus import BusHost
from hil.runtime.model import (SE3, Data, Model, ModelError, build_model, center_of_mass, composite_inertia,
                           connection_transforms, create_data, forward_dynamics, forward_kinematics, mass_matrix,
                           matrix_to_rpy, rnea, rpy_to_matrix, to_urdf, total_mass)
from hil.runtime.model import urdf_cli
from hil.runtime.scan import NoCache, VirtualRobot, scan_bus
from hil.runtime.transports.sim import SimTransport

GRAVITY = (0.0, 0.0, -9.80665)
INERTIA_RTOL = 1e-7
POSE_ATOL = 1e-6  # m (link frames from pybullet)
COM_ATOL = 1e-10  # m (CoMs from pybullet)
ROT_ATOL = 1e-6  # rotation-matrix entries
TAU_ATOL = 1e-9  # N m
H_ATOL = 1e-12  # kg m^2
N_SAMPLES = 20

ROBOTS = {"chain": lambda: virtual_robot(CHAIN), "commbot": lambda: assembly_robot("commbot")}  # vs pybullet


@pytest.fixture(scope="module")
def model() -> Model:
    return build_model(virtual_robot(CHAIN))


@pytest.fixture(scope="module", params=sorted(ROBOTS))
def any_model(request) -> Model:
    return build_model(ROBOTS[request.param]())


@pytest.fixture
def bullet(any_model, tmp_path):
    """The model's URDF loaded in pybullet (DIRECT), fixed base; plus a floating-base copy whose only use is
    reading the base link's inertial data (pybullet reports a fixed base's mass and inertia as zero)."""
    path = tmp_path / "robot.urdf"
    path.write_text(to_urdf(any_model, mesh_dir=tmp_path / "meshes"))
    client = p.connect(p.DIRECT)
    try:
        flags = p.URDF_MAINTAIN_LINK_ORDER | p.URDF_USE_INERTIA_FROM_FILE
        body = p.loadURDF(str(path), useFixedBase=True, flags=flags, physicsClientId=client)
        floating = p.loadURDF(str(path), basePosition=(5, 0, 0), useFixedBase=False, flags=flags,
                              physicsClientId=client)
        p.setGravity(*GRAVITY, physicsClientId=client)
        yield Bullet(client, body, floating)
    finally:
        p.disconnect(client)


class Bullet:
    """The loaded robot, with link and movable-joint indices looked up by name."""

    def __init__(self, client: int, body: int, floating: int):
        self.client, self.body, self.floating = client, body, floating
        count = p.getNumJoints(body, physicsClientId=client)
        infos = [p.getJointInfo(body, j, physicsClientId=client) for j in range(count)]
        self.link_index = {p.getBodyInfo(body, physicsClientId=client)[0].decode(): -1}
        self.link_index.update({info[12].decode(): info[0] for info in infos})
        self.movable = [info[1].decode() for info in infos if info[3] > -1]  # q index > -1: a movable joint
        self.joint_index = {info[1].decode(): info[0] for info in infos}

    def dynamics(self, link: int) -> tuple[float, np.ndarray, np.ndarray]:
        """(mass, CoM in the link frame, full inertia tensor about the CoM in the link frame)."""
        body = self.floating if link == -1 else self.body
        info = p.getDynamicsInfo(body, link, physicsClientId=self.client)
        mass, diagonal, pos, orn = info[0], np.array(info[2]), np.array(info[3]), info[4]
        rot = np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
        return mass, pos, rot @ np.diag(diagonal) @ rot.T

    def set_q(self, model: Model, q: np.ndarray) -> None:
        for name, value in zip(model.joint_names, q):
            p.resetJointState(self.body, self.joint_index[name], float(value), physicsClientId=self.client)

    def link_frame(self, link: int) -> SE3:
        """The URDF frame of a link in the world (pybullet places the base by its inertial frame)."""
        if link == -1:
            pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
            info = p.getDynamicsInfo(self.body, -1, physicsClientId=self.client)
            return _se3(pos, orn) * _se3(info[3], info[4]).inverse()
        state = p.getLinkState(self.body, link, computeForwardKinematics=True, physicsClientId=self.client)
        return _se3(state[4], state[5])

    def inertial_frame(self, link: int) -> SE3:
        """The link's principal inertial frame in the world (origin at its CoM)."""
        if link == -1:
            return _se3(*p.getBasePositionAndOrientation(self.body, physicsClientId=self.client))
        state = p.getLinkState(self.body, link, computeForwardKinematics=True, physicsClientId=self.client)
        return _se3(state[0], state[1])

    def world_inertial(self, link: int) -> tuple[float, np.ndarray, np.ndarray]:
        """(mass, CoM, inertia about the CoM) in world axes, from pybullet's principal moments and frame."""
        body = self.floating if link == -1 else self.body
        info = p.getDynamicsInfo(body, link, physicsClientId=self.client)
        frame = self.inertial_frame(link)
        return info[0], frame.translation, frame.rotation @ np.diag(info[2]) @ frame.rotation.T


def _se3(pos, orn) -> SE3:
    return SE3(np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3), pos)


# --- structure ---------------------------------------------------------------------------------------------


def test_every_body_of_every_part_is_a_link_in_depth_first_order(model):
    assert len(model.links) == sum(len(_descriptor(spec).bodies) for _, spec, *_ in CHAIN)
    assert [part.bus_id for part in model.parts] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert model.joint_names == ("cpc_servo_1_horn", "cpc_servo_3_horn", "cpc_servo_4_horn", "test_slider_6_slide",
                                 "test_slider_6_roll", "cpc_servo_7_horn", "XM430_W350_8_horn", "cpc_servo_9_horn",
                                 "cpc_servo_10_horn")
    assert model.nq == 9
    assert all(link.parent < i for i, link in enumerate(model.links))
    assert model.links[model.link_index("XM430_W350_8_horn")].bus_id == 8


def test_moving_joints_name_their_part_and_descriptor_joint(model):
    for k, joint in enumerate(model.moving_joints):
        assert joint.idx_q == k
        assert model.q_index(joint.bus_id, joint.part_joint) == k
        desc = _descriptor(next(spec for bus_id, spec, *_ in CHAIN if bus_id == joint.bus_id))
        assert joint.part_joint in [j.name for j in desc.moving_joints]
    assert model.q_index(8, "horn") == 6
    assert not model.part(8).self_describing
    with pytest.raises(KeyError):
        model.q_index(2, "horn")  # the bracket has no joint


def test_connection_transform_is_port_times_inverse_connector(model):
    """The modular-robot reference's claim, by hand for the bracket: the servo on its 'out' port is turned 90 degrees
    about x."""
    connection = model.part(3).parent
    assert (connection.parent_id, connection.port, connection.child_id) == (2, "out", 3)
    out = SE3(rpy_to_matrix((math.pi / 2, 0, 0)), (0.0, 0.012, 0.02))
    case = SE3.identity()  # cpc_servo's 'case' connector is its base frame
    assert connection.transform.isclose(out * case.inverse(), atol=1e-15)
    np.testing.assert_allclose(connection.transform.rotation @ [0, 0, 1], [0, -1, 0], atol=1e-15)
    # the bracket's own parent connector is offset and turned: its inverse appears in the horn -> bracket mount
    bracket = model.part(2).parent
    horn_port = SE3(np.eye(3), (0.0, 0.0, 0.004))
    expected = horn_port * SE3(rpy_to_matrix((0, 0, 0.2)), (0.001, 0.0, -0.002)).inverse()
    assert bracket.transform.isclose(expected, atol=1e-15)
    assert [c.child_id for c in model.part(2).children] == [3, 9]  # port order
    assert len(model.connections) == len(CHAIN) - 1


def test_connected_ports_coincide_in_the_world_at_any_configuration(model):
    data = create_data(model)
    rng = np.random.default_rng(7)
    descriptors = {bus_id: _descriptor(spec) for bus_id, spec, *_ in CHAIN}
    for _ in range(5):
        forward_kinematics(model, data, random_state(model, rng)[0])
        for c in model.connections:
            port = next(x for x in descriptors[c.parent_id].ports if x.name == c.port)
            connector = descriptors[c.child_id].parent_port
            at_parent = data.oMi[c.parent_link] * SE3.from_pose(port.pose.xyz, port.pose.rpy)
            at_child = data.oMi[c.child_link] * SE3.from_pose(connector.pose.xyz, connector.pose.rpy)
            assert at_parent.isclose(at_child, atol=1e-12), (c.parent_id, c.port, c.child_id)
        for c, relative in connection_transforms(model, data):
            on_base = model.part(c.parent_id).base_link == c.parent_link  # else the port moves with a joint
            assert relative.isclose(c.transform, atol=1e-12) == on_base, (c.parent_id, c.port)


def test_rpy_round_trips_including_gimbal_lock():
    rng = np.random.default_rng(3)
    cases = [rng.uniform(-math.pi, math.pi, 3) for _ in range(50)]
    cases += [np.array([r, s * math.pi / 2, y]) for r in (0.3, -2.0) for s in (1, -1) for y in (0.0, 0.7)]
    for rpy in cases:
        rot = rpy_to_matrix(rpy)
        np.testing.assert_allclose(rpy_to_matrix(matrix_to_rpy(rot)), rot, atol=1e-12)


def test_model_is_immutable_and_data_is_separate(model):
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.links[0].parent = 3
    with pytest.raises(ValueError):
        model.joints[0].placement.translation[0] = 1.0
    with pytest.raises(ValueError):
        model.links[1].inertia.inertia[0, 0] = 1.0
    with pytest.raises(TypeError):
        model.links[0] = model.links[1]
    a, b = create_data(model), create_data(model)
    assert isinstance(a, Data) and a is not b
    forward_kinematics(model, a, np.full(model.nq, 0.5))
    forward_kinematics(model, b, np.zeros(model.nq))
    assert not a.oMi[-1].isclose(b.oMi[-1])
    a.q[0] = 9.0  # Data is the mutable side
    assert b.q[0] == 0.0


def test_bad_robots_are_refused_with_the_reason():
    robot = virtual_robot(CHAIN[:3])
    with pytest.raises(ModelError, match="no root"):
        build_model(VirtualRobot("test://x", robot.parts, None))
    bad = dict(robot.parts)
    bad[2] = dataclasses.replace(bad[2], children={"nowhere": 3})
    with pytest.raises(ModelError, match="nowhere"):
        build_model(VirtualRobot("test://x", bad, 1))
    loop = dict(robot.parts)
    loop[3] = dataclasses.replace(loop[3], children={"horn": 1})
    with pytest.raises(ModelError, match="cycle"):
        build_model(VirtualRobot("test://x", loop, 1))
    wrong = dict(robot.parts)
    wrong[3] = dataclasses.replace(wrong[3], parent_port="side")
    with pytest.raises(ModelError, match="side"):
        build_model(VirtualRobot("test://x", wrong, 1))


def test_commbot_model_has_its_servo_dof_and_wheels_in_scan_order():
    robot = assembly_robot("commbot")
    model = build_model(robot)
    assert model.nq == robot.dof + 2 == 19  # 15 cpc_servo + 2 hands + 2 wheels, as the assembly says
    servo_joints = [(j.bus_id, j.part_joint) for j in model.moving_joints
                    if model.part(j.bus_id).kind in ("servo_joint", "gripper")]
    assert servo_joints == [(part.id, name) for part, name in robot.servo_joints]
    assert len(model.links) == sum(len(part.descriptor.bodies) for part in robot.parts.values())
    assert total_mass(model) == pytest.approx(sum(body.inertial.mass for part in robot.parts.values()
                                                  for body in part.descriptor.bodies), rel=1e-12)
    assert {c.child_id for c in model.connections} == set(robot.parts) - {robot.root_id}


def firmware(entries) -> list:
    """The parts of ``entries`` as virtual-device firmware: descriptors compiled into CPC blocks, port tables."""
    children: dict[int, dict[str, int]] = {}
    for bus_id, _, parent, port, _ in entries:
        if parent is not None:
            children.setdefault(parent, {})[port] = bus_id
    out = []
    for bus_id, spec, _, _, self_describing in entries:
        if not self_describing:
            out.append(ServoFirmware(XM430_W350, bus_id))
            continue
        data = encode_descriptor(_descriptor(spec))
        out.append(build_cpc_part(_descriptor(spec), data, descriptor_sha256(data), bus_id, 1000 + bus_id,
                                  children.get(bus_id, {})))
    return out


def test_model_of_the_scanned_bus_equals_the_model_from_descriptors(model):
    """The same robot on the virtual bus, scanned by the host: same links, joints, placements and inertias."""
    with BusHost(SimTransport("sim://test", device=VirtualBusDevice(firmware(CHAIN)))) as bus:
        robot = scan_bus(bus, NoCache())
    assert not robot.quarantined and not robot.problems
    scanned = build_model(robot)
    assert [link.name for link in scanned.links] == [link.name for link in model.links]
    assert [link.parent for link in scanned.links] == [link.parent for link in model.links]
    assert scanned.joint_names == model.joint_names
    assert not scanned.part(8).self_describing and scanned.part(8).name == "XM430-W350"
    for ours, theirs in zip(scanned.joints, model.joints):
        assert (ours.name, ours.type, ours.bus_id, ours.part_joint) == (theirs.name, theirs.type, theirs.bus_id,
                                                                        theirs.part_joint)
        assert ours.placement.isclose(theirs.placement, atol=0.0)
    for ours, theirs in zip(scanned.links, model.links):
        assert ours.inertia.mass == theirs.inertia.mass
        assert np.array_equal(ours.inertia.inertia, theirs.inertia.inertia)


# --- against pybullet ----------------------------------------------------------------------------------------


def test_urdf_loads_with_every_link_mass_com_and_inertia(any_model, bullet):
    model = any_model
    num_joints = p.getNumJoints(bullet.body, physicsClientId=bullet.client)
    assert num_joints == len(model.links) - 1  # nothing merged, nothing dropped
    assert len(bullet.movable) == model.nq
    assert sorted(bullet.movable) == sorted(model.joint_names)
    masses = []
    for link in model.links:
        mass, com, inertia = bullet.dynamics(bullet.link_index[link.name])
        masses.append(mass)
        assert mass == pytest.approx(link.inertia.mass, rel=1e-15)
        np.testing.assert_allclose(com, link.inertia.com, atol=1e-15)
        scale = np.abs(link.inertia.inertia).max()
        np.testing.assert_allclose(inertia, link.inertia.inertia, rtol=0, atol=INERTIA_RTOL * scale)
    assert sum(masses) == pytest.approx(total_mass(model), rel=1e-14)


def test_forward_kinematics_and_com_match_pybullet(any_model, bullet):
    model = any_model
    data = create_data(model)
    rng = np.random.default_rng(11)
    masses = {name: bullet.dynamics(index)[0] for name, index in bullet.link_index.items()}
    worst_xyz = worst_rot = worst_com = 0.0
    for _ in range(N_SAMPLES):
        q = random_state(model, rng)[0]
        bullet.set_q(model, q)
        forward_kinematics(model, data, q)
        for i, link in enumerate(model.links):
            theirs = bullet.link_frame(bullet.link_index[link.name])
            worst_xyz = max(worst_xyz, np.abs(data.oMi[i].translation - theirs.translation).max())
            worst_rot = max(worst_rot, np.abs(data.oMi[i].rotation - theirs.rotation).max())
        weighted = sum(masses[name] * bullet.inertial_frame(index).translation
                       for name, index in bullet.link_index.items())
        worst_com = max(worst_com, np.abs(center_of_mass(model, data, q) - weighted / sum(masses.values())).max())
    print(f"worst link position {worst_xyz:.1e} m, rotation {worst_rot:.1e}, CoM {worst_com:.1e} m")
    assert worst_xyz < POSE_ATOL and worst_rot < ROT_ATOL and worst_com < COM_ATOL


def test_composite_inertia_matches_pybullet_links_summed_about_the_com(any_model, bullet):
    model = any_model
    data = create_data(model)
    q = random_state(model, np.random.default_rng(5))[0]
    bullet.set_q(model, q)
    parts = [bullet.world_inertial(index) for index in bullet.link_index.values()]
    mass = sum(m for m, _, _ in parts)
    com = sum(m * c for m, c, _ in parts) / mass
    inertia = sum(i + m * ((c - com) @ (c - com) * np.eye(3) - np.outer(c - com, c - com)) for m, c, i in parts)
    ours = composite_inertia(model, data, q)
    assert ours.mass == pytest.approx(mass, rel=1e-14)
    np.testing.assert_allclose(ours.com, com, rtol=0, atol=COM_ATOL)
    np.testing.assert_allclose(ours.inertia, inertia, rtol=0, atol=INERTIA_RTOL * np.abs(inertia).max())
    np.testing.assert_allclose(data.com, com, rtol=0, atol=COM_ATOL)


def test_inverse_dynamics_matches_pybullet(any_model, bullet):
    """rnea(q, qd, qdd) against pybullet.calculateInverseDynamics for 20 seeded random states, to 1e-9 N m
    absolute (see the module docstring for why that bound)."""
    model = any_model
    data = create_data(model)
    rng = np.random.default_rng(2024)
    order = [model.joint_names.index(name) for name in bullet.movable]  # pybullet's q order -> ours
    worst, largest = 0.0, 0.0
    for _ in range(N_SAMPLES):
        q, qd, qdd = random_state(model, rng)
        ours = rnea(model, data, q, qd, qdd, GRAVITY)
        theirs = p.calculateInverseDynamics(bullet.body, q[order].tolist(), qd[order].tolist(), qdd[order].tolist(),
                                            physicsClientId=bullet.client)
        np.testing.assert_allclose(ours[order], theirs, rtol=0, atol=TAU_ATOL)
        worst = max(worst, np.abs(ours[order] - np.array(theirs)).max())
        largest = max(largest, np.abs(ours).max())
    assert largest > 0.01  # the comparison is not between zeros
    assert worst < TAU_ATOL


def test_mass_matrix_matches_pybullet_and_forward_dynamics_inverts_rnea(any_model, bullet):
    model = any_model
    data = create_data(model)
    rng = np.random.default_rng(99)
    order = [model.joint_names.index(name) for name in bullet.movable]
    for _ in range(5):
        q, qd, qdd = random_state(model, rng)
        h = mass_matrix(model, data, q)
        theirs = np.array(p.calculateMassMatrix(bullet.body, q[order].tolist(), physicsClientId=bullet.client))
        np.testing.assert_allclose(h[np.ix_(order, order)], theirs, rtol=0, atol=H_ATOL)
        tau = rnea(model, data, q, qd, qdd, GRAVITY)
        np.testing.assert_allclose(forward_dynamics(model, data, q, qd, tau, GRAVITY), qdd, rtol=1e-8, atol=1e-8)


# --- hil urdf ---------------------------------------------------------------------------------------------------


def test_urdf_command_writes_the_scanned_robot(tmp_path, model):
    parser = argparse.ArgumentParser()
    urdf_cli.add_arguments(parser)
    out = tmp_path / "chain.urdf"
    args = parser.parse_args(["--output", str(out), "--name", "my_chain"])
    assert urdf_cli.run(args, virtual_robot(CHAIN)) == 0
    root = ET.parse(out).getroot()
    assert root.get("name") == "my_chain"
    assert [el.get("name") for el in root.findall("link")] == [link.name for link in model.links]
    moving = [el.get("name") for el in root.findall("joint") if el.get("type") != "fixed"]
    assert moving == list(model.joint_names)
    boxed = to_urdf(model)  # without a mesh directory the roller's mesh becomes a box
    assert "bounding box" in boxed and "<mesh" not in boxed
