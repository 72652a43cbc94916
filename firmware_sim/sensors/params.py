"""Reading a descriptor Sensor's params with errors that name the sensor and the param.

A part's sensor model is only as good as the numbers its descriptor carries, so a missing or ill-typed param is
a catalog bug to report at construction, never a default to guess.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_MISSING = object()


class ParamReader:
    """Typed access to one sensor's params; every error is a ValueError naming the sensor and the param."""

    def __init__(self, sensor_name: str, params: Mapping[str, Any]):
        if not isinstance(params, Mapping):
            # ValueError, like every other bad param: callers catch one exception type for a bad descriptor
            kind = type(params).__name__
            raise ValueError(f"sensor {sensor_name!r}: params must be a mapping, not {kind}")  # noqa: TRY004
        self.sensor_name = sensor_name
        self.params = params

    def error(self, name: str, message: str) -> ValueError:
        return ValueError(f"sensor {self.sensor_name!r}: param {name!r} {message}")

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.params:
            return self.params[name]
        if default is _MISSING:
            raise self.error(name, "is missing")
        return default

    def number(self, name: str, *, minimum: float | None = None, positive: bool = False,
               default: Any = _MISSING) -> float:
        value = self.raw(name, default)
        return self.check_number(name, value, minimum=minimum, positive=positive)

    def check_number(self, name: str, value: Any, *, minimum: float | None = None, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be a number, not {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise self.error(name, f"must be finite, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(name, f"must be >= {minimum}, not {value!r}")
        if positive and value <= 0:
            raise self.error(name, f"must be > 0, not {value!r}")
        return value

    def integer(self, name: str, *, minimum: int | None = None) -> int:
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f"must be an integer, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(name, f"must be >= {minimum}, not {value!r}")
        return value

    def string(self, name: str, choices: tuple[str, ...] | None = None) -> str:
        value = self.raw(name)
        if not isinstance(value, str):
            raise self.error(name, f"must be a string, not {value!r}")
        if choices is not None and value not in choices:
            raise self.error(name, f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    def number_list(self, name: str, *, length: int | None = None, minimum: float | None = None) -> tuple[float, ...]:
        value = self.raw(name)
        if not isinstance(value, (list, tuple)) or not value:
            raise self.error(name, f"must be a non-empty list of numbers, not {value!r}")
        if length is not None and len(value) != length:
            raise self.error(name, f"must have {length} items, not {len(value)}")
        return tuple(self.check_number(name, v, minimum=minimum) for v in value)

    def string_list(self, name: str, *, length: int | None = None) -> tuple[str, ...] | None:
        """An optional list of names (None when absent)."""
        value = self.raw(name, None)
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.error(name, f"must be a list of strings, not {value!r}")
        if length is not None and len(value) != length:
            raise self.error(name, f"must have {length} items (one per sensor), not {len(value)}")
        return tuple(value)
