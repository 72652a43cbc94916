"""CRC-16 of Dynamixel Protocol 2.0: polynomial 0x8005, initial value 0, not reflected, no final xor.

The checksum covers the whole (stuffed) packet from the first header byte up to, not including, the CRC.
"""
from __future__ import annotations


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


CRC_TABLE: tuple[int, ...] = _make_table()


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Return the CRC-16 of ``data``, continuing from ``crc`` (0 starts a new packet).

    Continuing is what the fast replies need: each slot carries the running CRC of the packet so far.
    """
    table = CRC_TABLE
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc
