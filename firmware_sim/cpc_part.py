"""Self-describing parts: firmware whose control table carries the CPC block (devices.control_table.cpc).

Servo-like parts (servo joints, wheels, grippers) whose model number is a known Dynamixel table get that table
plus the CPC block, and the servo firmware; every other part gets the identity block, the function registers
its descriptor declares, and the CPC block.
"""
from __future__ import annotations

from dataclasses import replace

from hil.devices.control_table import TABLES_BY_MODEL, Access, Area, ControlTable, Register
from hil.devices.control_table.cpc import (CPC_RETURN_DELAY, MAX_PORTS, NO_PART, PORT_TABLE_ADDRESS, cpc_registers,
                                       descriptor_write_registers, identity_registers)
from hil.devices.descriptor import PartDescriptor, RegisterSpec

from .part import PartFirmware
from .servo import ServoFirmware

SERVO_KINDS = ("servo_joint", "wheel", "gripper")


class CpcBuildError(ValueError):
    pass


def _register(spec: RegisterSpec) -> Register:
    return Register(spec.name, spec.address, spec.size, Access(spec.access), Area(spec.area), spec.signed,
                    spec.default, spec.minimum, spec.maximum, spec.unit)


def table_for(desc: PartDescriptor, descriptor_len: int, writable_descriptor: bool = False) -> ControlTable:
    """The control table of a part built from ``desc`` (its function registers + the CPC block).

    The descriptor's register defaults are the part's factory defaults, also on a Dynamixel-compatible table (a
    wheel comes up, and comes back from a factory reset, in velocity mode)."""
    base = TABLES_BY_MODEL.get(desc.model_number) if desc.kind in SERVO_KINDS else None
    if base is not None:
        for spec in desc.registers:
            reg = base.by_name.get(spec.name)
            if reg is None or (reg.address, reg.size, reg.signed) != (spec.address, spec.size, spec.signed):
                raise CpcBuildError(f"part {desc.name}: register {spec.name} does not match the {base.model_name} table")
        defaults = {spec.name: spec.default for spec in desc.registers if spec.default}
        defaults.setdefault("return_delay_time", CPC_RETURN_DELAY)  # CPC parts answer at once (see cpc.py)
        registers = tuple(replace(r, default=defaults[r.name]) if r.name in defaults else r for r in base.registers)
    else:
        registers = identity_registers(desc.model_number) + tuple(_register(s) for s in desc.registers)
    mailbox = descriptor_write_registers() if writable_descriptor else ()
    return ControlTable(desc.name, desc.model_number, tuple(registers) + cpc_registers(descriptor_len) + mailbox)


def build_cpc_part(desc: PartDescriptor, data: bytes, sha256: bytes, device_id: int, serial_number: int,
                   port_table: dict[str, int] | None = None, writable_descriptor: bool = True) -> PartFirmware:
    """Firmware for one part storing ``data`` (its compiled descriptor); ``port_table`` maps port -> child ID;
    ``writable_descriptor``: the CPC block has the descriptor mailbox (firmware_sim/descriptor_store.py), as
    every simulated CPC part does unless told otherwise (a read-only part, for the host's refusal).

    The CPC block is factory data: it is part of the table's defaults, so a FactoryReset leaves the descriptor,
    the serial number and the port table (the connections the part's hub sees) as they are."""
    table = table_for(desc, len(data), writable_descriptor)
    factory = {"port_count": len(desc.ports), "serial_number": serial_number,
               "descriptor_sha256": int.from_bytes(sha256, "little"), "descriptor": int.from_bytes(data, "little"),
               "port_table": int.from_bytes(_port_entries(desc, port_table or {}), "little")}
    table = ControlTable(table.model_name, table.model_number,
                         tuple(replace(r, default=factory[r.name]) if r.name in factory else r for r in table.registers),
                         table.size)
    cls = ServoFirmware if desc.kind in SERVO_KINDS and desc.model_number in TABLES_BY_MODEL else PartFirmware
    part = cls(table, device_id, serial_number=serial_number)
    memory = part.memory
    if cls is ServoFirmware:
        part.position = float(memory.get("present_position"))
    part.descriptor = desc
    if writable_descriptor:
        from .descriptor_store import DescriptorStore

        part.descriptor_store = DescriptorStore()
    return part


def _port_entries(desc: PartDescriptor, children: dict[str, int]) -> bytes:
    names = [p.name for p in desc.ports]
    entries = bytearray([NO_PART] * MAX_PORTS)
    for port, child_id in children.items():
        if port not in names:
            raise CpcBuildError(f"part {desc.name}: no port {port!r} (ports: {', '.join(names)})")
        entries[names.index(port)] = child_id
    return bytes(entries)


def set_port_table(part: PartFirmware, desc: PartDescriptor, children: dict[str, int]) -> None:
    part.memory.data[PORT_TABLE_ADDRESS:PORT_TABLE_ADDRESS + MAX_PORTS] = _port_entries(desc, children)
