"""The wall format of config/maps/*.yaml, shared by the physics world and the crowd (both read the same files).

A wall is a segment ``{from: [x, y], to: [x, y], thickness?, height?, name?, surface?, bottom?}`` in metres
(``bottom``: its underside above the floor, 0 unless given: a beam or a shelf); ``defaults`` gives the thickness,
height and surface of walls that do not say. ``surface`` names what the wall is made of, one of the surface
table's (devices/surfaces.py: glass, metal, ...); none named is the table's default surface.
Errors are ConfigError with file:line (devices.yaml_source).
Each reader adds its own sections (places, entrances, a passage graph) on top.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from . import config_path
from .yaml_source import ConfigError, SourceDict, SourceList, check_keys, require


WALL_KEYS = ("from", "to", "thickness", "height", "name", "surface", "bottom")
DEFAULT_THICKNESS = 0.1
DEFAULT_HEIGHT = 2.0


def resolve_map(name_or_path: str | Path) -> Path:
    """A map's file: a name on the config search path (``arcade``; devices.config_path) or a path; ConfigError
    listing the known names."""
    return config_path.resolve(name_or_path, "maps", "map")


@dataclass(frozen=True)
class Wall:
    """A segment with a thickness (the physics world builds a box on it; the crowd keeps bodies off its faces)."""

    start: tuple[float, float]
    end: tuple[float, float]
    thickness: float
    height: float
    name: str = ""
    line: int = 0  # where the map file defines it, for messages
    surface: str | None = None  # what it is made of (devices/surfaces.py); None: the default surface
    bottom: float = 0.0  # its underside above the floor (m): 0 stands on the floor; above, a beam or a shelf

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


def no_unknown(mapping: SourceDict, known: tuple[str, ...], what: str) -> None:
    check_keys(mapping, known, what, noun="field")  # with the closest key, as everywhere else


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


MAX_COORDINATE_M = 1e5  # 100 km from the map's origin; a wall farther out (or 1e300 m long) is a typo
MAX_SIZE_M = 1e3  # thickness, height, width


def positive(mapping: SourceDict, key: str, what: str) -> float:
    value = mapping[key]
    if not is_number(value) or not 0 < value <= MAX_SIZE_M:
        raise mapping.error(key, f"{what}: {key} must be a number > 0 (metres) up to MAX_SIZE_M="
                                 f"{MAX_SIZE_M:g}, not {value!r}")
    return float(value)


def point(mapping: SourceDict, key: str, what: str) -> tuple[float, float]:
    value = require(mapping, key, list, what)
    if len(value) != 2 or not all(is_number(v) for v in value):
        raise mapping.error(key, f"{what}: {key} must be [x, y] in metres, not {list(value)!r}")
    if any(abs(v) > MAX_COORDINATE_M for v in value):
        raise mapping.error(key, f"{what}: {key} {list(value)!r} is beyond MAX_COORDINATE_M={MAX_COORDINATE_M:g} "
                                 f"from the map's origin")
    return float(value[0]), float(value[1])


def parse_defaults(doc: SourceDict) -> dict[str, float | str | None]:
    out: dict[str, float | str | None] = {"thickness": DEFAULT_THICKNESS, "height": DEFAULT_HEIGHT, "surface": None}
    if "defaults" not in doc:
        return out
    defaults = require(doc, "defaults", dict, "map")
    no_unknown(defaults, tuple(out), "defaults")
    for key in defaults:
        out[key] = surface(defaults, key, "defaults") if key == "surface" else positive(defaults, key, "defaults")
    return out


def surface(mapping: SourceDict, key: str, what: str) -> str:
    """A surface name checked against the surface table (file:line and the known surfaces when unknown)."""
    from .surfaces import load_surfaces  # only maps that name surfaces read the tables

    return load_surfaces().check(mapping, key, what)


def parse_walls(doc: SourceDict) -> tuple[Wall, ...]:
    defaults = parse_defaults(doc)
    walls = require(doc, "walls", list, "map")
    return tuple(parse_wall(walls, k, defaults) for k in range(len(walls)))


def parse_wall(walls: SourceList, k: int, defaults: dict[str, float | str | None]) -> Wall:
    entry = walls[k]
    what = f"wall #{k + 1}"
    if not isinstance(entry, SourceDict):
        raise ConfigError(walls.source, walls.line_of(k), f"{what} must be a mapping with 'from' and 'to'")
    no_unknown(entry, WALL_KEYS, what)
    start, end = point(entry, "from", what), point(entry, "to", what)
    if math.hypot(end[0] - start[0], end[1] - start[1]) < 1e-9:
        raise entry.error("to", f"{what}: 'from' and 'to' are the same point {list(start)}; a wall needs a length")
    thickness = positive(entry, "thickness", what) if "thickness" in entry else defaults["thickness"]
    height = positive(entry, "height", what) if "height" in entry else defaults["height"]
    name = require(entry, "name", str, what) if "name" in entry else ""
    bottom = 0.0
    if "bottom" in entry:
        bottom = entry["bottom"]
        if not is_number(bottom) or not 0 <= bottom <= MAX_SIZE_M:
            raise entry.error("bottom", f"{what}: bottom must be a number >= 0 (metres above the floor) up to "
                                        f"MAX_SIZE_M={MAX_SIZE_M:g}, not {bottom!r}")
    material = surface(entry, "surface", what) if "surface" in entry else defaults["surface"]
    return Wall(start, end, float(thickness), float(height), name, entry.line, material,  # type: ignore[arg-type]
                float(bottom))


# --- a map's default task: where a robot starts and where it goes when a trial does not say -----------------
TASK_SECTIONS = ("start", "goal")  # read by the trial (trial/task.py); the world and the crowd accept and ignore them


@dataclass(frozen=True)
class MapTask:
    """``start: [x, y, yaw]`` (m, m, rad) and ``goal: [x, y]`` (m) of a map file, each optional, with their lines."""

    start: tuple[float, float, float] | None = None
    goal: tuple[float, float] | None = None
    start_line: int | None = None
    goal_line: int | None = None


def parse_map_task(doc: SourceDict) -> MapTask:
    """The map's default start pose and goal (a trial that gives neither takes these); ConfigError at file:line."""
    start = goal = None
    if doc.get("start") is not None:
        start = _numbers(doc, "start", (2, 3), "start must be [x, y] or [x, y, yaw] (m, m, rad)")
        start = start if len(start) == 3 else (*start, 0.0)
    if doc.get("goal") is not None:
        goal = _numbers(doc, "goal", (2,), "goal must be [x, y] (m)")
    return MapTask(start, goal, doc.line_of("start") if start else None, doc.line_of("goal") if goal else None)


def _numbers(doc: SourceDict, key: str, sizes: tuple[int, ...], what: str) -> tuple[float, ...]:
    value = doc[key]
    if not isinstance(value, list) or len(value) not in sizes or not all(is_number(v) for v in value) or \
            any(abs(v) > MAX_COORDINATE_M for v in value):
        raise doc.error(key, f"map: {what}, not {value!r}")
    return tuple(float(v) for v in value)
