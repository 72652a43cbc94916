"""Route following: which way each pedestrian wants to go, and how fast, this step.

Each agent walks its route (a list of waypoints, the last one its goal) toward one waypoint at a time. What
passes a waypoint is *sight*, not a radius around it (crowd/kernel.py: ``_follow``, run every step for everyone):

* the agent takes the next waypoint as soon as the straight way from where it stands to that waypoint keeps its
  body's radius plus ``sight_margin`` off every wall face (for a wall the agent or the waypoint is already closer to,
  the way must not come closer than they are: a person pressed against a wall may walk along it, a goal beside a
  wall is reached). It looks further along the route in the same step, so a route is pulled taut round corners;
* an agent that has lost sight of the waypoint it walks to (pushed back through a door, round a corner, by the
  crowd) goes back to the latest earlier waypoint it sees; "lost sight" means the straight way to it comes closer
  than ``lost_fraction`` x radius to a wall: less than the margin it took the waypoint with, so a person walking
  past a corner does not flicker between two waypoints;
* an agent that sees none of the waypoints up to its current one gets a new route from where it stands
  (:meth:`crowd.sim.CrowdSim.step`).

Why: with a pass radius (the first version), a person at a 90-degree corner was counted past the corner node too
early, aimed at the next node through the inner corner, and the wall force cancelled the drive exactly: 1 of 20
never left RiMEA test 6's corner. Aiming only at what one can walk to straight cannot aim through a wall.

A waypoint is a line across the way, not a point (its *gate*, :meth:`crowd.sim.CrowdSim.gates`, set with the
route): where it stands in an opening (a door, a passage: walls on both sides within 1.5 m) the gate is the
opening's narrowest line through it, elsewhere the line square to the way walked there, at most 1.5 m to either
side. An agent walks to the point of the gate nearest to it that keeps its body ``sight_margin`` off the walls,
narrowing to the waypoint itself over the last 0.2 m before the line (from the waypoint the next one is in sight,
the route was planned so). Without gates a crowd converges on one point in every door: a 1 m door passed people in
single file, 1.2 /(m s), against 1.6-2.0 measured in experiments; with them people use the whole opening.

The last waypoint is the goal, reached within the agent's goal radius (``goal_threshold``; half the gate's width at
exits). Near the goal the desired speed falls off so the agent stops on it rather than overshooting.
"""
from __future__ import annotations

import numpy as np

from .agents import Agents


def desired_velocities(agents: Agents, speed_factor: np.ndarray, braking: float,
                       sight_margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(desired velocity (n, 2), unit desired direction (n, 2)) from the routes; zero for agents without one.

    The speed is v0 x speed_factor; toward the goal it is at most sqrt(2 x braking x distance), the speed from
    which the person can still stop on the goal decelerating at ``braking`` m/s^2. (A linear ramp would be
    gentler, but its pull vanishes near the goal, and a wall force then holds a person short of a goal near a
    wall; this one still reaches goals 0.35 m off a wall's face, and overshoots a free goal by < 0.2 m.)
    The headway rule (crowd/forces.py) acts on top of this, in the step.
    """
    from . import kernel  # here: a trial's process reads scenario scripts (objectives import this module) but
    # never steps a crowd, and must not load numba and the compiled step for that (~0.3 CPU s)

    return kernel.route_velocities(agents.pos, agents.radius, agents.v0, np.asarray(speed_factor, dtype=float),
                                   agents.has_route, agents.waypoint, agents.target, agents.final, agents.route_gate,
                                   float(braking), float(sight_margin))


def goal_distances(agents: Agents) -> np.ndarray:
    """Distance of each agent to its current waypoint (its goal once ``final``)."""
    rel = agents.target - agents.pos
    return np.sqrt(np.einsum("ij,ij->i", rel, rel))


def arrived_mask(agents: Agents) -> np.ndarray:
    """Agents on their last waypoint and within their goal radius of it (agents without a route count)."""
    return agents.final & (goal_distances(agents) <= agents.goal_radius) | ~agents.has_route
