"""Non-penetration: what a physics engine does for the crowd when it runs on its own.

Reference 000 lets the physics engine carry out each agent's intended motion where it is free and resolve it by
mechanics where bodies interfere. In a trial the pybullet world does that; standalone (tests, ``hil crowd``,
scripts) these projections keep bodies out of each other, out of the robot's disc and on their side of every
wall, after the social forces have been integrated:

* pedestrians: overlapping pairs are pushed apart along the line between their centres, half each, a few
  Jacobi iterations;
* the robot and walls are immovable: a body inside is put back on the surface, and the part of its velocity
  that points into it is removed;
* a step whose displacement would cross a wall's centre line is undone (the body stays where it was), so no one
  passes through a wall whatever the forces did; so is a step along which the body (a disc swept from where it
  was to where it ends) goes more than 2 cm into a wall: no one squeezes through a gap narrower than the body
  or cuts round a wall's end.
"""
from __future__ import annotations

import numpy as np

from .forces import WallIndex
from .maps import segment_distance

_GOLDEN = np.pi * (3.0 - np.sqrt(5.0))
CONTACT_SLACK_M = 0.3  # how far a contact push may carry a body toward a wall within one step
WALL_TOLERANCE_M = 0.02  # a body left deeper than this in a wall after the iterations is put back where it was


def separate_agents(pos: np.ndarray, radius: np.ndarray, i: np.ndarray, j: np.ndarray,
                    iterations: int) -> np.ndarray:
    """Push apart the candidate pairs (i, j) that overlap; returns the corrected positions (a new array)."""
    pos = pos.copy()
    n = len(pos)
    if not len(i) or iterations <= 0:
        return pos
    reach = radius[i] + radius[j]
    for _ in range(iterations):
        dx = pos[i] - pos[j]
        d = np.sqrt(np.einsum("ij,ij->i", dx, dx))
        overlap = reach - d
        hit = overlap > 0
        if not hit.any():
            break
        hi, hj, dx, d, overlap = i[hit], j[hit], dx[hit], d[hit], overlap[hit]
        unit = np.empty_like(dx)
        ok = d > 1e-9
        unit[ok] = dx[ok] / d[ok, None]
        if not ok.all():  # the same point: split along a direction that depends on the pair only
            ang = _GOLDEN * (hi[~ok] + 2 * hj[~ok] + 1)
            unit[~ok] = np.stack([np.cos(ang), np.sin(ang)], axis=1)
        push = 0.5 * overlap[:, None] * unit
        idx = np.concatenate([hi, hj])
        pos[:, 0] += np.bincount(idx, weights=np.concatenate([push[:, 0], -push[:, 0]]), minlength=n)
        pos[:, 1] += np.bincount(idx, weights=np.concatenate([push[:, 1], -push[:, 1]]), minlength=n)
    return pos


def keep_off_robot(pos: np.ndarray, vel: np.ndarray, radius: np.ndarray, robot_xy: tuple[float, float],
                   robot_radius: float) -> None:
    """Put bodies that overlap the robot's disc back on its surface (in place); no velocity into the robot."""
    rel = pos - np.asarray(robot_xy, dtype=float)
    dist = np.sqrt(np.einsum("ij,ij->i", rel, rel))
    inside = np.flatnonzero(dist < radius + robot_radius)
    if not len(inside):
        return
    unit = np.empty((len(inside), 2))
    ok = dist[inside] > 1e-9
    unit[ok] = rel[inside[ok]] / dist[inside[ok], None]
    unit[~ok] = (1.0, 0.0)
    pos[inside] = np.asarray(robot_xy) + unit * (radius[inside] + robot_radius)[:, None]
    vn = np.einsum("ij,ij->i", vel[inside], unit)
    vel[inside] -= np.minimum(vn, 0.0)[:, None] * unit


def resolve(old: np.ndarray, pos: np.ndarray, vel: np.ndarray, radius: np.ndarray, i: np.ndarray, j: np.ndarray,
            walls: WallIndex, robot: tuple[float, float, float] | None, iterations: int) -> np.ndarray:
    """All contacts after a step from ``old`` to ``pos``: returns the corrected positions; ``vel`` in place.

    Each iteration separates the candidate pairs (i, j) once, then puts bodies back off the robot (x, y, radius)
    and the walls, so a body squeezed between a neighbour and a wall ends up consistent with both; crossings of
    a wall are undone before and after.
    """
    pos = pos.copy()
    # The walls a body may touch this step: within its radius plus the slack plus its step of where it was
    # integrated to. Crossings, pushes and the swept check below only ever involve these.
    a, w = _wall_pairs(old, pos, radius, walls)
    if len(a):
        _, dist, _ = walls.closest(pos, a, w)
        step = np.sqrt(np.einsum("ij,ij->i", pos - old, pos - old))
        near = dist < walls.half_thickness[w] + radius[a] + CONTACT_SLACK_M + step[a]
        a, w = a[near], w[near]
    if len(a):
        _undo_crossings(old, pos, vel, a, w, walls)
    for _ in range(max(iterations, 1)):
        if iterations > 0:
            pos = separate_agents(pos, radius, i, j, 1)
        if robot is not None:
            keep_off_robot(pos, vel, radius, robot[:2], robot[2])
        if len(a):
            _push_off_walls(pos, vel, radius, a, w, walls)
    if len(a):
        # The body swept from old to pos must not have gone deeper into a wall than the tolerance (and than it
        # started): that catches walls pushing it opposite ways (a gap narrower than the body, a crowd pressing
        # it into a corner) and fast bodies cutting round a wall's end. Such a move is undone.
        seg = walls.segments[w]
        reach = walls.half_thickness[w] + radius[a]
        swept = segment_distance(old[a], pos[a], seg[:, :2], seg[:, 2:]) - reach
        start = walls.closest(old, a, w)[1] - reach
        deeper = (swept < -WALL_TOLERANCE_M) & (swept < start - 1e-9)
        if deeper.any():
            rows = np.unique(a[deeper])
            pos[rows] = old[rows]
            vel[rows] = 0.0
        _undo_crossings(old, pos, vel, a, w, walls)
    return pos


def _wall_pairs(old: np.ndarray, pos: np.ndarray, radius: np.ndarray,
                walls: WallIndex) -> tuple[np.ndarray, np.ndarray]:
    if not len(pos) or not len(walls.segments):
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty
    step = np.sqrt(np.einsum("ij,ij->i", pos - old, pos - old))
    reach = float(radius.max() + walls.half_thickness.max() + step.max()) + CONTACT_SLACK_M
    return walls.pairs(pos, reach)


def _push_off_walls(pos: np.ndarray, vel: np.ndarray, radius: np.ndarray, a: np.ndarray, w: np.ndarray,
                    walls: WallIndex) -> bool:
    """Bodies inside a wall's thickness back onto its face, inward velocity removed; False if none was."""
    n = len(pos)
    _, dist, normal = walls.closest(pos, a, w)
    pen = walls.half_thickness[w] + radius[a] - dist
    hit = pen > 0
    if not hit.any():
        return False
    ha, hn, hp = a[hit], normal[hit], pen[hit]
    pos[:, 0] += np.bincount(ha, weights=hp * hn[:, 0], minlength=n)
    pos[:, 1] += np.bincount(ha, weights=hp * hn[:, 1], minlength=n)
    vn = np.minimum(np.einsum("ij,ij->i", vel[ha], hn), 0.0)
    vel[:, 0] -= np.bincount(ha, weights=vn * hn[:, 0], minlength=n)
    vel[:, 1] -= np.bincount(ha, weights=vn * hn[:, 1], minlength=n)
    return True


def _undo_crossings(old: np.ndarray, pos: np.ndarray, vel: np.ndarray, a: np.ndarray, w: np.ndarray,
                    walls: WallIndex) -> None:
    seg = walls.segments[w]
    crossed = strictly_crosses(old[a], pos[a], seg[:, :2], seg[:, 2:])
    if crossed.any():
        rows = np.unique(a[crossed])
        pos[rows] = old[rows]
        vel[rows] = 0.0


def strictly_crosses(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """The move p0 -> p1 goes from one side of the wall line q0-q1 strictly to the other, within the wall.

    Starting or ending exactly on the line does not count (a body put back on its side must be free to leave).
    """
    def orient(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (b[..., 0] - a[..., 0]) * (c[..., 1] - a[..., 1]) - (b[..., 1] - a[..., 1]) * (c[..., 0] - a[..., 0])

    return (orient(q0, q1, p0) * orient(q0, q1, p1) < 0) & (orient(p0, p1, q0) * orient(p0, p1, q1) <= 0)
