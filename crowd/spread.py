"""Many people at once around a point: where ``spawn 40 adult_man at plaza spread 3m`` puts them (crowd/script.py).

A script that stages a crowd needs its people placed where bodies can stand, the same way for the same seed.
Candidates are drawn uniformly over the disc of the spread radius around the centre by the crowd's own generator
(``sim.rng``: the seed fixes them, and the crowd keeps one source of randomness), and a candidate is kept only
where its body fits:

- clear of every wall's face by its radius + ``GAP_M`` (walls and obstacles are both walls in a map);
- in sight of the centre (the straight line from the centre does not touch a wall), so a spread near a wall does
  not reach into the next room, and inside the box the map's walls span, so it does not leave through a gate;
- clear of everyone already on the map and of those of this line placed before it by both radii + ``GAP_M``;
- clear of the robot's disc by both radii + ``GAP_M``.

People are placed one after another, each with up to ``TRIES_PER_PERSON`` candidates (drawn in batches, always the
same batches for a seed). When one cannot be placed, :class:`NoRoom` says how many fit, and the caller adds nobody.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .maps import segment_distances

if TYPE_CHECKING:
    from .sim import CrowdSim

GAP_M = 0.05  # free space kept between two bodies, and between a body and a wall's face or the robot
TRIES_PER_PERSON = 400
BATCH = 50  # candidates drawn at once (a whole batch is drawn even when its first candidate fits)


class NoRoom(ValueError):
    """Not everyone fits: ``placed`` of ``count`` people could stand within the spread."""

    def __init__(self, placed: int, count: int, message: str) -> None:
        self.placed, self.count = placed, count
        super().__init__(message)


def spread_positions(sim: CrowdSim, centre: tuple[float, float], count: int, radius: float,
                     spread_m: float, where: str = "") -> np.ndarray:
    """``count`` non-overlapping positions (count, 2) within ``spread_m`` of ``centre`` for bodies of ``radius``;
    NoRoom when they do not all fit (``where`` names the centre in its message). Draws from ``sim.rng``."""
    others = [(sim.agents.pos, sim.agents.radius)]
    if sim.robot is not None:
        others.append((np.array([sim.robot.xy]), np.array([sim.robot.radius])))
    taken_xy = np.concatenate([xy for xy, _ in others]).reshape(-1, 2)
    taken_r = np.concatenate([r for _, r in others])
    fits = _Fits(sim, np.asarray(centre, dtype=float), radius)
    out = np.zeros((count, 2))
    for k in range(count):
        found = None
        for _ in range(TRIES_PER_PERSON // BATCH):
            cand = _draw(sim.rng, centre, spread_m, BATCH)
            ok = fits.walls(cand)
            if len(taken_xy):
                gaps = np.hypot(*(cand[:, None, :] - taken_xy[None, :, :]).transpose(2, 0, 1))
                ok &= np.all(gaps >= taken_r[None, :] + radius + GAP_M, axis=1)
            hits = np.flatnonzero(ok)
            if len(hits):
                found = cand[hits[0]]
                break
        if found is None:
            raise NoRoom(k, count, f"only {k} of {count} people fit within {spread_m:g} m of {where or tuple(centre)}"
                                   f" ({_clear_of(sim)}); nobody was spawned: give a wider spread or fewer people")
        out[k] = found
        taken_xy = np.vstack([taken_xy, found[None]])
        taken_r = np.append(taken_r, radius)
    return out


def _clear_of(sim: CrowdSim) -> str:
    """What the placement kept clear of, for NoRoom's message."""
    others = [what for what, there in (("the robot", sim.robot is not None),
                                       (f"the {len(sim.agents)} people already there", len(sim.agents))) if there]
    return "clear of the walls" + "".join(f", {what}" for what in others[:-1]) + \
        (f" and {others[-1]}" if others else "")


def _draw(rng: np.random.Generator, centre: tuple[float, float], spread_m: float, n: int) -> np.ndarray:
    """``n`` points uniform over the disc (the square root makes the density even, not crowded at the centre)."""
    r = spread_m * np.sqrt(rng.random(n))
    a = rng.random(n) * 2.0 * math.pi
    return np.column_stack([centre[0] + r * np.cos(a), centre[1] + r * np.sin(a)])


class _Fits:
    """The wall tests of a candidate: its body off every face, in sight of the centre, inside the walls' box."""

    def __init__(self, sim: CrowdSim, centre: np.ndarray, radius: float) -> None:
        self.segments, self.half = sim.map.wall_segments, sim.map.wall_half_thickness
        self.centre, self.radius = centre, radius
        if len(self.segments):
            xs, ys = self.segments[:, [0, 2]], self.segments[:, [1, 3]]
            self.box = (xs.min(), ys.min(), xs.max(), ys.max())
        else:
            self.box = None

    def walls(self, cand: np.ndarray) -> np.ndarray:
        if self.box is None:
            return np.ones(len(cand), dtype=bool)
        x0, y0, x1, y1 = self.box
        inside = (cand[:, 0] > x0) & (cand[:, 0] < x1) & (cand[:, 1] > y0) & (cand[:, 1] < y1)
        points = np.hstack([cand, cand])
        off_faces = np.all(segment_distances(points, self.segments) >= self.half + self.radius + GAP_M, axis=1)
        sight = np.hstack([np.broadcast_to(self.centre, cand.shape), cand])
        in_sight = np.all(segment_distances(sight, self.segments) > self.half, axis=1)
        return inside & off_faces & in_sight
