"""Agent trajectories as plain JSON: what ``hil crowd --json`` writes and what tests compare across runs.

A hook samples the state each step starts from (every ``every`` steps), so a record at time t is what the step
from t began with. Values are rounded to 0.1 mm / 0.1 mm/s / 1e-4 of a unit vector: enough for any analysis, and
byte-identical runs for a seed stay byte-identical after formatting.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sim import CrowdSim

FORMAT = "hil.crowd.trajectories/1"


def _r(v: float) -> float:
    return round(float(v), 4)


class TrajectoryRecorder:
    """Sim hook collecting every agent's samples ``[t, x, y, vx, vy, gaze_x, gaze_y]`` and the robot's pose."""

    def __init__(self, sim: CrowdSim, every_s: float | None = None) -> None:
        self.sim = sim
        self.every = max(1, int(round((every_s or sim.dt) / sim.dt)))
        self.agents: dict[int, dict[str, Any]] = {}
        self.robot: list[list[float]] = []
        self._count = 0

    def __call__(self, sim: CrowdSim) -> None:
        if self._count % self.every == 0:
            self.sample(sim.time_s - sim.dt)  # hooks run after the clock moved on: the state is the step's start
        self._count += 1

    def sample(self, time_s: float | None = None) -> None:
        """Record the state now, labelled ``time_s`` (default the sim's time: after the last step)."""
        sim, a = self.sim, self.sim.agents
        t = _r(sim.time_s if time_s is None else time_s)
        if self.robot and self.robot[-1][0] == t:
            return  # already sampled at this time
        for row, agent_id in enumerate(a.ids):
            agent_id = int(agent_id)
            track = self.agents.get(agent_id)
            if track is None:
                track = self.agents[agent_id] = {"id": agent_id, "name": a.names[row], "type": a.types[row],
                                                 "group": int(a.group[row]), "radius": _r(a.radius[row]),
                                                 "samples": []}
            track["samples"].append([t, _r(a.pos[row, 0]), _r(a.pos[row, 1]), _r(a.vel[row, 0]),
                                     _r(a.vel[row, 1]), _r(a.gaze[row, 0]), _r(a.gaze[row, 1])])
        r = sim.robot
        self.robot.append([t] + ([_r(r.x), _r(r.y), _r(r.yaw)] if r is not None else []))

    def to_dict(self, **meta: Any) -> dict[str, Any]:
        return {"format": FORMAT, **meta, "dt": self.sim.dt, "sample_every_s": _r(self.every * self.sim.dt),
                "columns": ["t", "x", "y", "vx", "vy", "gaze_x", "gaze_y"],
                "robot_columns": ["t", "x", "y", "yaw"], "robot": self.robot,
                "agents": [self.agents[k] for k in sorted(self.agents)]}

    def to_json(self, **meta: Any) -> str:
        return json.dumps(self.to_dict(**meta), separators=(",", ":"))
