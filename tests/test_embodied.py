"""The virtual robot in its pybullet world, driven through the bus as a controller would drive the real one.

Over a pty with the official client (the device served from a thread of this process, real clock, so the test
can read the world pose), and in-process on the simulator's clock for the exact checks (watchdog, bumper, ring,
determinism). No wall-clock assertions: polls are bounded by world time (and a wall-time cap).
"""
from __future__ import annotations

import math
import threading
import time

import pybullet as p
import pytest

from hil.devices.control_table import XM430_W350 as XM
from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.embodied import embody
from hil.firmware_sim.serve import serve_pty
from hil.runtime.bus import BusHost
from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S
from hil.runtime.transports.sim import SimTransport

ELBOW, WHEEL_LEFT, WHEEL_RIGHT, RING, BUMPER = 16, 2, 3, 4, 5
CENTRE = 2048
TICK_RAD = 2 * math.pi / 4096


# The SDK waits 2 x its adapter's latency timer + 2 ms for a reply; a pty has no adapter but a serving thread that
# the OS schedules, so give it the host's own allowance for a process peer (runtime/transports/base.py).
SDK_PTY_LATENCY_TIMER_MS = 1000 * PEER_PROCESS_LATENCY_S / 2
POLL_WORLD_S = 4.0  # polls are bounded by world time (which a loaded machine slows), and by WALL_CAP_S
WALL_CAP_S = 120.0


@pytest.fixture
def served_commbot(monkeypatch):
    """The commbot embodied with the real clock, on a pty served by a thread; yields (embodied, pty path)."""
    from dynamixel_sdk import port_handler

    monkeypatch.setattr(port_handler, "LATENCY_TIMER", SDK_PTY_LATENCY_TIMER_MS)
    embodied = embody(load_assembly("commbot"), clock="real", watchdog_s=0.5)
    stop, ready = threading.Event(), threading.Event()
    where: list[str] = []
    thread = threading.Thread(target=serve_pty, args=(embodied.device, stop, lambda path: (where.append(path),
                                                                                             ready.set())), daemon=True)
    thread.start()
    assert ready.wait(10), "the pty did not come up"
    yield embodied, where[0]
    stop.set()
    thread.join(10)
    embodied.close()


def sdk_port(path: str):
    from dynamixel_sdk import PacketHandler, PortHandler

    port, handler = PortHandler(path), PacketHandler(2.0)
    assert port.openPort() and port.setBaudRate(1_000_000)
    return port, handler


def sdk_ok(result) -> None:
    comm, error = result[-2], result[-1]
    assert comm == 0 and error == 0, (comm, error)


def world_polls(embodied, world_s: float = POLL_WORLD_S):
    """Yield until ``world_s`` of world time passed (a world on a loaded machine runs slower than the wall and
    skips what it cannot catch up, so a fixed number of wall-clock polls would test the machine, not the robot);
    at most WALL_CAP_S of wall time, so nothing hangs."""
    end, wall_end = embodied.world.time_s + world_s, time.monotonic() + WALL_CAP_S
    while embodied.world.time_s < end and time.monotonic() < wall_end:
        yield
        time.sleep(0.01)


# The servo's position loop has a finite stiffness (18.9 N m/rad at the default P gain 800), so a joint
# under gravity settles short of its goal by load / stiffness: ~11 ticks for the elbow here. 20 ticks (0.03 rad)
# is "arrived"; a joint that did not move at all is 500 ticks away.
ARRIVED_TICKS = 20


def test_sdk_moves_a_joint_with_its_dynamics(served_commbot):
    embodied, path = served_commbot
    port, ph = sdk_port(path)
    try:
        goal = CENTRE + 500
        # a slow profile (20 x 0.229 rpm: 500 ticks in ~1.6 s of world time), so that even a loaded machine's slow
        # polls see the joint on its way
        sdk_ok(ph.write4ByteTxRx(port, ELBOW, XM["profile_velocity"].address, 20))
        sdk_ok(ph.write1ByteTxRx(port, ELBOW, XM["torque_enable"].address, 1))
        sdk_ok(ph.write4ByteTxRx(port, ELBOW, XM["goal_position"].address, goal))
        trace = []
        for _ in world_polls(embodied):
            position, comm, error = ph.read4ByteTxRx(port, ELBOW, XM["present_position"].address)
            assert comm == 0 and error == 0
            trace.append(position if position < 1 << 31 else position - (1 << 32))
            if abs(trace[-1] - goal) <= ARRIVED_TICKS:
                break
        joint = embodied.robot.joint(ELBOW, "horn")
        q = p.getJointState(embodied.robot.body_id, joint.index, physicsClientId=embodied.world.client)[0]
    finally:
        port.closePort()
    assert abs(trace[-1] - goal) <= ARRIVED_TICKS, f"present position {trace[-1]} never reached {goal}"
    assert len(set(trace)) > 3, "it moved through intermediate positions (joint dynamics), not in one jump"
    assert q == pytest.approx((goal - CENTRE) * TICK_RAD, abs=(ARRIVED_TICKS + 2) * TICK_RAD), \
        "the world's joint is where the bus says"


def test_sdk_wheel_velocity_moves_the_robot(served_commbot):
    embodied, path = served_commbot
    port, ph = sdk_port(path)
    start = embodied.robot.base_pose()[0]
    try:
        for wheel, velocity in ((WHEEL_LEFT, 100), (WHEEL_RIGHT, -100)):  # the right wheel's axle points along -y
            sdk_ok(ph.write1ByteTxRx(port, wheel, XM["torque_enable"].address, 1))
            sdk_ok(ph.write4ByteTxRx(port, wheel, XM["goal_velocity"].address, velocity & 0xFFFFFFFF))
        for _ in world_polls(embodied):  # reading keeps the watchdog fed
            sdk_ok(ph.read4ByteTxRx(port, WHEEL_LEFT, XM["present_velocity"].address))
            if embodied.robot.base_pose()[0][0] - start[0] > 0.15:
                break
        end = embodied.robot.base_pose()[0]
    finally:
        port.closePort()
    assert end[0] - start[0] > 0.15, f"the robot moved {end[0] - start[0]:.3f} m forward"
    assert abs(end[1] - start[1]) < 0.05, "both wheels at the same speed drive it straight"


# --- in-process, simulator's clock: exact in simulated time -----------------------------------------------------
def sim_commbot(**options):
    """The commbot on the simulator's clock with every servo holding its zero pose, as a controller starts it
    (with torque off the head would sag forward: the neck's gear friction cannot hold it)."""
    query = "&".join(f"{k}={v}" for k, v in {"clock": "sim", **options}.items())
    transport = SimTransport(f"sim://commbot?{query}")
    bus = BusHost(transport)
    servos = [part.id for part in transport.embodied.parts
              if hasattr(part, "joint") and part.descriptor.kind in ("servo_joint", "gripper")]
    bus.sync_write_register(XM["goal_position"], {i: CENTRE for i in servos})
    bus.sync_write_register(XM["torque_enable"], {i: 1 for i in servos})
    return transport.embodied, bus


def drive(bus: BusHost, velocity: int) -> None:
    bus.sync_write_register(XM["torque_enable"], {WHEEL_LEFT: 1, WHEEL_RIGHT: 1})
    bus.sync_write_register(XM["goal_velocity"], {WHEEL_LEFT: velocity, WHEEL_RIGHT: -velocity})


def wheel_speed(embodied) -> float:
    joint = embodied.robot.joint(WHEEL_LEFT, "wheel")
    return p.getJointState(embodied.robot.body_id, joint.index, physicsClientId=embodied.world.client)[1]


def test_watchdog_stops_actuators_within_its_time():
    embodied, bus = sim_commbot(watchdog_ms=100)
    with embodied:
        drive(bus, 100)
        last_command_s = embodied.world.time_s
        embodied.world.advance_to(0.09)
        assert wheel_speed(embodied) > 2.0, "still driving before the watchdog time"
        embodied.world.advance_to(0.6)
        wheel = next(part for part in embodied.parts if part.id == WHEEL_LEFT)
        (step, why), = wheel.stops
        assert why == "watchdog"
        assert step * embodied.world.time_step_s - last_command_s <= 0.1 + 2 * embodied.world.time_step_s
        assert abs(wheel_speed(embodied)) < 0.05, "stopped"
        assert bus.read_register(WHEEL_LEFT, XM["bus_watchdog"]) == 255, "the register says the watchdog fired"
        drive(bus, 100)  # a new command resumes...
        embodied.world.advance_to(0.7)
        assert wheel_speed(embodied) > 2.0
        assert bus.read_register(WHEEL_LEFT, XM["bus_watchdog"]) == 5, "...and re-arms the watchdog (5 x 20 ms)"
        embodied.world.advance_to(1.2)
        assert [why for _, why in wheel.stops] == ["watchdog", "watchdog"]


def add_wall(embodied, x: float, thickness: float = 0.1) -> int:
    """A static wall across the robot's path whose near face is at ``x``."""
    client = embodied.world.client
    shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[thickness / 2, 2.0, 0.5], physicsClientId=client)
    return p.createMultiBody(0, shape, basePosition=[x + thickness / 2, 0, 0.5], physicsClientId=client)


def test_bumper_contact_stops_the_wheels_within_one_step():
    embodied, bus = sim_commbot(watchdog_ms=0)
    with embodied:
        add_wall(embodied, 0.45)
        drive(bus, 100)
        bumper = next(part for part in embodied.parts if part.id == BUMPER)
        wheel = next(part for part in embodied.parts if part.id == WHEEL_LEFT)
        first_contact = None
        for _ in range(int(3.0 / embodied.world.time_step_s)):
            embodied.world.step()
            if bumper.memory.get("contact"):
                first_contact = embodied.world.steps
                break
        assert first_contact is not None, "the robot reached the wall"
        assert bus.read_register(BUMPER, bumper.table["contact"]) & 0b010, "the centre zone reads pressed"
        assert wheel.stops == [(first_contact, "interlock")], "stopped in the post-step hook of the contact step"
        assert embodied.interlock.trips == 1
        speed_at_contact = abs(wheel_speed(embodied))
        embodied.world.advance_to(embodied.world.time_s + 0.5)
        assert abs(wheel_speed(embodied)) < 0.05 < speed_at_contact


def ring_ranges(bus: BusHost, ring) -> list[int]:
    names = ring.model.config.registers
    data = bus.read(RING, ring.table[names[0]].address, 2 * len(names))
    return [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]


def test_front_ring_sensor_reads_the_wall_distance():
    embodied, bus = sim_commbot(watchdog_ms=0)
    with embodied:
        wall_x = 1.5
        add_wall(embodied, wall_x)
        embodied.world.advance_to(0.3)
        ring = next(part for part in embodied.parts if part.id == RING)
        origin, _ = embodied.robot.link_pose(RING, "ring")
        expected_m = wall_x - (origin[0] + ring.model.config.origin_radius_m)
        sigma = ring.model.sigma_m(expected_m)
        readings = []
        for k in range(20):
            embodied.world.advance_to(0.3 + 0.1 * (k + 1))
            readings.append(ring_ranges(bus, ring)[0])
        assert all(abs(r / 1000 - expected_m) <= 5 * sigma + 0.001 for r in readings), (readings, expected_m)
        assert ring_ranges(bus, ring)[6] == ring.model.config.no_target_raw, "nothing behind the robot"
        counters = ring.model.config.invalid_counters
        no_hit = bus.read_register(RING, ring.table[counters["no_hit"]])
        assert no_hit == ring.model.counters["no_hit"] > 0, "the part counts its invalid readings by cause"


def scripted_trial(seed: int) -> list[list[int]]:
    embodied, bus = sim_commbot(seed=seed, watchdog_ms=0)
    with embodied:
        add_wall(embodied, 2.0)
        ring = next(part for part in embodied.parts if part.id == RING)
        drive(bus, 60)
        log = []
        for k in range(15):
            embodied.world.advance_to(0.1 * (k + 1))
            log.append(ring_ranges(bus, ring))
        return log


def test_same_seed_and_commands_give_identical_readings():
    first, second = scripted_trial(7), scripted_trial(7)
    assert first == second
    assert first != scripted_trial(8), "the noise comes from the seed"
    assert first[0][0] > first[-1][0], "the wall came closer as the robot drove"
