"""The crowd simulator (the crowd-simulation reference): maps, pedestrians under the social force model, and the step
loop that generation, objectives and scripts drive through hooks. Imports bridge/ and devices.yaml_source only."""
from __future__ import annotations

from .agents import AgentSpec, Agents
from .forces import DEFAULT_PARAMS
from .maps import CrowdMap, Entrance, Plaza, Wall, load_crowd_map, parse_crowd_map
from .sim import CrowdSim, RobotState

__all__ = ["AgentSpec", "Agents", "CrowdMap", "CrowdSim", "DEFAULT_PARAMS", "Entrance", "Plaza", "RobotState",
           "Wall", "load_crowd_map", "parse_crowd_map"]
