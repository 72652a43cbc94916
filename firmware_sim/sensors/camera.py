"""The depth camera's failures (the sensor-simulation reference: fringe-projection and stereo sensors lose pixels on
steep slopes and in the blind spots of emitter and receiver), applied to a rendered frame's exact depth.

In this order, per pixel of the exact z (metres along the optical axis, inf where nothing was hit):
  ``range``   z below ``min_range_m`` or beyond ``max_range_m``: invalid;
  ``angle``   invalid with probability logistic((incidence - dropout_angle50_deg) / dropout_width_deg), the
              incidence being the angle between the viewing ray and the surface normal (the ring's law);
  ``shadow``  the projector sits ``baseline_m`` beside the lens, so next to every near edge a band of the far
              surface is lit by no pattern: on the ``shadow_side`` of each step from a near z_n to a far z_f along
              an image row, round(fx * baseline * (1/z_n - 1/z_f)) pixels are invalid;
  ``noise``   the valid rest gets Gaussian noise of sigma = noise_z2 * z^2 (structured light's law).
Invalid pixels are NaN.

Randomness: each frame's noise comes from a generator of its own, PCG64 seeded with (the camera's seed, the frame's
index k = floor(t x rate)); every frame draws exactly one uniform and one normal per pixel whatever the scene, so
the same seed and scene give the same bytes, and frame k's noise does not depend on which frames were made before
it: reading a camera more or less often (a recording rate, a controller that skips frames) changes no frame.
"""
from __future__ import annotations

import numpy as np

from hil.devices.descriptor.camera import DepthFailure

SHADOW_STEP = 0.05  # a z step of more than 5 % between neighbouring pixels is an edge that casts a band


class DepthModel:
    """Applies :class:`DepthFailure` to exact depth images; one per camera, its noise seeded per frame."""

    def __init__(self, failure: DepthFailure, fx: float, seed: int):
        self.failure, self.fx, self.seed = failure, fx, int(seed)
        # the logistic law tabulated on cos(incidence), 0.05 degree apart near grazing: one interpolation per
        # pixel instead of an arccos and an exp
        angles = np.linspace(90.0, 0.0, 1801)
        self._cos_table = np.cos(np.radians(angles))
        self._p_table = 1.0 / (1.0 + np.exp(-(angles - failure.dropout_angle50_deg) / failure.dropout_width_deg))

    def apply(self, z: np.ndarray, cos_incidence: np.ndarray, frame_index: int) -> np.ndarray:
        """The measured depth (float32, NaN invalid) of frame ``frame_index``'s exact ``z`` with the surface's
        ``cos_incidence``."""
        f = self.failure
        rng = np.random.Generator(np.random.PCG64([self.seed & 0xFFFFFFFFFFFFFFFF, int(frame_index) & 0xFFFFFFFFFFFFFFFF]))
        uniform = rng.random(z.shape, dtype=np.float32)
        normal = rng.standard_normal(z.shape, dtype=np.float32)
        p_drop = np.interp(cos_incidence, self._cos_table, self._p_table).astype(np.float32)
        invalid = ~np.isfinite(z) | (z < f.min_range_m) | (z > f.max_range_m) | (uniform < p_drop)
        if f.baseline_m > 0:
            invalid |= shadow_band(z, self.fx * f.baseline_m, f.shadow_side)
        finite = np.where(invalid, np.float32(0.0), z)
        out = (finite + normal * (f.noise_z2 * finite * finite)).astype(np.float32)
        out[invalid] = np.nan
        return out


def shadow_band(z: np.ndarray, fx_baseline: float, side: str) -> np.ndarray:
    """Pixels of the far surface beside near edges that the projector cannot light (bool, z's shape)."""
    zz = np.where(np.isfinite(z), z, np.float32(1e6))
    if side == "left":
        zz = zz[:, ::-1]
    near, far = zz[:, :-1], zz[:, 1:]
    edge = far > near * (1.0 + SHADOW_STEP)  # stepping right from a near pixel onto a far one
    rows, cols = np.nonzero(edge)
    height, width = z.shape
    marks = np.zeros((height, width + 1), np.int32)
    if len(rows):
        widths = np.rint(fx_baseline * (1.0 / near[rows, cols] - 1.0 / far[rows, cols])).astype(np.int64)
        keep = widths > 0
        rows, cols, widths = rows[keep], cols[keep], widths[keep]
        np.add.at(marks, (rows, cols + 1), 1)
        np.add.at(marks, (rows, np.minimum(cols + 1 + widths, width)), -1)
    band = np.cumsum(marks[:, :width], axis=1) > 0
    return band[:, ::-1] if side == "left" else band
