"""The CPC block: where a self-describing part keeps its serial, its descriptor and its port table.

It sits at a high address so that a part's low addresses stay Dynamixel-compatible (a CPC servo is an
XM430-W350 table plus this block). Layout, little-endian:

    0x1000  cpc_magic          4  "CPC1"
    0x1004  cpc_version        1  1
    0x1005  port_count         1  ports declared by the descriptor (parent connector included)
    0x1006  descriptor_length  4  bytes of msgpack at 0x1100
    0x100A  serial_number      8  64-bit unique serial
    0x1012  descriptor_sha256 32  SHA-256 of the descriptor bytes
    0x1032  port_table        16  per port (descriptor order): ID of the part attached there, 0xFF for none
    0x1100  descriptor         N  the descriptor bytes, read in chunks

The header (0x1000..0x1041, 66 bytes) is read in one go; a warm scan reads nothing else.

A part whose descriptor memory is writable (``hil calibrate --write-parts`` stores a calibration in
the part itself) has a mailbox in the gap below the descriptor, all RAM (staging is volatile):

    0x1042  descriptor_write_offset      4  where the chunk after it goes in the staging buffer
    0x1046  descriptor_write_chunk_00   8x16 128 bytes of the new descriptor (one Write sets offset and chunk)
    0x10C6  descriptor_write_length      4  bytes staged
    0x10CA  descriptor_write_sha256_0   8x4  their SHA-256
    0x10EA  descriptor_write_commit      1  write 1: the part checks length and hash, then swaps the staged bytes
                                            in (descriptor, its length and hash) in one step, or keeps the old
    0x10EB  descriptor_write_status      1  R: 0 nothing committed, 1 stored, 2 bad length, 3 hash mismatch

Registers are at most 8 bytes when writable, hence the chunk and the hash as runs of 8-byte registers, each
written whole in one instruction. A part without the mailbox answers the first write with Access error ("not
a register"): its descriptor is read-only. A stored descriptor is factory data from then on (a factory reset
keeps it), as the descriptor it replaced was.

Every CPC part leaves the factory with return delay time 0 (a plain XM430 ships with 250, i.e. 500 us before
each reply): a scan makes a hundred small reads, and the delay would otherwise cost more than the bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from .registers import Access, Area, Register

CPC_BASE = 0x1000
CPC_MAGIC = b"CPC1"
CPC_VERSION = 1
MAX_PORTS = 16
NO_PART = 0xFF
PORT_TABLE_ADDRESS = 0x1032
CPC_HEADER_LEN = PORT_TABLE_ADDRESS + MAX_PORTS - CPC_BASE  # 66
DESCRIPTOR_ADDRESS = 0x1100
MAX_DESCRIPTOR_LEN = 0x10000 - DESCRIPTOR_ADDRESS

CPC_RETURN_DELAY = 0
R = Access.R


def cpc_registers(descriptor_len: int) -> tuple[Register, ...]:
    if not 0 < descriptor_len <= MAX_DESCRIPTOR_LEN:
        raise ValueError(f"descriptor of {descriptor_len} bytes does not fit the CPC block ({MAX_DESCRIPTOR_LEN} max)")
    return (
        Register("cpc_magic", CPC_BASE, 4, R, Area.EEPROM, default=int.from_bytes(CPC_MAGIC, "little")),
        Register("cpc_version", 0x1004, 1, R, Area.EEPROM, default=CPC_VERSION),
        Register("port_count", 0x1005, 1, R, Area.EEPROM),
        Register("descriptor_length", 0x1006, 4, R, Area.EEPROM, default=descriptor_len),
        Register("serial_number", 0x100A, 8, R, Area.EEPROM),
        Register("descriptor_sha256", 0x1012, 32, R, Area.EEPROM),
        Register("port_table", PORT_TABLE_ADDRESS, MAX_PORTS, R, Area.EEPROM,
                 default=int.from_bytes(bytes([NO_PART]) * MAX_PORTS, "little")),
        Register("descriptor", DESCRIPTOR_ADDRESS, descriptor_len, R, Area.EEPROM),
    )


DESCRIPTOR_WRITE_OFFSET = 0x1042
DESCRIPTOR_WRITE_CHUNK = 128
DESCRIPTOR_WRITE_LENGTH = 0x10C6
DESCRIPTOR_WRITE_COMMIT = 0x10EA
DESCRIPTOR_WRITE_STATUS = 0x10EB
WRITE_IDLE, WRITE_STORED, WRITE_BAD_LENGTH, WRITE_BAD_HASH = 0, 1, 2, 3
WRITE_STATUS_TEXT = {WRITE_IDLE: "nothing committed", WRITE_STORED: "stored",
                     WRITE_BAD_LENGTH: "the staged length is outside 1..%d or more than was staged" % MAX_DESCRIPTOR_LEN,
                     WRITE_BAD_HASH: "the staged bytes do not have the SHA-256 given (a chunk was lost)"}


def descriptor_write_registers() -> tuple[Register, ...]:
    """The mailbox of a part whose descriptor memory is writable (see the module's docstring)."""
    RW, RAM = Access.RW, Area.RAM
    chunk = tuple(Register(f"descriptor_write_chunk_{k:02d}", DESCRIPTOR_WRITE_OFFSET + 4 + 8 * k, 8, RW, RAM)
                  for k in range(DESCRIPTOR_WRITE_CHUNK // 8))
    sha = tuple(Register(f"descriptor_write_sha256_{k}", DESCRIPTOR_WRITE_LENGTH + 4 + 8 * k, 8, RW, RAM)
                for k in range(4))
    return ((Register("descriptor_write_offset", DESCRIPTOR_WRITE_OFFSET, 4, RW, RAM,
                      maximum=MAX_DESCRIPTOR_LEN - 1),) + chunk
            + (Register("descriptor_write_length", DESCRIPTOR_WRITE_LENGTH, 4, RW, RAM, maximum=MAX_DESCRIPTOR_LEN),)
            + sha + (Register("descriptor_write_commit", DESCRIPTOR_WRITE_COMMIT, 1, RW, RAM, maximum=1),
                     Register("descriptor_write_status", DESCRIPTOR_WRITE_STATUS, 1, R, RAM)))


@dataclass(frozen=True)
class CpcHeader:
    version: int
    port_count: int
    descriptor_length: int
    serial_number: int
    descriptor_sha256: bytes
    port_table: tuple[int | None, ...]  # one entry per declared port: child ID or None


class CpcHeaderError(ValueError):
    pass


def parse_cpc_header(data: bytes) -> CpcHeader:
    """Decode the 66 header bytes; CpcHeaderError when they are not a CPC block."""
    if len(data) != CPC_HEADER_LEN:
        raise CpcHeaderError(f"CPC header is {CPC_HEADER_LEN} bytes, got {len(data)}")
    if data[:4] != CPC_MAGIC:
        raise CpcHeaderError(f"no CPC magic (read {data[:4].hex()})")
    version, port_count = data[4], data[5]
    if version != CPC_VERSION:
        raise CpcHeaderError(f"CPC version {version} is not supported (this runtime reads {CPC_VERSION})")
    if port_count > MAX_PORTS:
        raise CpcHeaderError(f"port count {port_count} exceeds {MAX_PORTS}")
    length = int.from_bytes(data[6:10], "little")
    if not 0 < length <= MAX_DESCRIPTOR_LEN:
        raise CpcHeaderError(f"descriptor length {length} is outside 1..{MAX_DESCRIPTOR_LEN}")
    table = data[0x32:0x32 + MAX_PORTS]
    ports = tuple(None if b == NO_PART else b for b in table[:port_count])
    return CpcHeader(version, port_count, length, int.from_bytes(data[10:18], "little"), bytes(data[18:50]), ports)


def identity_registers(model_number: int) -> tuple[Register, ...]:
    """The Dynamixel-compatible identity block of a CPC part that is not a servo."""
    RW = Access.RW
    return (
        Register("model_number", 0, 2, R, Area.EEPROM, default=model_number),
        Register("model_information", 2, 4, R, Area.EEPROM),
        Register("firmware_version", 6, 1, R, Area.EEPROM, default=1),
        Register("id", 7, 1, RW, Area.EEPROM, default=1, minimum=0, maximum=252),
        Register("baud_rate", 8, 1, RW, Area.EEPROM, default=3, minimum=0, maximum=7),
        Register("return_delay_time", 9, 1, RW, Area.EEPROM, default=CPC_RETURN_DELAY, maximum=254, unit="2 us"),
        Register("led", 65, 1, RW, Area.RAM, maximum=1),
        Register("status_return_level", 68, 1, RW, Area.RAM, default=2, maximum=2),
        Register("hardware_error_status", 70, 1, R, Area.RAM),
    )
