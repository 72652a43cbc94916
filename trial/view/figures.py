"""People in ``hil view`` as the cameras see them: walking human figures from
firmware_sim/world/figures.py (the one module that makes a person's limbs from their state), drawn as three
batched meshes (boxes for torsos, cylinders for limbs, spheres for heads and hair).

Each frame sends the limbs' positions and orientations (their sizes and colours are sent again only when somebody
comes or goes). The gait phase follows each person's speed between the frames drawn; scrubbing back in a replay
holds it (a phase is a look, not a record). Clothes come from the person's id (seed 0, as in a trial of seed 0).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hil.firmware_sim.world.figures import Gait, figure

from .meshes import UNIT_SPHERE
from .quat import wxyz_of

KINDS = ("box", "cylinder", "sphere")


class FigureDrawer:
    """The crowd as figures under ``/people``; :meth:`draw` per frame, :meth:`clear` when nobody is there."""

    def __init__(self, scene: Any, meshes: dict[str, tuple[np.ndarray, np.ndarray]]):
        self.scene = scene
        self.meshes = {**meshes, "sphere": UNIT_SPHERE}
        self.gait = Gait(0)
        self.nodes: dict[str, Any] = {}
        self._key: tuple = ()

    def draw(self, t: float, people: list[dict[str, Any]]) -> None:
        phases = self.gait.update(t, people)
        parts: dict[str, list] = {k: [] for k in KINDS}
        for person in people:
            for limb in figure(person, phases.get(int(person["id"]), 0.0)):
                parts[limb.kind].append(limb)
        key = tuple((int(p["id"]), float(p.get("height", 1.7))) for p in people)
        for kind in KINDS:
            limbs = parts[kind]
            positions = np.array([limb.pose[:3, 3] for limb in limbs], np.float32).reshape(-1, 3)
            wxyzs = np.array([wxyz_of(limb.pose[:3, :3]) for limb in limbs], np.float32).reshape(-1, 4)
            node = self.nodes.get(kind)
            if node is not None and key == self._key:
                node.batched_positions, node.batched_wxyzs = positions, wxyzs
                continue
            if node is not None:
                node.remove()
                self.nodes.pop(kind)
            if not limbs:
                continue
            vertices, faces = self.meshes[kind]
            self.nodes[kind] = self.scene.add_batched_meshes_simple(
                f"/people/{kind}", vertices=vertices, faces=faces, batched_wxyzs=wxyzs, batched_positions=positions,
                batched_scales=np.array([_scale(limb) for limb in limbs], np.float32),
                batched_colors=np.array([[round(255 * c) for c in limb.rgba[:3]] for limb in limbs], np.uint8),
                lod="off", flat_shading=True, cast_shadow=False)
        self._key = key

    def clear(self) -> None:
        for node in self.nodes.values():
            node.remove()
        self.nodes, self._key = {}, ()


def _scale(limb) -> tuple[float, float, float]:
    if limb.kind == "box":
        return tuple(limb.size)
    if limb.kind == "cylinder":
        return (limb.size[0], limb.size[0], limb.size[1])
    return (limb.size[0],) * 3


