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
