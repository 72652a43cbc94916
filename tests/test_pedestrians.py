"""Pedestrians in the physics world: free where the way is clear, stopped by what they hit, seen by the ring."""
from __future__ import annotations

import pybullet as p
import pytest

from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.embodied import embody
from hil.firmware_sim.world import World
from hil.firmware_sim.world.pedestrians import Pedestrians, PedestrianIntent


def test_free_walking_reaches_the_intended_velocity_and_people_are_removed():
    with World() as world:
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, 1.2, 0.0), PedestrianIntent(2, 0.0, 3.0, 0.0, -0.8)])
        world.advance_to(2.0)
        one, two = people.states()
        assert (one.vx, one.vy) == pytest.approx((1.2, 0.0), abs=0.02)
        assert (two.vx, two.vy) == pytest.approx((0.0, -0.8), abs=0.02)
        assert one.x == pytest.approx(1.2 * 2.0 - 1.2 * 0.25, abs=0.15), "accelerated with the drive's time constant"
        people.sync([PedestrianIntent(2, 0.0, 0.0, 0.0, 0.0)])
        assert [s.id for s in people.states()] == [2] and 1 not in people.bodies


def test_a_wall_stops_a_person_who_intends_to_walk_through_it():
    with World() as world:
        wall = p.createMultiBody(0, p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.05, 2, 1], physicsClientId=world.client),
                                 basePosition=[1.5, 0, 1], physicsClientId=world.client)
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, 1.0, 0.0, radius=0.25)])
        world.advance_to(4.0)
        (state,) = people.states()
        assert state.x <= 1.5 - 0.05 - 0.25 + 0.02 and abs(state.vx) < 0.05, "mechanics where bodies collide"
        assert wall >= 0


def test_two_people_meeting_head_on_do_not_pass_through_each_other():
    with World() as world:
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, 1.2, 0.0), PedestrianIntent(2, 4.0, 0.05, -1.2, 0.0)])
        closest = 10.0
        for k in range(1, 300):
            world.advance_to(k / 100)
            a, b = people.states()
            closest = min(closest, ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)
        assert closest >= 2 * 0.25 - 0.03


def test_the_robots_ring_sees_a_pedestrian():
    embodied = embody(load_assembly("commbot"), clock="sim", watchdog_s=0.0)
    with embodied:
        people = Pedestrians(embodied.world)
        people.sync([PedestrianIntent(1, 1.2, 0.0, 0.0, 0.0, radius=0.25)])
        embodied.world.advance_to(0.5)
        ring = next(part for part in embodied.parts if part.id == 4)
        front = ring.memory.get(ring.model.config.registers[0]) / 1000
        origin, _ = embodied.robot.link_pose(4, "ring")
        expected = 1.2 - 0.25 - (origin[0] + ring.model.config.origin_radius_m)
        assert front == pytest.approx(expected, abs=0.06)
