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
    if not meta.get("ring"):
        raise CalibrationLogError(f"{path}: the log's robot ({meta.get('robot', '?')}) has no range ring: nothing "
                                  "to calibrate")
    if not samples:
        raise CalibrationLogError(f"{path}: no ring readings ({RING} is empty)")
    if any("yaw" not in s or s["yaw"] is None for s in samples):
        raise CalibrationLogError(f"{path}: ring readings without yaw (odometry or IMU): the fit needs the robot's "
                                  "heading of every reading")
    return CalibrationLog(meta, samples)


def mixed_sides(log: CalibrationLog, path: str | Path) -> tuple[CalibrationLog, CalibrationLog]:
    """(real, virtual) of a run on a mixed robot: the real ring's readings and the shadow (twin) ring's, recorded
    side by side at the same poses (``virtual`` in every sample: runtime/robot/overlay.py)."""
    if not all(isinstance(s.get("virtual"), list) for s in log.samples):
        raise CalibrationLogError(f"{path}: not a mixed run: its readings have no virtual (shadow ring) side; "
                                  "record it with a profile whose crowd: has walls: echo, or give the twin's log "
                                  "as a second argument")
    virtual = [{**s, "ranges": s["virtual"], "counters": {}} for s in log.samples]
    return log, CalibrationLog(log.meta, virtual)
