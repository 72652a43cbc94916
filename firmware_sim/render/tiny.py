"""The fallback renderer: pybullet's own TinyRenderer (software, in the physics client, no EGL needed), for a
machine where no EGL context opens (a wheel install without Mesa).

It draws the physics world as pybullet has it, so people are their capsules (not the figures of the EGL
renderer) and every pixel's label comes from pybullet's segmentation mask: the floor, a wall, a person by their
body, and a robot pixel attributed to the part body it belongs to through ``RobotBody.body_hit`` (the world's
contract: a pybullet link may carry several part bodies) when the world has it, else the link's one body. The
incidence angle comes from the depth image's gradient (TinyRenderer gives no normals). Each pixel's surface is
what the world says its (body, link) is made of (``World.surfaces``: a wall's map surface, a person's clothing,
a robot link's descriptor surface), as the camera's palette numbers it.
"""
from __future__ import annotations

import numpy as np
import pybullet as p

from .scene import FLOOR, NOTHING, PERSON_BASE, ROBOT_BASE, WALL, SurfacePalette, base_legend

SKY = (179, 204, 235)


class TinyRenderer:
    name = "pybullet-tinyrenderer"

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height

    def render_world(self, client: int, view: np.ndarray, projection: np.ndarray, near: float, far: float,
                     fx: float, fy: float, cx: float, cy: float, world, robot, pedestrians,
                     palette: SurfacePalette | None = None) -> tuple:
        """(rgb, labels, z, cos incidence, surface index HxW uint8, legend) of the physics world seen through
        ``view``/``projection`` (OpenGL matrices; ``projection`` with OpenGL's y up: pybullet flips its images to
        row 0 at the top); the surface index numbered by ``palette`` (None: all 0, the default surface)."""
        rgba, z, seg = self._image(client, view, projection, near, far, p.ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX)
        rgb = rgba[..., :3].copy()
        rgb[seg < 0] = SKY
        labels, legend = _labels(seg, z, view, fx, fy, cx, cy, world, robot, pedestrians)
        surfaces = _surfaces(seg, world, palette)
        return rgb, labels, z.astype(np.float32), _cos_from_depth(z, fx, fy, cx, cy), surfaces, legend

    def render_depth(self, client: int, view: np.ndarray, projection: np.ndarray, near: float,
                     far: float) -> np.ndarray:
        """z alone (HxW float32 m along the view's axis, inf where nothing) of a second view of the physics world,
        such as a depth camera's projector (sensors/projector.py)."""
        return self._image(client, view, projection, near, far, 0)[1].astype(np.float32)

    def _image(self, client: int, view: np.ndarray, projection: np.ndarray, near: float, far: float,
               flags: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rgba HxWx4 uint8, z HxW float32 m, inf where nothing, segmentation HxW int64) through pybullet."""
        w, h = self.width, self.height
        flip = projection.copy()
        flip[1, :] = -flip[1, :]  # the EGL renderer's projection puts row 0 at the top itself; pybullet flips
        _, _, rgba, depth_buffer, seg = p.getCameraImage(
            w, h, viewMatrix=view.T.reshape(-1).tolist(), projectionMatrix=flip.T.reshape(-1).tolist(),
            renderer=p.ER_TINY_RENDERER, flags=flags, physicsClientId=client)
        d = np.asarray(depth_buffer, np.float32).reshape(h, w)
        seg = np.asarray(seg, np.int64).reshape(h, w)
        z = far * near / (far - (far - near) * d)
        z[seg < 0] = np.inf
        return np.asarray(rgba, np.uint8).reshape(h, w, 4), z, seg


def _labels(seg, z, view, fx, fy, cx, cy, world, robot, pedestrians) -> tuple[np.ndarray, dict[int, str]]:
    legend = base_legend()
    labels = np.zeros(seg.shape, np.int32)
    body = np.where(seg >= 0, seg & ((1 << 24) - 1), -1)
    link = np.where(seg >= 0, (seg >> 24) - 1, -2)
    labels[body == world.floor_id] = FLOOR
    for wall_body in world.walls:
        labels[body == wall_body] = WALL
    people = {b: pid for pid, b in (pedestrians or {}).items()}
    for b, pid in people.items():
        labels[body == b] = PERSON_BASE + pid
        legend[PERSON_BASE + pid] = f"person:{pid}"
    if robot is not None:
        index_of = {(link_.part_id, link_.body): k for k, link_ in enumerate(robot.links)}
        hit = getattr(robot, "body_hit", None)
        mask = body == robot.body_id
        if mask.any():
            points = _world_points(z, view, fx, fy, cx, cy) if hit is not None else None
            for row, col in zip(*np.nonzero(mask)):
                index = int(link[row, col])
                found = hit(index, tuple(points[row, col])) if hit is not None else \
                    next(x for x in robot.links if x.index == index)
                k = index_of[(found.part_id, found.body)]
                labels[row, col] = ROBOT_BASE + k
                legend[ROBOT_BASE + k] = f"robot:{found.part_id}/{found.body}"
    labels[seg < 0] = NOTHING
    return labels, legend


def _surfaces(seg: np.ndarray, world, palette: SurfacePalette | None) -> np.ndarray:
    """Per pixel, the palette index of what its (body, link) is made of (``World.surfaces``; 0 elsewhere)."""
    out = np.zeros(seg.shape, np.uint8)
    named = getattr(world, "surfaces", None)
    if palette is None or not named:
        return out
    hit = seg >= 0
    body = np.where(hit, seg & ((1 << 24) - 1), -1)
    link = np.where(hit, (seg >> 24) - 1, -2)
    for (b, k), name in named.items():
        mask = body == b
        if mask.any():
            out[mask & (link == k)] = palette.index(name)
    return out


def _world_points(z, view, fx, fy, cx, cy) -> np.ndarray:
    h, w = z.shape
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    eye = np.stack([(u - cx) / fx * z, -(v - cy) / fy * z, -z, np.ones_like(z)], axis=-1)
    return (eye @ np.linalg.inv(view).T)[..., :3]


def _cos_from_depth(z: np.ndarray, fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """|cos| of the angle between each pixel's ray and the surface normal from the back-projected depth."""
    h, w = z.shape
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    zz = np.where(np.isfinite(z), z, 0.0)
    points = np.stack([(u - cx) / fx * zz, (v - cy) / fy * zz, zz], axis=-1)
    du = np.gradient(points, axis=1)
    dv = np.gradient(points, axis=0)
    normal = np.cross(du, dv)
    norm = np.linalg.norm(normal, axis=-1)
    rays = points / np.maximum(np.linalg.norm(points, axis=-1, keepdims=True), 1e-9)
    cos = np.abs(np.sum(normal * rays, axis=-1)) / np.maximum(norm, 1e-12)
    return np.where(np.isfinite(z) & (norm > 0), cos, 1.0).astype(np.float32)
