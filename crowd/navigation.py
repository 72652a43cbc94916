"""Route following: which way each pedestrian wants to go, and how fast, this step.

Each agent walks its route (a list of waypoints) one waypoint at a time: the desired direction points at the
current waypoint; an intermediate waypoint is passed within ``waypoint_threshold`` of it (or once the agent is
past it, within ``pass_radius``: in a crowd not everyone can step on the point); the last waypoint is the goal,
reached within the agent's goal radius (``goal_threshold``). Near the goal the desired speed falls off so the
agent stops on it rather than overshooting.
"""
from __future__ import annotations

import numpy as np

from .agents import Agents


def advance_waypoints(agents: Agents, waypoint_threshold: float, pass_radius: float) -> None:
    """Move agents that reached (or passed) their current intermediate waypoint on to the next one."""
    for _ in range(8):  # a route with several waypoints close together may advance more than one per step
        if not len(agents):
            return
        rel = agents.pos - agents.target
        dist = np.sqrt(np.einsum("ij,ij->i", rel, rel))
        ahead = agents.next_target - agents.target  # NaN on the final waypoint
        passed = np.einsum("ij,ij->i", rel, np.nan_to_num(ahead)) > 0
        due = agents.has_route & ~agents.final & ((dist < waypoint_threshold) | (passed & (dist < pass_radius)))
        rows = np.flatnonzero(due)
        if not len(rows):
            return
        for row in rows:
            agents.set_waypoint(int(row), int(agents.waypoint[row]) + 1)


def desired_velocities(agents: Agents, speed_factor: np.ndarray, braking: float) -> tuple[np.ndarray, np.ndarray]:
    """(desired velocity (n, 2), unit desired direction (n, 2)) from the routes; zero for agents without one.

    The speed is v0 x speed_factor; toward the goal it is at most sqrt(2 x braking x distance), the speed from
    which the person can still stop on the goal decelerating at ``braking`` m/s^2. (A linear ramp would be
    gentler, but its pull vanishes near the goal, and a wall force then holds a person short of a goal near a
    wall; this one still reaches goals 0.35 m off a wall's face, and overshoots a free goal by < 0.2 m.)
    """
    rel = agents.target - agents.pos
    dist = np.sqrt(np.einsum("ij,ij->i", rel, rel))
    direction = np.zeros_like(rel)
    moving = agents.has_route & (dist > 1e-9)
    direction[moving] = rel[moving] / dist[moving, None]
    speed = agents.v0 * speed_factor
    speed = np.where(agents.final, np.minimum(speed, np.sqrt(2.0 * braking * dist)), speed)
    return direction * speed[:, None], direction


def goal_distances(agents: Agents) -> np.ndarray:
    """Distance of each agent to its current waypoint (its goal once ``final``)."""
    rel = agents.target - agents.pos
    return np.sqrt(np.einsum("ij,ij->i", rel, rel))


def arrived_mask(agents: Agents) -> np.ndarray:
    """Agents on their last waypoint and within their goal radius of it (agents without a route count)."""
    return agents.final & (goal_distances(agents) <= agents.goal_radius) | ~agents.has_route
