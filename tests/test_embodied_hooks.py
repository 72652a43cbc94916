"""The per-step firmware hooks that run only when something can have changed: watchdogs kept by
deadline, contact sensors skipping the quiet steps. Each check states the rule the per-step poll applied and
asserts the scheduled hooks act on exactly the step it would have."""
from __future__ import annotations

import pybullet as p

from hil.devices.control_table import XM430_W350 as XM
from hil.firmware_sim.world.frames import compose
from hil.runtime.bus import BusHost
from hil.runtime.transports.sim import SimTransport

WHEEL_LEFT, WHEEL_RIGHT, ELBOW, BUMPER = 2, 3, 16, 5


def sim_commbot(**options):
    query = "&".join(f"{k}={v}" for k, v in {"clock": "sim", **options}.items())
    transport = SimTransport(f"sim://commbot?{query}")
    return transport.embodied, BusHost(transport)


def test_each_watchdog_fires_on_the_first_step_past_its_deadline():
    """Three actuators with different watchdog times, one of them addressed again later: each stops on the first
    step whose start lies more than its time after its last access (the rule the per-step poll checked)."""
    embodied, bus = sim_commbot(watchdog_ms=0)
    with embodied:
        world, dt = embodied.world, embodied.world.time_step_s
        settings = {WHEEL_LEFT: 3, WHEEL_RIGHT: 7, ELBOW: 5}  # x 20 ms
        for dxl_id, units in settings.items():
            bus.write_register(dxl_id, XM["bus_watchdog"], units)
        bus.sync_write_register(XM["torque_enable"], {i: 1 for i in settings})
        bus.sync_write_register(XM["goal_velocity"], {WHEEL_LEFT: 50, WHEEL_RIGHT: -50})
        world.advance_to(0.05)
        bus.read_register(WHEEL_RIGHT, XM["present_velocity"])  # addressed again: its deadline moves
        world.advance_to(0.5)
        servos = {part.id: part for part in embodied.parts if part.id in settings}
        for dxl_id, servo in servos.items():
            (step, why), = servo.stops
            assert why == "watchdog"
            expected = next(k for k in range(world.steps) if k * dt - servo.last_access_s > settings[dxl_id] * 0.02)
            assert step == expected, (dxl_id, step, expected)
            assert bus.read_register(dxl_id, XM["bus_watchdog"]) == 255


def test_a_contact_sensor_reads_zero_again_the_step_the_touch_ends():
    embodied, bus = sim_commbot(watchdog_ms=0)
    with embodied:
        world, robot = embodied.world, embodied.robot
        bumper = next(part for part in embodied.parts if part.id == BUMPER)
        world.advance_to(0.1)
        assert bumper.memory.get("contact") == 0
        shape = bumper.descriptor.body("bumper").collisions[1]
        centre = compose(robot.link_pose(BUMPER, "bumper"), (tuple(shape.pose.xyz), (0, 0, 0, 1)))[0]
        sphere = p.createCollisionShape(p.GEOM_SPHERE, radius=0.01, physicsClientId=world.client)
        stone = p.createMultiBody(0.0, sphere, basePosition=centre, physicsClientId=world.client)
        world.step()
        assert bumper.memory.get("contact") & 0b010, "the centre zone reads the touch"
        assert embodied.interlock.pressed
        p.removeBody(stone, physicsClientId=world.client)
        world.step()
        assert bumper.memory.get("contact") == 0 and not embodied.interlock.pressed
        assert bus.read_register(BUMPER, bumper.table["contact"]) == 0
