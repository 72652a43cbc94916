"""The depth cameras' invalid pixels in the trial log, by cause, as the ring's failed readings are.

Each frame a camera hands out (to the controller or to the camera recording, camera_log.py) carries how many of
its depth pixels are invalid and why (``no_return``, ``range``, ``shadow``, ``angle``: firmware_sim/sensors/
camera.py). After every bus cycle :class:`CameraFaults` looks at each camera's last frame (``Camera.last_frame``:
looking never renders, so it changes nothing in the simulation) and, for a frame it has not seen, writes
``/robot/camera_faults`` ``{camera, frame_t, pixels, invalid}`` and adds it to the camera's totals; the totals go
into ``/robot/sensor_faults`` beside the ring's counters (with ``frames`` and ``pixels`` per camera), and the
metrics count them as ``sensors.NAME.invalid`` (trial/report/metrics.py). A frame is counted once however often
it is read; a camera nobody reads counts nothing, and neither does a frame whose depth nobody looked at (a
rendered frame measures its depth on the first look: recording the colour image alone does not pay for it), so
the counts cover the frames the controller read the depth of, the log kept the depth of (``camera_depth``) or the
ROS bridge published.
"""
from __future__ import annotations

from typing import Any

TOPIC = "/robot/camera_faults"


class CameraFaults:
    """Counts the invalid depth pixels of the frames the robot's cameras hand out; one per trial log."""

    def __init__(self, rec: Any, robot: Any):
        from hil.runtime.robot.camera import Camera

        self.rec = rec
        self.cameras = [(name, s) for name, s in robot.sensors.items()
                        if isinstance(s, Camera) and s.available and "depth" in s.spec.delivers]
        self._seen: dict[str, Any] = {name: camera.last_frame for name, camera in self.cameras}  # by identity
        self.totals: dict[str, dict[str, int]] = {name: {} for name, _ in self.cameras}
        self.frames: dict[str, int] = dict.fromkeys(self.totals, 0)
        self.pixels: dict[str, int] = dict.fromkeys(self.totals, 0)

    def after_cycle(self, t: float) -> None:
        """Writes the frames handed out since the last call (at most one per camera: one frame per period)."""
        for name, camera in self.cameras:
            frame = camera.last_frame
            if frame is None or frame is self._seen[name] or not frame.depth_made:
                continue  # a depth nobody looked at was never measured: nothing to count (looking would make it)
            self._seen[name] = frame
            if frame.invalid is None or frame.depth is None:
                continue
            pixels = int(frame.depth.size)
            invalid = {cause: int(n) for cause, n in sorted(frame.invalid.items())}
            totals = self.totals[name]
            for cause, n in invalid.items():
                totals[cause] = totals.get(cause, 0) + n
            self.frames[name] += 1
            self.pixels[name] += pixels
            self.rec.write(TOPIC, t, {"camera": name, "frame_t": float(frame.t), "pixels": pixels,
                                      "invalid": invalid})

    def counters(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        """(invalid pixels by cause per camera, {frames, pixels} per camera) so far: cumulative, as the ring's."""
        return ({name: dict(totals) for name, totals in self.totals.items()},
                {name: {"frames": self.frames[name], "pixels": self.pixels[name]} for name in self.totals})
