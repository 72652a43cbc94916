"""``render()``: an RGB top view of the world now (walls, people, the robot and its heading, the goal), drawn with
the trial picture's canvas (trial/report/topdown.py), so it looks like a trial's topdown.png."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from hil.trial.report.topdown import GOAL, HEADER_PX, MARGIN_PX, PEOPLE, ROBOT, WALL, Canvas, Viewport

SCALE_PX_PER_M = 40.0
MAX_SIDE_PX = 800


def top_view(walls: list[Any], pose: tuple[float, float, float], people: list[dict],
             goal: tuple[float, float] | None, goal_radius: float, robot_radius: float) -> np.ndarray:
    """(h, w, 3) uint8: the scene seen from above, north up."""
    xs = [c for w in walls for c in (w.start[0], w.end[0])] + [pose[0]] + ([goal[0]] if goal else [])
    ys = [c for w in walls for c in (w.start[1], w.end[1])] + [pose[1]] + ([goal[1]] if goal else [])
    xmin, xmax, ymin, ymax = min(xs) - 1.0, max(xs) + 1.0, min(ys) - 1.0, max(ys) + 1.0
    scale = min(SCALE_PX_PER_M, MAX_SIDE_PX / max(xmax - xmin, ymax - ymin))
    width, height = round((xmax - xmin) * scale), round((ymax - ymin) * scale)
    view = Viewport(xmin, ymax, scale, width, height)
    canvas = Canvas(width + 2 * MARGIN_PX, height + HEADER_PX + 2 * MARGIN_PX)
    for wall in walls:
        cols, rows = view.to_px([wall.start[0], wall.end[0]], [wall.start[1], wall.end[1]])
        canvas.polyline(cols, rows, WALL, thickness=max(2, round(wall.thickness * scale)))
    if goal is not None:
        col, row = view.to_px(goal[0], goal[1])
        canvas.ring(float(col), float(row), goal_radius * scale, 2, GOAL)
    for person in sorted(people, key=lambda q: q["id"]):
        col, row = view.to_px(person["x"], person["y"])
        canvas.disc(float(col), float(row), person.get("radius", 0.25) * scale, PEOPLE[person["id"] % len(PEOPLE)])
    x, y, yaw = pose
    col, row = view.to_px(x, y)
    canvas.disc(float(col), float(row), robot_radius * scale, ROBOT)
    tip = view.to_px(x + 1.5 * robot_radius * math.cos(yaw), y + 1.5 * robot_radius * math.sin(yaw))
    canvas.polyline([float(col), float(tip[0])], [float(row), float(tip[1])], WALL, thickness=3)
    return canvas.rgb[HEADER_PX:]  # the trial picture's title band: none here


__all__ = ["top_view"]
