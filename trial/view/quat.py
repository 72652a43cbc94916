"""Rotation matrices as the unit quaternions viser takes (w, x, y, z): one function the scene and the figures share."""
from __future__ import annotations

import math

import numpy as np


def wxyz_of(matrix: np.ndarray) -> tuple[float, float, float, float]:
    """A rotation matrix as a unit quaternion (w, x, y, z), w >= 0."""
    m = matrix
    w = math.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2, m[2, 1] - m[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2, m[0, 2] - m[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2, m[1, 0] - m[0, 1])
    n = math.sqrt(w * w + x * x + y * y + z * z) or 1.0
    return w / n, x / n, y / n, z / n
