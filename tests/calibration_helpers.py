"""Shared by the calibration tests: ring readings with known (hidden) numbers, made by the ring firmware's own
model (firmware_sim.sensors.RangeRingModel: its pybullet ray casts, its dropout and noise draws) standing at a
rig's start and turning in place, without the robot, the bus or the logger: a fit is judged against numbers it
never saw, in a fraction of a second per data set. The ring stands where the commbot carries it (0.19 m above
the floor, 0.1 m behind the base frame), above a floor, so the cone's lower rays meet the floor as on the robot."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pybullet as pb

from hil.devices.catalog import load_part
from hil.devices.descriptor.schema import Sensor
from hil.firmware_sim.sensors import RangeRingModel
from hil.trial.calibrate.log import CalibrationLog
from hil.trial.calibrate.rig import Rig, load_rig

RIG = """\
start: [0.0, 0.0, 0.0]
walls:
  - {name: front, from: [1.0, -4.0], to: [1.0, 4.0], surface: plaster}
  - {name: back, from: [-2.6, -4.0], to: [-2.6, 4.0], surface: plaster}
turn: {rate_deg_s: 15, turns: 1.0, step_deg: 6}
"""
RING_IN_BASE_M = (-0.1, 0.0, 0.19)  # the commbot's ring frame in its base frame, which stands on the floor


def rig_text(near: float, far: float) -> str:
    """A corridor: a face across x at ``near`` m in front of the start and one at ``far`` m (negative) behind."""
    return (f"start: [0.0, 0.0, 0.0]\nwalls:\n  - {{name: front, from: [{near}, -4.0], to: [{near}, 4.0], "
            f"surface: plaster}}\n  - {{name: back, from: [{far}, -4.0], to: [{far}, 4.0], surface: plaster}}\n"
            "turn: {rate_deg_s: 15, turns: 1.0, step_deg: 6}\n")


class RingRig:
    """The rig's faces as 0.1 m boxes behind them in a pybullet DIRECT world, and the catalog ring's params."""

    def __init__(self, folder: Path, rig: str = RIG):
        (folder / "rig.yaml").write_text(rig)
        self.rig: Rig = load_rig(folder / "rig.yaml")
        self.client = pb.connect(pb.DIRECT)
        floor = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=self.client)
        pb.createMultiBody(0, floor, physicsClientId=self.client)
        self.surfaces: dict[tuple[int, int], str] = {}  # each face's box -> the surface the rig names for it
        for face in self.rig.faces:
            (ax, ay), (bx, by) = face.a, face.b
            assert ax == bx, "the helper builds faces across x only"
            behind = 0.05 if ax > 0 else -0.05  # the start (0, 0) is in front of every face
            shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[0.05, abs(by - ay) / 2, 1.0],
                                            physicsClientId=self.client)
            body = pb.createMultiBody(0, shape, basePosition=[ax + behind, (ay + by) / 2, 1.0],
                                      physicsClientId=self.client)
            self.surfaces[(body, -1)] = face.surface
        sensor = next(s for s in load_part("range_ring").sensors if s.name == "ring")
        self.catalog_params = dict(sensor.params)

    def readings(self, hidden: dict, seed: int, *, steps: int = 120, per_step: int = 1) -> CalibrationLog:
        """A calibration log of the ring with ``hidden`` in place of the catalog's numbers, turned once in
        ``steps`` steps, ``per_step`` readings at each, the pose exact (as a still robot's odometry)."""
        params = {**self.catalog_params, **hidden}
        model = RangeRingModel(Sensor("ring", "range_ring", "ring", params), seed)
        samples = []
        rx, ry, rz = RING_IN_BASE_M
        for k in range(steps):
            yaw = 2 * math.pi * k / steps
            orientation = pb.getQuaternionFromEuler([0.0, 0.0, yaw])
            ring_at = (math.cos(yaw) * rx - math.sin(yaw) * ry, math.sin(yaw) * rx + math.cos(yaw) * ry, rz)
            for _ in range(per_step):
                reading = model.measure(self.client, ring_at, orientation, surfaces=self.surfaces)
                samples.append({"t": 0.1 * len(samples), "x": 0.0, "y": 0.0, "yaw": yaw,
                                "ranges": list(reading.range_m), "still": True})
        return CalibrationLog(self.meta(params), samples)

    def meta(self, params: dict) -> dict:
        return {"robot": "ring on a stand", "ring": {
            "name": "ring", "part": "range_ring", "serial": 1, "sensor": "ring", "params": params,
            "ring_in_base": {"rotation": np.eye(3).tolist(), "translation": list(RING_IN_BASE_M)}}}

    def close(self) -> None:
        pb.disconnect(self.client)
