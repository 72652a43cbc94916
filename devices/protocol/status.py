"""Status packets: the device's answers, including the combined replies of Fast Sync/Bulk Read.

A fast reply is one status frame with ID 0xFE. After the instruction byte come slots, one per device in the
order of the request: ``error, id, data..., crc_l, crc_h``. Each slot's CRC is the running CRC of the frame up
to that point, the way the chained devices build it; the last slot's CRC is the frame's own CRC. The host
checks the frame CRC (which covers every slot) and does not depend on the intermediate ones.
"""
from __future__ import annotations

import struct

from .crc import crc16
from .errors import MalformedPacket
from .instructions import BROADCAST_ID, HEADER, Instruction
from .packets import HEADER_LEN, Packet, check_frame_length, encode_packet

_STATUS = int(Instruction.STATUS)


def encode_status(packet_id: int, error: int = 0, data: bytes = b"") -> bytes:
    return encode_packet(packet_id, _STATUS, bytes((error,)) + bytes(data))


def encode_ping_reply(packet_id: int, model_number: int, firmware_version: int, error: int = 0) -> bytes:
    return encode_status(packet_id, error, model_number.to_bytes(2, "little") + bytes((firmware_version,)))


def encode_fast_reply(slots: list[tuple[int, int, bytes]], length: int | None = None) -> bytes:
    """One frame carrying ``(error, id, data)`` for each answering device, with running CRCs between slots.

    ``length``: the length field the first device announced when it is more than these slots fill: a chain cut
    short (a real bus's chained reply stops at the first silent device, the ones after it wait for a slot that
    never comes), whose bytes end after the last slot that was sent (:func:`fast_reply_prefix` reads them)."""
    if not slots:
        raise MalformedPacket("a fast reply needs at least one slot")
    filled = 1 + sum(len(data) + 4 for _, _, data in slots)
    length = filled if length is None else length
    check_frame_length(length)
    frame = bytearray(HEADER + bytes((BROADCAST_ID,)) + length.to_bytes(2, "little") + bytes((_STATUS,)))
    crc = 0
    checked = 0
    for error, device_id, data in slots:
        frame.append(error)
        frame.append(device_id)
        frame += data
        crc = crc16(memoryview(frame)[checked:], crc)
        frame += crc.to_bytes(2, "little")
        checked = len(frame) - 2
    return bytes(frame)


_FAST_LAYOUTS: dict[tuple[tuple[int, int], ...], tuple[struct.Struct, tuple[int, ...]]] = {}


def _fast_layout(lengths: dict[int, int]) -> tuple[struct.Struct, tuple[int, ...]]:
    """The struct of a fast reply whose slots come complete and in the order asked (error, id, data, CRC each;
    the last slot's CRC is the frame's, not in the params), and the IDs in that order."""
    key = tuple(lengths.items())
    layout = _FAST_LAYOUTS.get(key)
    if layout is None:
        if len(_FAST_LAYOUTS) > 256:
            _FAST_LAYOUTS.clear()
        fmt = "2x".join(f"BB{n}s" for n in lengths.values())
        layout = _FAST_LAYOUTS[key] = (struct.Struct("<" + fmt), tuple(lengths))
    return layout


def parse_fast_reply(packet: Packet, lengths: dict[int, int]) -> list[tuple[int, int, bytes]]:
    """Split a fast reply into ``(error, id, data)`` slots; ``lengths`` maps each requested ID to its length.

    The usual reply (every device asked, in the order asked) is unpacked by one struct compiled per request
    (:func:`_fast_layout`); any other is walked slot by slot, with the same results and errors."""
    if packet.id != BROADCAST_ID or not packet.is_status:
        raise MalformedPacket(f"id {packet.id}: not a fast reply (expected a status from id 0xFE)")
    body = packet.params
    if lengths:
        layout, ids = _fast_layout(lengths)
        if len(body) == layout.size:
            values = layout.unpack(body)
            if values[1::3] == ids:
                return list(zip(values[0::3], ids, values[2::3]))
    slots = []
    i = 0
    end = len(body) + 2  # the last slot's CRC is the frame CRC, already removed from params
    while i < end:
        if end - i < 4:
            raise MalformedPacket(f"fast reply: truncated slot at byte {i}")
        error, device_id = body[i], body[i + 1]
        if device_id not in lengths:
            raise MalformedPacket(f"fast reply: slot at byte {i} is from id {device_id}, which was not asked")
        n = lengths[device_id]
        if i + 4 + n > end:
            raise MalformedPacket(f"fast reply: slot of id {device_id} is truncated")
        slots.append((error, device_id, bytes(body[i + 2:i + 2 + n])))
        i += 4 + n
    return slots


def fast_reply_prefix(data: bytes, lengths: dict[int, int]) -> list[tuple[int, int, bytes]]:
    """The ``(error, id, data)`` slots of a fast reply cut short (``data``: its bytes from the header on, fewer
    than its length field says) that can be trusted: each slot's running CRC covers the frame up to it, so every
    slot whose CRC checks arrived intact. Stops at the first incomplete or failing slot, or one from an ID not
    asked; [] when ``data`` is not the start of a fast reply."""
    if len(data) < HEADER_LEN + 1 or data[:4] != HEADER or data[4] != BROADCAST_ID or data[HEADER_LEN] != _STATUS:
        return []
    slots = []
    i, crc, checked = HEADER_LEN + 1, 0, 0
    while i + 2 <= len(data):
        device_id = data[i + 1]
        n = lengths.get(device_id)
        if n is None or i + 4 + n > len(data):
            break
        crc = crc16(memoryview(data)[checked:i + 2 + n], crc)
        if crc != data[i + 2 + n] | (data[i + 3 + n] << 8):
            break
        slots.append((data[i], device_id, bytes(data[i + 2:i + 2 + n])))
        checked = i + 2 + n
        i += 4 + n
    return slots


__all__ = ["encode_status", "encode_ping_reply", "encode_fast_reply", "parse_fast_reply", "fast_reply_prefix",
           "HEADER_LEN"]
