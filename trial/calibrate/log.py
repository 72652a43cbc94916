"""calibration.mcap: what a calibration run recorded, in JSON messages any MCAP reader opens.

``/calibration/meta`` (once): the robot, the ring part's identity (descriptor name, serial, bus id), its sensor
params (the ray pattern and the model the part claims), the ring body's placement in the base frame, the rig.
``/calibration/ring`` (every ring update): t (s), the odometry pose (x, y, yaw: m, m, rad), ranges (m, null where
the sensor had no valid echo) and the part's invalid-reading counters by cause where it has them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

META, RING = "/calibration/meta", "/calibration/ring"


class CalibrationLogError(ValueError):
    """The log cannot be fitted (not a calibration log, no ring readings, no yaw, another robot)."""


class CalibrationWriter:
    def __init__(self, path: Path):
        from mcap.writer import Writer

        self._file = open(path, "wb")
        self._writer = Writer(self._file)
        self._writer.start(profile="", library="hil calibrate")
        schema = self._writer.register_schema(name="hil.calibration", encoding="jsonschema",
                                              data=json.dumps({"type": "object"}).encode())
        self._channels = {topic: self._writer.register_channel(topic=topic, message_encoding="json",
                                                               schema_id=schema) for topic in (META, RING)}
        self.samples = 0

    def write(self, topic: str, t_s: float, message: dict[str, Any]) -> None:
        ns = int(round(t_s * 1e9))
        self._writer.add_message(self._channels[topic], log_time=ns, publish_time=ns,
                                 data=json.dumps(message, allow_nan=False).encode())
        self.samples += topic == RING

    def close(self) -> None:
        self._writer.finish()
        self._file.close()


@dataclass(frozen=True)
class CalibrationLog:
    meta: dict[str, Any]
    samples: list[dict[str, Any]]


def read_log(path: str | Path) -> CalibrationLog:
    """The meta and the ring samples; refuses a log that cannot be fitted, saying what is missing."""
    from mcap.reader import make_reader

    meta, samples = None, []
    try:
        with open(path, "rb") as f:
            for _, channel, message in make_reader(f).iter_messages(topics=[META, RING]):
                body = json.loads(message.data)
                if channel.topic == META:
                    meta = body
                else:
                    samples.append(body)
    except OSError as exc:
        raise CalibrationLogError(f"{path}: {exc.strerror or exc}") from None
    except Exception as exc:  # mcap's own errors for a file that is not MCAP
        raise CalibrationLogError(f"{path}: not a readable MCAP log ({exc})") from None
    if meta is None:
        raise CalibrationLogError(f"{path}: not a calibration log: no {META} message (record one with "
                                  "`hil calibrate ring`)")
    _check_meta(meta, path)
    if not meta.get("ring"):
        raise CalibrationLogError(f"{path}: the log's robot ({meta.get('robot', '?')}) has no range ring: nothing "
                                  "to calibrate")
    if not samples:
        raise CalibrationLogError(f"{path}: no ring readings ({RING} is empty)")
    bad = next((k for k, s in enumerate(samples) if not isinstance(s, dict)), None)
    if bad is not None:
        raise CalibrationLogError(f"{path}: {RING} message #{bad + 1} must be a JSON object, not "
                                  f"{type(samples[bad]).__name__}")
    if any("yaw" not in s or s["yaw"] is None for s in samples):
        raise CalibrationLogError(f"{path}: ring readings without yaw (odometry or IMU): the fit needs the robot's "
                                  "heading of every reading")
    return CalibrationLog(meta, samples)


def _check_meta(meta: Any, path: str | Path) -> None:
    """The meta's shape, so that a wrong one is a line naming the field (not a traceback in the fit); the ring's
    numbers are judged by the ring's own model when the fit builds its rays."""
    where = f"{path}: {META}"
    if not isinstance(meta, dict):
        raise CalibrationLogError(f"{where} must be a JSON object, not {type(meta).__name__}")
    ring = meta.get("ring")
    if not ring:
        return
    if not isinstance(ring, dict):
        raise CalibrationLogError(f"{where}: ring must be a JSON object, not {type(ring).__name__}")
    for key, kinds in (("part", str), ("sensor", str), ("params", dict), ("ring_in_base", dict)):
        if not isinstance(ring.get(key), kinds):
            raise CalibrationLogError(f"{where}: ring.{key} must be {_KIND_NAMES[kinds]}, not {ring.get(key)!r:.60}")
    serial = ring.get("serial")
    if serial is not None and (isinstance(serial, bool) or not isinstance(serial, int) or not 0 <= serial < 2 ** 64):
        raise CalibrationLogError(f"{where}: ring.serial must be an integer of 64 bits, not {serial!r:.60}")
    placement = ring["ring_in_base"]
    for key, shape in (("rotation", (3, 3)), ("translation", (3,))):
        if not _finite_array(placement.get(key), shape):
            raise CalibrationLogError(f"{where}: ring.ring_in_base.{key} must be {' x '.join(map(str, shape))} "
                                      f"finite numbers, not {placement.get(key)!r:.80}")


_KIND_NAMES = {str: "a string", dict: "a JSON object"}


def _finite_array(value: Any, shape: tuple[int, ...]) -> bool:
    import numpy as np

    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return array.shape == shape and bool(np.isfinite(array).all())


def is_calibration_log(path: str | Path) -> bool:
    """Whether ``path`` is a calibration log (it has a /calibration/meta channel) rather than a trial log."""
    from mcap.reader import make_reader

    try:
        with open(path, "rb") as f:
            summary = make_reader(f).get_summary()
    except OSError as exc:
        raise CalibrationLogError(f"{path}: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - mcap's own errors for a file that is not MCAP
        raise CalibrationLogError(f"{path}: not a readable MCAP log ({exc})") from None
    if summary is None:
        return True  # no summary (a cut file): read_log says what it finds
    return any(c.topic == META for c in summary.channels.values())


def mixed_trial_sides(path: str | Path, start: tuple[float, float, float]) -> tuple[CalibrationLog, CalibrationLog]:
    """(real, virtual) of a mixed trial's log (``hil run --record`` with a ``crowd:`` profile): the ring's real
    and shadow readings (``/robot/sensors`` ring_real, ring_virtual) at the tick's odometry pose (``/robot/state``,
    in the map frame since start_pose), the ring's model and placement from ``/robot/model``. ``start`` is the
    rig's start in the map frame: the poses are made relative to it, as a calibration run records them."""
    import math

    from hil.trial.record.log import read_log as read_trial_log

    try:
        log = read_trial_log(path)
    except Exception as exc:  # noqa: BLE001 - the reader's own errors name what is wrong with the file
        raise CalibrationLogError(f"{path}: not a readable trial log ({exc})") from None
    models = log.messages.get("/robot/model") or []
    ring = models[0].data.get("ring") if models else None
    if not models:
        raise CalibrationLogError(f"{path}: neither a calibration log nor a trial log (no /calibration/meta, no "
                                  "/robot/model)")
    if not ring:
        raise CalibrationLogError(f"{path}: the trial's robot has no range ring: nothing to check")
    if "params" not in ring or "in_base" not in ring:
        raise CalibrationLogError(f"{path}: the log's /robot/model predates the ring's model and placement in it; "
                                  "record the trial again")
    states = log.messages.get("/robot/state") or []
    sensors = [m for m in log.messages.get("/robot/sensors") or [] if "ring_virtual" in m.data]
    if not sensors:
        raise CalibrationLogError(f"{path}: not a mixed trial: /robot/sensors has no ring_virtual (record it with a "
                                  "profile whose crowd: has walls: echo)")
    if not states or any("odometry" not in s.data for s in states):
        raise CalibrationLogError(f"{path}: ring readings without yaw: /robot/state has no odometry pose")
    meta = {"robot": "mixed trial", "ring": {"name": ring.get("name"), "part": ring.get("part"),
                                             "serial": ring.get("serial"), "sensor": ring.get("sensor", "ring"),
                                             "params": ring["params"], "ring_in_base": ring["in_base"]}}
    sx, sy, syaw = start
    c, s = math.cos(syaw), math.sin(syaw)
    real, virtual, k = [], [], 0
    for message in sensors:
        while k + 1 < len(states) and states[k + 1].t <= message.t + 1e-9:
            k += 1
        ox, oy, oyaw = states[k].data["odometry"]
        dx, dy = ox - sx, oy - sy
        pose = {"t": message.t, "x": c * dx + s * dy, "y": -s * dx + c * dy, "yaw": oyaw - syaw, "still": True}
        real.append({**pose, "ranges": message.data["ring_real"]})
        virtual.append({**pose, "ranges": message.data["ring_virtual"]})
    return CalibrationLog(meta, real), CalibrationLog(meta, virtual)


def mixed_sides(log: CalibrationLog, path: str | Path) -> tuple[CalibrationLog, CalibrationLog]:
    """(real, virtual) of a run on a mixed robot: the real ring's readings and the shadow (twin) ring's, recorded
    side by side at the same poses (``virtual`` in every sample: runtime/robot/overlay.py)."""
    if not all(isinstance(s.get("virtual"), list) for s in log.samples):
        raise CalibrationLogError(f"{path}: not a mixed run: its readings have no virtual (shadow ring) side; "
                                  "record it with a profile whose crowd: has walls: echo, or give the twin's log "
                                  "as a second argument")
    virtual = [{**s, "ranges": s["virtual"], "counters": {}} for s in log.samples]
    return log, CalibrationLog(log.meta, virtual)
