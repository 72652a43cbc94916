"""What each pixel of a depth camera should see of a rig: its depth along the optical axis, the incidence angle on
the surface it meets, which surface that is, and whether the projector lights it: ray casts against the rig's
planes in numpy, from the camera's pose alone (a real capture has no labels; the renderer's are not used).

The rig's faces are vertical rectangles standing on the floor (rig.py: a segment, ``height_m`` tall); the floor is
the plane z = 0 of the rig frame, of the default surface (as the ring's calibration has it, geometry.py). A pixel
counts only where its whole footprint lies on one face: the ray through its centre and the four rays GUARD_PX
pixels left, right, above and below it must meet the same face (or the floor), so the pixels across a face's edge,
a wall's top, the floor's line under a wall or a near face's silhouette are left out (a pixel there is partly each,
and the renderer's rasterisation moves such an edge by a fraction of a pixel). The same five rays decide the
projector's shadow: a pixel is shadowed when a face stands between the projector and any of its five points (the
simulator's shadow-map test has a pixel's tolerance at its edge, docs/CAMERAS.md).

Poses: the lens at ``position`` in the rig frame, ``rotation``'s columns its forward (the optical axis), left (the
image's left) and up (the image's up) axes: the lens frame of a camera's descriptor (x forward, y left, z up).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hil.devices.descriptor.camera import Pinhole

from .rig import Rig

GUARD_PX = 1.0  # a pixel's footprint for the edge test: its centre +- this many pixels each way
SHADOW_TOLERANCE = 1e-4  # a face crossed this close to the lit point (as a fraction of the way) is its own face
NOTHING = -1


@dataclass(frozen=True)
class PixelGrid:
    """The pixels sampled (every ``stride``-th row and column, from stride // 2) and their rays in the lens frame,
    scaled so that the forward component is 1 (so a ray's parameter at a hit is the depth z)."""

    rows: np.ndarray
    cols: np.ndarray
    stride: int
    rays: np.ndarray  # (5, n, 3): the centre, then +-GUARD_PX in u and v

    @classmethod
    def of(cls, pinhole: Pinhole, stride: int) -> PixelGrid:
        r = np.arange(stride // 2, pinhole.height, stride)
        c = np.arange(stride // 2, pinhole.width, stride)
        rows, cols = (a.ravel() for a in np.meshgrid(r, c, indexing="ij"))
        shifts = ((0.0, 0.0), (GUARD_PX, 0.0), (-GUARD_PX, 0.0), (0.0, GUARD_PX), (0.0, -GUARD_PX))
        rays = np.empty((len(shifts), len(rows), 3))
        for k, (du, dv) in enumerate(shifts):
            rays[k, :, 0] = 1.0
            rays[k, :, 1] = -(cols + du - pinhole.cx) / pinhole.fx  # image right is the lens frame's -y
            rays[k, :, 2] = -(rows + dv - pinhole.cy) / pinhole.fy  # image down is -z
        return cls(rows, cols, stride, rays)


@dataclass(frozen=True)
class ExpectedPixels:
    """Per sampled pixel: ``z`` (m along the optical axis, nan where it meets nothing), ``incidence`` (deg),
    ``met`` (the face's index in rig.faces, len(rig.faces) for the floor, NOTHING (-1) where its footprint is not
    on one surface), ``shadow`` (the projector does not light all of its footprint)."""

    z: np.ndarray
    incidence: np.ndarray
    met: np.ndarray
    shadow: np.ndarray


def _cast(rig: Rig, origin: np.ndarray, dirs: np.ndarray, limit: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, |cos incidence| * |d|, what) of the nearest surface each ray ``origin + t d`` meets (t > 0; with
    ``limit``, only t < limit): ``what`` indexes rig.faces, len(rig.faces) is the floor, NOTHING none."""
    n = dirs.shape[0]
    origin = np.broadcast_to(np.asarray(origin, float), dirs.shape)
    best = np.full(n, np.inf) if limit is None else np.asarray(limit, float).copy()
    cos = np.full(n, np.nan)
    what = np.full(n, NOTHING)
    for k, face in enumerate(rig.faces):
        a, b = np.asarray(face.a, float), np.asarray(face.b, float)
        along = b - a
        normal = np.array([-along[1], along[0]]) / np.linalg.norm(along)
        denom = dirs[:, :2] @ normal
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((a - origin[:, :2]) @ normal) / denom
            hit = origin + t[:, None] * dirs
            u = ((hit[:, :2] - a) @ along) / (along @ along)
        ok = np.isfinite(t) & (t > 0) & (u >= 0) & (u <= 1) & (hit[:, 2] >= 0) & (hit[:, 2] <= face.height_m)
        nearer = ok & (t < best)
        best = np.where(nearer, t, best)
        cos = np.where(nearer, np.abs(denom), cos)
        what = np.where(nearer, k, what)
    oz = origin[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where((dirs[:, 2] < 0) & (oz > 0), oz / -dirs[:, 2], np.inf)
    floor = t_floor < best
    best = np.where(floor, t_floor, best)
    cos = np.where(floor, np.abs(dirs[:, 2]), cos)
    what = np.where(floor, len(rig.faces), what)
    return best, cos, what


def expected_pixels(rig: Rig, grid: PixelGrid, position: np.ndarray, rotation: np.ndarray,
                    projector: np.ndarray | None) -> ExpectedPixels:
    """What the grid's pixels should read from a lens at ``position`` with ``rotation`` (module docstring);
    ``projector``: its position in the lens frame (None: the camera has none, nothing is shadowed)."""
    position = np.asarray(position, float)
    z_all, what_all, lit_all = [], [], []
    cos_centre = None
    for k in range(grid.rays.shape[0]):
        dirs = grid.rays[k] @ np.asarray(rotation, float).T
        t, cos, what = _cast(rig, position, dirs)
        if k == 0:
            cos_centre = cos / np.linalg.norm(dirs, axis=1)
        z_all.append(t)
        what_all.append(what)
        if projector is not None:
            points = position + np.where(np.isfinite(t), t, 0.0)[:, None] * dirs
            source = position + np.asarray(rotation, float) @ np.asarray(projector, float)
            towards = points - source
            _, _, blocker = _cast(rig, source, towards, limit=np.full(len(t), 1.0 - SHADOW_TOLERANCE))
            lit_all.append(~np.isfinite(t) | (blocker == NOTHING))
    met = what_all[0].copy()
    for other in what_all[1:]:
        met = np.where(other == met, met, NOTHING)
    z = np.where(met != NOTHING, z_all[0], np.nan)
    incidence = np.degrees(np.arccos(np.clip(cos_centre, 0.0, 1.0)))
    shadow = np.zeros(len(met), bool) if not lit_all else ~np.logical_and.reduce(lit_all)
    return ExpectedPixels(z, np.where(met != NOTHING, incidence, np.nan), met, shadow & (met != NOTHING))


def lens_rotation(forward, up) -> np.ndarray:
    """The lens frame's axes (columns forward, left, up) from a forward and a roughly perpendicular up."""
    f = np.asarray(forward, float)
    f = f / np.linalg.norm(f)
    u = np.asarray(up, float) - f * (np.asarray(up, float) @ f)
    u = u / np.linalg.norm(u)
    return np.column_stack([f, np.cross(u, f), u])


def quaternion_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """The rotation of a unit quaternion (x, y, z, w)."""
    n = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
