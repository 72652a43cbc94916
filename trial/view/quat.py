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


def wxyz_many(matrices: np.ndarray) -> np.ndarray:
    """:func:`wxyz_of` of every rotation matrix of an (n, 3, 3) array at once: (n, 4), w >= 0."""
    m = np.asarray(matrices, dtype=np.float64)
    d0, d1, d2 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    w = np.sqrt(np.maximum(0.0, 1.0 + d0 + d1 + d2)) / 2
    x = np.copysign(np.sqrt(np.maximum(0.0, 1.0 + d0 - d1 - d2)) / 2, m[:, 2, 1] - m[:, 1, 2])
    y = np.copysign(np.sqrt(np.maximum(0.0, 1.0 - d0 + d1 - d2)) / 2, m[:, 0, 2] - m[:, 2, 0])
    z = np.copysign(np.sqrt(np.maximum(0.0, 1.0 - d0 - d1 + d2)) / 2, m[:, 1, 0] - m[:, 0, 1])
    q = np.stack([w, x, y, z], axis=1)
    n = np.linalg.norm(q, axis=1, keepdims=True)
    return q / np.where(n > 0, n, 1.0)
