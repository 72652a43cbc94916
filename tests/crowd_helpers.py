"""Shared by the crowd tests: a chi-square critical value without scipy, and small measuring helpers."""
from __future__ import annotations

import math

import numpy as np

P_VALUE = 0.001  # every statistical test here rejects at p < 0.001 (seeded, so the outcome is fixed anyway)
Z_999 = 3.090232  # standard normal quantile at 1 - 0.001


CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322, 8: 26.124, 9: 27.877,
            10: 29.588}  # exact upper 0.1 % points for small df


def chi2_critical(df: int, z: float = Z_999) -> float:
    """Upper quantile of chi-square(df): exact at p = 0.001 for df <= 10, else Wilson-Hilferty (within 0.2 %)."""
    if z == Z_999 and df in CHI2_999:
        return CHI2_999[df]
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


def merge_small(observed: list[float], expected: list[float], minimum: float = 5.0) -> tuple[list, list]:
    """Pool neighbouring cells until every expected count is >= minimum (the chi-square approximation's rule)."""
    obs, exp = [], []
    o_acc = e_acc = 0.0
    for o, e in zip(observed, expected):
        o_acc += o
        e_acc += e
        if e_acc >= minimum:
            obs.append(o_acc)
            exp.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0:
        if exp:
            obs[-1] += o_acc
            exp[-1] += e_acc
        else:
            obs.append(o_acc)
            exp.append(e_acc)
    return obs, exp


def angle_deg(u: np.ndarray, v: np.ndarray) -> float:
    """Angle between two 2-D vectors in degrees."""
    nu, nv = float(np.hypot(*u)), float(np.hypot(*v))
    if nu < 1e-12 or nv < 1e-12:
        return 180.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(np.dot(u, v)) / (nu * nv)))))


HALL_YAML = """
name: hall
walls:
  - {from: [-15, -10], to: [15, -10]}
  - {from: [15, -10], to: [15, 10]}
  - {from: [15, 10], to: [-15, 10]}
  - {from: [-15, 10], to: [-15, -10]}
  - {name: screen, from: [-3, 6], to: [3, 6]}
places: {east: [12, 0], west: [-12, 0]}
"""


def hall_map():
    """An open 30 m x 20 m hall with one short screen wall near its north side: room for objectives to play out
    without the passages of the arcade in the way (and the arcade may change)."""
    from hil.crowd.maps import parse_crowd_map
    from hil.devices.yaml_source import load_yaml_text

    return parse_crowd_map(load_yaml_text(HALL_YAML, "hall.yaml"), "hall.yaml")
