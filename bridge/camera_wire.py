"""The camera service's wire: camera frames of a world served by ``hil sim`` in another process, over ZeroMQ.

Pixels never go over the Dynamixel bus (ARCHITECTURE "Cameras": a 320x240 RGB-D frame is ~380 kB, seconds at
1 Mbit/s); a real RGB-D camera sits on USB beside the servo bus, and the served world's cameras sit on a loopback
ZeroMQ REQ/REP endpoint beside it (``hil sim --camera-endpoint``). Both ends import this module (bridge is below
firmware_sim and runtime), so the format is written down once.

Request (one frame): msgpack ``{"v": 1, "part": ID, "sensor": NAME | None, "have": T | None}``; at most
:data:`MAX_REQUEST_B`. ``have`` is the time of the frame the client holds: when the current frame period's frame
is that one, the reply is its header alone with ``"same": true`` (a read between two frames moves no pixels).
Reply: ``[header, *arrays]``. The header is msgpack ``{"v": 1, "ok": true, "t", "renderer", "legend": {id: name},
"pose": {"position", "orientation"} | None, "invalid": {cause: pixels} | None (the depth's invalid pixels by
cause), "arrays": [{"name", "dtype", "shape"}, ...]}``, each array's raw
C-order bytes one ZeroMQ frame after it (received without a copy, wrapped by numpy without another); or
``[{"v": 1, "ok": false, "error": "..."}]``. No pickle: both ends decode only plain msgpack and check every
field (:func:`parse_request`, :func:`parse_reply`), so a bad peer gets an error, never a crash.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

VERSION = 1
MAX_REQUEST_B = 1024
MAX_HEADER_B = 1 << 20  # a legend of thousands of labels still fits
ARRAYS = {"rgb": ("|u1", 3), "depth": ("<f4", 2), "labels": ("<i4", 2)}  # name -> (dtype, dimensions)
MAX_SIDE_PX = 8192  # devices/descriptor/camera.py refuses bigger cameras; a reply claiming more is not ours
MAX_NAME = 64


class WireError(ValueError):
    """A request or reply that is not one: says which field and why."""


def encode_request(part_id: int, sensor: str | None, have: float | None = None) -> bytes:
    return msgpack.packb({"v": VERSION, "part": int(part_id), "sensor": sensor, "have": have}, use_bin_type=True)


def parse_request(data: bytes) -> tuple[int, str | None, float | None]:
    """(part ID, sensor name or None, time of the frame held or None) of a request; WireError naming the field
    otherwise."""
    if len(data) > MAX_REQUEST_B:
        raise WireError(f"request of {len(data)} bytes; at most {MAX_REQUEST_B}")
    message = _unpack(data, "request")
    if message.get("v") != VERSION:
        raise WireError(f"request version {message.get('v')!r}; this server speaks {VERSION}")
    part = message.get("part")
    if not isinstance(part, int) or isinstance(part, bool) or not 0 <= part <= 252:
        raise WireError(f"request field 'part' must be a part ID 0..252, not {part!r}")
    sensor = message.get("sensor")
    if sensor is not None and not (isinstance(sensor, str) and 0 < len(sensor) <= MAX_NAME):
        raise WireError(f"request field 'sensor' must be a camera name (1..{MAX_NAME} characters) or nil, "
                        f"not {sensor!r}")
    have = message.get("have")
    if have is not None and not (isinstance(have, (int, float)) and not isinstance(have, bool)
                                 and math.isfinite(have)):
        raise WireError(f"request field 'have' must be a frame's time (a finite number) or nil, not {have!r}")
    extra = set(message) - {"v", "part", "sensor", "have"}
    if extra:
        raise WireError(f"request has unknown fields {sorted(map(str, extra))}")
    return part, sensor, None if have is None else float(have)


def encode_reply(frame: Mapping[str, Any]) -> list[Any]:
    """The frames of a reply carrying ``frame`` (firmware_sim's camera dict): the header, then each array's
    buffer as it is (C-contiguous arrays are not copied here; ZeroMQ copies once into its message)."""
    arrays, buffers = [], []
    for name, (dtype, dims) in ARRAYS.items():
        array = frame.get(name)
        if array is None:
            continue
        array = np.ascontiguousarray(array, dtype=np.dtype(dtype))
        if array.ndim != dims:
            raise WireError(f"frame array {name!r} has {array.ndim} dimensions, not {dims}")
        arrays.append({"name": name, "dtype": dtype, "shape": list(array.shape)})
        buffers.append(memoryview(array).cast("B"))
    pose = frame.get("pose")
    header = {"v": VERSION, "ok": True, "t": float(frame["t"]), "renderer": str(frame.get("renderer") or ""),
              "legend": {int(k): str(v) for k, v in (frame.get("legend") or {}).items()},
              "pose": None if pose is None else {"position": [float(v) for v in pose["position"]],
                                                 "orientation": [float(v) for v in pose["orientation"]]},
              "invalid": _invalid(frame.get("invalid")), "arrays": arrays}
    return [msgpack.packb(header, use_bin_type=True), *buffers]


def encode_same(t: float) -> list[bytes]:
    """The reply when the client already holds the current frame (its ``have``)."""
    return [msgpack.packb({"v": VERSION, "ok": True, "same": True, "t": float(t)}, use_bin_type=True)]


def encode_error(reason: str) -> list[bytes]:
    return [msgpack.packb({"v": VERSION, "ok": False, "error": str(reason)[:2000]}, use_bin_type=True)]


def parse_reply(frames: Sequence[Any]) -> dict[str, Any]:
    """A reply's frames (bytes or zmq.Frame) as firmware_sim's camera dict (t, rgb, depth, labels, legend, pose,
    renderer), the arrays wrapping the received buffers (read-only, no copy); ``{"same": True, "t": T}`` when the
    server says the client's frame is still the current one. A server's error reply raises
    :class:`RemoteCameraError` with its reason; anything malformed WireError naming the field."""
    if not frames:
        raise WireError("empty reply")
    head = _buffer(frames[0])
    if len(head) > MAX_HEADER_B:
        raise WireError(f"reply header of {len(head)} bytes; at most {MAX_HEADER_B}")
    header = _unpack(bytes(head), "reply header")
    if header.get("v") != VERSION:
        raise WireError(f"reply version {header.get('v')!r}; this client speaks {VERSION}")
    if header.get("ok") is not True:
        raise RemoteCameraError(str(header.get("error") or "the server gave no reason"))
    t = header.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
        raise WireError(f"reply field 't' must be a finite number, not {t!r}")
    if header.get("same") is True:
        if len(frames) != 1:
            raise WireError(f"a 'same' reply carries no arrays, not {len(frames) - 1}")
        return {"same": True, "t": float(t)}
    specs = header.get("arrays")
    if not isinstance(specs, list) or len(specs) != len(frames) - 1:
        raise WireError(f"reply lists {len(specs) if isinstance(specs, list) else specs!r} arrays but carries "
                        f"{len(frames) - 1}")
    out: dict[str, Any] = {"t": float(t), "rgb": None, "depth": None, "labels": None,
                           "renderer": str(header.get("renderer") or ""), "legend": _legend(header.get("legend")),
                           "pose": _pose(header.get("pose")), "invalid": _invalid(header.get("invalid"))}
    for k, (spec, frame) in enumerate(zip(specs, frames[1:])):
        name, array = _array(k, spec, _buffer(frame))
        if out[name] is not None:
            raise WireError(f"reply array {k}: a second {name!r}")
        out[name] = array
    return out


class RemoteCameraError(RuntimeError):
    """The server could not give the frame (no such camera, a renderer that cannot start): its reason."""


def _unpack(data: bytes, what: str) -> dict[Any, Any]:
    try:
        message = msgpack.unpackb(data, raw=False, strict_map_key=False, max_bin_len=MAX_HEADER_B,
                                  max_str_len=MAX_HEADER_B, max_array_len=1 << 16, max_map_len=1 << 16)
    except Exception as exc:  # noqa: BLE001 - msgpack's ExtraData, FormatError, StackError, ValueError...
        raise WireError(f"{what} is not msgpack ({type(exc).__name__}: {exc})") from None
    if not isinstance(message, dict):
        raise WireError(f"{what} must be a msgpack map, not {type(message).__name__}")
    return message


def _buffer(frame: Any) -> memoryview:
    return memoryview(frame.buffer if hasattr(frame, "buffer") else frame).cast("B")


def _array(k: int, spec: Any, buffer: memoryview) -> tuple[str, np.ndarray]:
    if not isinstance(spec, dict):
        raise WireError(f"reply array {k}: its description must be a map, not {type(spec).__name__}")
    name, dtype, shape = spec.get("name"), spec.get("dtype"), spec.get("shape")
    if name not in ARRAYS:
        raise WireError(f"reply array {k}: name {name!r} is not one of {', '.join(ARRAYS)}")
    want_dtype, dims = ARRAYS[name]
    if dtype != want_dtype:
        raise WireError(f"reply array {k} ({name}): dtype {dtype!r}, expected {want_dtype!r}")
    if not (isinstance(shape, list) and len(shape) == dims and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_SIDE_PX for n in shape)
            and (dims == 2 or shape[2] == 3)):
        raise WireError(f"reply array {k} ({name}): shape {shape!r} is not {dims} sides of 1..{MAX_SIDE_PX}"
                        + (" with 3 channels" if dims == 3 else ""))
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if len(buffer) != size:
        raise WireError(f"reply array {k} ({name}): {len(buffer)} bytes for shape {shape} of {dtype} ({size})")
    array = np.frombuffer(buffer, dtype=np.dtype(dtype)).reshape(shape)
    array.flags.writeable = False
    return name, array


def _legend(value: Any) -> dict[int, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, int) and isinstance(v, str) for k, v in value.items()):
        raise WireError("reply field 'legend' must map label ids to names")
    return dict(value)


def _invalid(value: Any) -> dict[str, int] | None:
    """A depth frame's invalid pixels by cause ({name: count >= 0}), checked as sent and as received."""
    if value is None:
        return None
    if not (isinstance(value, dict) and len(value) <= 16 and all(
            isinstance(k, str) and 0 < len(k) <= MAX_NAME and isinstance(n, int) and not isinstance(n, bool)
            and 0 <= n <= MAX_SIDE_PX * MAX_SIDE_PX for k, n in value.items())):
        raise WireError(f"reply field 'invalid' must map causes to pixel counts, not {value!r}"[:300])
    return dict(value)


def _pose(value: Any) -> dict[str, tuple[float, ...]] | None:
    if value is None:
        return None
    ok = isinstance(value, dict)
    position, orientation = (value.get("position"), value.get("orientation")) if ok else (None, None)
    for field, n in (("position", 3), ("orientation", 4)):
        v = value.get(field) if ok else None
        if not (isinstance(v, list) and len(v) == n and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            raise WireError(f"reply field 'pose.{field}' must be {n} finite numbers, not {v!r}")
    return {"position": tuple(float(x) for x in position), "orientation": tuple(float(x) for x in orientation)}
