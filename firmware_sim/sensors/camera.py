"""The depth camera's failures (the sensor-simulation reference: fringe-projection and stereo sensors lose pixels on
steep slopes and in the blind spots of emitter and receiver), applied to a rendered frame's exact depth.

Per pixel of the exact z (metres along the optical axis, inf where nothing was hit), each invalid pixel counted
under the first cause that applies, in this order:
  ``no_return``  nothing within the far plane (the sky): no echo of the pattern;
  ``range``      z below ``min_range_m`` or beyond ``max_range_m``;
  ``shadow``     the projector (or the second imager) does not see the point: the caller's ``lit`` mask, a
                 shadow-map test from the projector's own pose (sensors/projector.py);
  ``angle``      invalid with probability logistic((incidence - dropout_angle50_deg) / dropout_width_deg), the
                 incidence being the angle between the viewing ray and the surface normal (the ring's law);
  ``noise``      the valid rest gets Gaussian noise of sigma = noise_z2 * z^2 (structured light's law).
Invalid pixels are NaN.

Randomness: each frame's noise comes from a generator of its own, PCG64 seeded with (the camera's seed, the frame's
index k = floor(t x rate)); every frame draws exactly one uniform and one normal per pixel whatever the scene, so
the same seed and scene give the same bytes, and frame k's noise does not depend on which frames were made before
it: reading a camera more or less often (a recording rate, a controller that skips frames) changes no frame.
"""
from __future__ import annotations

import numpy as np

from hil.devices.descriptor.camera import DepthFailure

CAUSES = ("no_return", "range", "shadow", "angle")  # why a pixel is invalid, in the order they are decided


class DepthModel:
    """Applies :class:`DepthFailure` to exact depth images; one per camera, its noise seeded per frame."""

    def __init__(self, failure: DepthFailure, fx: float, seed: int):
        self.failure, self.fx, self.seed = failure, fx, int(seed)
        # the logistic law tabulated on cos(incidence), 0.05 degree apart near grazing: one interpolation per
        # pixel instead of an arccos and an exp
        angles = np.linspace(90.0, 0.0, 1801)
        self._cos_table = np.cos(np.radians(angles))
        self._p_table = 1.0 / (1.0 + np.exp(-(angles - failure.dropout_angle50_deg) / failure.dropout_width_deg))

    def apply(self, z: np.ndarray, cos_incidence: np.ndarray, frame_index: int,
              lit: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """The measured depth (float32, NaN invalid) of frame ``frame_index``'s exact ``z`` with the surface's
        ``cos_incidence``, and how many pixels are invalid by cause (:data:`CAUSES`). ``lit`` (bool, z's shape):
        where the projector sees the point; None: everywhere (no projector)."""
        f = self.failure
        rng = np.random.Generator(np.random.PCG64([self.seed & 0xFFFFFFFFFFFFFFFF, int(frame_index) & 0xFFFFFFFFFFFFFFFF]))
        uniform = rng.random(z.shape, dtype=np.float32)
        normal = rng.standard_normal(z.shape, dtype=np.float32)
        p_drop = np.interp(cos_incidence, self._cos_table, self._p_table).astype(np.float32)
        no_return = ~np.isfinite(z)
        out_of_range = ~no_return & ((z < f.min_range_m) | (z > f.max_range_m))
        invalid = no_return | out_of_range
        shadow = ~invalid & ~lit if lit is not None else np.zeros(z.shape, bool)
        invalid |= shadow
        angle = ~invalid & (uniform < p_drop)
        invalid |= angle
        finite = np.where(invalid, np.float32(0.0), z)
        out = (finite + normal * (f.noise_z2 * finite * finite)).astype(np.float32)
        out[invalid] = np.nan
        counts = {cause: int(np.count_nonzero(mask))
                  for cause, mask in zip(CAUSES, (no_return, out_of_range, shadow, angle))}
        return out, counts
