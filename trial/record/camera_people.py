"""``/camera/people``: the people each virtual camera's frames showed, for the failure analysis' evidence.

A frame is made when the controller or the recording asks for one; after each bus cycle this looks at the last
frame each camera handed out (``Camera.last_frame``, as camera_faults.py does) and, for a frame it has not seen,
writes which people its ground-truth labels hold and how many pixels each: ``{camera, people: [{id, pixels}]}``
(the blueprint's camera name). Nothing is rendered here: a trial whose cameras nobody asks for writes nothing,
and watching changes nothing in the simulation. A real camera has no labels, so only a rendered camera's frames
count.
"""
from __future__ import annotations

from typing import Any

import numpy as np

TOPIC = "/camera/people"
PERSON = "person:"


class CameraPeople:
    """After each cycle (:meth:`after_cycle` with the trial time), one message per new camera frame."""

    def __init__(self, rec: Any, robot: Any):
        from hil.runtime.robot.camera import Camera

        self.rec = rec
        self.cameras = [(name, s) for name, s in robot.sensors.items() if isinstance(s, Camera) and s.available]
        self._seen: dict[str, Any] = {name: camera.last_frame for name, camera in self.cameras}  # by identity

    def after_cycle(self, t: float) -> None:
        for name, camera in self.cameras:
            frame = camera.last_frame  # the frame handed out last: looking never renders
            if frame is None or frame is self._seen[name]:
                continue
            self._seen[name] = frame
            people = people_in(frame.labels, frame.legend)
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
