"""The unit meshes the viewer instances (batched meshes: walls, the robot's shapes, people's limbs): a box of side 1,
a cylinder and a sphere of radius 1, each (vertices float32, faces uint32) with outward faces."""
from __future__ import annotations

import math

import numpy as np


def unit_cylinder(segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """A cylinder of radius 1 and height 1 about z, centred at the origin: (vertices, faces), outward faces."""
    angle = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    bottom = np.column_stack([ring, np.full(segments, -0.5)])
    top = np.column_stack([ring, np.full(segments, 0.5)])
    vertices = np.vstack([bottom, top, [[0, 0, -0.5], [0, 0, 0.5]]]).astype(np.float32)
    i = np.arange(segments)
    j = (i + 1) % segments
    t, bc, tc = segments, 2 * segments, 2 * segments + 1
    faces = np.vstack([np.column_stack([i, j, t + j]), np.column_stack([i, t + j, t + i]),
                       np.column_stack([np.full(segments, tc), t + i, t + j]),
                       np.column_stack([np.full(segments, bc), j, i])]).astype(np.uint32)
    return vertices, faces


def unit_box() -> tuple[np.ndarray, np.ndarray]:
    """A box of side 1 centred at the origin: (vertices, faces), outward faces."""
    vertices = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)],
                        dtype=np.float32)  # index = 4 * (x > 0) + 2 * (y > 0) + (z > 0)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # -x, +x
                      [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # -y, +y
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], dtype=np.uint32)  # -z, +z
    return vertices, faces


def unit_sphere(rings: int = 6, segments: int = 10) -> tuple[np.ndarray, np.ndarray]:
    vertices = [[0.0, 0.0, 1.0]]
    for i in range(1, rings):
        theta = math.pi * i / rings
        for j in range(segments):
            phi = 2 * math.pi * j / segments
            vertices.append([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta)])
    vertices.append([0.0, 0.0, -1.0])
    faces = []
    bottom = len(vertices) - 1
    for j in range(segments):
        faces.append([0, 1 + j, 1 + (j + 1) % segments])
    for i in range(rings - 2):
        a, b = 1 + i * segments, 1 + (i + 1) * segments
        for j in range(segments):
            k = (j + 1) % segments
            faces += [[a + j, b + j, b + k], [a + j, b + k, a + k]]
    last = 1 + (rings - 2) * segments
    for j in range(segments):
        faces.append([bottom, last + (j + 1) % segments, last + j])
    return np.array(vertices, np.float32), np.array(faces, np.uint32)


UNIT_CYLINDER = unit_cylinder()
UNIT_BOX = unit_box()
UNIT_SPHERE = unit_sphere()
