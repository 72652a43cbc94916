"""The calibration rig: what stands where around the robot while it calibrates its range ring.

    # rig frame: metres and degrees; the robot's base starts at `start` (x, y, yaw_deg)
    start: [0.0, 0.0, 0.0]
    walls:                                  # the faces the sensors see (a flat wall, a corner, a box's sides)
      - {name: wall, from: [1.0, -3.0], to: [1.0, 3.0], surface: resin}
    turn: {rate_deg_s: 15, turns: 1.0, step_deg: 6}   # turn in place in steps, still between them
    drive: {distance_m: 0.4, speed_m_s: 0.1, times: 1}   # optional: back and forth along the start heading

A wall is its face, a segment on the floor (its height is taken as above the ring). For a virtual run the rig
becomes a map (:func:`rig_map_text`): each face is the front of a 0.1 m box standing behind it, seen from the
start. Refused at file:line: a rig with no wall, a start on or behind a face, a turn rate outside 1..90 deg/s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hil.devices.yaml_source import ConfigError, SourceDict, check_keys, load_yaml_mapping, require

WALL_THICKNESS_M = 0.1
WALL_HEIGHT_M = 2.0
MIN_CLEARANCE_M = 0.3  # the ring's outer face is ~0.2 m from the base frame: a face nearer than this is inside it


@dataclass(frozen=True)
class Face:
    name: str
    a: tuple[float, float]
    b: tuple[float, float]
    surface: str


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
    turn = doc.get("turn") or SourceDict()
    check_keys(turn, ("rate_deg_s", "turns", "step_deg"), "rig turn")
    rate = float(turn.get("rate_deg_s", 15.0))
    if not 1.0 <= rate <= 90.0:
        raise _error(doc, "turn", f"rig: turn rate_deg_s must be within 1..90 (slow enough for every sensor to see "
                                  f"the face at every angle), not {rate}")
    turns = float(turn.get("turns", 1.0))
    if not 0.1 <= turns <= 10:
        raise _error(doc, "turn", f"rig: turn turns must be within 0.1..10, not {turns}")
    step = float(turn.get("step_deg", 6.0))
    if not 0.5 <= step <= 45:
        raise _error(doc, "turn", f"rig: turn step_deg must be within 0.5..45, not {step}")
    drive = doc.get("drive") or SourceDict()
    check_keys(drive, ("distance_m", "speed_m_s", "times"), "rig drive")
    rig = Rig(str(path), (start[0], start[1], math.radians(start[2])), faces, math.radians(rate), turns, step,
              float(drive.get("distance_m", 0.0)), float(drive.get("speed_m_s", 0.1)), int(drive.get("times", 0)))
    for face in faces:
        if distance_to_segment(rig.start[:2], face) < MIN_CLEARANCE_M:
            raise _error(doc, "walls", f"rig: face {face.name!r} is within {MIN_CLEARANCE_M} m of the start: the "
                                       "robot would stand in it")
    return rig


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
    check_keys(entry, ("name", "from", "to", "surface"), what)
    a, b = _numbers(entry, "from", 2), _numbers(entry, "to", 2)
    if math.dist(a, b) < 0.1:
        raise entry.error("to", f"{what}: a face shorter than 0.1 m")
    return Face(str(entry.get("name", f"wall{index + 1}")), a, b, str(entry.get("surface", "unknown")))


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
                     f"to: [{bx + h * nx:.6f}, {by + h * ny:.6f}]}}")
    lines.append(f"places: {{start: [{sx}, {sy}]}}")
    return "\n".join(lines) + "\n"
