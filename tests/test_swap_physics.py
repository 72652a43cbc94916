"""A part swapped for another model moves as that model does (firmware_sim/embodied/reembody.py): a
weaker servo at the elbow cannot lift the forearm the original lifted, a slower wheel motor turns at its own
limit, and the world's robot weighs what its parts' descriptors now add up to. The commbot on the in-process
sim-clock world, the runtime's own loop adopting the changed part, pybullet asked directly for what it simulates."""
from __future__ import annotations

import pybullet as p
import pytest

from hil.devices.catalog import load_part
from hil.devices.descriptor import descriptor_from_dict, descriptor_to_dict
from hil.firmware_sim import hotplug
from hil.runtime.robot import Robot

HZ = 50.0
ELBOW, LEFT_WHEEL = 26, 2


def profile(tmp_path) -> dict:
    return {"bus": "sim://commbot?clock=sim&watchdog_ms=500", "clock": "sim", "semantics": "commbot",
            "cache_dir": str(tmp_path / "cache")}


def other_model(base: str, name: str, effort: float, velocity: float, mass_scale: float):
    """``base`` from the catalog as another model: its joint's effort and velocity limits and its masses."""
    doc = descriptor_to_dict(load_part(base))
    doc["name"] = name
    doc["joints"][0]["limits"].update(effort=effort, velocity=velocity)
    for body in doc["bodies"]:
        body["mass"] *= mass_scale
        body["inertia"] = {k: v * mass_scale for k, v in body["inertia"].items()}
    # the same Dynamixel-compatible table (model number): the host tells the models apart by their descriptors
    return descriptor_from_dict(doc)


def world_of(robot):
    return robot.bus.transport.embodied


def run(robot, seconds: float, each=None) -> None:
    for _ in robot.loop(hz=HZ, duration_s=seconds):
        if each is not None:
            each(robot)


def swap_while_running(robot, part_id: int, desc) -> None:
    """Unplug, swap, and run until the runtime has adopted the changed part (a 'changed' event)."""
    dev = robot.bus.transport.device
    hotplug.unplug(dev, part_id)
    run(robot, 0.2)
    hotplug.swap(dev, part_id, desc)
    run(robot, 1.0)
    assert [e.kind for e in robot.part_events][-2:] == ["lost", "changed"], robot.notes


def test_a_weaker_servo_at_the_elbow_cannot_lift_what_the_original_lifted(tmp_path):
    weak = other_model("cpc_servo", "cpc_servo_weak", effort=0.05, velocity=1.0, mass_scale=0.5)
    with Robot.open(profile(tmp_path)) as robot:
        embodied = world_of(robot)
        mass_before = embodied.robot.total_mass()
        run(robot, 2.0, each=lambda r: setattr(r.joints["right_arm.elbow"], "target", 1.2))
        lifted = robot.joints["right_arm.elbow"].position
        swap_while_running(robot, ELBOW, weak)
        assert embodied.robot.joint(ELBOW, "horn").limits.effort == pytest.approx(0.05)
        run(robot, 3.0, each=lambda r: setattr(r.joints["right_arm.elbow"], "target", 1.2))
        weak_reached = robot.joints["right_arm.elbow"].position
        assert robot.joints["right_arm.elbow"].available
        q = p.getJointState(embodied.robot.body_id, embodied.robot.joint(ELBOW, "horn").index,
                            physicsClientId=embodied.robot.client)[0]
        assert q == pytest.approx(weak_reached, abs=0.02), "the host reads what the world simulates"
        old_mass = sum(b.inertial.mass for b in load_part("cpc_servo").bodies)
        new_mass = sum(b.inertial.mass for b in weak.bodies)
        assert embodied.robot.total_mass() == pytest.approx(mass_before - old_mass + new_mass, abs=1e-9)
    assert lifted == pytest.approx(1.2, abs=0.05), "the original servo lifts the forearm"
    assert abs(weak_reached - 1.2) > 0.3, f"a 0.05 N m servo cannot hold the forearm at 1.2 rad ({weak_reached})"


def test_a_weaker_wheel_motor_cannot_turn_its_wheel_as_fast_and_a_slower_one_turns_at_its_limit(tmp_path):
    """The controller asks 4 rad/s of the left wheel (the robot pivots on the right one): the original's 10 N m
    turn it at 4 rad/s, a 0.3 N m motor cannot; a motor of 2 rad/s commanded past its limit over the bus (the
    runtime refuses that, the firmware clamps it) turns at 2 rad/s."""
    weak = other_model("wheel_motor", "wheel_motor_weak", effort=0.3, velocity=7.9, mass_scale=2.0)
    slow = other_model("wheel_motor", "wheel_motor_slow", effort=10.0, velocity=2.0, mass_scale=1.0)

    def spin(r):
        r.joints["base.wheel_left"].target_velocity = 4.0  # rad/s, within both models' limits

    with Robot.open(profile(tmp_path)) as robot:
        embodied = world_of(robot)
        body = embodied.robot
        mass_before = body.total_mass()

        def world_speed() -> float:
            joint = next(j for j in body.moving_joints if j.part_id == LEFT_WHEEL)
            return p.getJointState(body.body_id, joint.index, physicsClientId=body.client)[1]

        run(robot, 1.0, each=spin)
        before = world_speed()
        swap_while_running(robot, LEFT_WHEEL, weak)
        run(robot, 1.0, each=spin)
        weak_speed = world_speed()
        firmware = embodied.device.part(LEFT_WHEEL)
        assert firmware.descriptor.name == "wheel_motor_weak" and hasattr(firmware, "joint"), "world-backed"
        assert body.total_mass() == pytest.approx(mass_before + sum(b.inertial.mass for b in
                                                                    load_part("wheel_motor").bodies), abs=1e-9)
        swap_while_running(robot, LEFT_WHEEL, slow)
        wheel = robot.joints["base.wheel_left"]
        velocity = wheel.register("goal_velocity")
        raw = round(5.0 / 0.023980824)  # 5 rad/s in the register's units: past the slow model's 2 rad/s
        torque = wheel.register("torque_enable")
        robot.bus.write(LEFT_WHEEL, torque.address, bytes([1]))
        robot.bus.write(LEFT_WHEEL, velocity.address, raw.to_bytes(velocity.size, "little", signed=True))
        run(robot, 1.0)
        slow_speed = world_speed()
    assert before == pytest.approx(4.0, abs=0.1)
    assert weak_speed < 3.0, f"a 0.3 N m wheel motor cannot pivot the robot at 4 rad/s ({weak_speed:.2f})"
    assert slow_speed == pytest.approx(2.0, abs=0.1), "the slow model's velocity limit, not the commanded 5 rad/s"
