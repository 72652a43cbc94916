"""The merged world (firmware_sim/world/merge.py): bodies joined by fixed joints built as one pybullet link, while
everything above still speaks of parts. Each check compares the merged world with the unmerged one
(``merge_fixed=False``, one link per body, which tests/test_world.py checks against the host's URDF).

Tolerances (measured figures in brackets):
- composite mass, CoM and inertia about the CoM against the per-body sum done here with plain numpy: 1e-12
  relative to the largest entry [~1e-16];
- link poses merged vs unmerged at the same joint positions (pure kinematics, both double precision): 1e-9 m
  and quaternion components [~1e-15];
- after 1 s of seeded motion (arms swinging to random targets, wheels driving): 1e-5 m and quaternion
  components [5.0e-7]. A fixed joint is an exact constraint in Featherstone's algorithm, so the two are the same
  mechanics, but not the same arithmetic: sums of the same inertias in another order, a compound shape's
  contacts instead of a link's, a solver that sees its rows in another order. The difference is rounding; the
  bound is 20x the measured one and 100x below a millimetre;
- a 10 s trial on the simulator's clock (the bus driving the wheels and the arms through the firmware, in the
  lab): base position 1e-6 m, yaw 1e-6 rad, servo joints 1e-6 rad [7e-15 m, 1.4e-14 rad, 5e-15 rad]. The
  measured difference is rounding that the servos' and wheels' closed loops do not let grow; a bound of 1e-6 is
  three orders below what any sensor of the robot resolves (the ring's 1 mm unit, a servo's 1.5e-3 rad tick), so
  the controller sees the same trial, and far above rounding, so it does not fail on a different libm.
- the ring's readings: identical (same shapes at the same places, the same seeded noise).
"""
from __future__ import annotations

import math

import numpy as np
import pybullet as p
import pytest

from hil.devices.catalog import load_part
from hil.devices.control_table import XM430_W350 as XM
from hil.devices.descriptor import descriptor_sha256, encode_descriptor
from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.firmware_sim.sensors import ContactSensorModel, RangeRingModel
from hil.firmware_sim.world import World, build_robot, load_map
from hil.firmware_sim.world.frames import compose, rotation_matrix
from hil.runtime.bus import BusHost
from hil.runtime.model import build_model, to_urdf
from hil.runtime.scan import NoCache, scan_bus
from hil.runtime.transports.sim import SimTransport

from test_world import chain_parts, frame_error, hold, random_q

KINEMATICS_ATOL = 1e-9
MOTION_ATOL = 1e-5
TRIAL_POSITION_ATOL_M, TRIAL_YAW_ATOL, TRIAL_JOINT_ATOL = 1e-6, 1e-6, 1e-6


def pair(which: str = "commbot", **kwargs):
    """The same robot in two worlds, merged and unmerged."""
    worlds = [World(), World()]
    robots = [build_robot(w, load_assembly("commbot").parts if which == "commbot" else chain_parts(),
                          merge_fixed=merge, **kwargs) for w, merge in zip(worlds, (True, False))]
    return worlds, robots


def close(worlds) -> None:
    for w in worlds:
        w.close()


def part(desc, bus_id: int, children=None):
    data = encode_descriptor(desc)
    return build_cpc_part(desc, data, descriptor_sha256(data), bus_id, 1000 + bus_id, children or {})


# --- structure and composite inertia -------------------------------------------------------------------------------

def test_fixed_chains_are_one_link_each_and_every_shape_is_kept():
    with World() as world:
        robot = build_robot(world, load_assembly("commbot").parts)
        indices = sorted({link.index for link in robot.links})
        assert indices == list(range(-1, p.getNumJoints(robot.body_id, physicsClientId=world.client)))
        assert len(indices) < 59 // 2, "most of the 59 bodies are merged"
        assert len(robot.links) == 59 and {(k.part_id, k.body) for k in robot.links} == set(robot._links)
        for index in indices:
            bodies = robot.bodies_at(index)
            shapes = p.getCollisionShapeData(robot.body_id, index, physicsClientId=world.client)
            assert len(shapes) == sum(len(robot.parts[b.part_id].body(b.body).collisions) for b in bodies) <= 16
            assert bodies[0].offset == ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        for joint in robot.moving_joints:  # each moving joint carries its own link; what hangs on it rigidly, too
            assert robot.bodies_at(joint.index)[0].index == joint.index
        palm = robot.link(18, "palm")
        assert palm.index == robot.link_index(17, "link") == robot.joint_index(16, "horn")
        with pytest.raises(KeyError, match="no pybullet link 99"):
            robot.bodies_at(99)


@pytest.mark.parametrize("which", ["commbot", "chain"])
def test_composite_inertia_is_the_per_body_sum(which):
    with World() as world:
        robot = build_robot(world, load_assembly("commbot").parts if which == "commbot" else chain_parts())
        merged = 0
        for index in sorted({link.index for link in robot.links}):
            bodies = robot.bodies_at(index)
            merged += len(bodies) > 1
            mass = sum(robot.parts[b.part_id].body(b.body).inertial.mass for b in bodies)
            moments = []
            for b in bodies:  # each body's CoM and inertia in the link's frame, through its offset
                inertial = robot.parts[b.part_id].body(b.body).inertial
                rot = rotation_matrix(b.offset[1])
                moments.append((inertial.mass, rot @ np.array(inertial.com) + np.array(b.offset[0]),
                                rot @ np.array(inertial.inertia) @ rot.T))
            com = sum(m * c for m, c, _ in moments) / mass
            tensor = sum(i + m * (float((c - com) @ (c - com)) * np.eye(3) - np.outer(c - com, c - com))
                         for m, c, i in moments)
            got_mass, _, diagonal, got_com, orientation = p.getDynamicsInfo(robot.body_id, index,
                                                                            physicsClientId=world.client)[:5]
            r = rotation_matrix(orientation)
            scale = np.max(np.abs(tensor))
            assert got_mass == pytest.approx(mass, rel=1e-12)
            np.testing.assert_allclose(got_com, com, rtol=0, atol=1e-12)
            np.testing.assert_allclose(r @ np.diag(diagonal) @ r.T, tensor, rtol=0, atol=1e-12 * scale)
        assert merged >= (10 if which == "commbot" else 3)


def test_the_merged_links_have_the_dynamics_pybullet_merges_from_the_hosts_urdf(tmp_path):
    """An outside check: pybullet's own URDF_MERGE_FIXED_LINKS of the URDF the host writes from a bus scan (what
    `hil urdf` writes). Its loader merges every fixed chain; compared here are our links that hold the whole
    fixed chain below their joint (the builder splits one where friction or pybullet's 16 shapes say so): the
    same joint frames, the same masses. Not their CoMs and inertias: pybullet 3.2.7's merge drops the parent's
    inertial origin when it folds a child in (bullet3 pull request 4683, open), which puts the commbot head's CoM
    10 cm off; ours equal the per-body sums of the unmerged world (the tests above and below)."""
    with BusHost(SimTransport("sim://commbot?world=0")) as bus:
        model = build_model(scan_bus(bus, NoCache()))
    path = tmp_path / "commbot.urdf"
    path.write_text(to_urdf(model, mesh_dir=tmp_path / "meshes"))
    with World() as world:
        robot = build_robot(world, load_assembly("commbot").parts)
        c = world.client
        theirs = p.loadURDF(str(path), flags=p.URDF_USE_INERTIA_FROM_FILE | p.URDF_MERGE_FIXED_LINKS,
                            physicsClientId=c)
        info = p.getDynamicsInfo(theirs, -1, physicsClientId=c)  # their base link frame where ours is
        com = compose(robot.base_pose(), (info[3], info[4]))
        p.resetBasePositionAndOrientation(theirs, com[0], com[1], physicsClientId=c)
        p.setCollisionFilterGroupMask(theirs, -1, 0, 0, physicsClientId=c)
        names = {(j.bus_id, j.part_joint): j.name for j in model.moving_joints}
        their_index = {p.getJointInfo(theirs, j, physicsClientId=c)[1].decode(): j
                       for j in range(p.getNumJoints(theirs, physicsClientId=c))}
        fixed_below = {info[16] for info in (p.getJointInfo(robot.body_id, j, physicsClientId=c)
                                             for j in range(p.getNumJoints(robot.body_id, physicsClientId=c)))
                       if info[2] == p.JOINT_FIXED}
        compared = 0
        for joint in robot.moving_joints:
            if joint.index in fixed_below:
                continue
            index = their_index[names[(joint.part_id, joint.name)]]
            ours = p.getLinkState(robot.body_id, joint.index, computeForwardKinematics=True, physicsClientId=c)
            other = p.getLinkState(theirs, index, computeForwardKinematics=True, physicsClientId=c)
            assert frame_error(ours[4:6], other[4:6]) < 1e-6  # link frames (single precision in getLinkState)
            assert p.getDynamicsInfo(robot.body_id, joint.index, physicsClientId=c)[0] == \
                pytest.approx(p.getDynamicsInfo(theirs, index, physicsClientId=c)[0], rel=1e-9)
            compared += 1
        assert compared >= 15


# --- kinematics and motion -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["commbot", "chain"])
def test_every_body_is_where_it_was_at_rest_and_at_random_configurations(which):
    worlds, robots = pair(which, base_xy_yaw=(0.4, -0.3, 1.1))
    try:
        keys = [(k.part_id, k.body) for k in robots[1].links]
        assert max(frame_error(robots[0].link_pose(*k), robots[1].link_pose(*k)) for k in keys) < KINEMATICS_ATOL
        assert robots[0].stand_height == pytest.approx(robots[1].stand_height, abs=1e-12)  # placement unchanged
        rng = np.random.default_rng(3)
        for _ in range(4):
            q = random_q(robots[1], rng)
            for robot in robots:
                for j in robot.moving_joints:
                    p.resetJointState(robot.body_id, j.index, q[(j.part_id, j.name)], physicsClientId=robot.client)
            worst = max(frame_error(robots[0].link_pose(*k), robots[1].link_pose(*k)) for k in keys)
            assert worst < KINEMATICS_ATOL
    finally:
        close(worlds)


@pytest.mark.parametrize("which", ["commbot", "chain"])
def test_link_matrices_are_every_link_pose_at_once(which):
    """RobotBody.link_matrices (one getLinkStates call, what a camera frame places the robot with) gives each
    body's link_pose, merged and unmerged, at rest and at a random configuration: 1e-9 m and rotation entries."""
    from hil.firmware_sim.render.scene import _matrix

    worlds, robots = pair(which, base_xy_yaw=(0.4, -0.3, 1.1))
    try:
        rng = np.random.default_rng(5)
        for moved in (False, True):
            for robot in robots:
                if moved:
                    q = random_q(robot, rng)
                    for j in robot.moving_joints:
                        p.resetJointState(robot.body_id, j.index, q[(j.part_id, j.name)],
                                          physicsClientId=robot.client)
                batched = robot.link_matrices()
                one_by_one = np.stack([_matrix(*robot.link_pose(k.part_id, k.body)) for k in robot.links])
                assert batched.shape == (len(robot.links), 4, 4)
                assert np.abs(batched - one_by_one).max() < KINEMATICS_ATOL
    finally:
        close(worlds)


def test_every_body_moves_alike_merged_and_unmerged():
    worlds, robots = pair(base_xy_yaw=(0.0, 0.0, 0.3))
    try:
        targets = random_q(robots[1], np.random.default_rng(7))
        for robot in robots:
            hold(robot, {k: 0.5 * v for k, v in targets.items()})
            for wheel, sign in ((2, 1), (3, -1)):
                p.setJointMotorControl2(robot.body_id, robot.joint_index(wheel, "wheel"), p.VELOCITY_CONTROL,
                                        targetVelocity=sign * 4.0, force=10.0, physicsClientId=robot.client)
        for w in worlds:
            w.advance_to(1.0)
        keys = [(k.part_id, k.body) for k in robots[1].links]
        worst = max(frame_error(robots[0].link_pose(*k), robots[1].link_pose(*k)) for k in keys)
        moved = math.dist(robots[0].base_pose()[0], (0, 0, 0))
        print(f"after 1 s: moved {moved:.3f} m, worst link pose difference merged vs unmerged {worst:.2e}")
        assert moved > 0.2 and worst < MOTION_ATOL
    finally:
        close(worlds)


# --- contacts and rays ---------------------------------------------------------------------------------------------

def pebble(world, position, radius: float = 0.01) -> int:
    """A static sphere at ``position``: whatever body it is inside touches it after one step."""
    shape = p.createCollisionShape(p.GEOM_SPHERE, radius=radius, physicsClientId=world.client)
    return p.createMultiBody(0.0, shape, basePosition=position, physicsClientId=world.client)


def shape_centre(robot, part_id: int, body: str, k: int = 0):
    shape = robot.parts[part_id].body(body).collisions[k]
    return compose(robot.link_pose(part_id, body), (tuple(shape.pose.xyz), (0, 0, 0, 1)))[0]


def test_a_touch_on_a_merged_link_goes_to_the_part_touched_the_bumper():
    """A carriage with only its bumper: chassis and bumper are one link; the floor touches the chassis (wheels'
    housings absent, the caster and the chassis' underside), a pebble the bumper."""
    carriage, bumper = load_part("carriage"), load_part("bumper")
    with World() as world:
        robot = build_robot(world, [part(carriage, 1, {"bumper": 5}), part(bumper, 5)])
        assert robot.link(5, "bumper").index == robot.link(1, "chassis").index == -1
        stone = pebble(world, shape_centre(robot, 5, "bumper", 1))
        world.step()
        on_bumper, on_chassis = robot.body_contacts(5, "bumper"), robot.body_contacts(1, "chassis")
        assert on_bumper and {c[2] for c in on_bumper} == {stone}
        assert on_chassis and {c[2] for c in on_chassis} == {world.floor_id}
        assert len(on_bumper) + len(on_chassis) == len(robot.contact_points())
        assert all(robot.body_hit(-1, c[5]).part_id == 5 for c in on_bumper)
        model = ContactSensorModel(next(s for s in bumper.sensors if s.kind == "contact"))
        forces = model.forces_of(on_bumper, bumper.body("bumper").collisions, robot.link_pose(5, "bumper"))
        assert model.mask_of(forces) != 0, "the bumper feels it"


def test_a_touch_or_a_ray_on_the_hand_is_the_hands_not_the_forearms():
    with World() as world:
        robot = build_robot(world, load_assembly("commbot").parts)
        link = robot.link(18, "palm").index
        assert {(b.part_id, b.body) for b in robot.bodies_at(link)} == {(16, "horn"), (17, "link"), (18, "palm")}
        stone = pebble(world, shape_centre(robot, 18, "palm"))
        forearm = pebble(world, shape_centre(robot, 17, "link"), radius=0.005)
        world.step()
        assert {c[2] for c in robot.body_contacts(18, "palm")} == {stone}
        assert {c[2] for c in robot.body_contacts(17, "link")} == {forearm}
        assert all(robot.body_hit(link, c[5]) == robot.link(18, "palm") for c in robot.body_contacts(18, "palm"))
        for body in ((18, "palm"), (17, "link")):  # rays at each body's shape from six sides: the hits that land on
            target = np.array(shape_centre(robot, *body))  # the merged link are that body's
            starts = [target + 0.6 * np.array(axis) for axis in np.vstack([np.eye(3), -np.eye(3)])]
            hits = [h for h in p.rayTestBatch([s.tolist() for s in starts], [target.tolist()] * 6,
                                              physicsClientId=world.client) if h[0] == robot.body_id and h[1] == link]
            assert hits, body
            assert all(robot.body_hit(h[1], h[3]) == robot.link(*body) for h in hits), body


def test_the_ring_reads_the_same_merged_and_unmerged():
    worlds, robots = pair(base_xy_yaw=(1.5, 0.5, 0.7))
    try:
        for w in worlds:
            w.add_map(load_map("lab"))
        sensor = next(s for s in robots[0].parts[4].sensors if s.kind == "range_ring")
        readings = []
        for w, robot in zip(worlds, robots):
            model = RangeRingModel(sensor, seed=5)
            readings.append([model.measure(w.client, *robot.link_pose(4, "ring")).raw for _ in range(3)])
        assert readings[0] == readings[1]
        assert any(r < sensor.params["no_target_raw"] for r in readings[0][0]), "it sees walls"
    finally:
        close(worlds)


# --- a trial's trajectories --------------------------------------------------------------------------------------

def drive_a_trial(merge: int) -> list[tuple]:
    """10 s on the simulator's clock in the lab, through the bus: both wheels driving and turning, both arms
    swinging, every servo commanded each 0.1 s as a controller does; (x, y, yaw, joint positions) each 0.5 s."""
    transport = SimTransport(f"sim://commbot?clock=sim&map=lab&seed=4&pose=1.0,0.5,0.2&merge={merge}")
    embodied, bus = transport.embodied, BusHost(transport)
    servos = [fw.id for fw in embodied.parts if hasattr(fw, "joint") and fw.descriptor.kind in ("servo_joint",
                                                                                                  "gripper")]
    bus.sync_write_register(XM["torque_enable"], {i: 1 for i in (*servos, 2, 3)})
    links = p.getNumJoints(embodied.robot.body_id, physicsClientId=embodied.world.client) + 1
    assert links == 59 if not merge else links < 30
    out = []
    try:
        for tick in range(100):
            t = tick * 0.1
            swing = int(2048 + 400 * math.sin(0.8 * t))
            bus.sync_write_register(XM["goal_position"], {i: swing if i in (10, 16, 20, 26) else 2048
                                                          for i in servos})
            turn = int(40 * math.sin(0.5 * t))
            bus.sync_write_register(XM["goal_velocity"], {2: 60 + turn, 3: -(60 - turn)})
            embodied.world.advance_to(t + 0.1)
            if tick % 5 == 4:
                pose = embodied.robot_pose()
                joints = embodied.robot.joint_positions()
                out.append((pose["x"], pose["y"], pose["yaw"],
                            tuple(q for key, q in sorted(joints.items()) if key[0] not in (2, 3))))
    finally:
        embodied.close()
    return out


def test_a_trial_moves_alike_merged_and_unmerged():
    merged, unmerged = drive_a_trial(1), drive_a_trial(0)
    dxy = max(math.dist(a[:2], b[:2]) for a, b in zip(merged, unmerged))
    dyaw = max(abs(math.remainder(a[2] - b[2], 2 * math.pi)) for a, b in zip(merged, unmerged))
    dq = max(max(abs(x - y) for x, y in zip(a[3], b[3])) for a, b in zip(merged, unmerged))
    travelled = math.dist(merged[0][:2], merged[-1][:2])
    print(f"10 s trial: travelled {travelled:.2f} m; merged vs unmerged: base {dxy:.2e} m, yaw {dyaw:.2e} rad, "
          f"joints {dq:.2e} rad")
    assert travelled > 0.5, "it drove"
    assert dxy < TRIAL_POSITION_ATOL_M and dyaw < TRIAL_YAW_ATOL and dq < TRIAL_JOINT_ATOL
    assert drive_a_trial(1) == merged, "same seed, same trajectory"
