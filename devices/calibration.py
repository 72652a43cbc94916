"""A calibration file (CAL.yaml): a real part's measured sensor numbers, keyed by the part's identity.

Reference 003: a virtual sensor must return what the real one would measure, and its thresholds come from scans
of the real sensor. ``hil calibrate`` fits them (trial/calibrate) and writes this file; a profile's
``calibration:`` names it, and the virtual twin of that robot builds each matching part with these numbers in
place of the catalog's (firmware_sim.assembly.calibrated), so the twin's descriptor carries them as a part that
stores its own calibration would.

    schema: 1
    parts:
      - part: range_ring          # the descriptor's name (the part's model)
        serial: 1234567           # the part's 64-bit serial (identity block); omitted: every part of that model
        sensor: ring              # the descriptor's sensor whose params are replaced
        params: {dropout_angle50_deg: 52.0, dropout_width_deg: 4.0, noise_sigma_m: [0.01, 0.02]}
        fit: {...}                # how the numbers were found (intervals, points); informative, not applied

Only the params a calibration can measure may be set (:data:`CALIBRATED_PARAMS`); anything else is refused at
file:line, so a typo cannot silently leave the catalog's number in place. Pure: no I/O but reading the file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .descriptor import PartDescriptor
from .yaml_source import ConfigError, SourceDict, check_keys, load_yaml_mapping, require

SCHEMA = 1
CALIBRATED_PARAMS = ("dropout_angle50_deg", "dropout_width_deg", "noise_sigma_m", "min_range_m", "max_range_m")
ENTRY_KEYS = ("part", "serial", "sensor", "params", "fit")


@dataclass(frozen=True)
class SensorCalibration:
    """New params for one sensor of one part (``serial`` None: every part of that model)."""

    part: str
    sensor: str
    params: dict[str, Any]
    serial: int | None = None
    fit: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    def matches(self, desc: PartDescriptor, serial: int | None) -> bool:
        return desc.name == self.part and (self.serial is None or self.serial == serial)


@dataclass(frozen=True)
class Calibration:
    source: str
    entries: tuple[SensorCalibration, ...]

    def for_part(self, desc: PartDescriptor, serial: int | None) -> tuple[SensorCalibration, ...]:
        return tuple(e for e in self.entries if e.matches(desc, serial))


def apply(desc: PartDescriptor, entries: tuple[SensorCalibration, ...]) -> PartDescriptor:
    """The descriptor with each entry's params put into its sensor (a copy; the catalog's stays as it was)."""
    if not entries:
        return desc
    sensors = list(desc.sensors)
    for entry in entries:
        k = next((i for i, s in enumerate(sensors) if s.name == entry.sensor), None)
        if k is None:
            raise ConfigError("calibration", entry.line, f"part {desc.name} has no sensor {entry.sensor!r} "
                                                         f"(it has {', '.join(s.name for s in desc.sensors) or 'none'})")
        sensors[k] = replace(sensors[k], params={**sensors[k].params, **entry.params})
    return replace(desc, sensors=tuple(sensors))


def load_calibration(path: str | Path) -> Calibration:
    """Read and check a CAL.yaml; every error names file:line."""
    doc = load_yaml_mapping(path, "calibration", "calibration")
    source = str(path)
    check_keys(doc, ("schema", "parts", "robot", "rig", "log"), "calibration")
    if doc.get("schema") != SCHEMA:
        raise ConfigError(source, doc.line_of("schema") if "schema" in doc else doc.line,
                          f"calibration schema must be {SCHEMA}, not {doc.get('schema')!r}")
    entries = require(doc, "parts", list, "calibration")
    return Calibration(source, tuple(_entry(e, k, source, doc) for k, e in enumerate(entries)))


def _entry(entry: Any, index: int, source: str, doc: SourceDict) -> SensorCalibration:
    what = f"calibration part #{index + 1}"
    if not isinstance(entry, SourceDict):
        raise ConfigError(source, doc.line_of("parts"), f"{what} must be a mapping {{part, sensor, params}}")
    check_keys(entry, ENTRY_KEYS, what)
    part, sensor = require(entry, "part", str, what), require(entry, "sensor", str, what)
    params = require(entry, "params", dict, what)
    serial = entry.get("serial")
    if serial is not None and (isinstance(serial, bool) or not isinstance(serial, int) or not 0 <= serial < 2 ** 64):
        raise entry.error("serial", f"{what}: serial must be an integer of 64 bits, not {serial!r}")
    check_keys(params, CALIBRATED_PARAMS, f"{what} params", "param")
    for name, value in params.items():
        values = value if name == "noise_sigma_m" else [value]
        if name == "noise_sigma_m" and (not isinstance(value, list) or len(value) != 2):
            raise params.error(name, f"{what}: noise_sigma_m must be [a, b] (sigma = a + b * range), not {value!r}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                   for v in values):
            raise params.error(name, f"{what}: {name} must be finite numbers >= 0, not {value!r}")
    fit = entry.get("fit") or {}
    return SensorCalibration(part, sensor, _plain(params), serial, _plain(fit), entry.line)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
