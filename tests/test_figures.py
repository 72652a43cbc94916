"""People as walking figures (firmware_sim/world/figures.py): the one module the camera and the viewer draw them
with. A walking person's legs are in another pose 0.5 s later, a standing one's are not; they face where they
walk; a child is smaller than an adult; a seed dresses a crowd variously from the palettes, the same in every process."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np

from hil.firmware_sim.world.figures import HAIR, SHIRTS, SKIN, TROUSERS, Gait, colours, figure, heading


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


def test_a_child_is_smaller_than_an_adult():
    child = _limbs({"id": 2, "x": 0, "y": 0, "vx": 0, "vy": 0, "height": 1.1}, 0.0)
    adult = _limbs({"id": 2, "x": 0, "y": 0, "vx": 0, "vy": 0, "height": 1.75}, 0.0)
    assert child["head"].pose[2, 3] < adult["head"].pose[2, 3] - 0.5


CROWD = range(40)


def test_the_seed_dresses_a_crowd_variously_from_the_palettes_and_the_figure_wears_it():
    dressed = [colours(0, pid) for pid in CROWD]
    for paint in dressed:
        assert paint["skin"][:3] in SKIN and paint["shirt"][:3] in SHIRTS and paint["hair"][:3] in HAIR
        assert paint["trousers"][:3] in TROUSERS and all(colour[3] == 1.0 for colour in paint.values())
    # 40 people drawn from the palettes (9 shirts, 5 trousers, 4 skins): nearly every colour is worn
    assert len({p["shirt"] for p in dressed}) >= 7 and len({p["trousers"] for p in dressed}) >= 4
    assert len({p["skin"] for p in dressed}) >= 3 and len({tuple(p.values()) for p in dressed}) >= 30
    # another seed dresses the same people otherwise (the four draws agree by chance once in 720)
    assert sum(colours(1, pid) != dressed[pid] for pid in CROWD) >= 36
    limbs = _limbs({"id": 7, "x": 0, "y": 0, "vx": 0, "vy": 0, "height": 1.7}, 0.0, seed=3)
    paint = colours(3, 7)
    assert limbs["torso"].rgba == paint["shirt"] and limbs["head"].rgba == paint["skin"]
    assert limbs["leg_left"].rgba == paint["trousers"] and limbs["hair"].rgba == paint["hair"]


def test_the_same_seed_dresses_the_same_people_in_another_process():
    """Not this process's cache: a fresh interpreter draws the colours anew from (seed, id)."""
    code = ("import json; from hil.firmware_sim.world.figures import colours; "
            "print('COLOURS', json.dumps([colours(0, pid) for pid in range(40)]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stdout.splitlines() if line.startswith("COLOURS "))
    there = json.loads(line.removeprefix("COLOURS "))
    assert there == [{part: list(colour) for part, colour in colours(0, pid).items()} for pid in CROWD]
