"""A part's driver: its register conversions, plus its own code where that code is trusted.

Driver code is a Python source defining ``to_si(register, raw) -> float`` and/or
``from_si(register, value) -> int`` and a set ``REGISTERS`` naming the registers it converts; the others keep
the table conversion. Untrusted code never runs: the part comes up with its table conversions and a message
that says how to trust the code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from hil.devices.descriptor import PartDescriptor

from .conversions import ConversionError, RegisterDriver
from .trust import TrustStore


class DriverCodeError(RuntimeError):
    pass


@dataclass
class PartDriver:
    part_id: int
    descriptor: PartDescriptor
    registers: dict[str, RegisterDriver]
    code_registers: frozenset[str] = frozenset()
    code_to_si: Callable | None = field(default=None, repr=False)  # the trusted driver code's converters
    code_from_si: Callable | None = field(default=None, repr=False)
    message: str = ""  # why the code did or did not load

    def to_si(self, name: str, raw: int) -> float:
        if name in self.code_registers and self.code_to_si is not None:
            return float(self.code_to_si(name, raw))
        return self._register(name).to_si(raw)

    def from_si(self, name: str, value: float) -> int:
        if name in self.code_registers and self.code_from_si is not None:
            return int(self.code_from_si(name, value))
        return self._register(name).from_si(value)

    def _register(self, name: str) -> RegisterDriver:
        try:
            return self.registers[name]
        except KeyError:
            raise ConversionError(f"id {self.part_id} ({self.descriptor.name}) has no register {name!r}; it has "
                                  f"{', '.join(sorted(self.registers))}") from None


def load_part_driver(part_id: int, desc: PartDescriptor, trust: TrustStore) -> PartDriver:
    driver = PartDriver(part_id, desc, {s.name: RegisterDriver(part_id, s) for s in desc.registers})
    code = desc.driver
    if code is None:
        return driver
    decision = trust.decide(code)
    if not decision.trusted:
        driver.message = (f"id {part_id} ({desc.name}): driver code sha256 {code.sha256[:16]}... not run: "
                          f"{decision.reason}; the part uses its register table. {trust.how_to_trust(code)}")
        return driver
    namespace = {"__builtins__": __builtins__, "math": math, "__name__": f"hil_driver_{part_id}"}
    try:
        exec(compile(code.source, f"<driver of {desc.name} id {part_id}>", "exec"), namespace)  # noqa: S102 (trusted)
    except Exception as exc:
        raise DriverCodeError(f"id {part_id} ({desc.name}): trusted driver code failed to load: {exc}") from exc
    driver.code_to_si, driver.code_from_si = namespace.get("to_si"), namespace.get("from_si")
    driver.code_registers = frozenset(namespace.get("REGISTERS", ()))
    unknown = driver.code_registers - set(driver.registers)
    if unknown:
        raise DriverCodeError(f"id {part_id} ({desc.name}): driver code converts undeclared registers {sorted(unknown)}")
    driver.message = f"id {part_id} ({desc.name}): driver code loaded ({decision.reason})"
    return driver
