"""Maps (config/maps/*.yaml): walls as line segments with a thickness and a height, and named places.

    name: lab
    defaults: {thickness: 0.1, height: 2.0}     # for walls that do not say (optional)
    walls:
      - {from: [-4, -3], to: [4, -3]}           # metres, in the world frame (z up, floor at z = 0)
      - {from: [1.5, -3], to: [1.5, -1.2], thickness: 0.08, height: 1.2}
    places:                                     # optional: named points on the floor
      centre: [0, 0]
    start: [0, 0, 0]                            # optional: a trial's start pose when it gives none (x, y, yaw)
    goal: [3.5, 0]                              # optional: a trial's goal when it gives none

A wall is a box centred on its segment, exactly as long as the segment (no end caps: where two walls meet at a
corner their inner faces close the room; a doorway is exactly the gap between two segments' ends).
Every error names file:line (devices.yaml_source), and a map is either loaded whole or not at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hil.devices.map_format import TASK_SECTIONS, Wall, no_unknown, parse_walls, point, resolve_map
from hil.devices.yaml_source import (
    ConfigError,
    SourceDict,
    load_yaml_file,
    require,
)

SECTIONS = ("name", "defaults", "walls", "places")
# Sections of the same file that only the crowd reads (crowd/maps.py: gates, the passage graph, plazas); the
# world accepts and ignores them, so one map file drives both.
CROWD_SECTIONS = ("entrances", "graph", "plazas")
# ``start`` and ``goal``: the map's default task, which only a trial reads (devices/map_format.py, trial/task.py)


@dataclass(frozen=True)
class Map:
    name: str
    source: str
    walls: tuple[Wall, ...]
    places: dict[str, tuple[float, float]] = field(default_factory=dict)

    def place(self, name: str) -> tuple[float, float]:
        try:
            return self.places[name]
        except KeyError:
            raise KeyError(f"map {self.name} has no place {name!r}; places: {', '.join(sorted(self.places))}") from None


def resolve_map_path(name_or_path: str | Path) -> Path:
    """A name under config/maps/ (``lab``) or a path to a YAML file."""
    return resolve_map(name_or_path)


def load_map(name_or_path: str | Path) -> Map:
    path = resolve_map_path(name_or_path)
    return parse_map(load_yaml_file(path, "map"), str(path))


def parse_map(doc: object, source: str) -> Map:
    """A Map from a loaded YAML document (SourceDict), checked whole."""
    if not isinstance(doc, SourceDict):
        raise ConfigError(source, getattr(doc, "line", None), "a map must be a mapping with 'name' and 'walls'")
    no_unknown(doc, SECTIONS + CROWD_SECTIONS + TASK_SECTIONS, "map")
    name = require(doc, "name", str, "map")
    walls = parse_walls(doc)
    places = _places(doc)
    return Map(name=name, source=source, walls=walls, places=places)


def _places(doc: SourceDict) -> dict[str, tuple[float, float]]:
    if "places" not in doc:
        return {}
    places = require(doc, "places", dict, "map")
    return {name: point(places, name, f"place {name!r}") for name in places}
