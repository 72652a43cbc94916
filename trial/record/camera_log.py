"""The robot's cameras in the trial log, as Foxglove's Image panel opens them:

- ``/foxglove/NAME/image`` (foxglove.CompressedImage, JPEG) at the recording rate (``camera_rate`` Hz, default
  2; 0 records none), in the frame ``NAME_optical`` (x right, y down, z forward: the optical convention);
- ``/foxglove/NAME/calibration`` (foxglove.CameraCalibration: K, P, the plumb-bob model with no distortion)
  with every image;
- ``/foxglove/NAME/depth`` (foxglove.RawImage, 32FC1 metres, NaN invalid) when ``camera_depth`` is asked;
- ``/foxglove/tf`` once: the optical frame in the camera body's link frame, so the 3D panel places the images.

NAME is the camera's blueprint name (``head_camera``). The images are taken with ``Camera.observe``: the frame
the controller got when it read the same camera period first (then the recording costs no render), else one made
for the recording alone, which the controller never gets and which advances nothing its frames use (the depth
noise is seeded per frame, the people's gait has an observer's copy). So recording, or not, or at another rate,
changes nothing else in the trial (tests/test_camera_record.py compares every other topic byte for byte). A
recording that does not log depth does not make it (the depth model runs when the depth is first read). Images
are JPEG-encoded by Pillow at ``JPEG_QUALITY``: the same frame gives the same bytes, so the same trial keeps
giving the same log.
"""
from __future__ import annotations

import io
import math
import sys
from typing import Any

JPEG_QUALITY = 85
DEFAULT_CAMERA_RATE_HZ = 2.0  # bench/README.md "camera_record": the rate at which recording costs a
# GPU-less machine's demo at most ~15 % of its speed
OPTICAL_IN_BODY = ((0.0, 0.0, 1.0), (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0))  # columns: optical x, y, z in the body
OPTICAL_XYZW = (-0.5, 0.5, -0.5, 0.5)  # the same rotation as a quaternion (x, y, z, w): REP-103's optical frame


def image_topic(name: str) -> str:
    return f"/foxglove/{name}/image"


class CameraLog:
    """Writes the cameras' channels into a recorder; :meth:`after_cycle` once per bus cycle with the trial time."""

    def __init__(self, rec: Any, robot: Any, rate_hz: float = DEFAULT_CAMERA_RATE_HZ, depth: bool = False):
        from hil.runtime.robot.camera import Camera

        self.rec, self.rate_hz, self.depth = rec, float(rate_hz), depth
        self.cameras = [(name, s) for name, s in robot.sensors.items() if isinstance(s, Camera) and s.available]
        self._next_s = 0.0
        self._link_names = {name: camera_link_name(robot, camera) for name, camera in self.cameras}
        self.skipped: list[str] = []  # cameras not recorded, and why (each also one of the robot's notes)
        self._notes = getattr(robot, "notes", None)
        if self.rate_hz > 0 and self.cameras:
            try:
                self._encoder = _jpeg_encoder()
            except RuntimeError as exc:  # a core install (no camera extra): the trial runs, its cameras unrecorded
                for name, _ in self.cameras:
                    self._skip(name, str(exc))
                self.cameras = []
                return
            self._static_frames()

    def _skip(self, name: str, why: str) -> None:
        line = f"camera {name} not recorded: {why}"
        self.skipped.append(line)
        print(f"note: {line}", file=sys.stderr)  # said as it happens, as the robot's notes are at open
        if self._notes is not None:
            self._notes.append(line)

    def after_cycle(self, t: float) -> None:
        if self.rate_hz <= 0 or not self.cameras or t < self._next_s - 1e-9:
            return
        self._next_s = (math.floor(t * self.rate_hz + 1e-6) + 1) / self.rate_hz
        for name, camera in list(self.cameras):
            try:
                frame = camera.observe()
            except Exception as exc:  # noqa: BLE001 - a camera that cannot render must not end the trial's log
                self.cameras.remove((name, camera))
                self._skip(name, str(exc))
                continue
            self._write_frame(name, t, frame)

    def _write_frame(self, name: str, t: float, frame: Any) -> None:
        import foxglove.messages as fx

        stamp = _stamp(t)
        optical = f"{name}_optical"
        k = frame.intrinsics
        if frame.rgb is not None:
            self._write(image_topic(name), t, fx.CompressedImage(timestamp=stamp, frame_id=optical,
                                                                 data=self._encoder(frame.rgb), format="jpeg"))
        self._write(f"/foxglove/{name}/calibration", t, fx.CameraCalibration(
            timestamp=stamp, frame_id=optical, width=k.width, height=k.height, distortion_model="plumb_bob",
            D=[0.0] * 5, K=[float(v) for row in k.matrix for v in row],
            R=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], P=[k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0,
                                                                 1.0, 0.0]))
        if self.depth and frame.depth is not None:
            h, w = frame.depth.shape
            self._write(f"/foxglove/{name}/depth", t, fx.RawImage(
                timestamp=stamp, frame_id=optical, width=w, height=h, encoding="32FC1", step=4 * w,
                data=frame.depth.astype("<f4").tobytes()))

    def _static_frames(self) -> None:
        import foxglove.messages as fx

        from .foxglove import TF, _quat_matrix

        transforms = [fx.FrameTransform(timestamp=_stamp(0.0), parent_frame_id=self._link_names[name],
                                        child_frame_id=f"{name}_optical",
                                        translation=fx.Vector3(x=0.0, y=0.0, z=0.0),
                                        rotation=_quat_matrix(OPTICAL_IN_BODY))
                      for name, _ in self.cameras if self._link_names[name]]
        if transforms:
            self._write(TF, 0.0, fx.FrameTransforms(transforms=transforms))

    def _write(self, topic: str, t: float, message: Any) -> None:
        self.rec.write_encoded(topic, t, message.encode(), type(message).get_schema(), "protobuf")


def camera_link_name(robot: Any, camera: Any) -> str | None:
    """The camera body's link name as /robot/model and /foxglove/tf have it."""
    body = camera.sensor.body
    return next((link.name for link in robot.model.links if link.bus_id == camera.part_key and link.body == body),
                None)


def _stamp(t: float):
    import foxglove.messages as fx

    ns = round(t * 1e9)
    return fx.Timestamp(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)


def _jpeg_encoder():
    try:
        from PIL import Image
    except ImportError:
        raise RuntimeError("recording camera images needs Pillow: pip install 'hil[camera]' (--camera-rate 0 "
                           "records none)") from None

    def encode(rgb) -> bytes:
        out = io.BytesIO()
        Image.fromarray(rgb).save(out, format="JPEG", quality=JPEG_QUALITY)
        return out.getvalue()
    return encode
