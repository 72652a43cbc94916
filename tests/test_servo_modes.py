"""The servo's control modes in the virtual device (firmware_sim/embodied/servo.py), as the controller uses them:
the position loop's stiffness from Position P Gain, current-based position mode's torque limit, current mode
with ``robot.set_mode`` / ``target_torque``, ``robot.dynamics`` at the last bus cycle, and examples/hold_arm.py.

The model (runtime.model, from the scanned descriptors) and the world (pybullet, built from the same
descriptors) are independent implementations of the same arm, so where a test compares a held error with
load / stiffness, the load comes from the model and the error from the world.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from hil.devices.control_table import XM430_W350, position_stiffness
from hil.runtime.model import create_data, gravity_torques
from hil.runtime.robot import JointLimitError, JointModeError, Robot, UnknownName
from hil.runtime.robot.runner import run_controller

ROOT = Path(__file__).resolve().parent.parent
HZ = 50.0
OUT = -math.pi / 2  # shoulder pitch that holds the arm straight out in front
RAD_PER_PULSE = 2 * math.pi / 4096
KT = 4.1 / 2.3  # N m/A, XM430-W350
PITCH, ELBOW = "left_arm.shoulder_pitch", "left_arm.elbow"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("descriptors")


def profile(cache_dir: Path) -> dict:
    return {"bus": "sim://commbot?clock=sim", "clock": "sim", "semantics": "commbot", "cache_dir": str(cache_dir)}


@pytest.fixture
def robot(cache_dir):
    opened = Robot.open(profile(cache_dir))
    try:
        yield opened
    finally:
        opened.close()


def run_for(robot, seconds: float, each=None) -> None:
    for tick in robot.loop(hz=HZ, duration_s=seconds):
        if each is not None:
            each(tick)


def part(robot, name: str):
    """The world-side firmware of the part behind joint ``name``."""
    joint = robot.joints[name]
    return next(p for p in robot.bus.transport.embodied.parts if p.id == joint.part_id)


def held_error(robot, name: str) -> tuple[float, float]:
    """(target - position, the model's gravity torque) of joint ``name`` now."""
    joint = robot.joints[name]
    return joint.target - joint.position, robot.dynamics.gravity_torques()[robot.dynamics.index(name)]


def test_position_mode_gives_way_by_the_load_over_the_p_gains_stiffness(robot):
    shoulder = robot.joints[PITCH]
    errors = {}
    for gain in (800, 1600):
        shoulder.host.write_register(shoulder.part_id, XM430_W350["position_p_gain"], gain)
        shoulder.target = OUT + 0.01 * (gain == 1600)  # a new goal each time
        run_for(robot, 1.5)
        error, load = held_error(robot, PITCH)
        stiffness = position_stiffness(gain, shoulder.limits.effort, RAD_PER_PULSE)
        assert abs(load) > 1.5, "the arm held out weighs on the shoulder"
        assert error == pytest.approx(load / stiffness, rel=0.05), f"P gain {gain}"
        errors[gain] = error
    assert errors[1600] == pytest.approx(errors[800] / 2, rel=0.08), "twice the gain, half the error"


def test_current_based_position_mode_limits_the_torque_to_goal_current(robot):
    shoulder = robot.joints[PITCH]
    host, pid = shoulder.host, shoulder.part_id
    host.write_register(pid, XM430_W350["torque_enable"], 0)
    host.write_register(pid, XM430_W350["operating_mode"], 5)
    host.write_register(pid, XM430_W350["goal_current"], round(0.5 / 0.00269))  # 0.5 A: 0.89 N m
    host.write_register(pid, XM430_W350["torque_enable"], 1)
    shoulder.target = OUT
    loads = []
    run_for(robot, 3.0, lambda tick: loads.append(held_error(robot, PITCH)[1]))
    error, _ = held_error(robot, PITCH)
    present = host.read_register(pid, XM430_W350["present_current"]) * 0.00269
    assert error < -0.5, "0.89 N m cannot hold the arm out (1.7 N m): it hangs well below"
    assert abs(present) == pytest.approx(0.5, rel=0.03), "the motor gives the current limit"
    # at the limit it swings (the current loop leaves no damping but the joint's) about where its weight, from
    # the model, equals the motor's 0.89 N m
    assert abs(np.mean(loads[-100:])) == pytest.approx(0.5 * KT, rel=0.1)
    host.write_register(pid, XM430_W350["goal_current"], 1193)  # the current limit: 5.7 N m, capped at 4.1
    run_for(robot, 1.5)
    error, load = held_error(robot, PITCH)
    assert error == pytest.approx(load / position_stiffness(800, 4.1, RAD_PER_PULSE), rel=0.05)


def test_current_mode_applies_the_commanded_torque_and_reports_its_current(robot):
    robot.set_mode(ELBOW, "current")
    elbow = robot.joints[ELBOW]
    firmware = part(robot, ELBOW)
    assert firmware.memory.get("operating_mode") == 0 and firmware.memory.get("torque_enable") == 1
    assert elbow.target_current == 0.0 and elbow.current_limit_a == pytest.approx(1193 * 0.00269)
    start = elbow.position
    elbow.target_torque = 1.0  # more than the gear friction (0.6 N m): the forearm swings up
    run_for(robot, 0.5)
    assert firmware.memory.get("goal_current") == round(1.0 / KT / 0.00269)
    assert abs(elbow.position - start) > 0.3
    present = elbow.host.read_register(elbow.part_id, XM430_W350["present_current"]) * 0.00269
    assert present == pytest.approx(1.0 / KT, abs=0.003)
    # it swings up until the forearm's weight (from the model) and the friction balance the torque
    run_for(robot, 2.0)
    load = robot.dynamics.gravity_torques()[robot.dynamics.index(ELBOW)]
    assert abs(1.0 - load) <= 0.6 + 0.02 and abs(elbow.velocity) < 0.05


def test_modes_are_checked_before_anything_is_written_and_closing_restores_position_mode(cache_dir):
    robot = Robot.open(profile(cache_dir))
    try:
        firmware = part(robot, PITCH)
        with pytest.raises(UnknownName):
            robot.set_mode([PITCH, "left_arm.wing"], "current")
        with pytest.raises(ValueError, match="mode must be one of"):
            robot.set_mode(PITCH, "torque")
        assert firmware.memory.get("operating_mode") == 3, "nothing switched"
        shoulder = robot.joints[PITCH]
        with pytest.raises(JointModeError, match=r"set_mode\(name, \"current\"\)"):
            shoulder.target_torque = 0.5
        robot.set_mode(PITCH, "current")
        with pytest.raises(JointModeError, match="runs in current mode"):
            shoulder.target = 0.1
        with pytest.raises(JointLimitError, match="beyond the part's current limit"):
            shoulder.target_current = 3.3
        with pytest.raises(JointLimitError, match="beyond its effort limit"):
            shoulder.target_torque = 4.2
        shoulder.target_torque = 0.3
        run_for(robot, 0.1)
    finally:
        robot.close()
    assert firmware.memory.get("operating_mode") == 3, "a current left applied after the run could lift or drop it"
    assert firmware.memory.get("torque_enable") == 1
    assert abs(firmware.memory.get("goal_position") - firmware.memory.get("present_position")) <= 1, "holding"


def test_dynamics_is_the_model_at_the_last_bus_cycle(robot):
    robot.joints[PITCH].target = -1.0
    robot.joints["head.neck_yaw"].target = 0.4
    run_for(robot, 0.6)
    dynamics = robot.dynamics
    assert dynamics is robot.dynamics
    for name, joint in robot.joints.items():
        assert dynamics.q[dynamics.index(name)] == joint.position
        assert dynamics.qd[dynamics.index(name)] == joint.velocity
    assert dynamics.q[dynamics.index(PITCH)] == pytest.approx(-1.0, abs=0.1)
    np.testing.assert_array_equal(dynamics.gravity_torques(), gravity_torques(robot.model, create_data(robot.model),
                                                                              dynamics.q))
    by_name = dynamics.by_name(dynamics.gravity_torques())
    assert set(by_name) == set(robot.joints) and by_name[PITCH] < -1.0
    assert dynamics.placement("cpc_servo_10_housing").translation[2] > 0.5, "the shoulder is up on the torso"
    assert dynamics.jacobian("cpc_servo_16_housing").shape == (6, 19)
    assert dynamics.mass_matrix().shape == (19, 19) and len(dynamics.center_of_mass()) == 3
    tau = dynamics.inverse_dynamics()
    np.testing.assert_allclose(dynamics.forward_dynamics(tau), 0.0, atol=1e-8)
    with pytest.raises(KeyError, match="no joint 'left_arm.wing'"):
        dynamics.index("left_arm.wing")


def test_hold_arm_example_holds_tighter_with_gravity_fed_forward(cache_dir, capsys):
    summary = run_controller(ROOT / "examples" / "hold_arm.py", profile(cache_dir), duration_s=10.0)
    out = capsys.readouterr().out
    assert summary.stopped == "returned", out
    held = {}
    for label in "ABC":
        line = next(line for line in out.splitlines() if line.startswith(f"{label} "))
        held[label] = [float(x) for x in re.findall(r"(?:shoulder_pitch|elbow) ([+-][0-9.]+) rad", line)]
        loads = [float(x) for x in re.findall(r"([+-][0-9.]+) N m", line)]
    full, half = (position_stiffness(g, 4.1, RAD_PER_PULSE) for g in (800, 400))
    assert held["A"][0] == pytest.approx(loads[0] / full, rel=0.05), "position mode: the load over the stiffness"
    assert held["B"][0] == pytest.approx(loads[0] / half, rel=0.05)
    assert abs(held["C"][0]) < abs(held["A"][0]) / 2, "feed-forward at half the gain: under half A's error"
    assert abs(held["C"][1]) <= 0.6 / half + 0.005, "the elbow: within the friction's reach of the target"
    assert "half the gain holds" in out and "friction-limited" in out
