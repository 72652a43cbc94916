"""The projector's line of sight: which pixels of a depth camera its projector (or a stereo pair's second imager)
also sees. A structured-light or stereo camera measures a point only where both the lens and the projector see it;
beside a near edge, the far surface the lens sees but the projector does not is the camera's shadow.

A shadow-map test, per frame: the renderer draws the same scene from the projector's pose (:meth:`ProjectorView.view`,
:attr:`ProjectorView.projection`: a pinhole whose field of view covers the camera's frustum between its min and max
range, with pixels no wider than the camera's, so its picture is larger than the camera's when the projector sits
far from the lens or turned), giving the projector's own depth map; each camera pixel is back-projected to 3D with
its exact z, moved into the projector's frame, projected into the projector's image and compared with the
projector's depth there: lit when it is no farther than the nearest surface the projector sees along that ray. The
comparison takes the farthest of the 2 x 2 projector pixels around the point (the texels a bilinear lookup would
use) plus ``RELATIVE_TOLERANCE`` of its depth and ``ABSOLUTE_TOLERANCE_M``, so a lit surface at a slant to the
projector does not shadow itself between texels ("shadow acne"); a shadow's edge moves by at most a projector pixel
(a camera pixel or less, unless the picture was capped at ``MAX_PIXELS_RATIO`` times the camera's). Points behind
the projector, nearer to it than its near plane or outside its picture are unlit. Pure numpy on whole images, no
randomness: the same scene gives the same mask.
"""
from __future__ import annotations

import math

import numpy as np

from hil.devices.descriptor.camera import CameraSpec, Projector

from ..render.gl import projection_matrix

RELATIVE_TOLERANCE = 0.01
ABSOLUTE_TOLERANCE_M = 0.003
MAX_HALF_ANGLE_DEG = 80.0  # the widest half field of view the projector's picture is drawn with
MARGIN = 1.02  # the projector's picture covers the camera's frustum with 2 % to spare
MAX_PIXELS_RATIO = 4.0  # at most this many times the camera's pixels (its pixels grow beyond)
# lens frame (x forward, y image left, z image up) -> OpenGL eye frame (x right, y up, z backward)
_LENS_TO_EYE = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])


class ProjectorView:
    """A camera's projector as a second view: its view matrix given the camera's, its projection, and the test of
    which camera pixels it lights. Made once per camera (the projector is fixed to the lens)."""

    def __init__(self, spec: CameraSpec, projector: Projector):
        self.spec, self.projector = spec, projector
        self.camera_eye_to_projector_eye = _relative(projector)
        offset = float(np.linalg.norm(projector.position))
        self.near_m = spec.near_m
        self.far_m = max(spec.far_m, spec.depth.max_range_m + offset + 0.1)
        tan_x, tan_y = self._half_angles()
        focal = max(spec.fx, spec.fy)  # the camera's finest pixel
        scale = min(1.0, math.sqrt(MAX_PIXELS_RATIO * spec.width * spec.height / (4 * tan_x * tan_y * focal ** 2)))
        self.width = max(1, math.ceil(2 * tan_x * focal * scale))
        self.height = max(1, math.ceil(2 * tan_y * focal * scale))
        self.fx = (self.width / 2.0) / tan_x
        self.fy = (self.height / 2.0) / tan_y
        self.cx, self.cy = (self.width - 1) / 2.0, (self.height - 1) / 2.0
        self.projection = projection_matrix(self.width, self.height, self.fx, self.fy, self.cx, self.cy,
                                            self.near_m, self.far_m)
        # each camera pixel's ray (eye frame, per metre of depth) turned into the projector's eye frame: a point
        # at depth z is z * ray + shift there
        rows, cols = np.mgrid[0:spec.height, 0:spec.width]
        rays = np.stack([(cols - spec.cx) / spec.fx, -(rows - spec.cy) / spec.fy, -np.ones(rows.shape)])
        m = self.camera_eye_to_projector_eye
        self._rays = np.einsum("ij,jhw->ihw", m[:3, :3], rays).astype(np.float32)
        self._shift = m[:3, 3].astype(np.float32)

    def view(self, camera_view: np.ndarray) -> np.ndarray:
        """The projector's world -> eye matrix, given the camera's (gl.view_matrix) at this frame."""
        return self.camera_eye_to_projector_eye @ camera_view

    def lit(self, z: np.ndarray, projector_z: np.ndarray) -> np.ndarray:
        """Where the projector sees what the camera's pixel sees (bool, z's shape): ``z`` the camera's exact depth
        along its axis (inf: nothing), ``projector_z`` the projector's own (its picture: height x width)."""
        rays, t = self._rays, self._shift
        h, w = projector_z.shape
        finite = np.isfinite(z)
        depth = np.where(finite, z, np.float32(0.0)).astype(np.float32, copy=False)
        x = depth * rays[0] + t[0]
        y = depth * rays[1] + t[1]
        zp = -(depth * rays[2] + t[2])
        ahead = finite & (zp > self.near_m)
        inverse = np.float32(1.0) / np.where(ahead, zp, np.float32(1.0))
        u = np.float32(self.cx) + np.float32(self.fx) * x * inverse
        v = np.float32(self.cy) - np.float32(self.fy) * y * inverse
        inside = ahead & (u >= -0.5) & (u <= w - 0.5) & (v >= -0.5) & (v <= h - 0.5)
        # the farthest of the 2 x 2 texels from (floor u, floor v) on (clamped at the border), made once per frame
        farthest = projector_z.copy()
        np.maximum(farthest[:, :-1], projector_z[:, 1:], out=farthest[:, :-1])
        np.maximum(farthest[:-1], farthest[1:].copy(), out=farthest[:-1])
        col = np.clip(u, 0, w - 1).astype(np.int32)
        row = np.clip(v, 0, h - 1).astype(np.int32)
        blocker = farthest.ravel()[row * w + col]
        return inside & (zp <= blocker * np.float32(1.0 + RELATIVE_TOLERANCE) + np.float32(ABSOLUTE_TOLERANCE_M))

    def _half_angles(self) -> tuple[float, float]:
        """tan of the half angles (x, y) the projector's picture needs to cover the camera's frustum between its
        min and max range: the frustum is convex and x/z is extreme at its corners."""
        s = self.spec
        corners = []
        for depth in (s.depth.min_range_m, s.depth.max_range_m):
            for u in (-0.5, s.width - 0.5):
                for v in (-0.5, s.height - 0.5):
                    corners.append(((u - s.cx) / s.fx * depth, -(v - s.cy) / s.fy * depth, -depth, 1.0))
        p = self.camera_eye_to_projector_eye @ np.array(corners).T
        zp = -p[2]
        limit = math.tan(math.radians(MAX_HALF_ANGLE_DEG))
        if np.any(zp <= 1e-6):  # part of the frustum is beside or behind the projector: as wide as it draws
            return limit, limit
        tan_x = float(np.max(np.abs(p[0] / zp))) * MARGIN
        tan_y = float(np.max(np.abs(p[1] / zp))) * MARGIN
        return min(tan_x, limit), min(tan_y, limit)


def _relative(projector: Projector) -> np.ndarray:
    """4x4: the camera's OpenGL eye frame -> the projector's (both from their lens frames)."""
    forward = np.asarray(projector.forward, float)
    up = np.asarray(projector.up, float)
    up = up - forward * float(forward @ up)
    up /= np.linalg.norm(up)
    left = np.cross(up, forward)
    axes = np.stack([forward, left, up])  # rows: the projector's lens axes in the camera's lens frame
    rotation = _LENS_TO_EYE @ axes @ _LENS_TO_EYE.T
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = -rotation @ (_LENS_TO_EYE @ np.asarray(projector.position, float))
    return out
