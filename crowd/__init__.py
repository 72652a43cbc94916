"""The crowd simulator (the crowd-simulation reference): maps, pedestrians under the social force model, and the step
loop that generation, objectives and scripts drive through hooks. Imports bridge/ and devices.yaml_source only.

The names below are imported when first used (PEP 562): importing one submodule (``hil.crowd.cli`` to register
``hil crowd``, ``hil.crowd.maps`` for a map) must not compile-load the numba step of ``forces`` in every ``hil``
process, only in the crowd's."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agents import AgentSpec, Agents
    from .forces import DEFAULT_PARAMS
    from .maps import CrowdMap, Entrance, Plaza, Wall, load_crowd_map, parse_crowd_map
    from .sim import CrowdSim, RobotState

_WHERE = {"AgentSpec": "agents", "Agents": "agents", "DEFAULT_PARAMS": "forces", "CrowdMap": "maps",
          "Entrance": "maps", "Plaza": "maps", "Wall": "maps", "load_crowd_map": "maps", "parse_crowd_map": "maps",
          "CrowdSim": "sim", "RobotState": "sim"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # once: later lookups find it without this hook
    return value
