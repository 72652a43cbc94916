"""The calibration rig: what stands where around the robot while it calibrates its range ring.

    # rig frame: metres and degrees; the robot's base starts at `start` (x, y, yaw_deg)
    start: [0.0, 0.0, 0.0]
    walls:                                  # the faces the sensors see (a flat wall, a corner, a box's sides)
      - {name: wall, from: [1.0, -3.0], to: [1.0, 3.0], surface: plaster}   # height: 2.0 (m, optional)
    turn: {rate_deg_s: 15, turns: 1.0, step_deg: 6}   # turn in place in steps, still between them
    drive: {distance_m: 0.4, speed_m_s: 0.1, times: 1}   # optional: back and forth along the start heading

A wall is its face, a segment on the floor standing ``height`` m tall (default WALL_HEIGHT_M: above the ring; the
depth camera sees its top edge, trial/calibrate/camera_geometry.py); ``surface`` names what it is made
of, one of the surface table's (devices/surfaces.py; left out: the default surface, as the floor is), and the fit
finds the law of each surface the rig has (fit.py). For a virtual run the rig
becomes a map (:func:`rig_map_text`): each face is the front of a 0.1 m box standing behind it, seen from the
start. Refused at file:line: a rig with no wall, a start on or behind a face, a turn or drive value that is not a
finite number within its bounds (a turn rate within 1..90 deg/s, a drive speed within 0.02..1 m/s, at most 10
times 3 m: the constants below).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hil.devices.surfaces import load_surfaces
from hil.devices.yaml_source import ConfigError, SourceDict, check_keys, load_yaml_mapping, require

WALL_THICKNESS_M = 0.1
WALL_HEIGHT_M = 2.0
FACE_HEIGHT_M = (0.1, 20.0)  # what a face's ``height`` may be (inclusive)
MIN_CLEARANCE_M = 0.3  # the ring's outer face is ~0.2 m from the base frame: a face nearer than this is inside it
# what a rig's turn and drive may ask (inclusive): slow and short enough to measure, long enough to mean something,
# and never a run of days (the longest drive: 10 x 2 x 3 m at 0.02 m/s = 50 min)
TURN_RATE_DEG_S = (1.0, 90.0)
TURNS = (0.1, 10.0)
STEP_DEG = (0.5, 45.0)
DRIVE_TIMES = (0, 10)
DRIVE_DISTANCE_M = (0.0, 3.0)
DRIVE_SPEED_M_S = (0.02, 1.0)
SECTIONS = {"turn": ("rate_deg_s", "turns", "step_deg"), "drive": ("distance_m", "speed_m_s", "times")}


@dataclass(frozen=True)
class Face:
    name: str
    a: tuple[float, float]
    b: tuple[float, float]
    surface: str
    height_m: float = WALL_HEIGHT_M


@dataclass(frozen=True)
class Rig:
    source: str
    start: tuple[float, float, float]  # x m, y m, yaw rad
    faces: tuple[Face, ...]
    turn_rate_rad_s: float
    turns: float
    step_deg: float
    drive_distance_m: float = 0.0
    drive_speed_m_s: float = 0.1
    drive_times: int = 0

    @property
    def surfaces(self) -> tuple[str, ...]:
        """The surfaces the rig shows the ring, in the order the faces name them, the floor's (the default
        surface) among them."""
        names = [face.surface for face in self.faces] + [load_surfaces().default]
        return tuple(dict.fromkeys(names))

    @property
    def turn_s(self) -> float:
        return self.turns * 2 * math.pi / self.turn_rate_rad_s

    @property
    def drive_s(self) -> float:
        return 2 * self.drive_times * self.drive_distance_m / self.drive_speed_m_s if self.drive_times else 0.0


def load_rig(path: str | Path) -> Rig:
    doc = load_yaml_mapping(path, "rig", "rig")
    check_keys(doc, ("start", "walls", "turn", "drive", "description"), "rig")
    start = _numbers(doc, "start", 3)
    walls = require(doc, "walls", list, "rig")
    if not walls:
        raise doc.error("walls", "rig: walls is empty; a calibration needs at least one face to measure")
    faces = tuple(_face(w, k, doc) for k, w in enumerate(walls))
    turn = _section(doc, "turn")
    rate = _bounded(turn, "rate_deg_s", 15.0, TURN_RATE_DEG_S, "rig turn", "slow enough for every sensor to see "
                    "the face at every angle")
    turns = _bounded(turn, "turns", 1.0, TURNS, "rig turn")
    step = _bounded(turn, "step_deg", 6.0, STEP_DEG, "rig turn")
    drive = _section(doc, "drive")
    times = _bounded(drive, "times", 0, DRIVE_TIMES, "rig drive", whole=True)
    distance = _bounded(drive, "distance_m", 0.0 if not times else ..., DRIVE_DISTANCE_M, "rig drive")
    speed = _bounded(drive, "speed_m_s", 0.1, DRIVE_SPEED_M_S, "rig drive")
    rig = Rig(str(path), (start[0], start[1], math.radians(start[2])), faces, math.radians(rate), turns, step,
              distance, speed, int(times))
    for face in faces:
        if distance_to_segment(rig.start[:2], face) < MIN_CLEARANCE_M:
            raise _error(doc, "walls", f"rig: face {face.name!r} is within {MIN_CLEARANCE_M} m of the start: the "
                                       "robot would stand in it")
    return rig


def _section(doc: SourceDict, key: str) -> SourceDict:
    """``turn`` or ``drive``: a mapping of known keys (empty when absent)."""
    section = doc.get(key)
    if section is None:
        return SourceDict()
    if not isinstance(section, SourceDict):
        raise doc.error(key, f"rig: {key} must be a mapping such as {{{', '.join(SECTIONS[key])}}}, not "
                             f"{section!r}")
    check_keys(section, SECTIONS[key], f"rig {key}")
    return section


def _bounded(section: SourceDict, key: str, default, bounds: tuple[float, float], what: str, why: str = "", *,
             whole: bool = False) -> float:
    """``section[key]`` (``default`` when absent; ``...``: required) as a finite number within ``bounds``, else a
    ConfigError at the key's line: a rig's numbers decide how long the run is and how fast the robot moves."""
    low, high = bounds
    kind = "a whole number" if whole else "a number"
    if key not in section:
        if default is ...:
            raise section.error(None, f"{what}: {key} is missing: give {kind} within {low:g}..{high:g}")
        return default
    value = section[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and low <= value <= high and (not whole or float(value).is_integer())
    if not ok:
        because = f" ({why})" if why else ""
        raise section.error(key, f"{what}: {key} must be {kind} within {low:g}..{high:g}{because}, not {value!r}")
    return float(value)


def _error(doc: SourceDict, key: str, message: str) -> ConfigError:
    return doc.error(key if key in doc else None, message)


def _numbers(doc: SourceDict, key: str, n: int) -> tuple[float, ...]:
    value = require(doc, key, list, "rig")
    if len(value) != n or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                  for v in value):
        raise doc.error(key, f"rig: {key} must be {n} finite numbers, not {value!r}")
    return tuple(float(v) for v in value)


def _face(entry, index: int, doc: SourceDict) -> Face:
    what = f"rig wall #{index + 1}"
    if not isinstance(entry, SourceDict):
        raise doc.error("walls", f"{what} must be a mapping {{from: [x, y], to: [x, y]}}")
    check_keys(entry, ("name", "from", "to", "surface", "height"), what)
    a, b = _numbers(entry, "from", 2), _numbers(entry, "to", 2)
    if math.dist(a, b) < 0.1:
        raise entry.error("to", f"{what}: a face shorter than 0.1 m")
    surface = load_surfaces().check(entry, "surface", what) if "surface" in entry else load_surfaces().default
    height = _bounded(entry, "height", WALL_HEIGHT_M, FACE_HEIGHT_M, what)
    return Face(str(entry.get("name", f"wall{index + 1}")), a, b, surface, height)


def distance_to_segment(point, face: Face) -> float:
    (ax, ay), (bx, by), (px, py) = face.a, face.b, point
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(px - ax - t * dx, py - ay - t * dy)


def rig_map_text(rig: Rig) -> str:
    """The rig as a map for a virtual run: each face the front of a box standing behind it (seen from the start)."""
    lines = ["# written by hil calibrate from " + rig.source, "name: calibration_rig",
             f"defaults: {{thickness: {WALL_THICKNESS_M}, height: {WALL_HEIGHT_M}}}", "walls:"]
    sx, sy = rig.start[:2]
    for face in rig.faces:
        (ax, ay), (bx, by) = face.a, face.b
        nx, ny = -(by - ay), bx - ax
        norm = math.hypot(nx, ny)
        nx, ny = nx / norm, ny / norm
        if (sx - ax) * nx + (sy - ay) * ny > 0:  # the normal towards the start: the box goes the other way
            nx, ny = -nx, -ny
        h = WALL_THICKNESS_M / 2
        lines.append(f"  - {{name: {face.name}, from: [{ax + h * nx:.6f}, {ay + h * ny:.6f}], "
                     f"to: [{bx + h * nx:.6f}, {by + h * ny:.6f}], height: {face.height_m:g}, surface: {face.surface}}}")
    lines.append(f"places: {{start: [{sx}, {sy}]}}")
    return "\n".join(lines) + "\n"
