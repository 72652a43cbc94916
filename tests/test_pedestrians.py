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


def test_intended_velocities_change_through_the_drive_never_in_place():
    """The drive keeps its own list of who pushes how hard: a velocity changed in place would never reach it, so
    the mapping refuses it; a new mapping assigned whole (a restored state) does reach the people."""
    with World() as world:
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, 1.0, 0.0)])
        with pytest.raises(TypeError):
            people.intended[1] = (0.0, 0.5)
        people.intended = {1: (0.0, 0.5)}
        world.advance_to(2.0)
        (one,) = people.states()
        assert (one.vx, one.vy) == pytest.approx((0.0, 0.5), abs=0.02)


WALL_FACE_X = 1.5 - 0.05  # the wall's face: a 0.1 m box centred at x = 1.5
RADIUS_M = 0.25


def walk_into_a_wall(speed: float) -> tuple:
    """A person at the origin who intends ``speed`` m/s along +x, towards a wall 1.45 m away: their state after 4 s."""
    with World() as world:
        p.createMultiBody(0, p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.05, 2, 1], physicsClientId=world.client),
                          basePosition=[1.5, 0, 1], physicsClientId=world.client)
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, speed, 0.0, radius=RADIUS_M)])
        world.advance_to(4.0)
        (state,) = people.states()
        return state


def wall_failures(state) -> list[str]:
    """What is wrong with a person who walked 4 s towards the wall: they must stand against its face (within
    2 cm: they got there, and no further), stopped."""
    out = []
    against = WALL_FACE_X - RADIUS_M
    if state.x < against - 0.02:
        out.append(f"never reached the wall: x {state.x:.3f}, the face stops a body at {against:.3f}")
    if state.x > against + 0.02:
        out.append(f"went into the wall: x {state.x:.3f} past {against:.3f}")
    if abs(state.vx) >= 0.05:
        out.append(f"still moving: vx {state.vx:.3f}")
    return out


@pytest.mark.parametrize("speed, fails", [(1.0, False), (0.0, True)], ids=["walking", "frozen"])
def test_a_wall_stops_a_person_who_intends_to_walk_through_it(speed, fails):
    """The mechanics where bodies collide; a person frozen in place (intending 0 m/s) must fail the same check."""
    failures = wall_failures(walk_into_a_wall(speed))
    if fails:
        assert any("never reached" in f for f in failures), failures
    else:
        assert failures == []


def meet_head_on(speed: float) -> tuple[float, tuple, tuple]:
    """Two people 4 m apart (0.05 m off each other's line) walking at each other at ``speed``: their closest
    centre distance over 3 s and where each is at the end."""
    with World() as world:
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, speed, 0.0), PedestrianIntent(2, 4.0, 0.05, -speed, 0.0)])
        closest = 10.0
        for k in range(1, 300):
            world.advance_to(k / 100)
            a, b = people.states()
            closest = min(closest, ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)
        return closest, (a.x, a.y), (b.x, b.y)


def head_on_failures(closest: float, a: tuple, b: tuple) -> list[str]:
    """They must meet (bodies touching: centres 2 x 0.25 m apart, within 2 cm), never overlap by more than 3 cm,
    and get by each other (each ends on the other's side, side by side at least a body's width apart)."""
    out = []
    if closest < 2 * RADIUS_M - 0.03:
        out.append(f"passed through each other: centres {closest:.3f} m apart")
    if closest > 2 * RADIUS_M + 0.02:
        out.append(f"never met: centres at least {closest:.3f} m apart")
    if not (a[0] > b[0] and abs(a[1] - b[1]) >= 2 * RADIUS_M - 0.03):
        out.append(f"did not get by each other: {a} and {b}")
    return out


@pytest.mark.parametrize("speed, fails", [(1.2, False), (0.0, True)], ids=["walking", "frozen"])
def test_two_people_meeting_head_on_do_not_pass_through_each_other(speed, fails):
    """Measured: they touch (0.500 m), slide off each other and pass; two people frozen in place must fail."""
    failures = head_on_failures(*meet_head_on(speed))
    if fails:
        assert any("never met" in f for f in failures), failures
    else:
        assert failures == []


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


def test_people_pushed_from_the_side_and_below_their_centre_stay_upright():
    """A low box driven into a person's legs (a push 1.2 m below their centre of mass) and two people colliding:
    every person's orientation stays within 1e-6 rad of upright, where a free capsule topples."""
    with World() as world:
        c = world.client
        box = p.createMultiBody(500.0, p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.2, 0.2, 0.1],
                                                              physicsClientId=c),
                                basePosition=[-1.0, 0.0, 0.1], physicsClientId=c)
        p.changeDynamics(box, -1, lateralFriction=0.0, physicsClientId=c)
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 0.0, 0.0, 0.0, 0.0), PedestrianIntent(2, 1.0, 0.2, -1.0, 0.0)])
        for _ in range(int(2.0 / world.time_step_s)):
            p.resetBaseVelocity(box, (2.0, 0.0, 0.0), (0.0, 0.0, 0.0), physicsClientId=c)  # a robot driving on
            world.step()
        tilts = []
        for body in people.bodies.values():
            _, (qx, qy, qz, _) = p.getBasePositionAndOrientation(body, physicsClientId=c)
            tilts.append(2 * max(abs(qx), abs(qy), abs(qz)))
        (one, two) = people.states()
        assert one.x > 1.0, f"the box pushed person 1 along: x {one.x:.2f}"
        assert max(tilts) < 1e-6, tilts
