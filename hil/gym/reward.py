"""One episode's bookkeeping: the reward by CrowdNav's conventions and hil's running metrics, from ground truth.

Per step (``dt`` = the control period), every term weighted by the spec's ``reward:``:

- ``success`` once when the robot's centre is within ``goal_radius`` of the goal (terminated);
- ``collision`` once when the robot touches a wall or a person (pybullet's contacts after every physics step), or
  its disc (``ROBOT_RADIUS_M``) overlaps a person's, as CrowdNav counts it (terminated);
- ``timeout`` once when the episode's time is up (truncated);
- ``discomfort`` * (gap - ``discomfort_dist``) * dt while the nearest person's gap (between the two discs) is
  below ``discomfort_dist`` (a negative amount, as CrowdNav's);
- ``progress`` * (metres the goal came closer this step) (CrowdNav++'s potential);
- ``time`` * dt.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

from .observe import ROBOT_RADIUS_M
from .spec import EnvSpec
from .world import EpisodeWorld, nearest_gap

INTIMATE_M = 0.45  # hil's intimate zone (trial/report/metrics.py): an intrusion


class Episode:
    """The state of one episode, from reset to its end."""

    def __init__(self, spec: EnvSpec, pose: tuple[float, float, float], seed: int):
        self.spec, self.seed = spec, seed
        self.goal = spec.trial.goal
        self.steps = 0
        self.event: str | None = None  # goal, collision, timeout, nan_action
        self.over = False
        self.pose = pose
        self.distance = self._distance(pose)
        self.path_m = 0.0
        self.total = 0.0
        self.terms: Counter = Counter()
        self.touched: list[str] = []
        self.intrusions = 0  # steps with someone in the intimate zone
        self.discomfort_steps = 0
        self.min_gap = math.inf
        self.ring_failures: Counter = Counter()

    def _distance(self, pose: tuple[float, float, float]) -> float:
        return math.hypot(pose[0] - self.goal[0], pose[1] - self.goal[1]) if self.goal else 0.0

    def account(self, world: EpisodeWorld, command: tuple[float, float], dt: float) -> tuple[float, bool, bool]:
        """The step's reward, terminated, truncated (after the world advanced one period)."""
        weights, trial = self.spec.reward, self.spec.trial
        pose = world.pose()
        self.path_m += math.hypot(pose[0] - self.pose[0], pose[1] - self.pose[1])
        self.pose = pose
        terms: dict[str, float] = {}
        distance = self._distance(pose)
        terms["progress"] = weights["progress"] * (self.distance - distance)
        self.distance = distance
        terms["time"] = weights["time"] * dt
        gap, nearest = nearest_gap(pose, world.people(), ROBOT_RADIUS_M)
        if gap < 0.0:  # CrowdNav's collision: the discs overlap (whether or not the bodies touched)
            world.touched.add(f"person:{nearest}")
        self.min_gap = min(self.min_gap, gap)
        self.intrusions += gap < INTIMATE_M
        if gap < weights["discomfort_dist"]:
            self.discomfort_steps += 1
            terms["discomfort"] = weights["discomfort"] * (gap - weights["discomfort_dist"]) * dt
        terminated = truncated = False
        if world.touched:
            self.touched = sorted(set(self.touched) | world.touched)
            world.touched.clear()
            terms["collision"], self.event, terminated = weights["collision"], "collision", True
        elif self.goal is not None and distance <= trial.goal_radius:
            terms["success"], self.event, terminated = weights["success"], "goal", True
        elif self.event == "nan_action":
            truncated = True
        elif self.steps * dt >= trial.duration - 1e-9:
            terms["timeout"], self.event, truncated = weights["timeout"], "timeout", True
        reward = float(sum(terms.values()))
        self.terms.update(terms)
        self.total += reward
        self.over = terminated or truncated
        return reward, terminated, truncated

    def info(self, world: EpisodeWorld, ring_causes: Counter) -> dict[str, Any]:
        """hil's metrics of the episode so far (plain numbers and text: vector envs stack them)."""
        self.ring_failures.update(ring_causes)
        people = [t for t in self.touched if t.startswith("person:")]
        return {"t": self.steps / self.spec.control_hz, "seed": self.seed, "event": self.event or "",
                "is_success": self.event == "goal", "goal_distance_m": self.distance, "path_length_m": self.path_m,
                "collisions": {"walls": len(self.touched) - len(people), "people": len(people),
                               "with": ",".join(self.touched)},
                "intrusions": self.intrusions, "discomfort_steps": self.discomfort_steps,
                "min_gap_m": self.min_gap if math.isfinite(self.min_gap) else -1.0,
                "ring_failures": dict(sorted(self.ring_failures.items())),
                "reward_terms": {k: float(v) for k, v in sorted(self.terms.items())}, "return": self.total}


__all__ = ["Episode"]
