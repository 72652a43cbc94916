"""Social force, vectorised: what pushes each pedestrian, per step, for all of them at once.

The parameter names and defaults are pysocialforce's (pysocialforce/config/default.toml, version 1.1.2), in the
same sections, so a pysocialforce config translates key for key:

    desired_force          factor 1.0, relaxation_time 0.5, goal_threshold 0.2      Helbing & Molnar 1995
    social_force           factor 5.1, lambda_importance 2.0, gamma 0.35, n 2, n_prime 3     Moussaid et al. 2009
    obstacle_force         factor 10.0, sigma 0.2, threshold 3.0
    group_coherence_force  factor 3.0                                               Moussaid et al. 2010
    group_repulsive_force  factor 1.0, threshold 0.55
    group_gaze_force       factor 4.0, fov_phi 90.0
    scene                  max_speed_multiplier 1.3

What is ours (not in pysocialforce), each documented where it is used:

* ``social_force.cutoff`` (3.0 m): pairs farther apart than this are not evaluated. pysocialforce evaluates all
  N^2 pairs; the cut-off is what lets a uniform grid (:func:`neighbour_pairs`) make sparse crowds cost O(N).
  At 3 m a pair walking head-on at 1.3 m/s each still feels 1.3 m/s^2 (Moussaid's force is long-ranged for fast
  approaches), so the cut-off is a truncation, chosen by measurement: the lane order of the counterflow test is
  the same at 2, 3 and 5 m (0.84-0.92), while the pairs to evaluate grow with the cut-off squared in open space
  (5 m: 2.8x the pairs of 3 m).
* ``robot_force``: the robot-interaction force (:func:`robot_force`).
* ``contact``: non-penetration of bodies, walls and the robot (crowd/contacts.py), the stand-in for reference
  000's physics engine when the crowd runs on its own.

Formulas, and where they differ from pysocialforce's code:

* social force: pysocialforce's ``SocialForce`` exactly, except that theta (the angle between the interaction
  direction and the direction to the other) is wrapped to [-pi, pi]. pysocialforce subtracts two ``arctan2``
  results without wrapping, so for pairs whose vectors straddle the -x axis theta comes out near +-2 pi and the
  force on that agent vanishes (in a counterflow along x: the east-walkers' reaction to about half of the people
  coming at them; tests/test_crowd_motion.py has that case). The force is antisymmetric
  (f_ji = -f_ij: everything depends only on relative positions and velocities), so each pair is evaluated once.
* obstacle force: pysocialforce samples each wall line at 10 points per metre and sums exp(-d/sigma) over every
  sample within the threshold, so its wall force scales with the sampling resolution (for a body 0.3 m off a
  wall, about 6 samples' worth at sigma = 0.2). We take the closest point of each wall segment (Helbing & Molnar's wall potential), and measure
  d from the wall's face (our walls have a thickness) to the body's surface.
* group coherence and gaze: the Moussaid 2010 ("paper") versions, pysocialforce's ``GroupCoherenceForce`` and
  ``GroupGazeForce``. pysocialforce's Simulator enables the ``...Alt`` variants instead; the Alt gaze force
  divides by the distance to the goal (it grows without bound near the goal) and pushes forward when the group
  is ahead, which is not Moussaid's model.
* desired force: relaxes toward v0 (the preferred speed) in the desired direction. pysocialforce relaxes toward
  its *max* speed (1.3 x the initial speed), so its people walk 30 % faster than they are set to.
"""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

DEFAULT_PARAMS: dict[str, dict[str, float]] = {
    "scene": {"max_speed_multiplier": 1.3},
    "desired_force": {"factor": 1.0, "relaxation_time": 0.5, "goal_threshold": 0.2},
    "social_force": {"factor": 5.1, "lambda_importance": 2.0, "gamma": 0.35, "n": 2, "n_prime": 3, "cutoff": 3.0},
    "obstacle_force": {"factor": 10.0, "sigma": 0.2, "threshold": 3.0},
    "group_coherence_force": {"factor": 3.0},
    "group_repulsive_force": {"factor": 1.0, "threshold": 0.55},
    "group_gaze_force": {"factor": 4.0, "fov_phi": 90.0},
    # Ours. Helbing's circular specification around the robot's disc, anisotropic (lambda_: weight of a robot
    # behind the agent; 1 = isotropic). At 0.3 m between the surfaces it pushes with 3.4 m/s^2 -- more than the
    # desired force of a person walking at 1.3 m/s (v0 / relaxation_time = 2.6 m/s^2) -- so people keep about
    # that distance unless pressed (the robot test measures >= 0.22 m passing it in a 4 m corridor); beyond
    # threshold (m between surfaces) it is zero.
    "robot_force": {"factor": 8.0, "sigma": 0.35, "threshold": 3.0, "lambda_": 0.5},
    # Ours. waypoint_threshold: an intermediate waypoint counts as reached within this distance (m), or once the
    # agent has passed it (beyond the line through it square to the next leg) within pass_radius: a crowd
    # cannot all step on one point. braking (m/s^2): toward its goal an agent wants at most the speed from which
    # it can stop on the goal at this deceleration, sqrt(2 braking distance) (navigation.desired_velocities).
    "navigation": {"waypoint_threshold": 0.6, "pass_radius": 2.0, "braking": 1.0},
    # Ours. Overlaps left after integration are removed by pushing bodies apart (iterations of pairwise
    # projection); walls and the robot are immovable.
    "contact": {"iterations": 3},
}


def merge_params(params: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """Defaults overlaid with ``params`` ({section: {name: value}}); unknown sections or names are refused."""
    out = copy.deepcopy(DEFAULT_PARAMS)
    for section, values in (params or {}).items():
        if section not in out:
            raise ValueError(f"crowd params: unknown section {section!r}; sections: {', '.join(out)}")
        if not isinstance(values, dict):
            raise ValueError(f"crowd params: {section} must be a mapping of names to numbers")
        for name, value in values.items():
            if name not in out[section]:
                raise ValueError(f"crowd params: {section} has no parameter {name!r}; "
                                 f"parameters: {', '.join(out[section])}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"crowd params: {section}.{name} must be a number, not {value!r}")
            out[section][name] = float(value)
    return out


# --- neighbours --------------------------------------------------------------------------------------------------

# Half of the 3 x 3 stencil: with the pairs inside each cell these visit every pair of neighbouring cells once.
_HALF_STENCIL = ((1, -1), (1, 0), (1, 1), (0, 1))


def neighbour_pairs(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair (i, j) closer than ``cutoff``, found through a uniform grid (cell list).

    Cells are at least ``cutoff`` wide, so partners sit in the same or an adjacent cell; with a half stencil each
    candidate pair is generated once. Cost is O(N + candidate pairs), not O(N^2), in a sparse crowd. The pair
    order is a function of the positions only (stable sorts), so runs repeat exactly.
    """
    n = len(pos)
    if n < 2:
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty
    # 1-D coordinate arrays throughout: gathers of rows of an (n, 2) array cost several times more.
    x, y = pos[:, 0], pos[:, 1]
    lox, loy = float(x.min()), float(y.min())
    span_x, span_y = float(x.max()) - lox, float(y.max()) - loy
    cell = cutoff
    # Keep the grid at most ~4 cells per agent: a few agents far apart must not allocate a huge grid.
    while (math.floor(span_x / cell) + 1) * (math.floor(span_y / cell) + 1) > 4 * n + 64:
        cell *= 2.0
    cx = ((x - lox) * (1.0 / cell)).astype(np.intp)
    cy = ((y - loy) * (1.0 / cell)).astype(np.intp)
    nx, ny = int(cx.max()) + 1, int(cy.max()) + 1
    key = cx * ny + cy
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=nx * ny)
    ends = np.cumsum(counts)
    starts = ends - counts
    skey, scx, scy = key[order], cx[order], cy[order]
    rank = np.arange(n)
    # For each agent (in sorted order) a few ranges of partners: the rest of its own cell, then the whole of
    # each half-stencil neighbour cell.
    src, rstart, rcount = [rank], [rank + 1], [ends[skey] - rank - 1]
    for dx, dy in _HALF_STENCIL:
        ox, oy = scx + dx, scy + dy
        ok = (ox >= 0) & (ox < nx) & (oy >= 0) & (oy < ny)
        nkey = np.where(ok, ox * ny + oy, 0)
        src.append(rank)
        rstart.append(starts[nkey])
        rcount.append(np.where(ok, counts[nkey], 0))
    src_a, rstart_a, rcount_a = np.concatenate(src), np.concatenate(rstart), np.concatenate(rcount)
    some = rcount_a > 0
    src_a, rstart_a, rcount_a = src_a[some], rstart_a[some], rcount_a[some]
    total = int(rcount_a.sum())
    first = np.cumsum(rcount_a) - rcount_a
    a = np.repeat(src_a, rcount_a)
    b = np.repeat(rstart_a - first, rcount_a)
    b += np.arange(total)
    sx, sy = x[order], y[order]
    d2 = sx[a]
    d2 -= sx[b]
    d2 *= d2
    dy_ = sy[a]
    dy_ -= sy[b]
    dy_ *= dy_
    d2 += dy_
    close = d2 < cutoff * cutoff
    return order[a[close]], order[b[close]]


def all_pairs(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """The same pairs by brute force (i < j): the reference the grid is tested against."""
    i, j = np.triu_indices(len(pos), k=1)
    d = pos[i] - pos[j]
    close = np.einsum("ij,ij->i", d, d) < cutoff * cutoff
    return i[close], j[close]


def _scatter(n: int, idx: np.ndarray, fx: np.ndarray, fy: np.ndarray) -> np.ndarray:
    out = np.empty((n, 2))
    out[:, 0] = np.bincount(idx, weights=fx, minlength=n)
    out[:, 1] = np.bincount(idx, weights=fy, minlength=n)
    return out


# --- forces ------------------------------------------------------------------------------------------------------

def desired_force(vel: np.ndarray, desired_velocity: np.ndarray, p: dict[str, float]) -> np.ndarray:
    """Helbing-Molnar: relax toward the desired velocity within relaxation_time."""
    return p["factor"] * (desired_velocity - vel) / p["relaxation_time"]


def social_force(pos: np.ndarray, vel: np.ndarray, i: np.ndarray, j: np.ndarray,
                 p: dict[str, float]) -> np.ndarray:
    """Moussaid et al. 2009 pedestrian interaction, as pysocialforce's SocialForce, summed over the pairs (i, j).

    For the pair: e = unit vector from j to i; D = lambda (v_j - v_i) + e (pysocialforce's interaction vector,
    the negative of Moussaid's t_ij, so both terms below come out repulsive); B = gamma |D|; theta = angle from
    e to D, wrapped; force on i = factor [exp(-d/B - (n' B theta)^2) D/|D|
    - sign(theta) exp(-d/B - (n B theta)^2) left_normal(D/|D|)], and the opposite on j.
    """
    n = len(pos)
    if not len(i):
        return np.zeros((n, 2))
    # 1-D gathers and in-place arithmetic: this runs on every pair every step.
    px, py, vx, vy = pos[:, 0], pos[:, 1], vel[:, 0], vel[:, 1]
    ex = px[i] - px[j]
    ey = py[i] - py[j]
    d = np.hypot(ex, ey)
    inv = 1.0 / np.maximum(d, 1e-9)
    ex *= inv
    ey *= inv
    lam = p["lambda_importance"]
    tx = vx[j] - vx[i]
    tx *= lam
    tx += ex
    ty = vy[j] - vy[i]
    ty *= lam
    ty += ey
    t_len = np.hypot(tx, ty)
    inv = 1.0 / np.maximum(t_len, 1e-9)
    tx *= inv
    ty *= inv
    theta = np.arctan2(ex * ty - ey * tx, ex * tx + ey * ty)  # angle from e to D, in [-pi, pi]
    b = t_len
    b *= p["gamma"]
    np.maximum(b, 1e-9, out=b)
    base = d
    base /= b
    np.negative(base, out=base)  # -d / B
    bt2 = b * theta
    bt2 *= bt2  # (B theta)^2
    fv = np.exp(base - p["n_prime"] ** 2 * bt2)
    fa = np.exp(base - p["n"] ** 2 * bt2)
    fa *= -np.sign(theta)
    factor = p["factor"]
    fx = fv * tx  # left normal of (tx, ty) is (-ty, tx)
    fx -= fa * ty
    fx *= factor
    fy = fv * ty
    fy += fa * tx
    fy *= factor
    out = np.empty((n, 2))
    out[:, 0] = np.bincount(i, weights=fx, minlength=n) - np.bincount(j, weights=fx, minlength=n)
    out[:, 1] = np.bincount(i, weights=fy, minlength=n) - np.bincount(j, weights=fy, minlength=n)
    return out


class WallIndex:
    """The map's walls, bucketed on a static grid so each agent only meets walls within a reach.

    ``reach`` (metres from the wall's centre line) must cover the obstacle threshold plus a body's radius
    plus half the wall's thickness; :meth:`pairs` rebuilds the buckets when asked for more.
    """

    def __init__(self, segments: np.ndarray, half_thickness: np.ndarray, reach: float, cell: float = 2.0):
        self.segments = np.asarray(segments, dtype=float).reshape(-1, 4)
        self.half_thickness = np.asarray(half_thickness, dtype=float)
        self.cell = cell
        self._build(reach)

    def _build(self, reach: float) -> None:
        from .maps import segment_distances  # geometry helper shared with the map checks

        self.reach = reach
        m = len(self.segments)
        if not m:
            self.origin = np.zeros(2)
            self.shape = (1, 1)
            self.cell_start = np.zeros(2, dtype=np.intp)
            self.cell_walls = np.zeros(0, dtype=np.intp)
            return
        xs = self.segments[:, [0, 2]]
        ys = self.segments[:, [1, 3]]
        self.origin = np.array([xs.min() - reach, ys.min() - reach])
        top = np.array([xs.max() + reach, ys.max() + reach])
        nx, ny = (np.ceil((top - self.origin) / self.cell).astype(int) + 1).tolist()
        self.shape = (nx, ny)
        cx, cy = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
        centres = self.origin + (np.stack([cx.ravel(), cy.ravel()], axis=1) + 0.5) * self.cell
        points = np.hstack([centres, centres])  # degenerate segments: point-to-segment distances
        d = segment_distances(points, self.segments)
        # A wall is listed in a cell when some point of the cell can be within reach of it (conservative).
        near = d <= reach + self.cell * math.sqrt(0.5)
        counts = near.sum(axis=1)
        self.cell_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
        self.cell_walls = np.nonzero(near)[1].astype(np.intp)

    def pairs(self, pos: np.ndarray, reach: float) -> tuple[np.ndarray, np.ndarray]:
        """Candidate (agent, wall) pairs: every wall that may be within ``reach`` of each agent (and more)."""
        if reach > self.reach:
            self._build(reach * 1.25)
        n = len(pos)
        if not n or not len(self.segments):
            empty = np.zeros(0, dtype=np.intp)
            return empty, empty
        nx, ny = self.shape
        c = np.floor((pos - self.origin) / self.cell).astype(np.intp)
        inside = (c[:, 0] >= 0) & (c[:, 0] < nx) & (c[:, 1] >= 0) & (c[:, 1] < ny)
        key = np.where(inside, c[:, 0] * ny + c[:, 1], 0)
        start = self.cell_start[key]
        count = np.where(inside, self.cell_start[key + 1] - start, 0)
        total = int(count.sum())
        first = np.cumsum(count) - count
        agents = np.repeat(np.arange(n), count)
        slots = np.repeat(start - first, count) + np.arange(total)
        return agents, self.cell_walls[slots]

    def closest(self, pos: np.ndarray, a: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For pairs (agent a, wall w): the vector from the wall's closest point to the agent, its length, and
        the unit normal (the vector normalised; for an agent exactly on the line, the segment's left normal)."""
        seg = self.segments[w]
        s0 = seg[:, :2]
        d = seg[:, 2:] - s0
        rel = pos[a] - s0
        t = np.clip(np.einsum("ij,ij->i", rel, d) / np.einsum("ij,ij->i", d, d), 0.0, 1.0)
        vec = rel - t[:, None] * d
        dist = np.sqrt(np.einsum("ij,ij->i", vec, vec))
        normal = np.empty_like(vec)
        ok = dist > 1e-12
        normal[ok] = vec[ok] / dist[ok, None]
        if not ok.all():
            left = np.stack([-d[:, 1], d[:, 0]], axis=1)
            normal[~ok] = left[~ok] / np.linalg.norm(left[~ok], axis=1)[:, None]
        return vec, dist, normal


def obstacle_force(pos: np.ndarray, radius: np.ndarray, walls: WallIndex, p: dict[str, float]) -> np.ndarray:
    """Wall repulsion: factor exp(-gap/sigma) along the normal from the closest point of each wall with
    gap = distance to the wall's face - body radius < threshold (walls beyond it are never looked at)."""
    n = len(pos)
    reach = p["threshold"] + (float(radius.max()) if n else 0.0) + float(walls.half_thickness.max(initial=0.0))
    a, w = walls.pairs(pos, reach)
    if not len(a):
        return np.zeros((n, 2))
    _, dist, normal = walls.closest(pos, a, w)
    gap = dist - walls.half_thickness[w] - radius[a]
    mag = np.where(gap < p["threshold"], p["factor"] * np.exp(-gap / p["sigma"]), 0.0)
    return _scatter(n, a, mag * normal[:, 0], mag * normal[:, 1])


def group_forces(pos: np.ndarray, directions: np.ndarray, group: np.ndarray, i: np.ndarray, j: np.ndarray,
                 p_coherence: dict[str, float], p_repulsive: dict[str, float],
                 p_gaze: dict[str, float]) -> np.ndarray:
    """Moussaid 2010 group forces for agents with a group id >= 0 (pysocialforce's paper versions).

    coherence: factor x unit vector to the group's centre of mass, when farther than (size - 1) / 2 m from it;
    repulsion: factor x sum of (p_i - p_k) over members k closer than threshold (the pairs i, j are the
    neighbour pairs, which include every such member); gaze: -factor x (the angle in radians by which the centre
    of mass of the others lies outside the fov_phi half-angle of the walking direction) x walking direction.
    """
    n = len(pos)
    out = np.zeros((n, 2))
    members = np.flatnonzero(group >= 0)
    if not len(members):
        return out
    _, g = np.unique(group[members], return_inverse=True)
    size = np.bincount(g).astype(float)
    sum_x = np.bincount(g, weights=pos[members, 0])
    sum_y = np.bincount(g, weights=pos[members, 1])
    mp = pos[members]
    sz = size[g]
    # coherence
    to_com = np.stack([sum_x[g] / sz, sum_y[g] / sz], axis=1) - mp
    dist = np.linalg.norm(to_com, axis=1)
    pull = (dist >= (sz - 1) / 2) & (dist > 1e-12)
    coh = np.zeros_like(to_com)
    coh[pull] = to_com[pull] / dist[pull, None]
    out[members] += p_coherence["factor"] * coh
    # gaze: centre of mass of the others
    many = sz > 1
    others = np.zeros_like(mp)
    others[many, 0] = (sum_x[g][many] - mp[many, 0]) / (sz[many] - 1)
    others[many, 1] = (sum_y[g][many] - mp[many, 1]) / (sz[many] - 1)
    rel = others - mp
    rel_len = np.linalg.norm(rel, axis=1)
    ok = many & (rel_len > 1e-12)
    dirs = directions[members]
    cosang = np.zeros(len(members))
    cosang[ok] = np.einsum("ij,ij->i", dirs[ok], rel[ok]) / rel_len[ok]
    angle = np.degrees(np.arccos(np.clip(cosang, -1.0, 1.0)))
    rotation = np.where(ok & (angle > p_gaze["fov_phi"]), np.radians(angle - p_gaze["fov_phi"]), 0.0)
    out[members] += -p_gaze["factor"] * rotation[:, None] * dirs
    # repulsion among members closer than the threshold
    if len(i):
        same = (group[i] >= 0) & (group[i] == group[j])
        if same.any():
            gi, gj = i[same], j[same]
            diff = pos[gi] - pos[gj]
            near = np.einsum("ij,ij->i", diff, diff) <= p_repulsive["threshold"] ** 2
            gi, gj, diff = gi[near], gj[near], diff[near] * p_repulsive["factor"]
            out += _scatter(n, np.concatenate([gi, gj]), np.concatenate([diff[:, 0], -diff[:, 0]]),
                            np.concatenate([diff[:, 1], -diff[:, 1]]))
    return out


def robot_force(pos: np.ndarray, radius: np.ndarray, directions: np.ndarray, robot_xy: tuple[float, float],
                robot_radius: float, applies: np.ndarray, p: dict[str, float]) -> np.ndarray:
    """The robot-interaction force: Helbing's circular specification around the robot's disc.

    f = factor exp(-gap / sigma) w n for gap < threshold, where gap is the distance between the body's and the
    robot's surfaces, n the unit vector from the robot's centre to the agent, and w = lambda_ + (1 - lambda_)
    (1 + cos phi) / 2 the anisotropy (phi: angle between the agent's walking direction and the direction to the
    robot: a robot ahead counts fully, one behind by lambda_). Only rows in ``applies`` feel it: an agent under
    an objective's velocity override has already decided how to treat the robot.
    """
    n = len(pos)
    out = np.zeros((n, 2))
    rel = pos - np.asarray(robot_xy, dtype=float)
    dist = np.sqrt(np.einsum("ij,ij->i", rel, rel))
    gap = dist - radius - robot_radius
    rows = np.flatnonzero(applies & (gap < p["threshold"]) & (dist > 1e-12))
    if not len(rows):
        return out
    normal = rel[rows] / dist[rows, None]
    cos_phi = -np.einsum("ij,ij->i", directions[rows], normal)
    w = p["lambda_"] + (1.0 - p["lambda_"]) * (1.0 + cos_phi) / 2.0
    out[rows] = (p["factor"] * np.exp(-gap[rows] / p["sigma"]) * w)[:, None] * normal
    return out
