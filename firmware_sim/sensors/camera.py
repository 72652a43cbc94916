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

Surfaces. The numbers above are the camera's calibrated law, for the surface it was calibrated on. Given which
surface each pixel hit (the renderer's per-pixel surface index and the names it stands for), each pixel is drawn
with the law of its surface (surface_law.py: the law the camera carries measured on that surface, its
``depth.surfaces``, else the surface table's factors on the calibrated law: angle50 + offset, width x scale,
noise_z2 x noise scale), and a pixel seen at an incidence below its surface's ``specular_below_deg`` is lost as
saturated (cause ``angle``: it is the incidence that loses it), as the ring's echoes are. A pixel of a surface
whose law is the calibrated one (the default surface, anything that names none) is decided by the very same
arithmetic, so an image where no surface differs comes out byte for byte as it did without surfaces.

Randomness: each frame's noise comes from a generator of its own, PCG64 seeded with (the camera's seed, the frame's
index k = floor(t x rate)); every frame draws exactly one uniform and one normal per pixel whatever the scene, so
the same seed and scene give the same bytes, and frame k's noise does not depend on which frames were made before
it: reading a camera more or less often (a recording rate, a controller that skips frames) changes no frame.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hil.devices.descriptor.camera import DepthFailure
from hil.devices.surfaces import SurfaceTable

from .surface_law import RayLaw, SurfaceLaws

CAUSES = ("no_return", "range", "shadow", "angle")  # why a pixel is invalid, in the order they are decided


def depth_surface_laws(name: str, failure: DepthFailure, table: SurfaceTable | None = None) -> SurfaceLaws:
    """The camera's depth law per surface. The camera's noise (sigma = noise_z2 z^2) has one coefficient: it stands
    in the ring's noise ``a`` (scaled alike by a surface's noise_scale), its ``b`` is 0. ValueError names a
    measured surface the table does not know."""
    measured = {}
    for surface in failure.surfaces:
        law = {k: v for k, v in surface.measured().items() if k != "noise_z2"}
        if surface.noise_z2 is not None:
            law["noise_sigma_m"] = (surface.noise_z2, 0.0)
        measured[surface.name] = law
    return SurfaceLaws(name, failure.dropout_angle50_deg, failure.dropout_width_deg, (failure.noise_z2, 0.0),
                       measured, table)


class DepthModel:
    """Applies :class:`DepthFailure` to exact depth images, per pixel the law of the surface it hit; one per
    camera, its noise seeded per frame."""

    def __init__(self, failure: DepthFailure, fx: float, seed: int, name: str = "camera",
                 table: SurfaceTable | None = None):
        self.failure, self.fx, self.seed = failure, fx, int(seed)
        self.laws = depth_surface_laws(name, failure, table)
        # the logistic law tabulated on cos(incidence), 0.05 degree apart near grazing: one interpolation per
        # pixel instead of an arccos and an exp
        self._angles = np.linspace(90.0, 0.0, 1801)
        self._cos_table = np.cos(np.radians(self._angles))
        self._p_table = self._logistic(failure.dropout_angle50_deg, failure.dropout_width_deg)
        self._p_tables: dict[tuple[float, float], np.ndarray] = {}

    def _logistic(self, angle50_deg: float, width_deg: float) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self._angles - angle50_deg) / width_deg))

    def apply(self, z: np.ndarray, cos_incidence: np.ndarray, frame_index: int, lit: np.ndarray | None = None,
              surface_index: np.ndarray | None = None,
              surfaces: Sequence[str | None] = (None,)) -> tuple[np.ndarray, dict[str, int]]:
        """The measured depth (float32, NaN invalid) of frame ``frame_index``'s exact ``z`` with the surface's
        ``cos_incidence``, and how many pixels are invalid by cause (:data:`CAUSES`). ``lit`` (bool, z's shape):
        where the projector sees the point; None: everywhere (no projector). ``surface_index`` (unsigned
        integers, z's shape): which of ``surfaces`` (names; None: the default surface) each pixel hit; None:
        every pixel the default surface. ValueError: an index beyond ``surfaces``, or a surface nobody knows."""
        f = self.failure
        rng = np.random.Generator(np.random.PCG64([self.seed & 0xFFFFFFFFFFFFFFFF, int(frame_index) & 0xFFFFFFFFFFFFFFFF]))
        uniform = rng.random(z.shape, dtype=np.float32)
        normal = rng.standard_normal(z.shape, dtype=np.float32)
        per_surface = self._pixel_laws(z.shape, cos_incidence, surface_index, surfaces)
        if per_surface is None:
            p_drop = np.interp(cos_incidence, self._cos_table, self._p_table).astype(np.float32)
            noise_z2, saturated = f.noise_z2, None
        else:
            p_drop, noise_z2, saturated = per_surface
        no_return = ~np.isfinite(z)
        out_of_range = ~no_return & ((z < f.min_range_m) | (z > f.max_range_m))
        invalid = no_return | out_of_range
        shadow = ~invalid & ~lit if lit is not None else np.zeros(z.shape, bool)
        invalid |= shadow
        lost = uniform < p_drop
        if saturated is not None:
            lost |= saturated
        angle = ~invalid & lost
        invalid |= angle
        finite = np.where(invalid, np.float32(0.0), z)
        out = (finite + normal * (noise_z2 * finite * finite)).astype(np.float32)
        out[invalid] = np.nan
        counts = {cause: int(np.count_nonzero(mask))
                  for cause, mask in zip(CAUSES, (no_return, out_of_range, shadow, angle))}
        return out, counts

    def _pixel_laws(self, shape: tuple[int, ...], cos_incidence: np.ndarray, surface_index: np.ndarray | None,
                    surfaces: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """Per pixel (dropout probability float32, noise_z2 float32, saturated or None) from the law of the
        surface each hit; None where every pixel's law is the calibrated one (the single-law arithmetic then)."""
        if surface_index is None:
            if not self.laws.measured:
                return None
            index, present = None, [0]
            surfaces = (None,)
        else:
            index = np.asarray(surface_index)
            if index.shape != tuple(shape) or index.dtype.kind not in "ui":
                raise ValueError(f"surface_index must be integers of the image's shape {tuple(shape)}, not "
                                 f"{index.dtype} {index.shape}")
            seen = np.bincount(index.ravel(), minlength=len(surfaces)) if index.size else np.zeros(len(surfaces))
            if len(seen) > len(surfaces):
                raise ValueError(f"surface index {len(seen) - 1} beyond the {len(surfaces)} surfaces named "
                                 f"({', '.join(str(s) for s in surfaces)})")
            present = np.flatnonzero(seen).tolist()
        if not self.laws.measured and all(surfaces[s] is None for s in present):
            return None
        laws = [self.laws.law(surfaces[s]) for s in present]
        if all(law == self.laws.base for law in laws):
            return None
        p_drop = np.empty(shape, np.float32)
        noise_z2 = np.empty(shape, np.float32)
        saturated = np.zeros(shape, bool) if any(law.specular_below_deg > 0 for law in laws) else None
        for s, law in zip(present, laws):
            mask = slice(None) if index is None or len(present) == 1 else index == s
            cos = cos_incidence[mask]
            p_drop[mask] = np.interp(cos, self._cos_table, self._table_of(law))
            noise_z2[mask] = law.noise_a_m
            if law.specular_below_deg > 0:
                saturated[mask] = cos > math.cos(math.radians(law.specular_below_deg))
        return p_drop, noise_z2, saturated

    def _table_of(self, law: RayLaw) -> np.ndarray:
        key = (law.angle50_deg, law.width_deg)
        table = self._p_tables.get(key)
        if table is None:
            table = self._p_tables[key] = self._logistic(*key)
        return table
