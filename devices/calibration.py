"""A calibration file (CAL.yaml): a real part's measured sensor numbers, keyed by the part's identity.

The sensor-simulation reference: a virtual sensor must return what the real one would measure, and its thresholds come
from scans of the real sensor. ``hil calibrate`` fits them (trial/calibrate) and writes this file; a profile's
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
        surfaces:                 # optional: the law measured on other surfaces (devices/surfaces.py)
          glass:
            params: {dropout_angle50_deg: 31.0, dropout_width_deg: 3.0, noise_sigma_m: [0.01, 0.02]}
            fit: {...}

A depth camera's entry (``hil calibrate camera``) holds its numbers where the camera's params keep them, under
``depth`` (:data:`CAMERA_DEPTH_PARAMS`), and its surfaces' laws in the keys a camera's ``depth.surfaces`` takes
(:data:`CAMERA_SURFACE_PARAMS`):

      - part: camera
        sensor: camera
        params: {depth: {dropout_angle50_deg: 70.8, dropout_width_deg: 4.1, noise_z2: 0.0016}}
        fit: {...}
        surfaces: {glass: {params: {dropout_angle50_deg: 50.2, dropout_width_deg: 2.1, noise_z2: 0.0016}}}

An entry is a camera's when its params hold ``depth`` or a surface's hold ``noise_z2``; mixing the ring's keys in is
refused at file:line. :func:`apply` merges ``depth`` into the camera's depth params (the range limits, the
projector stay the part's) and the surfaces into its ``depth.surfaces``.

``params`` is the law on the default surface (the one every file before surfaces meant, and what a body that
names no surface is); each ``surfaces`` entry goes into the sensor's param ``surfaces`` (its law measured on that
surface, firmware_sim/sensors/surface_law.py), only dropout and noise (:data:`SURFACE_PARAMS`). An entry needs
``params``, ``surfaces`` or both; a surface the surface table does not know is refused at file:line.

Only the params a calibration can measure may be set (:data:`CALIBRATED_PARAMS`), each a finite number within
:data:`PARAM_BOUNDS`; anything else is refused at file:line, so a typo cannot silently leave the catalog's number in
place and a broken fit cannot blind the twin. The file must be a mapping of this shape, else one line says where. Pure: no I/O but reading the file.
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
# what a measured ring or depth camera can have (inclusive): a number outside these is a broken fit or a typo, and
# would blind the twin (a noise of 1e308 m, a blind zone of 1e308 m) rather than calibrate it
PARAM_BOUNDS = {"dropout_angle50_deg": (0.0, 180.0), "dropout_width_deg": (0.001, 90.0),
                "noise_sigma_m": (0.0, 1.0), "min_range_m": (0.0, 100.0), "max_range_m": (0.001, 100.0)}
ENTRY_KEYS = ("part", "serial", "sensor", "params", "fit", "surfaces")
SURFACE_PARAMS = ("dropout_angle50_deg", "dropout_width_deg", "noise_sigma_m")
CAMERA_DEPTH_PARAMS = ("dropout_angle50_deg", "dropout_width_deg", "noise_z2", "min_range_m", "max_range_m")
CAMERA_SURFACE_PARAMS = ("dropout_angle50_deg", "dropout_width_deg", "noise_z2")
CAMERA_BOUNDS = {"noise_z2": (0.0, 1.0)}  # sigma = noise_z2 z^2: 1 would be a metre of noise at 1 m


@dataclass(frozen=True)
class SensorCalibration:
    """New params for one sensor of one part (``serial`` None: every part of that model)."""

    part: str
    sensor: str
    params: dict[str, Any]
    serial: int | None = None
    fit: dict[str, Any] = field(default_factory=dict)
    line: int | None = None
    surfaces: dict[str, dict[str, Any]] = field(default_factory=dict)  # surface -> its params
    camera: bool = False  # a depth camera's entry: params {depth: {...}}, surfaces in depth.surfaces

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
        if entry.camera:  # the camera's depth params: the entry's replace theirs, range limits and projector stay
            depth = {**dict(sensors[k].params.get("depth") or {}), **entry.params.get("depth", {})}
            if entry.surfaces:
                depth["surfaces"] = {**dict(depth.get("surfaces") or {}), **entry.surfaces}
            params = {**sensors[k].params, "depth": depth}
        else:
            params = {**sensors[k].params, **entry.params}
        if entry.surfaces and not entry.camera:  # every surface kept: the part's own, replaced by name
            params["surfaces"] = {**dict(sensors[k].params.get("surfaces") or {}), **entry.surfaces}
        sensors[k] = replace(sensors[k], params=params)
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
    surfaces = _surfaces(entry, what) if "surfaces" in entry else {}
    if "params" not in entry and surfaces:
        params = SourceDict()
        params.source, params.line, params.key_lines = entry.source, entry.line, {}
    else:
        params = require(entry, "params", dict, what)
    serial = entry.get("serial")
    if serial is not None and (isinstance(serial, bool) or not isinstance(serial, int) or not 0 <= serial < 2 ** 64):
        raise entry.error("serial", f"{what}: serial must be an integer of 64 bits, not {serial!r}")
    if not isinstance(params, SourceDict):
        raise entry.error("params", f"{what}: params must be a mapping")
    camera = "depth" in params or any("noise_z2" in one for one in surfaces.values())
    if camera:
        _camera_params(entry, params, surfaces, what)
    else:
        check_keys(params, CALIBRATED_PARAMS, f"{what} params", "param")
        _check_values(params, what)
    fit = entry.get("fit") or {}
    return SensorCalibration(part, sensor, _plain(params), serial, _plain(fit), entry.line, surfaces, camera)


def _check_values(params: SourceDict, what: str) -> None:
    """Each value in its range, then the set as a whole (a max range above the min); the error names the key's line."""
    for name, value in params.items():
        why = param_error(name, value)
        if why is not None:
            raise params.error(name, f"{what}: {why}")
    why = params_error(params)
    if why is not None:
        raise params.error("max_range_m", f"{what}: {why}")


def _camera_params(entry: SourceDict, params: SourceDict, surfaces: dict[str, dict[str, Any]], what: str) -> None:
    """A depth camera's entry: params only ``depth`` (CAMERA_DEPTH_PARAMS), surfaces only CAMERA_SURFACE_PARAMS."""
    check_keys(params, ("depth",), f"{what} params (a depth camera's)", "param")
    depth = params.get("depth")
    if depth is not None:
        if not isinstance(depth, SourceDict):
            raise params.error("depth", f"{what}: depth must be a mapping of {', '.join(CAMERA_DEPTH_PARAMS)}")
        check_keys(depth, CAMERA_DEPTH_PARAMS, f"{what} depth params", "param")
        _check_values(depth, f"{what} depth")
    table = entry.get("surfaces")
    for name, one in surfaces.items():
        wrong = [key for key in one if key not in CAMERA_SURFACE_PARAMS]
        if wrong:
            raise table.error(name, f"{what} surface {name}: {wrong[0]} is a range ring's param; a depth camera's "
                                    f"surface takes {', '.join(CAMERA_SURFACE_PARAMS)}")


def _surfaces(entry: SourceDict, what: str) -> dict[str, dict[str, Any]]:
    """``surfaces: {name: {params, fit?}}``: known surface names, each with dropout and noise params only."""
    from .surfaces import load_surfaces

    table = require(entry, "surfaces", dict, what)
    known = load_surfaces()
    out: dict[str, dict[str, Any]] = {}
    for name in table:
        if name not in known.laws:
            raise table.error(name, f"{what}: unknown surface {name!r}; known surfaces: {', '.join(known.names)} "
                                    f"(config/surfaces/*.yaml)")
        one = table[name]
        where = f"{what} surface {name}"
        if not isinstance(one, SourceDict):
            raise table.error(name, f"{where} must be a mapping {{params, fit}}")
        check_keys(one, ("params", "fit"), where)
        params = require(one, "params", dict, where)
        check_keys(params, tuple(dict.fromkeys(SURFACE_PARAMS + CAMERA_SURFACE_PARAMS)), f"{where} params",
                   "param")
        for key, value in params.items():
            why = param_error(key, value)
            if why is not None:
                raise params.error(key, f"{where}: {why}")
        out[str(name)] = _plain(params)
    return out


def param_error(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the calibrated param ``name`` (None: it can). The one check of a CAL.yaml's
    numbers: the loader refuses with it at file:line, and ``hil calibrate fit`` never writes what it refuses."""
    bounds = {**PARAM_BOUNDS, **CAMERA_BOUNDS}
    if name not in bounds:
        return f"unknown param {name!r}; known: {', '.join(CALIBRATED_PARAMS)}"
    low, high = bounds[name]
    if name == "noise_sigma_m":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return f"noise_sigma_m must be [a, b] (sigma = a + b * range), not {value!r}"
        values = value
    else:
        values = [value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high
               for v in values):
        return f"{name} must be {'two ' if len(values) == 2 else ''}finite numbers within {low:g}..{high:g}, " \
               f"not {value!r}"
    return None


def params_error(params: dict[str, Any]) -> str | None:
    """Why the params together cannot be (each checked by :func:`param_error` first), else None."""
    low, high = params.get("min_range_m"), params.get("max_range_m")
    if low is not None and high is not None and not low < high:
        return f"max_range_m ({high}) must exceed min_range_m ({low})"
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
