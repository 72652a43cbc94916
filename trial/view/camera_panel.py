"""The robot's camera in ``hil view``: the log's latest picture of the chosen camera at the page's time.

The pictures are the log's own (trial/record/camera_log.py): ``/foxglove/NAME/image`` (foxglove.CompressedImage,
JPEG) and, when the trial recorded it, ``/foxglove/NAME/depth`` (foxglove.RawImage, 32FC1 metres, NaN invalid).
Replayed, the timeline holds them from the file; live, the recorder's *taps* hand them over as the log gets them
(its listeners see only the JSON topics). So the panel shows what a replay of the log will show, in step with the
scrubber: the latest picture at or before the page's time, with its own time, and under it how many of that
frame's depth pixels were invalid and why (``/robot/camera_faults``: shadow, range, angle, no return).

The messages are protobuf; the two fields the panel needs are read here with a few lines of protobuf's wire format
(no generated classes, no schema compiler at run time). Labels are not recorded (ground truth for tests, not a
camera's output), so the panel has RGB and depth.
"""
from __future__ import annotations

import html
import io
import json
import re
from typing import Any

import numpy as np

FAULTS_TOPIC = "/robot/camera_faults"  # a frame's invalid depth pixels by cause (trial/record/camera_faults.py)
CAMERA_TOPIC = re.compile(r"^/foxglove/([A-Za-z0-9_.-]+)/(image|depth)$")
KINDS = ("rgb", "depth")
_TOPIC_OF = {"rgb": "image", "depth": "depth"}
PLACEHOLDER = np.full((24, 32, 3), 40, np.uint8)  # before the first picture: a dark grey 4:3 block
_DEPTH_COLOURS = np.array([[48, 18, 59], [70, 131, 248], [27, 229, 180], [164, 252, 60], [251, 185, 56],
                           [221, 61, 8], [122, 4, 3]], float)  # near (dark blue) to far (dark red), turbo-like


def camera_topic(name: str, kind: str) -> str:
    return f"/foxglove/{name}/{_TOPIC_OF[kind]}"


def is_camera_topic(topic: str) -> bool:
    return CAMERA_TOPIC.match(topic) is not None


def protobuf_fields(data: bytes) -> dict[int, Any]:
    """The top-level fields of a protobuf message: number -> last value (int for varint/fixed, bytes for
    length-delimited). ValueError on bytes that are not a message (a cut or garbled record)."""
    return dict(protobuf_items(data))


def protobuf_items(data: bytes) -> list[tuple[int, Any]]:
    """Every top-level field of a protobuf message in order, (number, value): a repeated field once per value."""
    fields: list[tuple[int, Any]] = []
    pos, end = 0, len(data)

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= end or shift > 63:
                raise ValueError(f"protobuf varint cut short at byte {pos}")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < end:
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, varint()))
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise ValueError(f"protobuf field {number} cut short at byte {pos}")
            fields.append((number, int.from_bytes(data[pos:pos + size], "little")))
            pos += size
        elif wire == 2:
            size = varint()
            if pos + size > end:
                raise ValueError(f"protobuf field {number} ({size} bytes) cut short at byte {pos}")
            fields.append((number, bytes(data[pos:pos + size])))
            pos += size
        else:
            raise ValueError(f"protobuf field {number} has wire type {wire}, which no foxglove image uses")
    return fields


def decode_rgb(message: bytes) -> np.ndarray:
    """A foxglove.CompressedImage (fields: 2 data, 3 format) as H x W x 3 uint8."""
    fields = protobuf_fields(message)
    data, fmt = fields.get(2, b""), fields.get(3, b"").decode("utf-8", "replace")
    if not data:
        raise ValueError("the image message has no data")
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if fmt and image.format and image.format.lower() not in (fmt.lower(), "jpeg" if fmt == "jpg" else fmt):
            raise ValueError(f"the image says {fmt!r} but holds {image.format}")
        return np.asarray(image.convert("RGB"))


def decode_depth(message: bytes) -> np.ndarray:
    """A foxglove.RawImage 32FC1 (fields: 2 width, 3 height, 4 encoding, 5 step, 6 data) as H x W float32."""
    fields = protobuf_fields(message)
    width, height, step = int(fields.get(2, 0)), int(fields.get(3, 0)), int(fields.get(5, 0))
    encoding, data = fields.get(4, b"").decode("utf-8", "replace"), fields.get(6, b"")
    if encoding != "32FC1":
        raise ValueError(f"depth encoding {encoding!r}: the panel reads 32FC1")
    if width <= 0 or height <= 0 or step < 4 * width or len(data) < step * height:
        raise ValueError(f"depth image {width}x{height} step {step} does not fit its {len(data)} bytes")
    rows = np.frombuffer(data, np.uint8, count=step * height).reshape(height, step)
    return rows[:, :4 * width].copy().view("<f4").reshape(height, width)


def colour_depth(depth: np.ndarray) -> np.ndarray:
    """Depth as a picture: near blue to far red over the frame's own finite range, invalid (NaN) black."""
    valid = np.isfinite(depth)
    out = np.zeros((*depth.shape, 3), np.uint8)
    if not valid.any():
        return out
    values = depth[valid]
    lo, hi = float(values.min()), float(values.max())
    s = (values - lo) / (hi - lo) if hi > lo else np.zeros_like(values)
    anchors = np.linspace(0.0, 1.0, len(_DEPTH_COLOURS))
    out[valid] = np.stack([np.interp(s, anchors, _DEPTH_COLOURS[:, c]) for c in range(3)], axis=1).astype(np.uint8)
    return out


class CameraPanel:
    """The "Robot camera" folder of the page: which camera, RGB or depth, its picture and the picture's time.

    ``show(timeline, t)`` once per page frame; the picture is decoded and sent only when it is another message
    than the one shown. ``image.image`` is the array shown (what a test compares with the log's frame)."""

    def __init__(self, gui: Any):
        with gui.add_folder("Robot camera"):
            self.which = gui.add_dropdown("camera", ("none",), initial_value="none")
            self.kind = gui.add_dropdown("picture", KINDS, initial_value="rgb")
            self.image = gui.add_image(PLACEHOLDER, label=None, format="jpeg", jpeg_quality=90)
            self.caption = gui.add_html(_caption(None, None, None, "no trial yet"))
        self._cameras: tuple[str, ...] = ()
        self._shown: tuple[str, float] | None = None  # (topic, time) of the picture shown
        self._shape: tuple[int, ...] | None = None  # its size
        self._caption = ""
        self.errors = 0  # pictures that could not be decoded (the caption says why)

    def reset(self) -> None:
        self._shown = None

    def show(self, timeline: Any, t: float | None) -> None:
        cameras = timeline.cameras()
        if cameras != self._cameras:
            self._cameras = cameras
            options = cameras or ("none",)
            self.which.options = options
            if self.which.value not in options:
                self.which.value = options[0]
        name, kind = self.which.value, self.kind.value
        if name not in cameras:
            self._set_caption(_caption(None, None, None, "this trial recorded no camera" if not cameras else None))
            return
        topic = camera_topic(name, kind)
        found = timeline.latest_at(topic, timeline.end_t if t is None else t)
        if found is None:
            why = ("no depth recorded (camera_depth: true records it)" if kind == "depth"
                   and not timeline.has_topic(topic) else "no picture yet")
            self._set_caption(_caption(name, kind, None, why))
            return
        picture_t, message = found
        # the depth's invalid pixels of the frame shown (written in the same bus cycle, after the picture: looked
        # up every time, so a live page adds them when they come)
        faults = timeline.latest_matching(FAULTS_TOPIC, picture_t, "camera", name)
        invalid = faults[1] if faults is not None and abs(faults[0] - picture_t) < 1e-9 else None
        if self._shown == (topic, picture_t):
            if self._shape is not None:
                self._set_caption(_caption(name, kind, picture_t, None, self._shape, invalid))
            return
        self._shown = (topic, picture_t)
        try:
            picture = decode_rgb(message) if kind == "rgb" else colour_depth(decode_depth(message))
        except Exception as exc:  # noqa: BLE001 - a damaged image (or no Pillow) must not stop the page
            self.errors += 1
            self._shape = None
            self._set_caption(_caption(name, kind, picture_t, f"cannot show it: {exc}"))
            return
        self.image.image = picture
        self._shape = picture.shape
        self._set_caption(_caption(name, kind, picture_t, None, picture.shape, invalid))

    def _set_caption(self, content: str) -> None:
        if content != self._caption:
            self._caption = content
            self.caption.content = content


def _caption(name: str | None, kind: str | None, t: float | None, why: str | None,
             shape: tuple[int, ...] | None = None, faults: dict[str, Any] | None = None) -> str:
    invalid = {str(k): int(v) for k, v in sorted((faults or {}).get("invalid", {}).items())}
    attrs = (f" data-camera='{html.escape(name or '')}' data-kind='{html.escape(kind or '')}'"
             f" data-t='{'' if t is None else f'{t:.3f}'}'"
             f" data-invalid='{html.escape(json.dumps(invalid, sort_keys=True)) if faults else ''}'")
    if why or t is None:
        text = html.escape(why or "no picture yet")
    else:
        size = f" &middot; {shape[1]}x{shape[0]}" if shape else ""
        text = f"{html.escape(name or '')} {html.escape(kind or '')} at <b id='hil-camera-t'>{t:.2f}</b> s{size}"
        if faults:
            pixels = max(1, int(faults.get("pixels") or 1))
            causes = " &middot; ".join(f"{html.escape(cause.replace('_', ' '))} {n}" for cause, n in invalid.items())
            text += (f"<br>depth invalid {100.0 * sum(invalid.values()) / pixels:.1f} %: "
                     f"<span id='hil-camera-invalid'>{causes}</span>")
    return f"<div id='hil-camera' style='font-size:12px'{attrs}>{text}</div>"
