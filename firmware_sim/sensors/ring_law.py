"""The range ring's law: what decides one reading, in one place for the part that draws it and the fit that
measures it.

The ring firmware (range_ring.py) *samples* this law per measure; the calibration fit (trial/calibrate/fit.py)
computes the probability of what it saw under the same law, so a fitted number means what the firmware does with
it. Per sensor, given each of its rays' nearest hit (range and incidence on the surface there, the floor included):

- a ray echoes only if it hits something within max range at no less than min range;
- an echoing ray drops out with probability logistic((incidence - angle50) / width), independently per ray;
- the reading is the nearest surviving echo's range plus one Gaussian draw of sigma = a + b * range;
- a noisy value outside [min range, max range] is rejected: the reading is invalid.

Hence P(valid) = sum over the rays, nearest first, of P(this ray is the first to survive) * P(its noisy range is
accepted) = sum_j (1 - d_j) prod_{i nearer than j} d_i * accept(r_j).
"""
from __future__ import annotations

import math

import numpy as np


def dropout_probability(incidence_deg: np.ndarray | float, angle50_deg: np.ndarray | float,
                        width_deg: np.ndarray | float) -> np.ndarray:
    """Probability that an echo at this incidence angle (degrees) is lost: logistic((inc - angle50) / width).
    angle50 and width may be arrays (per ray: the law of the surface each hit, surface_law.py)."""
    x = (np.asarray(incidence_deg, dtype=float) - angle50_deg) / width_deg
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def noise_sigma(range_m: np.ndarray | float, a: float, b: float) -> np.ndarray:
    """The noise's standard deviation at this true range: a + b * range."""
    return a + b * np.asarray(range_m, dtype=float)


def can_echo(range_m: np.ndarray, min_range_m: float) -> np.ndarray:
    """Rays that hit something within max range (finite) and not inside the blind zone."""
    r = np.asarray(range_m, dtype=float)
    return np.isfinite(r) & (r >= min_range_m)


def acceptance(range_m: np.ndarray, a: np.ndarray | float, b: np.ndarray | float, min_range_m: float,
               max_range_m: float) -> np.ndarray:
    """Probability that an echo at this true range, plus its noise draw, lands within [min, max] (not rejected).
    ``a`` and ``b`` may be arrays of the ranges' shape (per ray: the noise of the surface each hit)."""
    r = np.asarray(range_m, dtype=float)
    out = np.zeros(r.shape)
    ok = np.isfinite(r)
    a = np.broadcast_to(np.asarray(a, dtype=float), r.shape)[ok] if np.ndim(a) else a
    b = np.broadcast_to(np.asarray(b, dtype=float), r.shape)[ok] if np.ndim(b) else b
    sigma = noise_sigma(r[ok], a, b)
    lo, hi = min_range_m - r[ok], max_range_m - r[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        out[ok] = np.where(sigma > 0, _normal_cdf(hi / sigma) - _normal_cdf(lo / sigma),
                           ((lo <= 0) & (hi >= 0)).astype(float))
    return out


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf, otypes=[float])(np.asarray(z, dtype=float) / math.sqrt(2.0)))


def nearest_first(range_m: np.ndarray) -> np.ndarray:
    """Per row (one sensor's rays), the ray indices ordered nearest first (what the firmware's minimum picks)."""
    return np.argsort(np.where(np.isfinite(range_m), range_m, np.inf), axis=-1, kind="stable")


def valid_probability(drop: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """P(valid reading) per row, from each ray's dropout probability (1 where it cannot echo) and acceptance,
    both ordered nearest first along the last axis: the first ray to survive gives the reading, and its noisy
    range must be accepted."""
    drop = np.asarray(drop, dtype=float)
    nearer_all_dropped = np.empty(drop.shape)  # [..., j]: the product of drop[..., :j] (1 for the nearest ray)
    nearer_all_dropped[..., 0] = 1.0
    # the running product one ray at a time over all rows: the same products in the same order as np.cumprod
    # along the last axis, twice to five times faster for the fit's thousands of rows (it evaluates this some
    # 20,000 times per calibration)
    for j in range(1, drop.shape[-1]):
        np.multiply(nearer_all_dropped[..., j - 1], drop[..., j - 1], out=nearer_all_dropped[..., j])
    return np.sum(nearer_all_dropped * (1.0 - drop) * accept, axis=-1)
