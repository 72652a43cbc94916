"""Register layouts: what lives at which address of a part's control table, and what may be written there.

A :class:`ControlTable` is an immutable layout shared by every part of a model; the mutable bytes of one part
live in a :class:`~devices.control_table.memory.RegisterMemory`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Access(str, Enum):
    R = "R"
    RW = "RW"


class Area(str, Enum):
    EEPROM = "EEPROM"  # persists across reboot; locked while torque is enabled
    RAM = "RAM"  # back to defaults on reboot


@dataclass(frozen=True, slots=True)
class Register:
    """One typed register. ``minimum``/``maximum`` is the static valid range (writes outside answer Data Range)."""

    name: str
    address: int
    size: int
    access: Access = Access.RW
    area: Area = Area.RAM
    signed: bool = False
    default: int = 0
    minimum: int | None = None
    maximum: int | None = None
    unit: str = ""  # the raw unit, e.g. "0.088 deg"; SI conversion belongs to the drivers
    description: str = ""
    # a RAM register the servo still refuses to change while torque is on (the X series' indirect addresses)
    torque_lock: bool = False

    def __post_init__(self) -> None:
        if self.size not in (1, 2, 4, 8) and self.access is Access.RW:
            raise ValueError(f"register {self.name}: writable registers are 1, 2, 4 or 8 bytes, not {self.size}")
        lo, hi = self.raw_bounds
        if not lo <= self.default <= hi:
            raise ValueError(f"register {self.name}: default {self.default} does not fit {self.size} bytes")

    @property
    def end(self) -> int:
        return self.address + self.size

    @property
    def locked_by_torque(self) -> bool:
        """Refused (Access error) while Torque Enable(64) is 1: the EEPROM area, and RAM marked ``torque_lock``."""
        return self.area is Area.EEPROM or self.torque_lock

    @property
    def raw_bounds(self) -> tuple[int, int]:
        bits = 8 * self.size
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.signed else (0, (1 << bits) - 1)

    @property
    def valid_range(self) -> tuple[int, int]:
        lo, hi = self.raw_bounds
        return (lo if self.minimum is None else self.minimum, hi if self.maximum is None else self.maximum)

    def encode(self, value: int) -> bytes:
        return int(value).to_bytes(self.size, "little", signed=self.signed)

    def decode(self, data: bytes) -> int:
        return int.from_bytes(data, "little", signed=self.signed)


INDIRECT_ADDRESS_PREFIX = "indirect_address_"
INDIRECT_DATA_PREFIX = "indirect_data_"


@dataclass(frozen=True)
class ControlTable:
    """A model's layout: registers by name and address, its model number, and its size in bytes.

    ``indirect`` pairs every Indirect Data byte's address with the address of the Indirect Address register that
    points it elsewhere (registers ``indirect_address_N`` and ``indirect_data_N``, as ROBOTIS numbers them); it is
    empty for a table without indirect addressing."""

    model_name: str
    model_number: int
    registers: tuple[Register, ...]
    size: int = 0
    by_name: dict[str, Register] = field(init=False, repr=False, compare=False)
    owner_of: tuple[Register | None, ...] = field(init=False, repr=False, compare=False)
    indirect: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Register] = {}
        size = max([self.size] + [r.end for r in self.registers])
        owner: list[Register | None] = [None] * size
        for reg in self.registers:
            if reg.name in by_name:
                raise ValueError(f"{self.model_name}: register name {reg.name!r} appears twice")
            by_name[reg.name] = reg
            for a in range(reg.address, reg.end):
                if owner[a] is not None:
                    raise ValueError(f"{self.model_name}: {reg.name} overlaps {owner[a].name} at address {a}")
                owner[a] = reg
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "by_name", by_name)
        object.__setattr__(self, "owner_of", tuple(owner))
        indirect = {}
        for name, reg in by_name.items():
            if name.startswith(INDIRECT_DATA_PREFIX):
                pointer = by_name.get(INDIRECT_ADDRESS_PREFIX + name[len(INDIRECT_DATA_PREFIX):])
                if pointer is None or reg.size != 1 or pointer.size != 2:
                    raise ValueError(f"{self.model_name}: {name} needs a 1-byte data register and a 2-byte "
                                     f"{INDIRECT_ADDRESS_PREFIX}{name[len(INDIRECT_DATA_PREFIX):]}")
                indirect[reg.address] = pointer.address
        object.__setattr__(self, "indirect", indirect)

    def __getitem__(self, name: str) -> Register:
        try:
            return self.by_name[name]
        except KeyError:
            close = [n for n in self.by_name if name.split("_")[0] in n][:5]
            hint = f"; close: {', '.join(close)}" if close else ""
            raise KeyError(f"{self.model_name} has no register {name!r}{hint}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def defaults(self) -> bytearray:
        memory = bytearray(self.size)
        for reg in self.registers:
            memory[reg.address:reg.end] = reg.encode(reg.default)
        return memory
