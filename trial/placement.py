"""Where a robot may start in a map: not inside an obstacle, not with its body in a wall.

Two ways a start pose can be wrong, both caught before anything starts:

- **inside an obstacle**: a closed ring of walls (a shop block, the fountain's basin, a platform island) whose
  inside a robot cannot reach. A closed ring is a set of walls joined end to end with every corner shared by an
  even number of walls; the ring that holds every other wall of the map is the room itself, not an obstacle.
  Inside is decided by counting crossings of a ray (even: outside);
- **in a wall**: the robot's disc (``ROBOT_RADIUS_M``) overlaps a wall's box.

The error names the obstacle (the walls' shared name, ``fountain`` for ``fountain_s, fountain_e, ...``, and the
map's file:line) and the nearest free pose: the nearest point of a 0.1 m grid that is neither, at the same yaw.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from hil.devices.map_format import Wall
from hil.runtime.robot.crowd_spec import ROBOT_RADIUS_M  # the commbot's footprint, as the world and the crowd take it

MARGIN_M = 0.05  # a free pose keeps this much air between the robot's body and a wall
GRID_M = 0.1  # the nearest free pose is searched on this grid
SEARCH_M = (5.0, 25.0, 100.0)  # half-widths of the squares searched, one after the other


@dataclass(frozen=True)
class Obstacle:
    """A closed ring of walls: its name for messages and its segments."""

    name: str
    walls: tuple[Wall, ...]

    def contains(self, x: float, y: float) -> bool:
        return bool(_inside(self.walls, np.array([[x, y]]))[0])


def obstacles(walls: tuple[Wall, ...]) -> tuple[Obstacle, ...]:
    """The map's closed rings of walls, without the room's own (the ring that holds every other wall)."""
    rings = [ring for ring in _components(walls) if _closed(ring)]
    out = []
    for ring in rings:
        others = [w for w in walls if w not in ring]
        if others and bool(np.all(_inside(ring, np.array([w.midpoint for w in others])))):
            continue  # the room: everything else is inside it
        if not others and len(rings) == 1:
            continue  # a map that is one closed room and nothing else
        out.append(Obstacle(_name(ring), tuple(ring)))
    return tuple(out)


def blocked(walls: tuple[Wall, ...], x: float, y: float, radius: float = ROBOT_RADIUS_M,
            source: str = "the map") -> str | None:
    """What keeps a robot of ``radius`` from standing at (x, y), as words with the map file's lines ("inside the
    fountain (arcade.yaml:67-70: walls fountain_s, ...)", "with its body in the wall nw1_s (arcade.yaml:40; ...)");
    None: it may stand there."""
    for obstacle in obstacles(walls):
        if obstacle.contains(x, y):
            return f"inside the {obstacle.name} ({_where(obstacle.walls, source)})"
    if not walls:
        return None
    gaps = _gaps(walls, np.array([[x, y]]))[0]
    k = int(np.argmin(gaps))
    if gaps[k] >= radius:
        return None
    wall = walls[k]
    return (f"with its body in the wall {wall.name or '#'} ({_where((wall,), source)}; the robot's centre must be "
            f"{radius + wall.thickness / 2:.2f} m from the wall's centre line)")


def nearest_free(walls: tuple[Wall, ...], x: float, y: float,
                 radius: float = ROBOT_RADIUS_M) -> tuple[float, float] | None:
    """The nearest point of the ``GRID_M`` grid where a robot of ``radius`` stands free (ties: the lower x, then
    y); None when there is none within the largest search square."""
    rings = obstacles(walls)
    cx, cy = round(x / GRID_M) * GRID_M, round(y / GRID_M) * GRID_M
    for half in SEARCH_M:
        n = int(round(half / GRID_M))
        steps = np.arange(-n, n + 1) * GRID_M
        gx, gy = np.meshgrid(cx + steps, cy + steps, indexing="ij")
        points = np.column_stack([gx.ravel(), gy.ravel()])
        free = np.all(_gaps(walls, points) >= radius + MARGIN_M, axis=1) if walls else np.ones(len(points), bool)
        for ring in rings:
            free &= ~_inside(ring.walls, points)
        if free.any():
            candidates = points[free]
            distance = np.hypot(candidates[:, 0] - x, candidates[:, 1] - y)
            order = np.lexsort((candidates[:, 1], candidates[:, 0], np.round(distance, 9)))
            best = candidates[order[0]]
            return round(float(best[0]), 2) + 0.0, round(float(best[1]), 2) + 0.0
    return None


# --- geometry -------------------------------------------------------------------------------------------------
def _gaps(walls: tuple[Wall, ...], points: np.ndarray) -> np.ndarray:
    """(points x walls): distance from each point to each wall's box face (its centre line less half its
    thickness; negative inside the box)."""
    if not walls:
        return np.zeros((len(points), 0))
    a = np.array([w.start for w in walls])
    b = np.array([w.end for w in walls])
    half = np.array([w.thickness / 2 for w in walls])
    ab = b - a
    length2 = np.maximum(np.sum(ab * ab, axis=1), 1e-18)
    ap = points[:, None, :] - a[None, :, :]
    t = np.clip(np.sum(ap * ab[None], axis=2) / length2[None], 0.0, 1.0)
    nearest = a[None] + t[..., None] * ab[None]
    return np.hypot(*(points[:, None, :] - nearest).transpose(2, 0, 1)) - half[None]


def _inside(ring: tuple[Wall, ...] | list[Wall], points: np.ndarray) -> np.ndarray:
    """Even-odd rule: a ray toward +x from each point crosses the ring's segments an odd number of times."""
    a = np.array([w.start for w in ring])
    b = np.array([w.end for w in ring])
    px, py = points[:, 0:1], points[:, 1:2]
    straddles = (a[None, :, 1] > py) != (b[None, :, 1] > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = a[None, :, 0] + (py - a[None, :, 1]) * (b[None, :, 0] - a[None, :, 0]) / \
            (b[None, :, 1] - a[None, :, 1])
    return (np.sum(straddles & (px < x_cross), axis=1) % 2) == 1


def _key(point: tuple[float, float]) -> tuple[float, float]:
    return round(point[0], 6), round(point[1], 6)


def _components(walls: tuple[Wall, ...]) -> list[list[Wall]]:
    """Walls joined end to end, each group in the map's order."""
    parent = list(range(len(walls)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    at: dict[tuple[float, float], list[int]] = defaultdict(list)
    for i, wall in enumerate(walls):
        at[_key(wall.start)].append(i)
        at[_key(wall.end)].append(i)
    for members in at.values():
        for j in members[1:]:
            parent[root(j)] = root(members[0])
    groups: dict[int, list[Wall]] = defaultdict(list)
    for i, wall in enumerate(walls):
        groups[root(i)].append(wall)
    return list(groups.values())


def _closed(ring: list[Wall]) -> bool:
    degree: dict[tuple[float, float], int] = defaultdict(int)
    for wall in ring:
        degree[_key(wall.start)] += 1
        degree[_key(wall.end)] += 1
    return len(ring) >= 3 and all(d % 2 == 0 for d in degree.values())


def _name(ring: list[Wall]) -> str:
    """The walls' shared name (``fountain`` for fountain_s, fountain_e, ...), else "closed walls"."""
    names = [w.name for w in ring]
    if all(names):
        prefix = os.path.commonprefix(names).rstrip("_- ")
        if prefix:
            return prefix
        return "walls " + ", ".join(names)
    return "closed walls"


def _where(walls: tuple[Wall, ...], source: str) -> str:
    """``arcade.yaml:67-70: walls fountain_s, fountain_e, ...`` (the wall's name alone for one wall)."""
    lines = sorted(w.line for w in walls if w.line)
    span = "" if not lines else f":{lines[0]}" if lines[0] == lines[-1] else f":{lines[0]}-{lines[-1]}"
    names = ", ".join(w.name for w in walls if w.name)
    return f"{source}{span}" + (f": walls {names}" if len(walls) > 1 and names else "")


def format_xy(value: tuple[float, ...]) -> str:
    """A point or pose as a user writes it in a trial file: [-2, 0, 0]."""
    return "[" + ", ".join(f"{v + 0.0:g}" for v in value) + "]"  # + 0.0: -0 reads 0
