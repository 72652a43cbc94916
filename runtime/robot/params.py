"""Controller parameters that may be changed while the controller runs (Foxglove's Parameters panel, live).

``robot.params`` is the run's parameters, read-only to the controller (a trial's ``params:``). A controller that
wants some of them tunable while it runs says so, once, with their defaults::

    robot.declare_changeable(cruise_m_s=0.6, avoid_m=0.5)   # in the controller, before its loop
    ...
    speed = robot.params["cruise_m_s"]                       # read every tick: a change shows up here

Only declared names may change, and only to a value of the declared type (the default's type, or the trial's
value's when it gave one: bool, int, float, str; an int is accepted for a float). A change is checked whole and
applied whole (:func:`checked_changes`), never half; it is applied by whoever steers the trial between two bus
cycles (trial/foxglove_live), so the controller sees a consistent set from one tick to the next, and it is
recorded in the log as a parameter event.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

KINDS = (bool, int, float, str)


class ParamError(ValueError):
    """A parameter change refused: which parameter, what was given, what it takes."""


def declared_kinds(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, type]:
    """The type each declared name takes: of the run's value when it has one, else of the default."""
    kinds = {}
    for name, default in defaults.items():
        value = params.get(name, default)
        kind = type(value)
        if kind not in KINDS:
            raise ParamError(f"parameter {name!r}: only bool, int, float or str may be changeable, not "
                             f"{kind.__name__} ({value!r})")
        kinds[name] = kind
    return kinds


def checked_changes(kinds: Mapping[str, type], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as the values to apply, each converted to its declared type; ParamError for the first that is
    not declared changeable or has the wrong type (nothing applied)."""
    out = {}
    for name, value in changes.items():
        kind = kinds.get(name)
        if kind is None:
            changeable = ", ".join(sorted(kinds)) or "none"
            raise ParamError(f"parameter {name!r} is not changeable while the controller runs (changeable: "
                             f"{changeable})")
        out[name] = _as_kind(name, kind, value)
    return out


def _as_kind(name: str, kind: type, value: Any) -> Any:
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ParamError(f"parameter {name!r}: {value!r} is not a finite number")
        return float(value)
    if type(value) is kind:
        return value
    raise ParamError(f"parameter {name!r} takes a {kind.__name__}, not {type(value).__name__} ({value!r})")
