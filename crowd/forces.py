"""The motion model: what pushes each pedestrian and how fast they may walk; its parameters, the wall grid, and
thin wrappers over the compiled step (crowd/kernel.py, where every formula below runs).

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

* ``headway`` (time_gap 1.0 s, anticipation_time 0.45 s): the speed rule that makes a crowd slow down with density.
  The social force alone cannot: in a uniform crowd the pair forces cancel, and a one-directional crowd walked at
  1.33 m/s at every density (Weidmann: 1.30 at 0.5 persons/m^2, 0.16 at 4; RMS 0.77 m/s, as JuPedSim's social
  force model and pysocialforce do). The rule is the optimal-velocity function of Tordeux, Chraibi & Seyfried's
  collision-free speed model ("Collision-free speed model for pedestrian dynamics", Traffic and Granular Flow '15,
  2016; JuPedSim's CollisionFreeSpeedModel, whose default time gap is also 1 s): an agent wants at most
  s / time_gap, s its free path to the nearest person ahead in its lane. Ours in three respects: s is the exact
  free path of two discs (how far it walks straight on before touching: ahead - sqrt((r_i + r_j)^2 - lateral^2),
  where the model uses the centre distance minus r_i + r_j); s is measured to where the person ahead will be after
  anticipation_time at their present velocity (their velocity along one's way; the anticipation velocity model of
  Xu, Chraibi & Seyfried 2021 anticipates neighbours the same way), which lets a queue start moving as a whole
  and raises the flow through a door to the measured 1.6-2.0 /(m s) (without it: 1.2) while a uniform crowd,
  where everyone walks at the same speed, sees time_gap - anticipation_time = 0.55 s; and the rule sets the
  *desired* velocity of the social force model (the desired force still relaxes toward it and the other forces
  still act), with one constraint on the velocity itself: while the rule binds, the pushes of the crowd ahead do
  not walk a person backwards. People coming the other way and one's own group do not count (the social and group
  forces handle them); a robot counts while it drives one's way. Calibrated side by side with JuPedSim in
  bench/crowd_fidelity.py: RMS 0.09 m/s against Weidmann (JuPedSim's collision-free speed model 0.25 in the same
  scene), 1.75-1.9 /(m s) through a 1 m door. Known departure: above ~3 persons/m^2 the crowd pushes itself on
  and the speed stops falling (about 0.3 m/s at 4 /m^2, Weidmann 0.16).
* ``navigation`` (sight_margin, lost_fraction, braking): route following by sight (crowd/navigation.py).
* ``social_force.cutoff`` (3.0 m): pairs farther apart than this are not evaluated. pysocialforce evaluates all
  N^2 pairs; the cut-off is what lets a uniform grid (:func:`neighbour_pairs`) make sparse crowds cost O(N).
  At 3 m a pair walking head-on at 1.3 m/s each still feels 1.3 m/s^2 (Moussaid's force is long-ranged for fast
  approaches), so the cut-off is a truncation, chosen by measurement: the lane order of the counterflow test is
  the same at 2, 3 and 5 m (0.84-0.92), while the pairs to evaluate grow with the cut-off squared in open space
  (5 m: 2.8x the pairs of 3 m). Within it, pairs feeling less than 0.005 m/s^2 are skipped too (kernel.py).
* ``robot_force``: the robot-interaction force (kernel.py: ``_robot_force``).
* ``contact``: non-penetration of bodies, walls and the robot (kernel.py: ``_resolve``), the stand-in for
  the crowd-simulation reference's physics engine when the crowd runs on its own.

Formulas, and where they differ from pysocialforce's code:

* social force: pysocialforce's ``SocialForce`` exactly, except that theta (the angle between the interaction
  direction and the direction to the other) is wrapped to [-pi, pi]. pysocialforce subtracts two ``arctan2``
  results without wrapping, so for pairs whose vectors straddle the -x axis theta comes out near +-2 pi and the
  force on that agent vanishes (in a counterflow along x: the east-walkers' reaction to about half of the people
  coming at them; tests/test_crowd_motion.py has that case). The force is antisymmetric
  (f_ji = -f_ij: everything depends only on relative positions and velocities), so each pair is evaluated once.
* obstacle force: pysocialforce samples each wall line at 10 points per metre and sums exp(-d/sigma) over every
  sample within the threshold, so its wall force scales with the sampling resolution (for a body 0.3 m off a
  wall, about 6 samples' worth at sigma = 0.2). We take the closest point of each wall segment (Helbing & Molnar's
  wall potential), once per corner where walls meet, and measure d from the wall's face (our walls have a
  thickness) to the body's surface. Walls steer but do not hold people back: the part of the force against the
  desired direction is dropped (walls only turn the direction of motion in the collision-free speed model; the
  contact handling keeps bodies out of them), else the jambs of a 1 m door held the crowd half a metre off it.
* group coherence and gaze: the Moussaid 2010 ("paper") versions, pysocialforce's ``GroupCoherenceForce`` and
  ``GroupGazeForce``. pysocialforce's Simulator enables the ``...Alt`` variants instead; the Alt gaze force
  divides by the distance to the goal (it grows without bound near the goal) and pushes forward when the group
  is ahead, which is not Moussaid's model.
* desired force: relaxes toward v0 (the preferred speed) in the desired direction, at most the headway speed.
  pysocialforce relaxes toward its *max* speed (1.3 x the initial speed), so its people walk 30 % faster than
  they are set to.
"""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from . import kernel

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
    # Ours (crowd/navigation.py). sight_margin (m): the next waypoint is taken once the straight way to it keeps
    # the body's radius plus this off every wall; lost_fraction: the waypoint walked to is given up (for the
    # latest one in sight) when the straight way to it comes closer to a wall than this fraction of the radius.
    # braking (m/s^2): toward its goal an agent wants at most the speed from which it can stop on the goal at
    # this deceleration, sqrt(2 braking distance) (navigation.desired_velocities).
    "navigation": {"sight_margin": 0.05, "lost_fraction": 0.5, "braking": 1.0},
    # Ours: the headway speed rule (module docstring): an agent wants at most s / time_gap, s its free path to the
    # person ahead in its lane, measured to where that person will be after anticipation_time (s).
    "headway": {"time_gap": 1.0, "anticipation_time": 0.45},
    # Ours. Overlaps left after integration are removed by pushing bodies apart (iterations of pairwise
    # projection); walls and the robot are immovable.
    "contact": {"iterations": 3},
}


def param_vector(p: dict[str, dict[str, float]]) -> np.ndarray:
    """The merged params as the compiled step's parameter vector (kernel.P_* indices)."""
    v = np.empty(kernel.N_PARAMS)
    d, s, o = p["desired_force"], p["social_force"], p["obstacle_force"]
    v[kernel.P_DESIRED_FACTOR], v[kernel.P_TAU] = d["factor"], d["relaxation_time"]
    v[kernel.P_SOCIAL_FACTOR], v[kernel.P_LAMBDA], v[kernel.P_GAMMA] = s["factor"], s["lambda_importance"], s["gamma"]
    v[kernel.P_N], v[kernel.P_N_PRIME], v[kernel.P_CUTOFF] = s["n"], s["n_prime"], s["cutoff"]
    v[kernel.P_OBST_FACTOR], v[kernel.P_OBST_SIGMA], v[kernel.P_OBST_THRESHOLD] = o["factor"], o["sigma"], o["threshold"]
    v[kernel.P_COH_FACTOR] = p["group_coherence_force"]["factor"]
    v[kernel.P_GREP_FACTOR] = p["group_repulsive_force"]["factor"]
    v[kernel.P_GREP_THRESHOLD] = p["group_repulsive_force"]["threshold"]
    v[kernel.P_GAZE_FACTOR], v[kernel.P_GAZE_FOV] = p["group_gaze_force"]["factor"], p["group_gaze_force"]["fov_phi"]
    r = p["robot_force"]
    v[kernel.P_ROBOT_FACTOR], v[kernel.P_ROBOT_SIGMA] = r["factor"], r["sigma"]
    v[kernel.P_ROBOT_THRESHOLD], v[kernel.P_ROBOT_LAMBDA] = r["threshold"], r["lambda_"]
    nav = p["navigation"]
    v[kernel.P_BRAKING], v[kernel.P_SIGHT_MARGIN], v[kernel.P_LOST_FRACTION] = (
        nav["braking"], nav["sight_margin"], nav["lost_fraction"])
    v[kernel.P_TIME_GAP] = p["headway"]["time_gap"]
    v[kernel.P_ANTICIPATION] = p["headway"]["anticipation_time"]
    v[kernel.P_ITERATIONS] = p["contact"]["iterations"]
    v[kernel.P_MAX_SPEED_MULT] = p["scene"]["max_speed_multiplier"]
    return v


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


# --- thin wrappers over the compiled kernel (the tests call these; the step calls the kernel directly) ----------

def neighbour_pairs(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair (i, j) closer than ``cutoff``, found through a uniform grid (cell list).

    Cells are at least ``cutoff`` wide, so partners sit in the same or an adjacent cell; with a half stencil each
    candidate pair is generated once. Cost is O(N + candidate pairs), not O(N^2), in a sparse crowd. The pair
    order is a function of the positions only, so runs repeat exactly.
    """
    pos = np.asarray(pos, dtype=float).reshape(-1, 2)
    return kernel.neighbour_pairs(np.ascontiguousarray(pos[:, 0]), np.ascontiguousarray(pos[:, 1]), float(cutoff))


def all_pairs(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """The same pairs by brute force (i < j): the reference the grid is tested against."""
    i, j = np.triu_indices(len(pos), k=1)
    d = pos[i] - pos[j]
    close = np.einsum("ij,ij->i", d, d) < cutoff * cutoff
    return i[close], j[close]


def social_force(pos: np.ndarray, vel: np.ndarray, i: np.ndarray, j: np.ndarray,
                 p: dict[str, float]) -> np.ndarray:
    """Moussaid et al. 2009 pedestrian interaction, as pysocialforce's SocialForce, summed over the pairs (i, j).

    For the pair: e = unit vector from j to i; D = lambda (v_j - v_i) + e (pysocialforce's interaction vector,
    the negative of Moussaid's t_ij, so both terms below come out repulsive); B = gamma |D|; theta = angle from
    e to D, wrapped; force on i = factor [exp(-d/B - (n' B theta)^2) D/|D|
    - sign(theta) exp(-d/B - (n B theta)^2) left_normal(D/|D|)], and the opposite on j.
    """
    return kernel.social_force_pairs(np.ascontiguousarray(pos, dtype=float), np.ascontiguousarray(vel, dtype=float),
                                     np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64),
                                     float(p["factor"]), float(p["lambda_importance"]), float(p["gamma"]),
                                     float(p["n"]), float(p["n_prime"]))


class WallIndex:
    """The map's walls, bucketed on a static grid so each agent only meets walls within a reach.

    ``reach`` (metres from the wall's centre line) must cover the obstacle threshold plus a body's radius
    plus half the wall's thickness; :meth:`ensure_reach` rebuilds the buckets when a step needs more.
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
            self._pack()
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
        self._pack()

    def _pack(self) -> None:
        nx, ny = self.shape
        self._kernel_args = (self.segments, self.half_thickness, self.origin.astype(float), float(self.cell), int(nx),
                             int(ny), self.cell_start.astype(np.int64), self.cell_walls.astype(np.int64),
                             float(self.reach))

    def ensure_reach(self, reach: float) -> None:
        """Rebuild the buckets when a step needs walls farther than they cover (bigger bodies, faster steps)."""
        if reach > self.reach:
            self._build(reach * 1.25)

    def kernel_args(self) -> tuple:
        """What the compiled step needs of the walls (crowd/kernel.py: step), ending with the reach covered."""
        return self._kernel_args
