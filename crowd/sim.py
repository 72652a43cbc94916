"""CrowdSim: the crowd's clock, state and step. Generation, objectives and scripts drive it through hooks.

One step (``dt`` seconds of simulated time)::

    time_s += dt (rounded to the nanosecond)
    reset the per-step arrays: override_velocity = NaN, override_gaze = NaN, speed_factor = 1
    run the hooks in order (generator, objective manager, ...): they may add/remove/move agents and set the arrays
    one compiled call for everyone (crowd/kernel.py, which lists its parts):
        route following by sight -> desired velocity v0 x speed_factor toward the current waypoint's gate (or the
        override's row), at most the headway speed
        forces: desired (relaxation), social (pairs within the cut-off, via a cell grid), walls, groups, robot
        integrate (semi-implicit Euler: v += a dt, clamp |v|, x += v dt), keep bodies apart and out of walls/robot
        gaze: the override where set, else the walking direction
    a new route for agents that lost sight of their way
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

from . import kernel, navigation
from .agents import DEFAULT_DT, Agents, AgentSpec  # DEFAULT_DT beside the agents: a trial's process reads it
from .forces import WallIndex, merge_params, param_vector
from .maps import CrowdMap

ROBOT = "robot"
REPLAN_S = 1.0  # an agent that lost sight of its way gets a new route at most this often
GATE_REACH_M = 1.5  # a waypoint's gate reaches at most this far to either side of it
GATE_DIRECTIONS = 24  # directions tried for an opening's narrowest line (every 7.5 degrees)


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


_warmed_up = False


def warm_up() -> None:
    """Compile (or load from numba's disk cache) every compiled entry point now, on a two-person scene with a wall,
    a group and a robot. The first CrowdSim of a process calls this, so a served crowd has done it before it prints
    its endpoint: a first compile after an install (~15 s) must not look to the world like a crowd that stalled."""
    global _warmed_up
    if _warmed_up:
        return
    _warmed_up = True
    from hil.devices.map_format import Wall

    room = CrowdMap("warm-up", "<warm-up>", (Wall((0.0, -2.0), (0.0, 2.0), 0.1, 1.0),),
                    nodes={"a": (2.0, 0.0), "b": (4.0, 1.0)}, edges=(("a", "b"),))
    sim = CrowdSim(room, seed=0)
    sim.set_robot(3.0, -1.0)
    for y in (0.0, 0.6):
        sim.add_agent(AgentSpec("adult", 0.23, 1.3, (1.0, y), [(2.0, 0.0), (4.0, 1.0)], group=0))
    navigation.desired_velocities(sim.agents, sim.speed_factor, 1.0, 0.05)
    sim.step()


class CrowdSim:
    """Pedestrians on a CrowdMap under the social force model, stepped at a fixed ``dt``."""

    def __init__(self, crowd_map: CrowdMap, *, seed: int = 0, dt: float = DEFAULT_DT,
                 params: dict[str, Any] | None = None):
        if not dt > 0:
            raise ValueError(f"dt must be > 0 s, not {dt!r}")
        warm_up()
        self.map = crowd_map
        self.dt = float(dt)
        self.time_s = 0.0
        self.seed = seed
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.surface_of_type: dict[str, str] = {}  # person type -> its clothing's surface (rates' person_types)
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
        self._param_vector = param_vector(self.params)
        self._robot_vector = np.zeros(6)
        self._no_group_index = np.zeros(0, dtype=np.int64)
        self._replanned: dict[int, float] = {}  # agent id -> sim time of its last new route
        self._openings: dict[tuple[float, float], tuple | None] = {}  # waypoint -> its opening's gate, if any

    # --- agents ---------------------------------------------------------------------------------------------

    def add_agent(self, spec: AgentSpec) -> int:
        """Add a pedestrian; returns its id. Its gaze starts toward its first waypoint."""
        goal_radius = self._goal_radius(spec.route[-1] if spec.route else None)
        agent_id = self.agents.add(spec, goal_radius)
        row = len(self.agents) - 1
        if spec.route:
            self.agents.route_gate[row, :len(spec.route)] = self.gates(spec.position, spec.route)
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
        self.agents.set_route(row, route, goal_radius, robot_target=to_robot, gates=self.gates(start, route))

    def gates(self, start: Sequence[float], route: Sequence[Sequence[float]]) -> np.ndarray:
        """Each waypoint's gate (navigation.py); the goal has none. Where the waypoint stands in an opening (walls
        on both sides within GATE_REACH_M: a door, a passage), the gate is the opening's narrowest line through it;
        elsewhere the line square to the way walked there (the bisector of the legs in and out), as far as the walls
        on either side, at most GATE_REACH_M."""
        out = np.zeros((len(route), 4))
        points = [np.asarray(start, dtype=float), *(np.asarray(p, dtype=float) for p in route)]
        for k in range(len(route) - 1):
            before, here, after = points[k], points[k + 1], points[k + 2]
            opening = self._opening(float(here[0]), float(here[1]))
            if opening is not None:
                out[k] = opening
                continue
            way = np.zeros(2)
            for leg in (here - before, after - here):
                norm = float(np.hypot(*leg))
                if norm > 1e-9:
                    way += leg / norm
            norm = float(np.hypot(*way))
            if norm < 1e-9:  # a U-turn at the waypoint: square to the way out
                way, norm = after - here, float(np.hypot(*(after - here)))
            if norm < 1e-9:
                continue
            out[k] = self._gate(here, -way[1] / norm, way[0] / norm)
        return out

    def _gate(self, here: np.ndarray, gx: float, gy: float) -> tuple[float, float, float, float]:
        seg, half = self.walls.segments, self.walls.half_thickness
        return (gx, gy, kernel.free_reach(here[0], here[1], -gx, -gy, seg, half, GATE_REACH_M),
                kernel.free_reach(here[0], here[1], gx, gy, seg, half, GATE_REACH_M))

    def _opening(self, x: float, y: float) -> tuple[float, float, float, float] | None:
        """The narrowest line through (x, y) with a wall within GATE_REACH_M at both ends, or None (cached)."""
        key = (round(x, 6), round(y, 6))
        if key not in self._openings:
            best = None
            for k in range(GATE_DIRECTIONS):
                angle = math.pi * k / GATE_DIRECTIONS
                gate = self._gate(np.array([x, y]), math.cos(angle), math.sin(angle))
                if gate[2] < GATE_REACH_M and gate[3] < GATE_REACH_M and (
                        best is None or gate[2] + gate[3] < best[2] + best[3] - 1e-9):
                    best = gate
            self._openings[key] = best
        return self._openings[key]

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

    def _move_agents(self) -> None:
        """One compiled step (crowd/kernel.py) for everyone; new routes for agents who lost their way; arrivals."""
        a = self.agents
        if a.group.max(initial=-1) >= 0:
            members = a.group >= 0
            gidx = np.full(len(a), -1, dtype=np.int64)
            uniques, gidx[members] = np.unique(a.group[members], return_inverse=True)
            n_groups = len(uniques)
        else:
            gidx, n_groups = self._no_groups(len(a)), 0
        robot = self._robot_vector
        if self.robot is not None:
            r = self.robot
            robot = np.array([1.0, r.x, r.y, r.radius, r.vx, r.vy])
        for _ in range(2):
            new_pos, new_vel, lost, leaving, n_lost, n_leaving, needed = kernel.step(
                a.pos, a.vel, a.radius, a.v0, self.speed_factor, gidx, n_groups, a.gaze,
                a.has_route, a.route_xy, a.route_len, a.route_gate, a.waypoint, a.target, a.final, a.goal_radius,
                a.robot_target, a.exit_on_arrival, self.override_velocity, self.override_gaze,
                *self.walls.kernel_args(), robot, self._param_vector, self.dt)
            if not needed:
                break
            self.walls.ensure_reach(needed)  # bigger bodies or faster steps than the wall buckets cover
        a.pos, a.vel = new_pos, new_vel
        if n_lost:
            for row in np.flatnonzero(lost):
                self._replan(int(row))
        if n_leaving:
            self._remove_rows(np.flatnonzero(leaving))

    def _replan(self, row: int) -> None:
        """A new route from where the agent stands to its goal: it lost sight of the waypoint it walked to (pushed
        back through a door, round a corner, off its way by the crowd or its group). At most once per REPLAN_S
        per agent (in between it walks to the latest earlier waypoint it sees, which the step chose)."""
        a = self.agents
        agent_id = int(a.ids[row])
        if self.time_s - self._replanned.get(agent_id, -math.inf) < REPLAN_S:
            return
        if len(self._replanned) > 2 * len(a) + 64:
            present = set(a.ids.tolist())
            self._replanned = {k: v for k, v in self._replanned.items() if k in present}
        self._replanned[agent_id] = self.time_s
        goal = a.routes[row][-1]
        try:
            route = self.map.route(tuple(a.pos[row]), goal)
        except ValueError:  # a map without a passage graph, and no straight way: keep the step's choice
            return
        a.set_route(row, route, float(a.goal_radius[row]), robot_target=bool(a.robot_target[row]),
                    gates=self.gates(tuple(a.pos[row]), route))

    def _no_groups(self, n: int) -> np.ndarray:
        if len(self._no_group_index) != n:
            self._no_group_index = np.full(n, -1, dtype=np.int64)
        return self._no_group_index

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
