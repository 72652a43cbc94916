"""Instruction codes and fixed numbers of Dynamixel Protocol 2.0."""
from __future__ import annotations

from enum import IntEnum

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC  # 253 (0xFD) is reserved, 254 is broadcast
MAX_PACKET_BYTES = 1024 * 4  # bound on one frame (the length field allows 64 KiB; longer is treated as garbage so
# a corrupted length cannot stall a decoder); readers batch bigger transfers, see runtime/scan


class Instruction(IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    FAST_SYNC_READ = 0x8A
    BULK_READ = 0x92
    BULK_WRITE = 0x93
    FAST_BULK_READ = 0x9A


KNOWN_INSTRUCTIONS = frozenset(int(i) for i in Instruction)

# Factory reset options (parameter of FACTORY_RESET)
RESET_ALL = 0xFF
RESET_ALL_BUT_ID = 0x01
RESET_ALL_BUT_ID_AND_BAUD = 0x02

# CLEAR: first parameter selects what to clear, then a fixed 4-byte key.
CLEAR_MULTI_TURN = 0x01
CLEAR_ERROR = 0x02
CLEAR_KEY = b"\x44\x58\x4c\x22"
