"""The virtual side of a robot on two buses mirrors the real parts: the body in this process
(sim://commbot_body, a pybullet world) and its left arm served by another process on a real pty
(`hil sim left_arm --pty --no-world`, the stand-in for a real arm). After the scan the body's world gets the arm's
bodies at the torso's shoulder_left port, and after each bus cycle the arm's read joint positions.

No timing assertions: targets are reached when the joints get there, however long the machine takes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pybullet as p
import pytest
from test_multibus import BODY_NO_WORLD, MAX_TICKS, REACHED_RAD, scan_alone, two_buses

from hil.runtime import Robot
from hil.runtime.model import build_model, create_data, forward_kinematics, total_mass

BODY_WORLD = "sim://commbot_body"
MOUNT_SAG_M = 2e-3  # the fixed constraint is solved, not exact: the mirror sits within this of its mount




@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("descriptors")


def mirror_of(robot: Robot):
    embodied = robot.bus.transport.embodied
    assert robot.mirrored == ["arm"] and len(embodied.robot.mirrors) == 1
    return embodied, embodied.robot.mirrors[0]


def run_until(robot: Robot, done) -> None:
    for tick in robot.loop(hz=50):
        if done() or tick.index >= MAX_TICKS:
            break


def relative(a, b):
    """b's frame in a's frame, as (rotation matrix, translation): world frames are (xyz, quaternion)."""
    ra = np.array(p.getMatrixFromQuaternion(a[1])).reshape(3, 3)
    rb = np.array(p.getMatrixFromQuaternion(b[1])).reshape(3, 3)
    return ra.T @ rb, ra.T @ (np.subtract(b[0], a[0]))


# --- mass and mount -----------------------------------------------------------------------------------------------
def test_the_mirrored_arm_puts_the_whole_commbots_mass_in_the_world_at_its_mount(arm, tmp_path, cache_dir):
    commbot = total_mass(build_model(scan_alone("sim://commbot?world=0", cache_dir)))
    body = total_mass(build_model(scan_alone(BODY_NO_WORLD, cache_dir)))
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where, body=BODY_WORLD)) as robot:
        embodied, mirror = mirror_of(robot)
        own = sum(p.getDynamicsInfo(embodied.robot.body_id, index, physicsClientId=embodied.world.client)[0]
                  for index in {link.index for link in embodied.robot.links})  # merged bodies share a link
        assert own == pytest.approx(body, rel=1e-12)  # the body's multibody is untouched
        assert mirror.total_mass() == pytest.approx(commbot - body, rel=1e-9)  # the arm's mass is in physics
        assert embodied.robot.total_mass() == pytest.approx(commbot, rel=1e-12)
        assert embodied.robot.total_mass() == pytest.approx(total_mass(robot.model), rel=1e-12)
        # keyed by the host's robot-wide IDs: the arm's bus IDs 1..9 do not collide with the body's
        shoulder = robot.joints["left_arm.shoulder_pitch"]
        assert shoulder.part_key != shoulder.part_id and shoulder.part_key in mirror.parts
        assert mirror.mount == (6, "shoulder_left")  # the torso's port, as the profile's mount says
        run_until(robot, lambda: robot.ticks >= 50)  # a second of wall time with gravity on the arm
        mount, base = mirror.mount_pose(), mirror.base_pose()
        assert np.linalg.norm(np.subtract(mount[0], base[0])) < MOUNT_SAG_M
        # the mirror belongs to the robot: it does not press on the torso's shoulder pads
        assert not robot.sensors["shoulders"].any


def test_a_body_without_a_world_or_a_single_bus_has_nothing_to_mirror(arm, tmp_path, cache_dir):
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where)) as robot:  # sim://commbot_body?world=0
        assert robot.mirrored == [] and robot.bus.transport.embodied is None
        assert all(hook.__name__ != "write_mirror" for hook in robot.after_cycle)


# --- the mirror follows the real joints -----------------------------------------------------------------------------
def test_moving_the_real_elbow_moves_the_mirrored_elbow_as_the_model_says(arm, tmp_path, cache_dir):
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where, body=BODY_WORLD)) as robot:
        embodied, mirror = mirror_of(robot)
        elbow = robot.joints["left_arm.elbow"]
        hand = robot.virtual.parts[robot.joints["left_arm.hand"].part_key]  # beyond the elbow, off its axis
        hand_body = hand.descriptor.bodies[0].name
        torso = embodied.robot.parts[6].bodies[0].name

        def hand_in_torso():
            return relative(embodied.robot.link_pose(6, torso), mirror.link_pose(hand.id, hand_body))

        before = hand_in_torso()
        goal = elbow.position + 0.6
        elbow.target = goal
        run_until(robot, lambda: abs(elbow.position - goal) < REACHED_RAD)
        assert elbow.position == pytest.approx(goal, abs=REACHED_RAD)
        robot.cycle()  # one more cycle: the mirror holds what it just read
        mirrored = mirror.joint_positions()
        for joint in (j for j in robot.joints.values() if j.bus == "arm"):
            assert mirrored[(joint.part_key, joint.part_joint)] == pytest.approx(joint.position, abs=1e-6), joint.name
        # the hand moved in the world, to where the host's model puts it for the joints as read
        rot, xyz = hand_in_torso()
        assert np.linalg.norm(xyz - before[1]) > 0.05
        model = robot.model
        q = model.neutral()
        for joint in robot.joints.values():
            q[model.q_index(joint.part_key, joint.part_joint)] = joint.position
        placements = forward_kinematics(model, create_data(model), q)
        link = {(lk.bus_id, lk.body): k for k, lk in enumerate(model.links)}
        m_torso, m_hand = placements[link[(6, torso)]], placements[link[(hand.id, hand_body)]]
        expected_xyz = m_torso.rotation.T @ (m_hand.translation - m_torso.translation)
        expected_rot = m_torso.rotation.T @ m_hand.rotation
        assert np.linalg.norm(xyz - expected_xyz) < MOUNT_SAG_M
        assert np.abs(rot - expected_rot).max() < 1e-2


def test_mirrored_positions_name_their_joint_and_the_world_touches_the_mirror(arm, tmp_path, cache_dir):
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where, body=BODY_WORLD)) as robot:
        embodied, mirror = mirror_of(robot)
        with pytest.raises(KeyError, match="no mirrored part has ID 6"):
            embodied.set_mirrored_positions({(6, "horn"): 0.0})  # the torso is the body's own part
        elbow = robot.joints["left_arm.elbow"]
        with pytest.raises(KeyError, match="has no moving joint 'nope'"):
            embodied.set_mirrored_positions({(elbow.part_key, elbow.part_joint): 0.1, (elbow.part_key, "nope"): 0})
        # a box where the hand is: the mirror collides with the world's other bodies (people, walls, boxes)
        hand = robot.virtual.parts[robot.joints["left_arm.hand"].part_key]
        xyz, _ = mirror.link_pose(hand.id, hand.descriptor.bodies[0].name)
        c = embodied.world.client
        with embodied.device.lock:
            shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=(0.05, 0.05, 0.05), physicsClientId=c)
            box = p.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=shape, basePosition=xyz,
                                    physicsClientId=c)
            embodied.world.step()
            assert any(point[2] == box for point in mirror.contact_points())
            assert any(point[2] == box for point in embodied.robot.all_contact_points())
            assert not any(point[2] == box for point in embodied.robot.contact_points())  # the body's own links


def test_under_the_sim_clock_the_mirror_is_written_between_the_masters_steps(arm, tmp_path, cache_dir):
    """The body's world is the lockstep master (the arm keeps wall time in its own process): the mirror is
    written after each cycle, under the device's lock, and the world's steps see it."""
    path = tmp_path / "sim.yaml"
    path.write_text(f"clock: sim\nsemantics: commbot\ncache_dir: {cache_dir}\nbuses:\n"
                    f"  - {{name: body, url: '{BODY_WORLD}?clock=sim'}}\n"
                    f"  - {{name: arm, url: '{arm.where}', mount: {{part: torso, port: shoulder_left}}}}\n")
    with Robot.open(path) as robot:
        embodied, mirror = mirror_of(robot)
        elbow = robot.joints["left_arm.elbow"]
        goal = elbow.position - 0.4
        elbow.target = goal
        run_until(robot, lambda: abs(elbow.position - goal) < REACHED_RAD)
        assert elbow.position == pytest.approx(goal, abs=REACHED_RAD)
        assert embodied.world.time_s > 0  # the master stepped the world meanwhile
        key = (elbow.part_key, elbow.part_joint)
        assert mirror.joint_positions()[key] == pytest.approx(elbow.position, abs=1e-6)
        with embodied.device.lock:  # 0.2 s of steps with no new reading: the position motor holds the last one
            embodied.world.advance_to(embodied.world.time_s + 0.2)
        assert mirror.joint_positions()[key] == pytest.approx(elbow.position, abs=1e-2)
