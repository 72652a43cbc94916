"""Surfaces: what a range sensor's echo depends on besides the geometry (config/surfaces/*.yaml).

A real range finder fails by what it looks at: a matt resin face echoes to steep incidence, bare metal and glass
send the echo away at far shallower angles, and a mirror-like face seen head on can saturate the receiver. A
sensor's calibrated law (dropout angle of 50 %, dropout width, noise a + b * range) is its law on the surface it
was calibrated on; a surface table says, per surface, how the law differs from that one:

    schema: 1
    default: plaster                  # the surface of everything that names none (only one file may say it)
    surfaces:
      plaster: {}                     # the calibrated law itself
      metal: {angle50_offset_deg: -10, width_scale: 0.5, specular_below_deg: 8}

Per surface (every field optional; the defaults leave the calibrated law unchanged):
  ``angle50_offset_deg``  added to the sensor's dropout_angle50_deg;
  ``width_scale``         multiplies dropout_width_deg (> 0);
  ``noise_scale``         multiplies both noise coefficients a and b (>= 0);
  ``specular_below_deg``  an echo at an incidence below this saturates the receiver and is lost (0: never).

A sensor whose descriptor (or calibration file) carries a law measured on a surface (its param ``surfaces:
{name: {dropout_angle50_deg, dropout_width_deg, noise_sigma_m}}``) uses those numbers for that surface instead of
the table's factors; the table's ``specular_below_deg`` still applies.

The shipped table is ``default.yaml`` among the built-in config; every ``*.yaml`` under ``config/surfaces/`` on
the config search path (devices.config_path) is read, the built-in ones first, then ``$HIL_PATH``'s, then the
current directory's, each folder's files in name order, so a user's file adds surfaces or replaces a shipped
one by name. Every error names file:line. Pure: no I/O but reading those files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import config_path
from .yaml_source import ConfigError, SourceDict, check_keys, load_yaml_mapping, require

SCHEMA = 1
FILE_KEYS = ("schema", "default", "surfaces")
LAW_KEYS = ("angle50_offset_deg", "width_scale", "noise_scale", "specular_below_deg")
MAX_NAME_CHARS = 40


@dataclass(frozen=True)
class SurfaceLaw:
    """How a sensor's law on this surface differs from its calibrated one (module docstring)."""

    name: str
    angle50_offset_deg: float = 0.0
    width_scale: float = 1.0
    noise_scale: float = 1.0
    specular_below_deg: float = 0.0
    source: str = ""
    line: int = 0

    @property
    def is_identity(self) -> bool:
        """True when this surface leaves the calibrated law exactly as it is."""
        return (self.angle50_offset_deg == 0.0 and self.width_scale == 1.0 and self.noise_scale == 1.0
                and self.specular_below_deg == 0.0)


@dataclass(frozen=True)
class SurfaceTable:
    """Every known surface and the one of things that name none."""

    default: str
    laws: dict[str, SurfaceLaw]
    sources: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.laws))

    def law(self, name: str | None) -> SurfaceLaw:
        """The law of ``name`` (None: the default surface); KeyError listing the known ones."""
        key = self.default if name is None else name
        if key not in self.laws:
            raise KeyError(f"unknown surface {key!r}; known: {', '.join(self.names)}")
        return self.laws[key]

    def check(self, mapping: SourceDict, key: str, what: str) -> str:
        """``mapping[key]`` as a known surface name, else a ConfigError at its file:line naming the known ones."""
        value = mapping[key]
        if not isinstance(value, str) or value not in self.laws:
            raise mapping.error(key, f"{what}: unknown surface {value!r}; known surfaces: {', '.join(self.names)} "
                                     f"(config/surfaces/*.yaml)")
        return value


def surface_files() -> list[Path]:
    """The surface tables in reading order: built-in first, the current directory's last (it wins)."""
    files: list[Path] = []
    for folder in reversed(config_path.search_dirs("surfaces")):
        if folder.is_dir():
            files.extend(sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()))
    return files


_CACHE: dict[tuple, SurfaceTable] = {}


def load_surfaces(files: list[Path] | None = None) -> SurfaceTable:
    """The surface table from ``files`` (default: :func:`surface_files`); cached by the files' paths and times."""
    files = surface_files() if files is None else list(files)
    key = tuple((str(f), _mtime(f)) for f in files)
    table = _CACHE.get(key)
    if table is None:
        table = _CACHE[key] = _load(files)
    return table


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _load(files: list[Path]) -> SurfaceTable:
    laws: dict[str, SurfaceLaw] = {}
    default: tuple[str, str, int] | None = None
    for path in files:
        doc = load_yaml_mapping(path, "surface table", "surfaces")
        source = str(path)
        check_keys(doc, FILE_KEYS, "surface table")
        if doc.get("schema") != SCHEMA:
            raise ConfigError(source, doc.line_of("schema") if "schema" in doc else doc.line,
                              f"surface table schema must be {SCHEMA}, not {doc.get('schema')!r}")
        table = require(doc, "surfaces", dict, "surface table")
        for name, entry in table.items():
            laws[name] = _law(table, name, entry, source)
        if "default" in doc:
            if default is not None:
                raise doc.error("default", f"surface table: the default surface is already {default[0]!r} "
                                           f"({default[1]}:{default[2]}); only one table may name it")
            name = require(doc, "default", str, "surface table")
            default = (name, source, doc.line_of("default"))
    if default is None:
        where = ", ".join(str(f) for f in files) or "no config/surfaces/*.yaml found"
        raise ConfigError(where, None, "no surface table names the default surface ('default: NAME')")
    if default[0] not in laws:
        raise ConfigError(default[1], default[2], f"surface table: the default surface {default[0]!r} is not "
                                                  f"defined; known surfaces: {', '.join(sorted(laws))}")
    return SurfaceTable(default[0], laws, tuple(str(f) for f in files))


def _law(table: SourceDict, name: Any, entry: Any, source: str) -> SurfaceLaw:
    what = f"surface {name!r}"
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or not name.replace("_", "").isalnum():
        raise table.error(name, f"surface names are words of letters, digits and _ (up to {MAX_NAME_CHARS}), "
                                f"not {name!r}")
    if entry is None:
        entry = SourceDict()
        entry.source, entry.line, entry.key_lines = source, table.line_of(name), {}
    if not isinstance(entry, SourceDict):
        raise table.error(name, f"{what} must be a mapping of {', '.join(LAW_KEYS)} (or {{}})")
    check_keys(entry, LAW_KEYS, what, "field")
    values: dict[str, float] = {}
    for key in entry:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise entry.error(key, f"{what}: {key} must be a finite number, not {value!r}")
        low, high = _BOUNDS[key]
        if not low <= value <= high or (key == "width_scale" and value == 0):
            raise entry.error(key, f"{what}: {key} must lie within {low:g}..{high:g}"
                                   f"{' and be > 0' if key == 'width_scale' else ''}, not {value!r}")
        values[key] = float(value)
    return SurfaceLaw(name, source=source, line=table.line_of(name), **values)


_BOUNDS = {"angle50_offset_deg": (-90.0, 90.0), "width_scale": (0.0, 100.0), "noise_scale": (0.0, 100.0),
           "specular_below_deg": (0.0, 90.0)}
