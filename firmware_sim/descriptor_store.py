"""A part whose descriptor memory is writable: the mailbox of the CPC block (devices.control_table.cpc).

The host stages a new descriptor 128 bytes at a time (offset and chunk in one Write), then writes its length,
its SHA-256 and commit. Only then does the part check the staged bytes (length within the block and what was
staged, hash equal) and swap them in: the descriptor register takes the new length, the header the new length
and hash, all as factory data (a factory reset keeps the stored descriptor). A failed check keeps the old
descriptor whole and says why in ``descriptor_write_status``: nothing is half-applied.

The part does not interpret the bytes (a real part's firmware stores what it is given; the host validated them);
in the simulator the part's ``descriptor`` object follows when the bytes decode, so what is built from it later
(a hot-plug replug) is what a scan reads. What the part *measures* does not change: a stored calibration says
what the sensor does, it does not make it do so.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING

from hil.devices.control_table import ControlTable, Register
from hil.devices.control_table.cpc import (CPC_BASE, DESCRIPTOR_WRITE_CHUNK, MAX_DESCRIPTOR_LEN, WRITE_BAD_HASH,
                                       WRITE_BAD_LENGTH, WRITE_STORED, cpc_registers, descriptor_write_registers)

if TYPE_CHECKING:
    from .part import PartFirmware

CHUNK_REGISTERS = tuple(f"descriptor_write_chunk_{k:02d}" for k in range(DESCRIPTOR_WRITE_CHUNK // 8))
SHA_REGISTERS = tuple(f"descriptor_write_sha256_{k}" for k in range(4))
KEPT_FACTORY = ("cpc_magic", "cpc_version", "port_count", "serial_number", "port_table")


class DescriptorStore:
    """The staging buffer of one part and what a commit does."""

    def __init__(self) -> None:
        self.staged = bytearray()
        self.stored = 0  # descriptors stored since power-on

    def written(self, part: PartFirmware, names: list[str]) -> None:
        """After a host write that touched the mailbox: take a chunk, or commit."""
        memory = part.memory
        if CHUNK_REGISTERS[0] in names:
            offset = memory.get("descriptor_write_offset")
            chunk = b"".join(memory.get(n).to_bytes(8, "little") for n in CHUNK_REGISTERS)
            if len(self.staged) < offset + len(chunk):
                self.staged.extend(bytes(offset + len(chunk) - len(self.staged)))
            self.staged[offset:offset + len(chunk)] = chunk
        if "descriptor_write_commit" in names and memory.get("descriptor_write_commit"):
            memory.set("descriptor_write_commit", 0)
            memory.set("descriptor_write_status", self._commit(part))

    def _commit(self, part: PartFirmware) -> int:
        memory = part.memory
        length = memory.get("descriptor_write_length")
        if not 0 < length <= min(MAX_DESCRIPTOR_LEN, len(self.staged)):
            return WRITE_BAD_LENGTH
        data = bytes(self.staged[:length])
        sha = b"".join(memory.get(n).to_bytes(8, "little") for n in SHA_REGISTERS)
        if hashlib.sha256(data).digest() != sha:
            return WRITE_BAD_HASH
        swap_descriptor(part, data, sha)
        self.staged = bytearray()
        self.stored += 1
        return WRITE_STORED


def swap_descriptor(part: PartFirmware, data: bytes, sha: bytes) -> None:
    """Put ``data`` in the part's CPC block as its descriptor (factory data), keeping everything else."""
    old = part.table
    factory = {r.name: r.default for r in old.registers if r.name in KEPT_FACTORY}
    factory.update(descriptor_sha256=int.from_bytes(sha, "little"), descriptor=int.from_bytes(data, "little"))
    cpc = tuple(replace(r, default=factory[r.name]) if r.name in factory else r for r in cpc_registers(len(data)))
    below: list[Register] = [r for r in old.registers if r.address < CPC_BASE]
    table = ControlTable(old.model_name, old.model_number, tuple(below) + cpc + descriptor_write_registers())
    part.memory.retable(table)  # every byte below the descriptor stays (registers, header, port table, mailbox)
    part.table = table
    for name in ("descriptor_length", "descriptor_sha256", "descriptor"):
        reg = table[name]
        part.memory.data[reg.address:reg.end] = reg.encode(reg.default)
    try:
        from hil.devices.descriptor import decode_descriptor

        part.descriptor = decode_descriptor(data)
    except Exception:  # noqa: BLE001 - the part stores bytes; the scan will name what is wrong with them
        pass
