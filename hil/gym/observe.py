"""The observation, built from the Robot alone (its ring, its odometry, its wheels), so that the environment and a
policy run as a controller (controller.py) see the very same numbers; only ``people`` (CrowdNav's privileged
ground truth) comes from the world, and a controller refuses it.

- ``ring``: metres per sensor, a failed or empty reading (None on the robot) as the ring's max range, and
  ``ring_valid`` 1/0 beside it (a Box must be finite: NaN cannot be observed);
- ``goal``: (dx, dy) of the goal in the robot's frame, from odometry (the map frame at the start pose);
- ``velocity``: the base's (v, w) from the wheels;
- ``people``: the N nearest people as CrowdNav's robot-centric state rows (px, py, vx, vy, radius,
  distance - radius - robot radius), in the robot's frame, nearest first, zero rows with a 0 mask beyond;
- ``depth`` (off unless asked for): a camera's depth image in blocks of ``depth_block`` pixels a side, each the
  nearest depth measured in it (the far limit where none was), and ``depth_valid`` the share of its pixels that
  measured one; a camera that gives no frame (unplugged) reads as nothing measured.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .spec import EnvSpec

GOAL_BOUND_M = 1000.0
PERSON_FIELDS = 6  # px, py, vx, vy, radius, gap
ROBOT_RADIUS_M = 0.3  # the commbot's footprint (trial/world.py): CrowdNav's gap is between the two discs


class ObservationError(ValueError):
    """The spec asks for what this robot cannot observe (a sensor it lacks); names what it has."""


class Observer:
    """The observation space of a spec on an opened robot, and :meth:`observe` of that robot now."""

    def __init__(self, spec: EnvSpec, robot: Any):
        self.spec, self.want = spec, spec.observation
        self.goal = spec.trial.goal
        self.ring = None
        if self.want.ring is not None:
            from hil.runtime.robot.sensors import RangeRing

            try:
                ring = robot.sensors[self.want.ring]
            except KeyError:
                ring = None
            if not isinstance(ring, RangeRing):
                rings = [name for name, s in robot.sensors.items() if isinstance(s, RangeRing)]
                raise spec.error("observation.ring", f"observation.ring: the robot has no range ring "
                                 f"{self.want.ring!r}; its rings: {', '.join(rings) or 'none'}")
            self.ring = ring
            self.max_range = float(ring.max_range) if math.isfinite(ring.max_range) else 10.0
        self.camera = self._camera(robot) if self.want.depth is not None else None
        self.max_v = float(robot.base.max_speed) * 2.0
        self.max_w = self.max_v / max(robot.base.track_width / 2.0, 1e-3)
        self.parts = self._parts()

    def _camera(self, robot: Any) -> Any:
        """The camera of ``observation.depth``, checked: it is one, it gives depth, its blocks tile its image."""
        from hil.runtime.robot.camera import Camera

        name, block = self.want.depth, self.want.depth_block
        camera = robot.sensors.get(name)
        if not isinstance(camera, Camera):
            cameras = [n for n, s in robot.sensors.items() if isinstance(s, Camera)]
            raise self.spec.error("observation.depth", f"observation.depth: the robot has no camera {name!r}; its "
                                  f"cameras: {', '.join(cameras) or 'none'}")
        spec = camera.spec
        if not camera.has_depth:  # its descriptor delivers none, or its device (camera.device) has none
            why = f"its device {camera.device}" if camera.device else f"it delivers {', '.join(spec.delivers)}"
            raise self.spec.error("observation.depth", f"observation.depth: camera {name!r} gives no depth ({why})")
        if spec.width % block or spec.height % block:
            raise self.spec.error("observation.depth_block", f"observation.depth_block: {block} does not divide the "
                                  f"{spec.width}x{spec.height} image of camera {name!r}")
        self.depth_shape = (spec.height // block, spec.width // block)
        self.far_m = float(spec.far_m)
        return camera

    def _parts(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """name -> (low, high) of each part of the observation, in order."""
        parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if self.ring is not None:
            n = len(self.ring.angles)
            parts["ring"] = (np.zeros(n, np.float32), np.full(n, self.max_range, np.float32))
            parts["ring_valid"] = (np.zeros(n, np.float32), np.ones(n, np.float32))
        if self.want.goal:
            parts["goal"] = (np.full(2, -GOAL_BOUND_M, np.float32), np.full(2, GOAL_BOUND_M, np.float32))
        if self.want.velocity:
            high = np.array([self.max_v, self.max_w], np.float32)
            parts["velocity"] = (-high, high)
        if self.want.people:
            n = self.want.people
            parts["people"] = (np.full((n, PERSON_FIELDS), -GOAL_BOUND_M, np.float32),
                               np.full((n, PERSON_FIELDS), GOAL_BOUND_M, np.float32))
            parts["people_valid"] = (np.zeros(n, np.float32), np.ones(n, np.float32))
        if self.camera is not None:
            parts["depth"] = (np.zeros(self.depth_shape, np.float32), np.full(self.depth_shape, self.far_m, np.float32))
            parts["depth_valid"] = (np.zeros(self.depth_shape, np.float32), np.ones(self.depth_shape, np.float32))
        return parts

    def space(self) -> Any:
        from gymnasium import spaces

        if self.want.flat:
            low = np.concatenate([lo.ravel() for lo, _ in self.parts.values()])
            high = np.concatenate([hi.ravel() for _, hi in self.parts.values()])
            return spaces.Box(low, high, dtype=np.float32)
        return spaces.Dict({name: spaces.Box(lo, hi, dtype=np.float32) for name, (lo, hi) in self.parts.items()})

    def observe(self, robot: Any, people: Callable[[], Sequence[dict]] | None = None) -> Any:
        """The observation of ``robot`` as its last bus cycle read it; ``people()`` gives the world's people
        (required when the spec observes them)."""
        out: dict[str, np.ndarray] = {}
        if self.ring is not None:
            ranges = robot.sensors[self.want.ring].ranges  # this robot's (a reopened world has a new one)
            valid = np.array([r is not None for r in ranges], np.float32)
            out["ring"] = np.clip(np.array([self.max_range if r is None else r for r in ranges], np.float32),
                                  0.0, self.max_range)
            out["ring_valid"] = valid
        x, y, yaw = robot.base.odometry
        if self.want.goal:
            out["goal"] = np.clip(np.array(to_robot_frame(self.goal[0] - x, self.goal[1] - y, yaw), np.float32),
                                  -GOAL_BOUND_M, GOAL_BOUND_M)
        if self.want.velocity:
            v, w = robot.base.velocity
            out["velocity"] = np.clip(np.array([v, w], np.float32), self.parts["velocity"][0],
                                      self.parts["velocity"][1])
        if self.want.people:
            if people is None:
                raise ObservationError("observation.people is the world's ground truth; a robot alone has none")
            out["people"], out["people_valid"] = self._people(people(), x, y, yaw)
        if self.camera is not None:
            out["depth"], out["depth_valid"] = self._depth(robot.sensors[self.want.depth])
        if self.want.flat:
            return np.concatenate([out[name].ravel() for name in self.parts])
        return out

    def _people(self, states: Sequence[dict], x: float, y: float, yaw: float) -> tuple[np.ndarray, np.ndarray]:
        n = self.want.people
        rows = []
        for person in states:
            px, py = to_robot_frame(person["x"] - x, person["y"] - y, yaw)
            vx, vy = to_robot_frame(person["vx"], person["vy"], yaw)
            radius = float(person.get("radius", 0.25))
            rows.append((px, py, vx, vy, radius, math.hypot(px, py) - radius - ROBOT_RADIUS_M))
        rows.sort(key=lambda row: row[5])
        table = np.zeros((n, PERSON_FIELDS), np.float32)
        valid = np.zeros(n, np.float32)
        for k, row in enumerate(rows[:n]):
            table[k] = row
            valid[k] = 1.0
        return np.clip(table, -GOAL_BOUND_M, GOAL_BOUND_M), valid


    def _depth(self, camera: Any) -> tuple[np.ndarray, np.ndarray]:
        """The frame of this frame period in blocks: the nearest depth (m) and the share of pixels measured."""
        from hil.runtime.robot.camera import CameraError

        rows, cols = self.depth_shape
        try:
            depth = camera.frame().depth
        except CameraError:  # unplugged, rebooting: nothing measured, as a ring's failed reading
            return np.full(self.depth_shape, self.far_m, np.float32), np.zeros(self.depth_shape, np.float32)
        blocks = depth.reshape(rows, self.want.depth_block, cols, self.want.depth_block)
        measured = ~np.isnan(blocks)
        nearest = np.where(measured, blocks, np.inf).min(axis=(1, 3))
        nearest = np.where(np.isfinite(nearest), nearest, self.far_m)
        return (np.clip(nearest, 0.0, self.far_m).astype(np.float32),
                measured.mean(axis=(1, 3), dtype=np.float32))


def to_robot_frame(dx: float, dy: float, yaw: float) -> tuple[float, float]:
    """A world-frame vector in the frame of a robot heading ``yaw`` (x forward, y left)."""
    c, s = math.cos(yaw), math.sin(yaw)
    return c * dx + s * dy, -s * dx + c * dy


__all__ = ["Observer", "ObservationError", "to_robot_frame"]
