"""The controller API on the commbot: Robot.open on the in-process virtual bus, driven on the simulator's clock.

Each test opens its own robot (a fresh world) and checks what the controller sees against what the world did:
joints reach their targets, the base drives at the commanded speed and turns at the commanded rate (world pose vs
odometry), the ring sees a wall placed in the world, the bumper reports a contact, and every tick costs exactly
one write and one read transaction. Everything is measured in simulated time; no wall-clock assertions.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pybullet as p
import pytest

from hil.devices.control_table import position_stiffness
from hil.runtime import Robot as LazyRobot
from hil.runtime.robot import JointLimitError, JointModeError, Robot, UnknownName
from hil.runtime.robot.runner import run_controller

SERVO_STIFFNESS = position_stiffness(800, 4.1, 2 * math.pi / 4096)  # N m/rad: an XM430-W350 at its default P gain

ROOT = Path(__file__).resolve().parent.parent
HZ = 50.0


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("descriptors")


def profile(cache_dir: Path, **extra) -> dict:
    return {"bus": "sim://commbot?clock=sim&watchdog_ms=500", "clock": "sim", "semantics": "commbot",
            "cache_dir": str(cache_dir), **extra}


@pytest.fixture
def robot(cache_dir):
    opened = Robot.open(profile(cache_dir))  # the product's lockstep clock, stepping the in-process world
    try:
        yield opened
    finally:
        opened.close()


def world_of(robot):
    return robot.bus.transport.embodied


def base_xy_yaw(robot) -> tuple[float, float, float]:
    (x, y, _), quaternion = world_of(robot).robot.base_pose()
    return x, y, p.getEulerFromQuaternion(quaternion)[2]


def run_for(robot, seconds: float, each=None) -> None:
    for tick in robot.loop(hz=HZ, duration_s=seconds):
        if each is not None:
            each(tick)


def add_wall(robot, near_face_x: float, thickness: float = 0.1) -> None:
    client = world_of(robot).world.client
    shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[thickness / 2, 2.0, 0.5], physicsClientId=client)
    p.createMultiBody(0, shape, basePosition=[near_face_x + thickness / 2, 0, 0.5], physicsClientId=client)


# --- opening -----------------------------------------------------------------------------------------------------
def test_open_names_every_joint_and_sensor_and_holds_the_pose(robot):
    assert LazyRobot is Robot, "`from runtime import Robot` is the controller API"
    assert len(robot.joints) == 19 and len(robot.virtual.parts) == 40
    for side in ("left_arm", "right_arm"):
        for joint in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "hand"):
            assert f"{side}.{joint}" in robot.joints
    assert {"head.neck_yaw", "left_eye.pan", "right_eye.tilt", "base.wheel_left", "base.wheel_right"} <= set(robot.joints)
    assert set(robot.sensors) == {"ring", "bumper", "shoulders", "left_arm.forearm", "right_arm.forearm",
                                  "head_camera", "right_camera"}  # the cameras: frames beside the bus
    assert robot.joints["torso/neck:horn"] is robot.joints["head.neck_yaw"], "the tree path still works"
    assert robot.joints["left_arm.hand"].path.endswith("/elbow/horn/hand")
    assert not robot.notes
    servos = [part for part in world_of(robot).parts if hasattr(part, "joint")]
    assert all(part.memory.get("torque_enable") == 1 for part in servos), "torque on for every joint"
    wheels = [part for part in servos if part.descriptor.kind == "wheel"]
    assert [w.memory.get("operating_mode") for w in wheels] == [1, 1] and all(w.memory.get("goal_velocity") == 0
                                                                               for w in wheels)
    for part in servos:
        if part.descriptor.kind != "wheel":
            assert part.memory.get("goal_position") == part.memory.get("present_position"), "goal = present"
    run_for(robot, 1.0)
    head = robot.joints["head.neck_pitch"]
    # held by the servo's position loop: it gives way by the head's weight over the loop's stiffness (P gain 800)
    load = abs(robot.dynamics.gravity_torques()[robot.dynamics.index("head.neck_pitch")])
    sag = load / SERVO_STIFFNESS
    assert load > 0.5 and abs(head.position) == pytest.approx(sag, rel=0.25), \
        f"the head is held (torque on): {head.position:+.4f} rad; {load:.3f} N m / stiffness = {sag:.4f} rad"


def test_joint_targets_are_reached(robot):
    targets = {"head.neck_yaw": 0.3, "left_arm.elbow": -0.5, "right_arm.shoulder_pitch": 0.4, "left_arm.hand": 0.8}
    start = {name: robot.joints[name].position for name in targets}
    for name, value in targets.items():
        robot.joints[name].target = value
    run_for(robot, 1.5)
    load = robot.dynamics.gravity_torques()
    for name, value in targets.items():
        joint = robot.joints[name]
        assert abs(start[name] - value) > 0.25, "the target is away from where it started"
        sag = abs(load[robot.dynamics.index(name)]) / SERVO_STIFFNESS  # the servo gives way under its load
        assert joint.position == pytest.approx(value, abs=0.01 + 1.25 * sag), name
        assert abs(joint.velocity) < 0.05, f"{name} has settled"
        assert joint.target == pytest.approx(value, abs=0.002)


def test_each_tick_is_one_write_and_one_read_transaction(robot):
    calls: list[tuple[str, int]] = []
    bus = robot.bus
    for method in ("sync_write", "bulk_write", "bulk_read", "sync_read", "read", "write"):
        original = getattr(bus, method)

        def spy(*args, _name=method, _original=original, **kwargs):
            items = args[0] if _name in ("bulk_read", "bulk_write") else args[2] if _name == "sync_write" else ()
            calls.append((_name + ("(fast)" if kwargs.get("fast") else ""), len(items)))
            return _original(*args, **kwargs)

        setattr(bus, method, spy)
    per_tick, counts = [], []
    before = robot.stats.transactions
    for tick in robot.loop(hz=HZ, duration_s=0.4):
        per_tick.append(list(calls))
        counts.append(robot.stats.transactions - before)
        calls.clear()
        before = robot.stats.transactions
        if tick.index < 10:  # a target that changes every tick...
            step = tick.index + 1
            robot.joints["head.neck_yaw"].target = 0.02 * step
            robot.joints["left_arm.elbow"].target = -0.02 * step
            robot.base.drive(0.01 * step, 0.0)
        # ...then nothing changes for the last ten ticks
    assert counts[1:11] == [2] * 10, "a tick with changed targets: one write + one read"
    assert counts[11:] == [1] * 9, "a tick with nothing to write: the read alone (it also feeds the watchdogs)"
    assert per_tick[2] == [("bulk_write", 4), ("bulk_read(fast)", 24)], \
        "positions and wheel velocities together: one BulkWrite; 19 joint parts + ring + 4 contact parts in one read"
    robot.joints["head.neck_yaw"].target = 0.0
    robot.joints["left_arm.elbow"].target = 0.0
    calls.clear()
    robot.cycle()
    assert calls == [("sync_write", 2), ("bulk_read(fast)", 24)], "one register for every target: a SyncWrite"


# --- the base ------------------------------------------------------------------------------------------------------
def test_base_geometry_comes_from_the_wheel_parts(robot):
    base = robot.base
    assert base.track_width == pytest.approx(0.45) and base.wheel_radius == pytest.approx(0.10)
    gains = {w.joint.name: w.gain for w in base.wheels}
    assert gains == {"base.wheel_left": pytest.approx(0.10), "base.wheel_right": pytest.approx(-0.10)}, \
        "the right wheel's axle points along -y: forward is a negative joint velocity"
    assert base.max_speed == pytest.approx(0.79, abs=0.01)
    left, right = base.wheel_speeds(0.3, 0.0)
    assert left == pytest.approx(3.0) and right == pytest.approx(-3.0)


def test_drive_forward_moves_at_v_and_odometry_agrees(robot):
    v = 0.3
    run_for(robot, 1.0, lambda tick: robot.base.drive(v, 0.0))  # accelerate
    x0, y0, yaw0 = base_xy_yaw(robot)
    odo0 = robot.base.odometry
    run_for(robot, 2.0, lambda tick: robot.base.drive(v, 0.0))
    x1, y1, yaw1 = base_xy_yaw(robot)
    odo1 = robot.base.odometry
    world_speed = math.hypot(x1 - x0, y1 - y0) / 2.0
    odo_speed = math.hypot(odo1.x - odo0.x, odo1.y - odo0.y) / 2.0
    assert world_speed == pytest.approx(v, rel=0.05), f"the world says {world_speed:.4f} m/s"
    assert odo_speed == pytest.approx(world_speed, rel=0.05), f"odometry {odo_speed:.4f} m/s"
    assert x1 - x0 > 0.55 and abs(yaw1 - yaw0) < 0.02, "forward is +x, and straight"
    assert robot.base.velocity.v == pytest.approx(v, rel=0.05) and abs(robot.base.velocity.w) < 0.02
    assert abs(robot.base.odometry.x - x1) < 0.05 * x1, "odometry and the world agree on the distance driven"


def test_drive_turns_at_w_and_odometry_agrees(robot):
    w = 0.5
    run_for(robot, 1.0, lambda tick: robot.base.drive(0.0, w))
    _, _, yaw0 = base_xy_yaw(robot)
    odo0 = robot.base.odometry.yaw
    run_for(robot, 2.0, lambda tick: robot.base.drive(0.0, w))
    x1, y1, yaw1 = base_xy_yaw(robot)
    world_rate = math.remainder(yaw1 - yaw0, 2 * math.pi) / 2.0
    odo_rate = (robot.base.odometry.yaw - odo0) / 2.0
    assert world_rate == pytest.approx(w, rel=0.10), f"the world turned at {world_rate:.4f} rad/s (counter-clockwise)"
    assert odo_rate == pytest.approx(world_rate, rel=0.10), f"odometry {odo_rate:.4f} rad/s"
    assert math.hypot(x1, y1) < 0.05, "it turned on the spot"


def test_drive_beyond_the_wheels_limit_changes_nothing(robot):
    robot.base.drive(0.2, 0.0)
    with pytest.raises(JointLimitError, match=r"base\.wheel_(left|right).*top speed 0\.79"):
        robot.base.drive(2.0, 0.0)
    assert [w.joint.target_velocity for w in robot.base.wheels] == [pytest.approx(2.0), pytest.approx(-2.0)]


def test_close_stops_the_wheels_and_leaves_servos_holding(cache_dir):
    robot = Robot.open(profile(cache_dir))
    run_for(robot, 0.5, lambda tick: robot.base.drive(0.3, 0.0))
    parts = {part.id: part for part in world_of(robot).parts}
    assert parts[2].memory.get("goal_velocity") != 0
    clock = robot.clock
    robot.close()
    assert parts[2].memory.get("goal_velocity") == 0 and parts[3].memory.get("goal_velocity") == 0
    assert parts[30].memory.get("torque_enable") == 1, "servos keep holding"
    assert clock.closed and robot.closed
    with pytest.raises(RuntimeError, match="closed"):
        robot.cycle()


# --- sensors -------------------------------------------------------------------------------------------------------
def test_ring_sees_a_wall_placed_in_the_world(robot):
    wall_x = 1.5
    add_wall(robot, wall_x)
    run_for(robot, 0.5)
    ring = robot.sensors["ring"]
    origin, _ = world_of(robot).robot.link_pose(ring.part_id, "ring")
    expected = wall_x - (origin[0] + 0.20)  # rays start on the ring's outer face, radius 0.20 m
    tolerance = 3 * (0.003 + 0.01 * expected)  # 3 sigma of the part's noise model (sigma = 3 mm + 1 % of range)
    front = ring.angles.index(min(ring.angles, key=abs))
    assert ring.angles[front] == pytest.approx(0.0, abs=1e-9), "sensor 0 looks straight ahead"
    assert ring.ranges[front] == pytest.approx(expected, abs=tolerance), (ring.ranges, expected)
    assert ring.raw[front] == round(ring.ranges[front] * 1000), "metres through the part's driver (raw mm)"
    back = ring.angles.index(max(ring.angles, key=abs))
    assert ring.ranges[back] is None and ring.raw[back] == ring.no_target_raw, "nothing behind: no echo is None"
    assert ring.nearest(-0.3, 0.3) == pytest.approx(expected, abs=tolerance)


def test_bumper_reports_the_contact_by_zone(robot):
    add_wall(robot, 0.45)
    bumper = robot.sensors["bumper"]
    assert bumper.pressed == {"left": False, "centre": False, "right": False} and bumper.mask == 0
    hit = None
    for tick in robot.loop(hz=HZ, duration_s=3.0):
        if bumper.any:
            hit = tick
            break
        robot.base.drive(0.2, 0.0)
    assert hit is not None, "the robot reached the wall"
    assert bumper.pressed["centre"] and bumper.mask & 0b010
    run_for(robot, 0.5)
    assert abs(robot.base.velocity.v) < 0.02, "the bumper interlock stopped the wheels"


# --- names and limits ------------------------------------------------------------------------------------------------
def test_unknown_names_list_close_matches(robot):
    with pytest.raises(KeyError) as info:
        robot.joints["head.neck_yw"]
    assert isinstance(info.value, UnknownName)
    assert "'head.neck_yaw'" in str(info.value) and "no joint named 'head.neck_yw'" in str(info.value)
    with pytest.raises(KeyError, match="left_arm.elbow"):
        robot.joints["left_arm.elbo"]
    with pytest.raises(KeyError, match="did you mean 'ring'"):
        robot.sensors["rings"]


def test_targets_outside_limits_name_the_joint_and_change_nothing(robot):
    hand = robot.joints["left_arm.hand"]
    before = hand.target
    with pytest.raises(JointLimitError, match=r"joint left_arm\.hand: target 2 rad is outside its limits 0\.\.1\.2 rad"):
        hand.target = 2.0
    assert hand.target == before and hand.pending_write() is None, "nothing half-applied"
    with pytest.raises(JointLimitError, match="head.neck_yaw.*must be finite"):
        robot.joints["head.neck_yaw"].target = math.nan
    with pytest.raises(JointModeError, match="base.wheel_left runs in velocity mode"):
        robot.joints["base.wheel_left"].target = 1.0
    assert robot.joints["left_arm.hand"].limits.upper == pytest.approx(1.2)


# --- hil run ---------------------------------------------------------------------------------------------------------
def test_unmodified_script_follows_the_sim_clock_under_the_time_patch(cache_dir, tmp_path, capsys):
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent("""
        import time                       # no runtime import for time: only time.sleep / time.time
        start = time.time()
        neck = robot.joints["head.neck_yaw"]
        while True:
            neck.target = 0.2
            robot.cycle()
            time.sleep(0.02)
            elapsed = time.time() - start
    """))
    summary = run_controller(script, profile(cache_dir), duration_s=2.0,
                             open_robot=partial(Robot.open))
    out = capsys.readouterr().out
    assert summary.mode == "script" and summary.stopped == "duration"
    assert summary.clock_s == pytest.approx(2.0) and summary.ticks == 101, "100 sleeps of 20 ms of sim time"
    assert "101 ticks in 2.000 s of clock time" in out and "bus: " in out


def test_wander_avoid_stops_on_a_bumper_contact_the_ring_cannot_see(cache_dir, capsys):
    def open_with_kerb(profile_, bus=None):
        robot = Robot.open(profile_, bus=bus)
        client = world_of(robot).world.client
        kerb = p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.05, 1.0, 0.06], physicsClientId=client)
        p.createMultiBody(0, kerb, basePosition=[1.0, 0, 0.06], physicsClientId=client)  # 0.12 m: below the ring
        return robot

    summary = run_controller(ROOT / "examples" / "wander_avoid.py", profile(cache_dir), duration_s=10.0,
                             open_robot=open_with_kerb)
    out = capsys.readouterr().out
    assert summary.stopped == "returned", "the controller ended itself on the contact, before the 10 s"
    line = next(line for line in out.splitlines() if "bumper pressed" in line)
    assert "(left, centre, right)" in line, "the whole plate meets the kerb"
    stopped_x = float(line.split("x=")[1].split()[0])
    assert stopped_x == pytest.approx(0.95 - 0.155, abs=0.05), "odometry: kerb face minus the bumper's reach"
    assert "ahead:  nothing  -> cruise" in out and "-> turn" not in out, "the ring never saw the kerb"
    assert summary.clock_s < 5.0


def trial_log(cache_dir) -> list:
    """One second of driving toward a wall while sweeping the neck: what the controller saw, tick by tick."""
    with Robot.open(profile(cache_dir, semantics="commbot")) as robot:
        add_wall(robot, 1.2)
        log = []
        for tick in robot.loop(hz=HZ, duration_s=1.0):
            robot.joints["head.neck_yaw"].target = 0.3 * math.sin(2 * math.pi * tick.time)
            robot.base.drive(0.3, 0.2)
            log.append((tick, robot.joints["head.neck_yaw"].position, robot.base.odometry,
                        tuple(robot.sensors["ring"].raw)))
        return log


def test_sim_clock_runs_are_identical(cache_dir):
    first, second = trial_log(cache_dir), trial_log(cache_dir)
    assert first == second, "same profile, same controller, same seed: the same trial"
    assert first[0][3] != first[-1][3] and first[-1][2].x > 0.1, "and something happened in it"


def test_the_same_controller_runs_on_the_real_clock(cache_dir, capsys):
    real = {**profile(cache_dir), "bus": "sim://commbot", "clock": "real"}
    summary = run_controller(ROOT / "examples" / "joint_sweep.py", real, duration_s=0.3)
    assert summary.clock == "real" and summary.stopped == "duration"
    assert 1 <= summary.ticks <= 15, "paced at 50 Hz by the wall clock: at most 15 ticks in 0.3 s"
    assert "sim://commbot?clock=real, clock real: duration" in capsys.readouterr().out


def test_hil_run_joint_sweep_as_a_subprocess(tmp_path):
    env = {**os.environ, "HIL_CACHE_DIR": str(tmp_path / "cache"), "HIL_TRUST_FILE": str(tmp_path / "trust.yaml")}
    hil = Path(sys.executable).with_name("hil")
    command = [str(hil)] if hil.exists() else [sys.executable, "-m", "hil"]
    result = subprocess.run([*command, "run", "examples/joint_sweep.py", "--profile", "config/profiles/virtual.yaml",
                             "--duration", "2"], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "hil run: examples/joint_sweep.py (main) on sim://commbot?clock=sim, clock sim: duration" in result.stdout
    assert "100 ticks in 2.000 s of clock time" in result.stdout
    assert "bus: " in result.stdout and " 0 failed" in result.stdout
    assert "t=  1.00 s  neck_yaw" in result.stdout, "the controller's own output"
