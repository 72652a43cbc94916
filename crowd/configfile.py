"""Small helpers shared by the crowd's config readers, so every bad value is reported as file:line: what.

The crowd's files live under ``config/<kind>/`` on the config search path and can be named (``weekday``) or given as a path; values are
checked here once, with the line they came from, instead of failing later inside numpy with no location.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hil.devices import config_path
from hil.devices.yaml_source import ConfigError, SourceDict, SourceList, load_yaml_mapping

WHAT = {"crowd": "rates file", "maps": "map", "scenarios": "scenario"}
SIZE_KIND = {"crowd": "rates", "maps": "map", "scenarios": "scenario"}  # devices.yaml_source.SIZE_LIMITS


def resolve(name_or_path: str | Path, kind: str, suffix: str = ".yaml") -> Path:
    """A name on the config search path (``weekday``: ./config/<kind>, $HIL_PATH, hil's own files;
    devices.config_path) or a path to a file; raises ConfigError listing the known names otherwise."""
    return config_path.resolve(name_or_path, kind, WHAT.get(kind, kind),
                               suffixes=(suffix,))


def load(name_or_path: str | Path, kind: str) -> SourceDict:
    """Load a YAML mapping with line numbers; a file that is not a mapping is an error at its first line."""
    return load_yaml_mapping(resolve(name_or_path, kind), WHAT.get(kind, kind), SIZE_KIND.get(kind, "config"))


def mapping(parent: SourceDict, key: str, what: str, required: bool = True) -> SourceDict:
    """``parent[key]`` as a mapping (an empty one when optional and absent)."""
    if key not in parent:
        if required:
            raise parent.error(None, f"{what}: missing field {key!r}")
        out = SourceDict()
        out.source, out.line, out.key_lines = parent.source, parent.line, {}
        return out
    value = parent[key]
    if not isinstance(value, SourceDict):
        raise parent.error(key, f"{what}: {key} must be a mapping, not {type(value).__name__}")
    return value


def number(parent: SourceDict | SourceList, key: Any, what: str, *, low: float | None = None,
           high: float | None = None, default: float | None = None) -> float:
    """A finite real number at ``parent[key]`` within [low, high]; ``default`` when absent (if given)."""
    if isinstance(parent, SourceDict) and key not in parent:
        if default is None:
            raise parent.error(None, f"{what}: missing field {key!r}")
        return float(default)
    value = parent[key]
    line = parent.line_of(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(parent.source, line, f"{what}: {key} must be a number, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"[{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        raise ConfigError(parent.source, line, f"{what}: {key} = {value} is outside {bounds}")
    return float(value)


def probabilities(table: SourceDict, what: str, *, total: float | None = None) -> dict[Any, float]:
    """A mapping name -> probability; each in [0, 1]; they sum to ``total`` (or at most 1 when ``total`` is None)."""
    out = {key: number(table, key, what, low=0.0, high=1.0) for key in table}
    s = sum(out.values())
    if total is not None and abs(s - total) > 1e-6:
        raise table.error(None, f"{what}: the probabilities sum to {s:g}, not {total:g}")
    if total is None and s > 1.0 + 1e-6:
        raise table.error(None, f"{what}: the probabilities sum to {s:g}, more than 1")
    return out
