"""The crowd's state: one row per pedestrian in numpy arrays (struct of arrays), so forces are vectorised.

Rows are added and removed as people arrive and leave; ``ids`` keeps every agent's stable integer id and
``names`` the script names (``kid``). Everything is SI: metres, seconds, radians; positions in the map frame.

Routes are Python lists for the API (``routes``) and, for the compiled step, one padded array ``route_xy``
(n, K, 2) with ``route_len`` waypoints per row (K grows to the longest route set). ``waypoint`` is the index of
the waypoint walked to now, ``target`` that waypoint, ``final`` whether it is the goal: the step (crowd/kernel.py)
updates the three in place as agents pass or re-acquire waypoints, so no step loops over agents in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_DT = 0.1  # seconds of simulated time per crowd step, unless told otherwise
NO_GROUP = -1


@dataclass
class AgentSpec:
    """What a new pedestrian is: drawn by the generator from the rates, or given by a script line."""

    person_type: str  # adult_man, adult_woman, child, elderly, or a script's type such as boy02
    radius: float  # body radius (m)
    preferred_speed: float  # m/s
    position: tuple[float, float]
    route: list[tuple[float, float]] = field(default_factory=list)  # waypoints to walk through, last one = goal
    group: int = NO_GROUP  # -1: alone
    name: str = ""  # a script's name for it
    exit_on_arrival: bool = True  # generated agents leave at their exit; scripted ones stay
    surface: str | None = None  # its own clothing's surface (a script line's); None: its type's, else the default


# Per-row arrays and the value a new row starts with (shape of one row).
_ARRAYS: dict[str, tuple[tuple[int, ...], type]] = {
    "pos": ((2,), float),
    "vel": ((2,), float),
    "radius": ((), float),
    "v0": ((), float),
    "group": ((), int),
    "ids": ((), int),
    "gaze": ((2,), float),  # unit vector where each one looks (walking direction unless told otherwise)
    "waypoint": ((), int),  # index into the route of the waypoint walked to now
    "target": ((2,), float),  # that waypoint (the agent's own position when it has no route)
    "final": ((), bool),  # ``target`` is the last waypoint
    "has_route": ((), bool),
    "goal_radius": ((), float),  # within this of the goal = arrived (goal_threshold; half a gate's width at exits)
    "robot_target": ((), bool),  # walking to the robot (``move X to robot``): the avoidance force is off
    "exit_on_arrival": ((), bool),  # leaves the map on arriving at its goal
    "route_len": ((), int),  # waypoints in the row's route
}
ROUTE_WIDTH = 8  # initial K of route_xy


class Agents:
    """Struct of arrays. ``pos``, ``vel``, ``gaze``, ``target`` (n, 2); ``radius``, ``v0`` (n,); ``group``,
    ``ids`` (n,) int; ``route_xy`` (n, K, 2); per-agent lists ``types``, ``names``, ``surfaces``, ``routes``."""

    def __init__(self) -> None:
        for name, (shape, dtype) in _ARRAYS.items():
            setattr(self, name, np.zeros((0, *shape), dtype=dtype))
        self.types: list[str] = []
        self.names: list[str] = []
        self.surfaces: list[str | None] = []  # an agent's own clothing surface (AgentSpec.surface)
        self.routes: list[list[tuple[float, float]]] = []
        self.route_xy = np.zeros((0, ROUTE_WIDTH, 2))
        self.route_gate = np.zeros((0, ROUTE_WIDTH, 4))  # per waypoint: gate direction (x, y), extents - and +
        self._next_id = 0

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, spec: AgentSpec, goal_radius: float = 0.2) -> int:
        """Append one agent; returns its id (ids are never reused)."""
        agent_id = self._next_id
        self._next_id += 1
        row = {
            "pos": spec.position, "vel": (0.0, 0.0), "radius": spec.radius, "v0": spec.preferred_speed,
            "group": spec.group, "ids": agent_id, "gaze": (1.0, 0.0), "waypoint": 0, "target": spec.position,
            "final": True, "has_route": False, "goal_radius": goal_radius, "robot_target": False,
            "exit_on_arrival": spec.exit_on_arrival, "route_len": 0,
        }
        for name, value in row.items():
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr, np.asarray(value, dtype=arr.dtype)[None]]))
        self.types.append(spec.person_type)
        self.names.append(spec.name)
        self.surfaces.append(spec.surface)
        self.routes.append([])
        self.route_xy = np.concatenate([self.route_xy, np.zeros((1, *self.route_xy.shape[1:]))])
        self.route_gate = np.concatenate([self.route_gate, np.zeros((1, *self.route_gate.shape[1:]))])
        self.set_route(len(self) - 1, spec.route, goal_radius)
        return agent_id

    def remove(self, rows: np.ndarray) -> None:
        """Drop the given rows (a boolean mask or indices)."""
        keep = np.ones(len(self), dtype=bool)
        keep[rows] = False
        for name in _ARRAYS:
            setattr(self, name, getattr(self, name)[keep])
        kept = np.flatnonzero(keep)
        self.types = [self.types[i] for i in kept]
        self.names = [self.names[i] for i in kept]
        self.surfaces = [self.surfaces[i] for i in kept]
        self.routes = [self.routes[i] for i in kept]
        self.route_xy = self.route_xy[keep]
        self.route_gate = self.route_gate[keep]

    def set_route(self, row: int, route: list[tuple[float, float]], goal_radius: float,
                  robot_target: bool = False, gates: np.ndarray | None = None) -> None:
        """Give a row a new route (walk from its first waypoint); an empty route means stand still. ``gates``
        (len(route), 4): each waypoint's gate (navigation.py), zeros (a point) when not given."""
        self.routes[row] = [(float(x), float(y)) for x, y in route]
        if len(route) > self.route_xy.shape[1]:
            width = max(len(route), 2 * self.route_xy.shape[1])
            wider = np.zeros((len(self), width, 2))
            wider[:, :self.route_xy.shape[1]] = self.route_xy
            self.route_xy = wider
            wider_gates = np.zeros((len(self), width, 4))
            wider_gates[:, :self.route_gate.shape[1]] = self.route_gate
            self.route_gate = wider_gates
        self.route_gate[row] = 0.0
        if route:
            self.route_xy[row, :len(route)] = self.routes[row]
            if gates is not None:
                self.route_gate[row, :len(route)] = gates
        self.route_len[row] = len(route)
        self.has_route[row] = bool(route)
        self.goal_radius[row] = goal_radius
        self.robot_target[row] = robot_target
        self.set_waypoint(row, 0)

    def set_waypoint(self, row: int, k: int) -> None:
        """Walk to waypoint ``k`` of the row's route next (refreshes the cached arrays)."""
        route = self.routes[row]
        self.waypoint[row] = k
        if not route:
            self.target[row] = self.pos[row]
            self.final[row] = True
            return
        self.target[row] = route[k]
        self.final[row] = k == len(route) - 1

    def row(self, agent_id: int) -> int:
        rows = np.flatnonzero(self.ids == agent_id)
        if not len(rows):
            raise KeyError(f"no agent with id {agent_id}")
        return int(rows[0])

    def row_of_name(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no agent named {name!r}") from None
