"""CrowdSim: the crowd's clock, state and step. Generation, objectives and scripts drive it through hooks.

One step (``dt`` seconds of simulated time)::

    time_s += dt (rounded to the nanosecond)
    reset the per-step arrays: override_velocity = NaN, override_gaze = NaN, speed_factor = 1
    run the hooks in order (generator, objective manager, ...): they may add/remove/move agents and set the arrays
    route following -> desired velocity v0 x speed_factor toward the current waypoint (or the override's row)
    forces: desired (relaxation), social (pairs within the cut-off, via a cell grid), walls, groups, robot
    integrate (semi-implicit Euler: v += a dt, clamp |v|, x += v dt), keep bodies apart and out of walls/robot
    gaze: the override where set, else the walking direction
    remove agents that arrived at their final waypoint and have exit_on_arrival

Two rules hooks should know:
* the robot-avoidance force acts only on agents following their route (no override_velocity this step) and not
  walking to the robot (``move(id, "robot")``): an objective that overrides the velocity (approach, stop at a
  distance, flee) has decided how to treat the robot, and a reflex pushing it away would undo that. The robot's
  disc stays solid for everyone.
* an override_velocity of (0, 0) stops the agent's own drive, not the world: neighbours and walls still push
  it (a person standing 0.7 m from a wall drifts off it at a few cm/s).

The only randomness of the whole crowd is ``rng`` (numpy PCG64 seeded by ``seed``); nothing here depends on set
or dict order or on the wall clock, so the same seed and the same calls give identical arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import navigation
from .agents import Agents, AgentSpec
from .contacts import resolve
from .forces import (
    WallIndex,
    desired_force,
    group_forces,
    merge_params,
    neighbour_pairs,
    obstacle_force,
    robot_force,
    social_force,
)
from .maps import CrowdMap

ROBOT = "robot"


@dataclass
class RobotState:
    """The robot as the crowd sees it: a disc at (x, y) with a heading and a velocity (map frame, SI)."""

    x: float
    y: float
    yaw: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    radius: float = 0.3

    @property
    def xy(self) -> tuple[float, float]:
        return self.x, self.y


class CrowdSim:
    """Pedestrians on a CrowdMap under the social force model, stepped at a fixed ``dt``."""

    def __init__(self, crowd_map: CrowdMap, *, seed: int = 0, dt: float = 0.1,
                 params: dict[str, Any] | None = None):
        if not dt > 0:
            raise ValueError(f"dt must be > 0 s, not {dt!r}")
        self.map = crowd_map
        self.dt = float(dt)
        self.time_s = 0.0
        self.seed = seed
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.params = merge_params(params)
        self.agents = Agents()
        self.robot: RobotState | None = None
        self.hooks: list[Callable[[CrowdSim], None]] = []
        self.override_velocity = np.zeros((0, 2))
        self.override_gaze = np.zeros((0, 2))
        self.speed_factor = np.zeros(0)
        self.steps = 0
        half = getattr(crowd_map, "wall_half_thickness", np.zeros(0))
        reach = self.params["obstacle_force"]["threshold"] + 0.6 + float(half.max(initial=0.0))
        self.walls = WallIndex(getattr(crowd_map, "wall_segments", np.zeros((0, 4))), half, reach)

    # --- agents ---------------------------------------------------------------------------------------------

    def add_agent(self, spec: AgentSpec) -> int:
        """Add a pedestrian; returns its id. Its gaze starts toward its first waypoint."""
        goal_radius = self._goal_radius(spec.route[-1] if spec.route else None)
        agent_id = self.agents.add(spec, goal_radius)
        row = len(self.agents) - 1
        rel = self.agents.target[row] - self.agents.pos[row]
        norm = math.hypot(*rel)
        if norm > 1e-9:
            self.agents.gaze[row] = rel / norm
        self.override_velocity = np.vstack([self.override_velocity, (np.nan, np.nan)])
        self.override_gaze = np.vstack([self.override_gaze, (np.nan, np.nan)])
        self.speed_factor = np.append(self.speed_factor, 1.0)
        return agent_id

    def remove_agent(self, agent_id: int) -> None:
        self._remove_rows(np.array([self.agents.row(agent_id)]))

    def row(self, agent_id: int) -> int:
        """The agent's row in the arrays now (rows shift as agents leave; ids do not)."""
        return self.agents.row(agent_id)

    def place(self, agent_id: int, x: float, y: float) -> None:
        """Teleport an agent (velocity zero); it keeps its route."""
        row = self.agents.row(agent_id)
        self.agents.pos[row] = (x, y)
        self.agents.vel[row] = 0.0
        if not self.agents.has_route[row]:
            self.agents.target[row] = (x, y)

    def move(self, agent_id: int, target: str | tuple[float, float] | Sequence[float]) -> None:
        """Send an agent to a place, node, entrance or plaza name, an (x, y), or ``"robot"``; replaces its route.

        ``"robot"``: the route ends where the agent, coming along its last leg, touches the robot's disc plus
        goal_threshold (the robot is solid: its centre cannot be reached); the robot-avoidance force is off for
        this agent until its next move.
        """
        row = self.agents.row(agent_id)
        start = tuple(self.agents.pos[row])
        to_robot = isinstance(target, str) and target == ROBOT
        if to_robot:
            if self.robot is None:
                raise ValueError("move to robot: there is no robot (set_robot first)")
            robot_xy = self.robot.xy
            route = self.map.route(start, robot_xy)
            before = route[-2] if len(route) > 1 else start
            away = np.subtract(before, robot_xy)
            norm = float(np.hypot(*away))
            unit = away / norm if norm > 1e-9 else np.array([-1.0, 0.0])
            stand = self.robot.radius + self.agents.radius[row] + self.params["desired_force"]["goal_threshold"]
            route[-1] = tuple(float(c) for c in np.asarray(robot_xy) + unit * stand)
            goal_radius = self.params["desired_force"]["goal_threshold"]
        else:
            if not isinstance(target, str):
                target = (float(target[0]), float(target[1]))
            route = self.map.route(start, target)
            goal_radius = self._goal_radius(target)
        self.agents.set_route(row, route, goal_radius, robot_target=to_robot)

    def arrived(self, agent_id: int) -> bool:
        """On its final waypoint and within goal_threshold of it (half the gate's width at an exit gate); an agent
        without a route has nowhere to go and counts as arrived."""
        row = self.agents.row(agent_id)
        return bool(navigation.arrived_mask(self.agents)[row])

    def set_robot(self, x: float, y: float, yaw: float = 0.0, vx: float = 0.0, vy: float = 0.0,
                  radius: float = 0.3) -> None:
        self.robot = RobotState(float(x), float(y), float(yaw), float(vx), float(vy), float(radius))

    # --- stepping -------------------------------------------------------------------------------------------

    def run(self, duration_s: float) -> None:
        """Step for ``duration_s`` of simulated time (rounded to whole steps)."""
        for _ in range(int(round(duration_s / self.dt))):
            self.step()

    def step(self) -> None:
        # Rounded to the nanosecond so that 0.1 s steps read 0.3, not 0.30000000000000004 (scripts compare times).
        self.time_s = round(self.time_s + self.dt, 9)
        self.steps += 1
        n = len(self.agents)
        self.override_velocity = np.full((n, 2), np.nan)
        self.override_gaze = np.full((n, 2), np.nan)
        self.speed_factor = np.ones(n)
        for hook in self.hooks:
            hook(self)
        if not len(self.agents):
            return
        self._move_agents()
        self._remove_arrivals()

    def _move_agents(self) -> None:
        p = self.params
        a = self.agents
        dt = self.dt
        nav = p["navigation"]
        navigation.advance_waypoints(a, nav["waypoint_threshold"], nav["pass_radius"])
        v_route, directions = navigation.desired_velocities(a, self.speed_factor, nav["braking"])
        overridden = ~np.isnan(self.override_velocity).any(axis=1)
        v_desired = np.where(overridden[:, None], np.nan_to_num(self.override_velocity), v_route)
        if overridden.any():
            speed = np.linalg.norm(v_desired[overridden], axis=1)
            unit = np.zeros((int(overridden.sum()), 2))
            ok = speed > 1e-9
            unit[ok] = v_desired[overridden][ok] / speed[ok, None]
            directions = directions.copy()
            directions[overridden] = unit

        pos, vel, radius = a.pos, a.vel, a.radius
        i, j = neighbour_pairs(pos, p["social_force"]["cutoff"])
        force = desired_force(vel, v_desired, p["desired_force"])
        force += social_force(pos, vel, i, j, p["social_force"])
        force += obstacle_force(pos, radius, self.walls, p["obstacle_force"])
        if (a.group >= 0).any():
            force += group_forces(pos, directions, a.group, i, j, p["group_coherence_force"],
                                  p["group_repulsive_force"], p["group_gaze_force"])
        if self.robot is not None:
            applies = ~overridden & ~a.robot_target
            force += robot_force(pos, radius, directions, self.robot.xy, self.robot.radius, applies,
                                 p["robot_force"])

        # Semi-implicit Euler with pysocialforce's speed cap (max_speed_multiplier x the speed it wants).
        new_vel = vel + dt * force
        wanted = np.maximum(np.linalg.norm(v_desired, axis=1), a.v0 * self.speed_factor)
        cap = p["scene"]["max_speed_multiplier"] * wanted
        speed = np.linalg.norm(new_vel, axis=1)
        too_fast = speed > cap
        new_vel[too_fast] *= (cap[too_fast] / speed[too_fast])[:, None]
        new_pos = pos + dt * new_vel

        # Contacts: candidate pairs are the neighbour pairs that could touch after this step's moves.
        iterations = int(p["contact"]["iterations"])
        if len(i):
            reach = radius[i] + radius[j] + 2 * dt * float(cap.max())
            dd = pos[i] - pos[j]
            near = np.einsum("ij,ij->i", dd, dd) < reach * reach
            ci, cj = i[near], j[near]
        else:
            ci = cj = i
        robot = None if self.robot is None else (self.robot.x, self.robot.y, self.robot.radius)
        new_pos = resolve(pos, new_pos, new_vel, radius, ci, cj, self.walls, robot, iterations)
        a.pos = new_pos
        a.vel = new_vel

        # Gaze: the override where a hook set one, else the walking direction (kept while standing).
        speed = np.linalg.norm(new_vel, axis=1)
        walking = speed > 0.05
        a.gaze[walking] = new_vel[walking] / speed[walking, None]
        told = ~np.isnan(self.override_gaze).any(axis=1)
        if told.any():
            g = self.override_gaze[told]
            norm = np.linalg.norm(g, axis=1)
            ok = norm > 1e-9
            rows = np.flatnonzero(told)[ok]
            a.gaze[rows] = g[ok] / norm[ok, None]

    def _remove_arrivals(self) -> None:
        a = self.agents
        leaving = navigation.arrived_mask(a) & a.has_route & np.asarray(a.exit_on_arrival, dtype=bool)
        if leaving.any():
            self._remove_rows(np.flatnonzero(leaving))

    def _remove_rows(self, rows: np.ndarray) -> None:
        keep = np.ones(len(self.agents), dtype=bool)
        keep[rows] = False
        self.agents.remove(rows)
        self.override_velocity = self.override_velocity[keep]
        self.override_gaze = self.override_gaze[keep]
        self.speed_factor = self.speed_factor[keep]

    def _goal_radius(self, target: object) -> float:
        """goal_threshold, or half the gate's width when the goal is an exit gate (people leave anywhere in it)."""
        threshold = self.params["desired_force"]["goal_threshold"]
        if target is None:
            return threshold
        if isinstance(target, str):
            gate = self.map.entrances.get(target)
            return max(threshold, gate.width / 2) if gate is not None and gate.is_exit else threshold
        xy = (float(target[0]), float(target[1]))  # type: ignore[index]
        for gate in self.map.entrances.values():
            if gate.is_exit and math.dist(xy, gate.point) < 1e-6:
                return max(threshold, gate.width / 2)
        return threshold

    # --- output ---------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """This instant as plain lists (JSON/msgpack-ready), for trajectories."""
        a = self.agents
        return {
            "t": self.time_s,
            "ids": a.ids.tolist(),
            "names": list(a.names),
            "types": list(a.types),
            "group": a.group.tolist(),
            "pos": a.pos.tolist(),
            "vel": a.vel.tolist(),
            "gaze": a.gaze.tolist(),
        }
