"""People as walking figures (firmware_sim/world/figures.py): the one module the camera and the viewer draw them
with. A walking person's legs are in another pose 0.5 s later, a standing one's are not; they face where they
walk; a child is smaller than an adult; the same seed dresses them the same."""
from __future__ import annotations

import math

import numpy as np

from hil.firmware_sim.world.figures import Gait, colours, figure, heading


def _limbs(person, phase, seed=0):
    return {limb.name: limb for limb in figure(person, phase, seed)}


def _legs_after(person: dict, dt: float) -> tuple[np.ndarray, np.ndarray]:
    gait = Gait(seed=1)
    first = gait.update(10.0, [person])[person["id"]]
    moved = {**person, "x": person["x"] + person["vx"] * dt, "y": person["y"] + person["vy"] * dt}
    second = gait.update(10.0 + dt, [moved])[person["id"]]
    a, b = _limbs(person, first), _limbs(moved, second)
    relative = lambda limbs: np.linalg.inv(limbs["torso"].pose) @ limbs["leg_left"].pose  # noqa: E731
    return relative(a), relative(b)


def test_a_walking_persons_legs_differ_half_a_second_later():
    walker = {"id": 4, "x": 1.0, "y": 2.0, "vx": 1.2, "vy": 0.0, "height": 1.7}
    before, after = _legs_after(walker, 0.5)
    assert not np.allclose(before, after, atol=1e-3)


def test_a_standing_persons_legs_do_not_move():
    stander = {"id": 5, "x": 1.0, "y": 2.0, "vx": 0.0, "vy": 0.0, "height": 1.7}
    before, after = _legs_after(stander, 0.5)
    assert np.allclose(before, after, atol=1e-12)
    limbs = _limbs(stander, 1.3)
    leg_axis = limbs["leg_left"].pose[:3, 2]
    assert np.allclose(leg_axis, (0.0, 0.0, 1.0), atol=1e-12)  # straight down: no swing when still


def test_figures_face_where_they_walk_and_stand_facing_their_gaze():
    assert heading({"vx": 0.0, "vy": 1.0}) == math.pi / 2
    assert heading({"vx": 0.0, "vy": 0.0, "gaze": [-1.0, 0.0]}) == math.pi
    walker = _limbs({"id": 1, "x": 0.0, "y": 0.0, "vx": 0.0, "vy": 1.0, "height": 1.7}, 0.0)
    assert np.allclose(walker["torso"].pose[:3, 0], (0.0, 1.0, 0.0), atol=1e-12)  # the chest's x: forward


def test_a_child_is_smaller_than_an_adult_and_the_seed_dresses_them():
    child = _limbs({"id": 2, "x": 0, "y": 0, "vx": 0, "vy": 0, "height": 1.1}, 0.0)
    adult = _limbs({"id": 2, "x": 0, "y": 0, "vx": 0, "vy": 0, "height": 1.75}, 0.0)
    assert child["head"].pose[2, 3] < adult["head"].pose[2, 3] - 0.5
    assert colours(0, 2) == colours(0, 2)
    assert any(colours(0, 2) != colours(s, 2) for s in range(1, 6))
