"""The top-down picture of a trial: map walls, the robot's path, every pedestrian's path, start and goal.

Rasterised with numpy and written by our own PNG encoder (png.py): lines are DDA-sampled (one point per pixel
of the longer axis) and stamped with a disc of the line's thickness, circles are filled by a distance test, text
is a 5x7 bitmap font. A plotting library would be a large dependency for this, and would not give byte-identical
files across its versions; this gives the same bytes for the same log.

Layout: the world fits ~1000 px on its longer side (at most 200 px/m for tiny worlds), a white margin around it,
a header band above with the title and a legend, a light grid every 0.5/1/2/5/10 m (the first step at least 60 px
wide) and a scale bar. y points up (north), as on a map. Each pedestrian's path ends in a dot where the person
was last seen, so the direction of walking can be read.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..record.log import LogMessage
from .metrics import DEFAULT_GOAL_RADIUS_M, _person_tracks
from .png import write_png

TARGET_PX = 1000
MAX_SCALE_PX_PER_M = 200.0
MARGIN_PX = 30
HEADER_PX = 64

BACKGROUND = (255, 255, 255)
GRID = (234, 234, 234)
WALL = (40, 40, 40)
ROBOT = (0, 70, 200)
START = (0, 150, 60)
GOAL = (215, 25, 25)
PLACE = (160, 160, 160)
ENTRANCE = (240, 140, 0)
COLLISION = (200, 0, 200)
TEXT = (30, 30, 30)
# Pedestrians: muted colours that stay apart from the robot's blue, the start's green and the goal's red.
PEOPLE = ((148, 103, 189), (140, 86, 75), (227, 119, 194), (188, 189, 34), (23, 190, 207), (255, 152, 150),
          (127, 127, 127), (197, 176, 213))

WALL_PX, ROBOT_PX, PERSON_PX = 4, 4, 2


@dataclass(frozen=True)
class Viewport:
    """World (m) to pixel (column, row) mapping of one picture."""

    xmin: float
    ymax: float
    scale: float  # px per m
    width: int
    height: int

    def to_px(self, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        col = MARGIN_PX + (np.asarray(x, dtype=float) - self.xmin) * self.scale
        row = HEADER_PX + MARGIN_PX + (self.ymax - np.asarray(y, dtype=float)) * self.scale
        return col, row


class Canvas:
    """An RGB image with the few drawing operations a trial picture needs."""

    def __init__(self, width: int, height: int, background: tuple[int, int, int] = BACKGROUND):
        self.rgb = np.empty((height, width, 3), np.uint8)
        self.rgb[:] = background
        self.height, self.width = height, width

    def _stamp(self, cols: np.ndarray, rows: np.ndarray, color: tuple[int, int, int]) -> None:
        keep = (cols >= 0) & (cols < self.width) & (rows >= 0) & (rows < self.height)
        self.rgb[rows[keep], cols[keep]] = color

    def polyline(self, cols: Sequence[float], rows: Sequence[float], color: tuple[int, int, int],
                 thickness: int = 1) -> None:
        """Connected segments through the points; DDA sampling, each sample stamped with a disc of the thickness."""
        p = np.column_stack([np.asarray(cols, float), np.asarray(rows, float)])
        if not len(p):
            return
        if len(p) > 1:
            d = np.diff(p, axis=0)
            steps = np.maximum(np.ceil(np.max(np.abs(d), axis=1)), 1).astype(int)
            seg = np.repeat(np.arange(len(d)), steps)
            first = np.repeat(np.cumsum(steps) - steps, steps)
            u = (np.arange(len(seg)) - first) / steps[seg]
            pts = np.vstack([p[:-1][seg] + u[:, None] * d[seg], p[-1:]])
        else:
            pts = p
        ij = np.unique(np.rint(pts).astype(np.int64), axis=0)
        offsets = _disc_offsets(thickness / 2.0)
        allc = (ij[:, None, 0] + offsets[None, :, 0]).ravel()
        allr = (ij[:, None, 1] + offsets[None, :, 1]).ravel()
        self._stamp(allc, allr, color)

    def disc(self, col: float, row: float, radius: float, color: tuple[int, int, int]) -> None:
        offsets = _disc_offsets(radius)
        self._stamp(round(col) + offsets[:, 0], round(row) + offsets[:, 1], color)

    def ring(self, col: float, row: float, radius: float, thickness: int, color: tuple[int, int, int]) -> None:
        r_out = radius + thickness / 2.0
        n = int(math.ceil(r_out))
        dc, dr = np.meshgrid(np.arange(-n, n + 1), np.arange(-n, n + 1))
        dist = np.hypot(dc, dr)
        sel = (dist <= r_out) & (dist >= radius - thickness / 2.0)
        self._stamp(round(col) + dc[sel], round(row) + dr[sel], color)

    def rect(self, col: int, row: int, w: int, h: int, color: tuple[int, int, int]) -> None:
        self.rgb[max(row, 0):max(row + h, 0), max(col, 0):max(col + w, 0)] = color

    def text(self, col: int, row: int, text: str, color: tuple[int, int, int] = TEXT, scale: int = 2) -> int:
        """Draw upper-cased text with its top-left at (col, row); returns the column after the last glyph."""
        for ch in text.upper():
            glyph = _FONT.get(ch, _FONT["?"])
            for r, line in enumerate(glyph):
                for c, bit in enumerate(line):
                    if bit == "#":
                        self.rect(col + c * scale, row + r * scale, scale, scale, color)
            col += 6 * scale
        return col


def _disc_offsets(radius: float) -> np.ndarray:
    """Integer (dcol, drow) offsets of a filled disc; radius < 1 gives the single pixel (thickness 1 lines)."""
    n = int(math.ceil(radius))
    dc, dr = np.meshgrid(np.arange(-n, n + 1), np.arange(-n, n + 1))
    sel = np.hypot(dc, dr) <= max(radius, 0.5)
    return np.column_stack([dc[sel], dr[sel]])


def render_topdown(messages: Mapping[str, Sequence[LogMessage]],
                   metrics: Mapping[str, Any] | None = None) -> tuple[np.ndarray, Viewport]:
    """The picture as an (h, w, 3) uint8 array, and the viewport that placed the world in it."""
    the_map = messages["/map"][0].data if messages.get("/map") else {}
    walls = np.array(the_map.get("walls") or [], dtype=float).reshape(-1, 4)
    robot = messages.get("/robot/state", ())
    rx = np.array([m.data["x"] for m in robot], dtype=float)
    ry = np.array([m.data["y"] for m in robot], dtype=float)
    tracks = _person_tracks(messages.get("/pedestrians", ()))
    goal = the_map.get("goal")
    goal_radius = float(the_map.get("goal_radius") or DEFAULT_GOAL_RADIUS_M)
    places = {k: v for k, v in sorted((the_map.get("places") or {}).items())}
    entrances = {k: v for k, v in sorted((the_map.get("entrances") or {}).items())}
    start = the_map.get("start") or ([rx[0], ry[0]] if len(rx) else None)

    xs = [walls[:, 0], walls[:, 2], rx] + [np.array(t.pos)[:, 0] for t in tracks.values()]
    ys = [walls[:, 1], walls[:, 3], ry] + [np.array(t.pos)[:, 1] for t in tracks.values()]
    for point in [goal, start, *places.values(), *entrances.values()]:
        if point is not None:
            xs.append(np.asarray(point, float)[0::2])
            ys.append(np.asarray(point, float)[1::2])
    if goal is not None:
        xs.append(np.array([goal[0] - goal_radius, goal[0] + goal_radius]))
        ys.append(np.array([goal[1] - goal_radius, goal[1] + goal_radius]))
    allx, ally = np.concatenate(xs), np.concatenate(ys)
    if not len(allx):
        allx, ally = np.array([-1.0, 1.0]), np.array([-1.0, 1.0])
    xmin, xmax, ymin, ymax = allx.min(), allx.max(), ally.min(), ally.max()
    span = max(xmax - xmin, ymax - ymin, 1e-3)
    scale = min(TARGET_PX / span, MAX_SCALE_PX_PER_M)
    width = int(math.ceil((xmax - xmin) * scale)) + 2 * MARGIN_PX + 1
    height = int(math.ceil((ymax - ymin) * scale)) + 2 * MARGIN_PX + HEADER_PX + 1
    width = max(width, 860)  # room for the header's legend on tall, narrow worlds
    view = Viewport(float(xmin), float(ymax), float(scale), width, height)
    canvas = Canvas(width, height)

    _grid(canvas, view, xmin, xmax, ymin, ymax)
    for point in places.values():
        c, r = view.to_px(point[0], point[1])
        canvas.disc(c, r, 3, PLACE)
    for x1, y1, x2, y2 in walls:
        c, r = view.to_px([x1, x2], [y1, y2])
        canvas.polyline(c, r, WALL, WALL_PX)
    for shape in entrances.values():  # after the walls: an entrance is often drawn across a wall's gap
        c, r = view.to_px(np.asarray(shape, float)[0::2], np.asarray(shape, float)[1::2])
        if len(c) > 1:
            canvas.polyline(c, r, ENTRANCE, 6)
        else:
            canvas.disc(c[0], r[0], 6, ENTRANCE)
    person_px = PERSON_PX if len(tracks) <= 20 else 1  # a busy crowd in hairlines keeps the robot's path legible
    for track in tracks.values():
        color = PEOPLE[track.id % len(PEOPLE)]
        for _, pos in track.runs():
            c, r = view.to_px(pos[:, 0], pos[:, 1])
            canvas.polyline(c, r, color, person_px)
            canvas.disc(c[-1], r[-1], 3, color)  # where the person was last seen
    if len(rx):
        c, r = view.to_px(rx, ry)
        canvas.polyline(c, r, ROBOT, ROBOT_PX)
    if metrics:
        for event in metrics.get("collisions", {}).get("events", []):
            i = int(np.searchsorted([m.t for m in robot], event["t"])) if len(robot) else None
            if i is not None:
                i = min(i, len(robot) - 1)
                c, r = view.to_px(rx[i], ry[i])
                canvas.polyline([c - 7, c + 7], [r - 7, r + 7], COLLISION, 3)
                canvas.polyline([c - 7, c + 7], [r + 7, r - 7], COLLISION, 3)
    if start is not None:
        c, r = view.to_px(start[0], start[1])
        canvas.disc(c, r, 9, START)
    if goal is not None:
        c, r = view.to_px(goal[0], goal[1])
        canvas.ring(c, r, max(goal_radius * scale, 10.0), 3, GOAL)
        canvas.disc(c, r, 5, GOAL)
    _header(canvas, messages, metrics, the_map)
    _scale_bar(canvas, view)
    return canvas.rgb, view


def write_topdown(messages: Mapping[str, Sequence[LogMessage]], path: str | os.PathLike[str],
                  metrics: Mapping[str, Any] | None = None) -> Viewport:
    """Render and write the PNG; returns the viewport (to find a world point's pixel)."""
    rgb, view = render_topdown(messages, metrics)
    write_png(rgb, path)
    return view


def _grid_step(scale: float) -> float:
    for step in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0):
        if step * scale >= 60:
            return step
    return 100.0


def _grid(canvas: Canvas, view: Viewport, xmin: float, xmax: float, ymin: float, ymax: float) -> None:
    step = _grid_step(view.scale)
    top, bottom = view.to_px(0, ymax)[1], view.to_px(0, ymin)[1]
    left, right = view.to_px(xmin, 0)[0], view.to_px(xmax, 0)[0]
    for gx in np.arange(math.ceil(xmin / step) * step, xmax + 1e-9, step):
        c = round(float(view.to_px(gx, 0)[0]))
        canvas.rect(c, int(top), 1, int(bottom - top) + 1, GRID)
    for gy in np.arange(math.ceil(ymin / step) * step, ymax + 1e-9, step):
        r = round(float(view.to_px(0, gy)[1]))
        canvas.rect(int(left), r, int(right - left) + 1, 1, GRID)


def _header(canvas: Canvas, messages: Mapping[str, Sequence[LogMessage]], metrics: Mapping[str, Any] | None,
            the_map: Mapping[str, Any]) -> None:
    meta = messages["/trial/meta"][0].data if messages.get("/trial/meta") else {}
    title = ["TRIAL"]
    if the_map.get("name"):
        title.append(f"MAP {the_map['name']}")
    if "scenario" in meta:
        title.append(f"SCENARIO {meta['scenario']}")
    if "seed" in meta:
        title.append(f"SEED {meta['seed']}")
    if metrics:
        if metrics.get("duration_s") is not None:
            title.append(f"{metrics['duration_s']:.1f} S")
        goal_t = metrics.get("time_to_goal_s")
        if goal_t is not None:
            title.append(f"GOAL IN {goal_t:.1f} S")
        elif (metrics.get("goal") or {}).get("xy") is not None:
            title.append("GOAL NOT REACHED")
        else:
            title.append("NO GOAL")
    canvas.text(MARGIN_PX, 10, "   ".join(title)[: (canvas.width - 2 * MARGIN_PX) // 12])
    col, row = MARGIN_PX, 38
    canvas.rect(col, row + 5, 28, ROBOT_PX, ROBOT)
    col = canvas.text(col + 36, row, "ROBOT") + 18
    for k, color in enumerate(PEOPLE[:3]):
        canvas.rect(col + 10 * k, row + 6, 8, PERSON_PX, color)
    col = canvas.text(col + 36, row, "PEOPLE") + 18
    canvas.rect(col, row + 5, 28, WALL_PX, WALL)
    col = canvas.text(col + 36, row, "WALLS") + 18
    canvas.disc(col + 7, row + 7, 7, START)
    col = canvas.text(col + 22, row, "START") + 18
    canvas.ring(col + 7, row + 7, 6, 3, GOAL)
    canvas.disc(col + 7, row + 7, 3, GOAL)
    col = canvas.text(col + 22, row, "GOAL") + 18
    if the_map.get("entrances"):
        canvas.rect(col, row + 4, 20, 6, ENTRANCE)
        col = canvas.text(col + 28, row, "ENTRANCE") + 18
    if metrics and metrics.get("collisions", {}).get("events"):
        canvas.polyline([col, col + 12], [row + 1, row + 13], COLLISION, 3)
        canvas.polyline([col, col + 12], [row + 13, row + 1], COLLISION, 3)
        canvas.text(col + 22, row, "CONTACT")


def _scale_bar(canvas: Canvas, view: Viewport) -> None:
    step = _grid_step(view.scale)
    length = round(step * view.scale)
    row = canvas.height - MARGIN_PX // 2 - 2
    canvas.rect(MARGIN_PX, row, length, 3, TEXT)
    canvas.rect(MARGIN_PX, row - 6, 2, 9, TEXT)
    canvas.rect(MARGIN_PX + length - 2, row - 6, 2, 9, TEXT)
    label = f"{step:g} M"
    canvas.text(MARGIN_PX + length + 8, row - 10, label, scale=2)


def _glyphs(spec: str) -> dict[str, tuple[str, ...]]:
    out = {}
    for line in spec.strip().splitlines():
        ch, rows = line[0], line[2:].split()
        out[ch] = tuple(rows)
    return out


# 5x7 bitmap glyphs: the character, a space, then seven rows of five columns ('#' ink, '.' paper).
_FONT = _glyphs("""
A .###. #...# #...# ##### #...# #...# #...#
B ####. #...# #...# ####. #...# #...# ####.
C .###. #...# #.... #.... #.... #...# .###.
D ####. #...# #...# #...# #...# #...# ####.
E ##### #.... #.... ####. #.... #.... #####
F ##### #.... #.... ####. #.... #.... #....
G .###. #...# #.... #.### #...# #...# .####
H #...# #...# #...# ##### #...# #...# #...#
I .###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.
J ..### ...#. ...#. ...#. ...#. #..#. .##..
K #...# #..#. #.#.. ##... #.#.. #..#. #...#
L #.... #.... #.... #.... #.... #.... #####
M #...# ##.## #.#.# #.#.# #...# #...# #...#
N #...# #...# ##..# #.#.# #..## #...# #...#
O .###. #...# #...# #...# #...# #...# .###.
P ####. #...# #...# ####. #.... #.... #....
Q .###. #...# #...# #...# #.#.# #..#. .##.#
R ####. #...# #...# ####. #.#.. #..#. #...#
S .#### #.... #.... .###. ....# ....# ####.
T ##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..
U #...# #...# #...# #...# #...# #...# .###.
V #...# #...# #...# #...# #...# .#.#. ..#..
W #...# #...# #...# #.#.# #.#.# #.#.# .#.#.
X #...# #...# .#.#. ..#.. .#.#. #...# #...#
Y #...# #...# .#.#. ..#.. ..#.. ..#.. ..#..
Z ##### ....# ...#. ..#.. .#... #.... #####
0 .###. #...# #..## #.#.# ##..# #...# .###.
1 ..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.
2 .###. #...# ....# ...#. ..#.. .#... #####
3 ##### ...#. ..#.. ...#. ....# #...# .###.
4 ...#. ..##. .#.#. #..#. ##### ...#. ...#.
5 ##### #.... ####. ....# ....# #...# .###.
6 ..##. .#... #.... ####. #...# #...# .###.
7 ##### ....# ...#. ..#.. .#... .#... .#...
8 .###. #...# #...# .###. #...# #...# .###.
9 .###. #...# #...# .#### ....# ...#. .##..
  ..... ..... ..... ..... ..... ..... .....
. ..... ..... ..... ..... ..... .##.. .##..
, ..... ..... ..... ..... .##.. ..#.. .#...
: ..... .##.. .##.. ..... .##.. .##.. .....
- ..... ..... ..... ##### ..... ..... .....
+ ..... ..#.. ..#.. ##### ..#.. ..#.. .....
= ..... ..... ##### ..... ##### ..... .....
/ ..... ....# ...#. ..#.. .#... #.... .....
( ...#. ..#.. .#... .#... .#... ..#.. ...#.
) .#... ..#.. ...#. ...#. ...#. ..#.. .#...
_ ..... ..... ..... ..... ..... ..... #####
? .###. #...# ....# ...#. ..#.. ..... ..#..
""")
