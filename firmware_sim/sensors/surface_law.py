"""A sensor's law on each surface: its calibrated law changed by the surface table (devices/surfaces.py), or the
law measured on that surface when the sensor carries one (its param ``surfaces``).

The law of surface s for a sensor calibrated to (angle50, width, noise a, b):
  measured on s (``surfaces: {s: {dropout_angle50_deg, dropout_width_deg, noise_sigma_m}}``): those numbers, any
  one left out taken from the rule below;
  otherwise: angle50 + angle50_offset_deg(s), width * width_scale(s), (a, b) * noise_scale(s);
and in both cases an echo at an incidence below specular_below_deg(s) is lost (saturated).
A body that names no surface is the table's default surface. The table is read only when a world names a surface
or the sensor carries measured ones, so a world without surfaces never depends on the config files.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hil.devices.surfaces import SurfaceTable, load_surfaces

from .params import ParamReader

MEASURED_KEYS = ("dropout_angle50_deg", "dropout_width_deg", "noise_sigma_m")


@dataclass(frozen=True)
class RayLaw:
    """The numbers one echo is drawn with."""

    angle50_deg: float
    width_deg: float
    noise_a_m: float
    noise_b: float
    specular_below_deg: float = 0.0


def measured_laws(r: ParamReader) -> dict[str, dict[str, Any]]:
    """The sensor's param ``surfaces`` checked for shape and numbers (names are checked against the table when it
    is read): ``{surface: {dropout_angle50_deg?, dropout_width_deg?, noise_sigma_m?}}``."""
    value = r.raw("surfaces", None)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                 for k, v in value.items()):
        raise r.error("surfaces", f"must map surface names to {{{', '.join(MEASURED_KEYS)}}}, not {value!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, law in value.items():
        unknown = set(law) - set(MEASURED_KEYS)
        if unknown:
            raise r.error("surfaces", f"surface {name!r}: unknown key {sorted(unknown)[0]!r}; known: "
                                      f"{', '.join(MEASURED_KEYS)}")
        sub = ParamReader(f"{r.sensor_name}.surfaces.{name}", law)
        entry: dict[str, Any] = {}
        if "dropout_angle50_deg" in law:
            entry["dropout_angle50_deg"] = sub.number("dropout_angle50_deg")
        if "dropout_width_deg" in law:
            entry["dropout_width_deg"] = sub.number("dropout_width_deg", positive=True)
        if "noise_sigma_m" in law:
            entry["noise_sigma_m"] = sub.number_list("noise_sigma_m", length=2, minimum=0.0)
        out[name] = entry
    return out


class SurfaceLaws:
    """One sensor's law per surface, computed once per surface name."""

    def __init__(self, sensor_name: str, angle50_deg: float, width_deg: float, noise_sigma_m: Sequence[float],
                 measured: Mapping[str, Mapping[str, Any]] | None = None, table: SurfaceTable | None = None):
        self.sensor_name = sensor_name
        self.base = RayLaw(angle50_deg, width_deg, float(noise_sigma_m[0]), float(noise_sigma_m[1]))
        self.measured = dict(measured or {})
        self._table = table
        self._laws: dict[str | None, RayLaw] = {}
        if self.measured:
            unknown = sorted(set(self.measured) - set(self.table.laws))
            if unknown:
                raise ValueError(f"sensor {sensor_name!r}: param 'surfaces' names unknown surface {unknown[0]!r}; "
                                 f"known surfaces: {', '.join(self.table.names)}")

    @property
    def table(self) -> SurfaceTable:
        if self._table is None:
            self._table = load_surfaces()
        return self._table

    def law(self, surface: str | None) -> RayLaw:
        """The law of ``surface`` (None: the default surface); ValueError naming an unknown one."""
        cached = self._laws.get(surface)
        if cached is not None:
            return cached
        try:
            factors = self.table.law(surface)
        except KeyError as exc:
            raise ValueError(f"sensor {self.sensor_name!r}: {exc.args[0]}") from None
        own = self.measured.get(factors.name, {})
        base = self.base
        angle50 = own.get("dropout_angle50_deg", base.angle50_deg + factors.angle50_offset_deg)
        width = own.get("dropout_width_deg", base.width_deg * factors.width_scale)
        a, b = own.get("noise_sigma_m", (base.noise_a_m * factors.noise_scale, base.noise_b * factors.noise_scale))
        law = self._laws[surface] = RayLaw(float(angle50), float(width), float(a), float(b),
                                           factors.specular_below_deg)
        return law

    def arrays(self, surfaces: Sequence[str | None]) -> tuple[np.ndarray, ...]:
        """Per item of ``surfaces``: (angle50, width, noise a, noise b, specular limit) as arrays."""
        laws = [self.law(s) for s in surfaces]
        return tuple(np.array([getattr(law, f) for law in laws], dtype=float)
                     for f in ("angle50_deg", "width_deg", "noise_a_m", "noise_b", "specular_below_deg"))
