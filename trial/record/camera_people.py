"""``/camera/people``: the people each virtual camera's frames showed, for the failure analysis' evidence.

A frame is made when the controller or the recording asks for one (firmware_sim/embodied/camera.py); after each
bus cycle this looks at the last frame of every camera and, for a frame it has not seen, writes which people its
ground-truth labels hold and how many pixels each: ``{camera, people: [{id, pixels}]}`` (the blueprint's camera
name). Nothing is rendered here: a trial whose cameras nobody asks for writes nothing, and watching changes
nothing in the simulation. A real camera has no labels, so only a virtual robot's trial has the channel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

TOPIC = "/camera/people"
PERSON = "person:"


class CameraPeople:
    """After each cycle (:meth:`after_cycle` with the trial time), one message per new camera frame."""

    def __init__(self, rec: Any, robot: Any, probe: Any):
        from hil.runtime.robot.camera import Camera

        self.rec, self.probe = rec, probe
        self.names = {(camera.part_id, camera.sensor.name): name for name, camera in robot.sensors.items()
                      if isinstance(camera, Camera)}
        self._seen: dict[tuple[int, str], float] = {}

    def after_cycle(self, t: float) -> None:
        if self.probe is None or not self.names:
            return
        for key, frame in self.probe.last_camera_frames().items():
            name = self.names.get(key)
            if name is None or self._seen.get(key) == frame["t"]:
                continue
            self._seen[key] = frame["t"]
            people = people_in(frame.get("labels"), frame.get("legend") or {})
            if people is not None:
                self.rec.write(TOPIC, t, {"camera": name, "people": people})


def people_in(labels: np.ndarray | None, legend: dict[int, str]) -> list[dict[str, int]] | None:
    """[{id, pixels}] of every person a label image holds, by id; None without labels."""
    if labels is None:
        return None
    ids, counts = np.unique(labels, return_counts=True)
    pixels = dict(zip(ids.tolist(), counts.tolist()))
    people = []
    for label, name in legend.items():
        if name.startswith(PERSON) and pixels.get(int(label), 0) > 0:
            try:
                people.append({"id": int(name[len(PERSON):]), "pixels": int(pixels[int(label)])})
            except ValueError:
                continue
    return sorted(people, key=lambda p: p["id"])
