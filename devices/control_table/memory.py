"""The mutable control table of one part, answering reads and writes exactly as the protocol says.

Every write is validated as a whole before any byte changes, so a rejected write leaves nothing half-applied.
The error raised is the status error the device puts on the wire (Access, Data Range, Data Length, Data Limit).

Indirect addressing (X series): Indirect Data N reads and writes the byte its Indirect Address N points at, so a
host gathers scattered registers into one span (ROBOTIS's ros2_control interface maps its state items at 578..
and reads them with one Fast Sync Read at 634). Every instruction reaches the table through :meth:`read` and
:meth:`check_write`/:meth:`commit`, so every instruction sees the mapping. A pointer left at its factory value
(its own data byte) makes that byte plain storage. A write through the mapping is checked as a write of the
registers it lands in (access, torque lock, range, the part's rules), whole or not at all.
"""
from __future__ import annotations

import struct
from typing import Callable

from ..protocol.errors import AccessError, DataLengthError, DataRangeError, StatusError
from .registers import INDIRECT_ADDRESS_PREFIX, INDIRECT_DATA_PREFIX, Access, Area, ControlTable, Register

# A part's own rules on top of the static ranges (e.g. goal position within the position limits in the current
# operating mode). It raises DataLimitError (or another StatusError) to refuse, returns None to accept.
WriteRule = Callable[["RegisterMemory", Register, int], None]

TORQUE_ENABLE = "torque_enable"
# Little-endian codecs for the usual register sizes, by (size, signed); other sizes go through Register.decode.
_STRUCTS = {(size, signed): struct.Struct("<" + (code if signed else code.upper()))
            for size, code in ((1, "b"), (2, "h"), (4, "i"), (8, "q")) for signed in (False, True)}


def _check_indirect_target(memory: "RegisterMemory", reg: Register, value: int) -> None:
    """An Indirect Address may point at its own data byte (the factory value: no mapping) or at the first..last
    byte of any register outside the indirect blocks; anything else is the real servo's Data Range error."""
    table = memory.table
    if table.indirect.get(value) == reg.address:
        return
    owner = table.owner_of[value] if 0 <= value < table.size else None
    if owner is None:
        why = "is not a register"
    elif owner.name.startswith((INDIRECT_ADDRESS_PREFIX, INDIRECT_DATA_PREFIX)):
        why = f"is in the indirect blocks ({owner.name})"
    else:
        return
    raise DataRangeError(memory._device_id, DataRangeError.code, f"{reg.name}={value}: address {value} {why}")


class RegisterMemory:
    """Bytes of one part's control table plus the write rules of its model."""

    def __init__(self, table: ControlTable, rules: dict[str, WriteRule] | None = None):
        self.rules = dict(rules or {})
        self.data = table.defaults()
        # host writes land on a few spans over and over (a SyncWrite of goal_position every cycle): each span's
        # registers, offsets, codecs and ranges are worked out once (_layout) instead of walking owner_of per write
        self._layouts: dict[tuple[int, int], tuple[tuple, ...]] = {}
        self._bind(table)

    def _bind(self, table: ControlTable) -> None:
        """Take ``table``'s layout: codecs by name, the torque lock, the indirect span and its pointers' rule."""
        self.table = table
        # get/set are the firmware's hot path (every access publishes its state): name -> (struct, address, reg)
        self._fields = {reg.name: (_STRUCTS.get((reg.size, reg.signed)), reg.address, reg) for reg in table.registers}
        self._eeprom_lock = TORQUE_ENABLE in table
        # [lo, hi): the addresses a read or write must look at byte by byte (empty without indirect addressing)
        self._indirect_span = (min(table.indirect), max(table.indirect) + 1) if table.indirect else (0, 0)
        self._indirect_lo, self._indirect_hi = self._indirect_span  # read's hot path: two attributes
        for reg in table.registers:
            if reg.name.startswith(INDIRECT_ADDRESS_PREFIX):
                self.rules.setdefault(reg.name, _check_indirect_target)

    @property
    def _device_id(self) -> int:
        return self.get("id") if "id" in self.table else 0

    # device-side access: no rules, used by the firmware to publish measurements
    def get(self, name: str) -> int:
        field = self._fields.get(name)
        if field is None:
            raise self._unknown(name)
        codec, address, reg = field
        if codec is None:
            return reg.decode(self.data[address:reg.end])
        return codec.unpack_from(self.data, address)[0]

    def set(self, name: str, value: int) -> None:
        field = self._fields.get(name)
        if field is None:
            raise self._unknown(name)
        codec, address, reg = field
        if codec is not None:
            try:
                codec.pack_into(self.data, address, value)
                return
            except struct.error:
                pass  # not an int, or out of range: Register.encode converts it or raises OverflowError
        self.data[address:reg.end] = reg.encode(value)

    def getter(self, name: str) -> Callable[[], int]:
        """``get(name)`` compiled for one register: a firmware that publishes every access calls these instead
        of looking the name up each time (same value, same errors)."""
        field = self._fields.get(name)
        if field is None:
            raise self._unknown(name)
        codec, address, reg = field
        data = self.data  # the bytearray is changed in place, never replaced
        if codec is None:
            return lambda: reg.decode(data[address:reg.end])
        unpack_from = codec.unpack_from
        return lambda: unpack_from(data, address)[0]

    def setter(self, name: str) -> Callable[[int], None]:
        """``set(name, value)`` compiled for one register (see :meth:`getter`)."""
        field = self._fields.get(name)
        if field is None:
            raise self._unknown(name)
        codec, address, reg = field
        data = self.data
        if codec is None:
            return lambda value: self.set(name, value)
        pack_into = codec.pack_into

        def set_value(value: int) -> None:
            try:
                pack_into(data, address, value)
            except struct.error:
                self.set(name, value)  # the general path converts or raises as set() does
        return set_value

    def _unknown(self, name: str) -> KeyError:
        try:
            self.table[name]
        except KeyError as exc:  # the table's message, with close names
            return exc
        return KeyError(name)

    # host-side access: what a Read or Write instruction may do
    def read(self, address: int, length: int) -> bytes:
        end = address + length
        if length == 0 or end > self.table.size:
            raise AccessError(self._device_id, AccessError.code,
                              f"read of {length} bytes at {address} leaves the {self.table.size}-byte table")
        if address < self._indirect_hi and end > self._indirect_lo:
            data = self.data
            out = bytearray(data[address:end])
            for where, target in self._targets(address, end):
                out[where - address] = data[target]
            return bytes(out)
        return bytes(self.data[address:end])

    def _targets(self, address: int, end: int) -> list[tuple[int, int]]:
        """(indirect data address, address it points at) for the mapped indirect data bytes in [address, end)."""
        lo, hi = self._indirect_span
        indirect, data = self.table.indirect, self.data
        out = []
        for where in range(max(address, lo), min(end, hi)):
            pointer = indirect.get(where)
            if pointer is not None:
                target = data[pointer] | data[pointer + 1] << 8
                if target != where:
                    out.append((where, target))
        return out

    def check_write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """Validate a write of ``data`` at ``address``; return the (register, value) pairs it would set."""
        lo, hi = self._indirect_span
        if address < hi and address + len(data) > lo and self._targets(address, address + len(data)):
            return self._check_indirect_write(address, data)
        layout = self._layouts.get((address, len(data)))
        if layout is None:
            layout = self._layout(address, len(data))
            if layout is None:  # a span that is not whole writable registers: refused as the byte walk says
                return self._check_write_walk(address, data)
        changes: list[tuple[Register, int]] = []
        locked = None
        for reg, offset, codec, lo, hi, lockable in layout:
            if lockable:
                if locked is None:
                    locked = self._eeprom_lock and bool(self.get(TORQUE_ENABLE))
                if locked:
                    raise AccessError(self._device_id, AccessError.code, _locked_text(reg))
            value = codec.unpack_from(data, offset)[0]
            if not lo <= value <= hi:
                raise DataRangeError(self._device_id, DataRangeError.code,
                                     f"{reg.name}={value} outside {lo}..{hi}")
            changes.append((reg, value))
        rules = self.rules
        if rules:
            for reg, value in changes:
                rule = rules.get(reg.name)
                if rule is not None:
                    rule(self, reg, value)
        return changes

    def _layout(self, address: int, length: int) -> tuple[tuple, ...] | None:
        """The registers a write of ``length`` bytes at ``address`` sets, as (register, offset in the data, codec,
        lowest, highest valid value, locked while torque is on?), in address order; None for a span that is refused
        whatever the data (not a register, part of a register, outside the table, read-only), which is not cached."""
        end = address + length
        if not length or end > self.table.size:
            return None
        owner_of = self.table.owner_of
        layout = []
        a = address
        while a < end:
            reg = owner_of[a]
            if reg is None or reg.address != a or reg.end > end or reg.access is not Access.RW:
                return None
            lo, hi = reg.valid_range
            layout.append((reg, a - address, _STRUCTS[(reg.size, reg.signed)], lo, hi, reg.locked_by_torque))
            a = reg.end
        if len(self._layouts) > 256:
            self._layouts.clear()
        self._layouts[(address, length)] = out = tuple(layout)
        return out

    def _check_write_walk(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """check_write register by register: the error of the first register that refuses, in address order."""
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

    def _check_indirect_write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """check_write of a span with mapped indirect data: the direct runs as usual, the mapped bytes as a write
        of the registers they land in (each register composed of the bytes written and the bytes it has)."""
        mapped = dict(self._targets(address, address + len(data)))
        changes: list[tuple[Register, int]] = []
        run = None  # start of the current run of direct bytes
        landing: dict[Register, bytearray] = {}
        for i in range(len(data) + 1):
            where = address + i
            if i < len(data) and where not in mapped:
                run = where if run is None else run
                continue
            if run is not None:
                changes += self._check_write_walk(run, data[run - address:i])
                run = None
            if i < len(data):
                target = mapped[where]
                reg = self.table.owner_of[target] if target < self.table.size else None
                if reg is None:
                    raise AccessError(self._device_id, AccessError.code,
                                      f"indirect data at {where} points at {target}, not a register")
                staged = landing.setdefault(reg, bytearray(self.data[reg.address:reg.end]))
                staged[target - reg.address] = data[i]
        for reg, staged in landing.items():
            self._check_writable(reg)
            value = reg.decode(bytes(staged))
            lo, hi = reg.valid_range
            if not lo <= value <= hi:
                raise DataRangeError(self._device_id, DataRangeError.code,
                                     f"{reg.name}={value} outside {lo}..{hi} (written through indirect data)")
            rule = self.rules.get(reg.name)
            if rule is not None:
                rule(self, reg, value)
            changes.append((reg, value))
        return changes

    def commit(self, address: int, data: bytes) -> None:
        """Apply a write that :meth:`check_write` accepted: mapped indirect data bytes land where they point
        (the pointers as they were before this write), every other byte at its own address."""
        end = address + len(data)
        lo, hi = self._indirect_span
        mapped = self._targets(address, end) if address < hi and end > lo else None
        self.data[address:end] = data
        if mapped:
            for where, target in mapped:
                self.data[target] = data[where - address]

    def write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """Validate then apply a host write; raises the StatusError the device would answer."""
        changes = self.check_write(address, data)
        self.commit(address, data)
        return changes

    def _check_writable(self, reg: Register) -> None:
        if reg.access is not Access.RW:
            raise AccessError(self._device_id, AccessError.code, f"{reg.name} (address {reg.address}) is read-only")
        if reg.locked_by_torque and TORQUE_ENABLE in self.table and self.get(TORQUE_ENABLE):
            raise AccessError(self._device_id, AccessError.code, _locked_text(reg))

    def retable(self, table: ControlTable) -> None:
        """Take a new layout in place (a part that stored a new descriptor of another length): the bytes at the
        addresses both tables have are kept, the bytearray is resized, never replaced, so the getters and
        setters compiled from it stay valid for the registers that did not move."""
        if table.size > len(self.data):
            self.data.extend(bytes(table.size - len(self.data)))
        else:
            del self.data[table.size:]
        self._bind(table)
        self._layouts.clear()

    def reset(self, keep: tuple[str, ...] = (), area: Area | None = None) -> None:
        """Back to defaults (all of it, or one area), keeping the named registers' current values."""
        kept = {name: self.get(name) for name in keep if name in self.table}
        fresh = self.table.defaults()
        for reg in self.table.registers:
            if area is None or reg.area is area:
                self.data[reg.address:reg.end] = fresh[reg.address:reg.end]
        for name, value in kept.items():
            self.set(name, value)


def _locked_text(reg: Register) -> str:
    where = "in EEPROM" if reg.area is Area.EEPROM else "an indirect address"
    return f"{reg.name} is {where}, locked while torque is enabled"


__all__ = ["RegisterMemory", "WriteRule", "StatusError"]
