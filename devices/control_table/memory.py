"""The mutable control table of one part, answering reads and writes exactly as the protocol says.

Every write is validated as a whole before any byte changes, so a rejected write leaves nothing half-applied.
The error raised is the status error the device puts on the wire (Access, Data Range, Data Length, Data Limit).
"""
from __future__ import annotations

from typing import Callable

from ..protocol.errors import AccessError, DataLengthError, DataRangeError, StatusError
from .registers import Access, Area, ControlTable, Register

# A part's own rules on top of the static ranges (e.g. goal position within the position limits in the current
# operating mode). It raises DataLimitError (or another StatusError) to refuse, returns None to accept.
WriteRule = Callable[["RegisterMemory", Register, int], None]

TORQUE_ENABLE = "torque_enable"


class RegisterMemory:
    """Bytes of one part's control table plus the write rules of its model."""

    def __init__(self, table: ControlTable, rules: dict[str, WriteRule] | None = None):
        self.table = table
        self.rules = dict(rules or {})
        self.data = table.defaults()
        # name -> (address, end, signed): get/set are the firmware's hot path (every access publishes state)
        self._spans = {reg.name: (reg.address, reg.end, reg.signed) for reg in table.registers}

    @property
    def _device_id(self) -> int:
        return self.get("id") if "id" in self.table else 0

    # device-side access: no rules, used by the firmware to publish measurements
    def get(self, name: str) -> int:
        span = self._spans.get(name)
        if span is None:
            self.table[name]  # raises the table's KeyError, with close names
        address, end, signed = span
        return int.from_bytes(self.data[address:end], "little", signed=signed)

    def set(self, name: str, value: int) -> None:
        span = self._spans.get(name)
        if span is None:
            self.table[name]
        address, end, signed = span
        self.data[address:end] = int(value).to_bytes(end - address, "little", signed=signed)

    # host-side access: what a Read or Write instruction may do
    def read(self, address: int, length: int) -> bytes:
        if length == 0 or address + length > self.table.size:
            raise AccessError(self._device_id, AccessError.code,
                              f"read of {length} bytes at {address} leaves the {self.table.size}-byte table")
        return bytes(self.data[address:address + length])

    def check_write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """Validate a write of ``data`` at ``address``; return the (register, value) pairs it would set."""
        end = address + len(data)
        if not data or end > self.table.size:
            raise AccessError(self._device_id, AccessError.code,
                              f"write of {len(data)} bytes at {address} leaves the {self.table.size}-byte table")
        owner_of = self.table.owner_of
        changes: list[tuple[Register, int]] = []
        a = address
        while a < end:
            reg = owner_of[a]
            if reg is None:
                raise AccessError(self._device_id, AccessError.code, f"address {a} is not a register")
            if reg.address != a or reg.end > end:
                raise DataLengthError(self._device_id, DataLengthError.code,
                                      f"write at {address}+{len(data)} covers only part of {reg.name}")
            self._check_writable(reg)
            value = reg.decode(data[a - address:reg.end - address])
            lo, hi = reg.valid_range
            if not lo <= value <= hi:
                raise DataRangeError(self._device_id, DataRangeError.code,
                                     f"{reg.name}={value} outside {lo}..{hi}")
            changes.append((reg, value))
            a = reg.end
        for reg, value in changes:
            rule = self.rules.get(reg.name)
            if rule is not None:
                rule(self, reg, value)
        return changes

    def write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """Validate then apply a host write; raises the StatusError the device would answer."""
        changes = self.check_write(address, data)
        self.data[address:address + len(data)] = data
        return changes

    def _check_writable(self, reg: Register) -> None:
        if reg.access is not Access.RW:
            raise AccessError(self._device_id, AccessError.code, f"{reg.name} (address {reg.address}) is read-only")
        if reg.area is Area.EEPROM and TORQUE_ENABLE in self.table and self.get(TORQUE_ENABLE):
            raise AccessError(self._device_id, AccessError.code,
                              f"{reg.name} is in EEPROM, locked while torque is enabled")

    def reset(self, keep: tuple[str, ...] = (), area: Area | None = None) -> None:
        """Back to defaults (all of it, or one area), keeping the named registers' current values."""
        kept = {name: self.get(name) for name in keep if name in self.table}
        fresh = self.table.defaults()
        for reg in self.table.registers:
            if area is None or reg.area is area:
                self.data[reg.address:reg.end] = fresh[reg.address:reg.end]
        for name, value in kept.items():
            self.set(name, value)


__all__ = ["RegisterMemory", "WriteRule", "StatusError"]
