"""Register drivers: raw register values <-> SI, as each part's descriptor declares (``si = raw*scale + offset``).

This is the layer where units become SI; nothing above it sees raw counts. A value that the register cannot
hold is refused with the part ID, the register and the range, never clamped silently.
"""
from __future__ import annotations

from dataclasses import dataclass

from hil.devices.descriptor import RegisterSpec


class ConversionError(ValueError):
    pass


@dataclass(frozen=True)
class RegisterDriver:
    part_id: int
    spec: RegisterSpec

    @property
    def raw_range(self) -> tuple[int, int]:
        bits = 8 * self.spec.size
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.spec.signed else (0, (1 << bits) - 1)
        return (lo if self.spec.minimum is None else self.spec.minimum,
                hi if self.spec.maximum is None else self.spec.maximum)

    def to_si(self, raw: int) -> float:
        return raw * self.spec.scale + self.spec.offset

    def from_si(self, value: float) -> int:
        raw = round((value - self.spec.offset) / self.spec.scale)
        lo, hi = self.raw_range
        if not lo <= raw <= hi:
            si_lo, si_hi = sorted((self.to_si(lo), self.to_si(hi)))
            raise ConversionError(f"id {self.part_id} register {self.spec.name}: {value:g} {self.spec.unit} is outside "
                                  f"{si_lo:g}..{si_hi:g} {self.spec.unit}")
        return raw

    def encode(self, value: float) -> bytes:
        return self.from_si(value).to_bytes(self.spec.size, "little", signed=self.spec.signed)

    def decode(self, data: bytes) -> float:
        return self.to_si(int.from_bytes(data, "little", signed=self.spec.signed))
