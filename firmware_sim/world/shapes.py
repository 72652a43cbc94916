"""Descriptor shapes as pybullet shapes: one compound collision shape and one visual shape array per link,
each primitive at its own pose in the link's frame; and the lowest point of a placed shape.

Sizes follow the descriptor (devices.descriptor.Shape): box edge lengths (pybullet wants half extents),
cylinder and capsule (radius, length) along z (pybullet's GEOM_CYLINDER/GEOM_CAPSULE take the same, the
capsule's length without its caps, as in URDF), sphere (radius,). pybullet's shape arrays cannot take mesh
vertices inline, so a mesh is written once as a Wavefront OBJ into the world's scratch directory (from the
descriptor's own vertices -- nothing is read from data files); as a collision shape of a moving body pybullet
uses its convex hull.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pybullet as p

from hil.devices.descriptor import Shape

from .frames import Frame, compose, frame_of, rotation_matrix

GEOM = {"box": p.GEOM_BOX, "sphere": p.GEOM_SPHERE, "cylinder": p.GEOM_CYLINDER, "capsule": p.GEOM_CAPSULE,
        "mesh": p.GEOM_MESH}


class MeshFiles:
    """OBJ files for mesh shapes, written on first use into a private temporary directory (removed by close)."""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._paths: dict[str, str] = {}

    def path(self, shape: Shape) -> str:
        text = "".join(f"v {x!r} {y!r} {z!r}\n" for x, y, z in shape.vertices) + \
            "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in shape.triangles)
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        if key not in self._paths:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix="hil-world-meshes-"))
            path = self._dir / f"{key}.obj"
            path.write_text(text)
            self._paths[key] = str(path)
        return self._paths[key]

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir, self._paths = None, {}


def _arrays(shapes: Sequence[Shape], meshes: MeshFiles) -> dict:
    """The per-shape argument lists both createCollisionShapeArray and createVisualShapeArray take."""
    kinds, halves, radii, lengths, files = [], [], [], [], []
    for shape in shapes:
        kinds.append(GEOM[shape.kind])
        size = tuple(float(v) for v in shape.size)
        halves.append([v / 2 for v in size] if shape.kind == "box" else [0.0, 0.0, 0.0])
        radii.append(size[0] if shape.kind in ("sphere", "cylinder", "capsule") else 0.0)
        lengths.append(size[1] if shape.kind in ("cylinder", "capsule") else 0.0)
        files.append(meshes.path(shape) if shape.kind == "mesh" else "")
    return {"shapeTypes": kinds, "halfExtents": halves, "radii": radii, "lengths": lengths, "fileNames": files,
            "meshScales": [[1.0, 1.0, 1.0]] * len(shapes)}


def collision_shape(client: int, shapes: Sequence[Shape], meshes: MeshFiles,
                    frames: Sequence[Frame] | None = None) -> int:
    """A compound collision shape of ``shapes``, each at its pose in the link frame or at ``frames[i]`` (a merged
    link places each body's shapes through the body's offset); -1 when there are none."""
    if not shapes:
        return -1
    frames = frames if frames is not None else [frame_of(s.pose) for s in shapes]
    shape_id = p.createCollisionShapeArray(**_arrays(shapes, meshes), collisionFramePositions=[f[0] for f in frames],
                                           collisionFrameOrientations=[f[1] for f in frames], physicsClientId=client)
    if shape_id < 0:
        raise RuntimeError(f"pybullet refused the collision shapes {[s.kind for s in shapes]}")
    return shape_id


def visual_shape(client: int, shapes: Sequence[Shape], meshes: MeshFiles,
                 frames: Sequence[Frame] | None = None) -> int:
    """A visual shape array of ``shapes`` with their colours (at ``frames`` if given, as collision_shape); -1
    when there are none."""
    if not shapes:
        return -1
    frames = frames if frames is not None else [frame_of(s.pose) for s in shapes]
    shape_id = p.createVisualShapeArray(**_arrays(shapes, meshes), rgbaColors=[list(s.rgba) for s in shapes],
                                        visualFramePositions=[f[0] for f in frames],
                                        visualFrameOrientations=[f[1] for f in frames], physicsClientId=client)
    if shape_id < 0:
        raise RuntimeError(f"pybullet refused the visual shapes {[s.kind for s in shapes]}")
    return shape_id


def lowest_z(shape: Shape, link_frame: Frame) -> float:
    """The lowest world z of ``shape`` when its link's frame is ``link_frame`` (exact for every primitive; a
    mesh's lowest vertex)."""
    pos, quat = compose(link_frame, frame_of(shape.pose))
    rot = rotation_matrix(quat)
    z, axis_z = pos[2], abs(rot[2, 2])  # the shape's own z axis, seen from the world's z
    size = shape.size
    if shape.kind == "box":
        return z - sum(abs(rot[2, i]) * size[i] / 2 for i in range(3))
    if shape.kind == "sphere":
        return z - size[0]
    if shape.kind == "cylinder":
        return z - axis_z * size[1] / 2 - size[0] * float(np.sqrt(max(0.0, 1.0 - axis_z * axis_z)))
    if shape.kind == "capsule":
        return z - axis_z * size[1] / 2 - size[0]
    vertices = np.asarray(shape.vertices, dtype=float)
    return float(np.min(vertices @ rot[2]) + z)
