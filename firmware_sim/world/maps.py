"""Maps (config/maps/*.yaml): walls as line segments with a thickness and a height, and named places.

    name: lab
    defaults: {thickness: 0.1, height: 2.0}     # for walls that do not say (optional)
    walls:
      - {from: [-4, -3], to: [4, -3]}           # metres, in the world frame (z up, floor at z = 0)
      - {from: [1.5, -3], to: [1.5, -1.2], thickness: 0.08, height: 1.2}
    places:                                     # optional: named points on the floor
      centre: [0, 0]

A wall is a box centred on its segment, exactly as long as the segment (no end caps: where two walls meet at a
corner their inner faces close the room; a doorway is exactly the gap between two segments' ends).
Every error names file:line (devices.yaml_source), and a map is either loaded whole or not at all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from devices.yaml_source import (
    ConfigError,
    SourceDict,
    SourceList,
    load_yaml_file,
    require,
    resolve_config_path,
)

MAPS_DIR = Path(__file__).resolve().parents[2] / "config" / "maps"
SECTIONS = ("name", "defaults", "walls", "places")
# Sections of the same file that only the crowd reads (crowd/maps.py: gates, the passage graph, plazas); the
# world accepts and ignores them, so one map file drives both.
CROWD_SECTIONS = ("entrances", "graph", "plazas")
WALL_KEYS = ("from", "to", "thickness", "height", "name")
DEFAULT_THICKNESS = 0.1
DEFAULT_HEIGHT = 2.0


@dataclass(frozen=True)
class Wall:
    start: tuple[float, float]
    end: tuple[float, float]
    thickness: float
    height: float
    name: str = ""
    line: int = 0  # where the map file defines it, for messages

    @property
    def length(self) -> float:
        return math.hypot(self.end[0] - self.start[0], self.end[1] - self.start[1])

    @property
    def midpoint(self) -> tuple[float, float]:
        return (self.start[0] + self.end[0]) / 2, (self.start[1] + self.end[1]) / 2

    @property
    def yaw(self) -> float:
        """Heading of the segment from start to end (rad, about z)."""
        return math.atan2(self.end[1] - self.start[1], self.end[0] - self.start[0])


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
    return resolve_config_path(name_or_path, MAPS_DIR, "map")


def load_map(name_or_path: str | Path) -> Map:
    path = resolve_map_path(name_or_path)
    return parse_map(load_yaml_file(path), str(path))


def parse_map(doc: object, source: str) -> Map:
    """A Map from a loaded YAML document (SourceDict), checked whole."""
    if not isinstance(doc, SourceDict):
        raise ConfigError(source, getattr(doc, "line", None), "a map must be a mapping with 'name' and 'walls'")
    _no_unknown(doc, SECTIONS + CROWD_SECTIONS, "map")
    name = require(doc, "name", str, "map")
    defaults = _defaults(doc)
    walls_doc = require(doc, "walls", list, "map")
    walls = tuple(_wall(walls_doc, k, defaults) for k in range(len(walls_doc)))
    places = _places(doc)
    return Map(name=name, source=source, walls=walls, places=places)


def _no_unknown(mapping: SourceDict, known: tuple[str, ...], what: str) -> None:
    for key in mapping:
        if key not in known:
            raise mapping.error(key, f"{what}: unknown field {key!r}; fields: {', '.join(known)}")


def _defaults(doc: SourceDict) -> dict[str, float]:
    out = {"thickness": DEFAULT_THICKNESS, "height": DEFAULT_HEIGHT}
    if "defaults" not in doc:
        return out
    defaults = require(doc, "defaults", dict, "map")
    _no_unknown(defaults, tuple(out), "defaults")
    for key in defaults:
        out[key] = _positive(defaults, key, "defaults")
    return out


def _wall(walls: SourceList, k: int, defaults: dict[str, float]) -> Wall:
    entry = walls[k]
    what = f"wall #{k + 1}"
    if not isinstance(entry, SourceDict):
        raise ConfigError(walls.source, walls.line_of(k), f"{what} must be a mapping with 'from' and 'to'")
    _no_unknown(entry, WALL_KEYS, what)
    start, end = _point(entry, "from", what), _point(entry, "to", what)
    if math.hypot(end[0] - start[0], end[1] - start[1]) < 1e-9:
        raise entry.error("to", f"{what}: 'from' and 'to' are the same point {list(start)}; a wall needs a length")
    thickness = _positive(entry, "thickness", what) if "thickness" in entry else defaults["thickness"]
    height = _positive(entry, "height", what) if "height" in entry else defaults["height"]
    name = require(entry, "name", str, what) if "name" in entry else ""
    return Wall(start, end, thickness, height, name, entry.line)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(mapping: SourceDict, key: str, what: str) -> float:
    value = mapping[key]
    if not _number(value) or value <= 0:
        raise mapping.error(key, f"{what}: {key} must be a number > 0 (metres), not {value!r}")
    return float(value)


def _point(mapping: SourceDict, key: str, what: str) -> tuple[float, float]:
    value = require(mapping, key, list, what)
    if len(value) != 2 or not all(_number(v) for v in value):
        raise mapping.error(key, f"{what}: {key} must be [x, y] in metres, not {list(value)!r}")
    return float(value[0]), float(value[1])


def _places(doc: SourceDict) -> dict[str, tuple[float, float]]:
    if "places" not in doc:
        return {}
    places = require(doc, "places", dict, "map")
    return {name: _point(places, name, f"place {name!r}") for name in places}
