"""Frames: the envelope every Dynamixel 2.0 packet travels in, and a streaming decoder for a byte stream.

    FF FF FD 00 | ID | LEN_L LEN_H | INSTRUCTION | PARAMS... | CRC_L CRC_H
    LEN counts instruction + (stuffed) params + CRC.

A status packet is a frame whose instruction is 0x55; its first parameter is the error byte. The fast replies
(Fast Sync Read / Fast Bulk Read) are one status frame with ID 0xFE assembled by several devices; they are not
byte-stuffed (see docs/ARCHITECTURE.md), which is also how the official client parses them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .crc import crc16
from .errors import CrcMismatch, FrameError, MalformedPacket
from .instructions import BROADCAST_ID, HEADER, MAX_PACKET_BYTES, Instruction
from .stuffing import stuff, unstuff

_STATUS = int(Instruction.STATUS)
HEADER_LEN = 7  # FF FF FD 00 ID LEN_L LEN_H
MIN_FRAME = HEADER_LEN + 3  # + instruction + CRC


@dataclass(frozen=True, slots=True)
class Packet:
    """One decoded frame: who it is for or from, what it says, and its (unstuffed) parameters."""

    id: int
    instruction: int
    params: bytes = b""
    raw: bytes = field(default=b"", compare=False, repr=False)

    @property
    def is_status(self) -> bool:
        return self.instruction == _STATUS

    @property
    def error(self) -> int:
        """Error byte of a status packet."""
        if not self.is_status or not self.params:
            raise MalformedPacket(f"id {self.id}: not a status packet with an error byte")
        return self.params[0]

    @property
    def data(self) -> bytes:
        """Parameters of a status packet after the error byte."""
        return self.params[1:]


def is_fast_reply(packet_id: int, instruction: int) -> bool:
    return instruction == _STATUS and packet_id == BROADCAST_ID


def encode_packet(packet_id: int, instruction: int, params: bytes = b"") -> bytes:
    """Frame ``params`` for the wire: header, ID, length, stuffed body, CRC."""
    body = bytes((instruction,)) + bytes(params)
    if not is_fast_reply(packet_id, instruction):
        body = stuff(body)
    check_frame_length(len(body) + 2)
    frame = HEADER + bytes((packet_id,)) + (len(body) + 2).to_bytes(2, "little") + body
    return frame + crc16(frame).to_bytes(2, "little")


def check_frame_length(length: int) -> None:
    """Refuse a frame whose length field (instruction + body + CRC) exceeds what any decoder here accepts; a
    request asking for more (a read of 65535 bytes) must be answered with an error, not an overflowing frame."""
    if length > MAX_PACKET_BYTES:
        raise MalformedPacket(f"a frame of {length} bytes exceeds the {MAX_PACKET_BYTES}-byte limit of one packet")


def decode_frame(frame: bytes) -> Packet:
    """Decode exactly one complete frame (header included); raises FrameError subclasses."""
    events = StreamDecoder().feed(frame)
    if len(events) != 1:
        raise MalformedPacket(f"expected exactly one frame, found {len(events)} ({len(frame)} bytes)")
    if isinstance(events[0], FrameError):
        raise events[0]
    return events[0]


class StreamDecoder:
    """Turns an arbitrary byte stream into packets, resynchronising after garbage.

    :meth:`feed` never raises: it returns the packets found, interleaved with the :class:`FrameError` instances
    for frames it had to reject (bad CRC, impossible length), so that the caller can count them. After a bad
    frame it drops only the first header byte and searches again, so a corrupted length field cannot swallow
    the good frames that follow.
    """

    __slots__ = ("_buffer", "garbage_bytes")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.garbage_bytes = 0

    def reset(self) -> None:
        """Forget any partial frame (after a timeout the rest of it will not come)."""
        self.garbage_bytes += len(self._buffer)
        self._buffer.clear()

    @property
    def pending(self) -> int:
        """Bytes held while waiting for the rest of a frame."""
        return len(self._buffer)

    def partial_frame(self) -> bytes:
        """The bytes held of the frame being received, from its header on (b"" if none has begun): what a fast
        reply cut short leaves, for the host to read the slots that came (status.fast_reply_prefix)."""
        start = self._buffer.find(HEADER)
        return bytes(self._buffer[start:]) if start >= 0 else b""

    def bytes_needed(self) -> int:
        """How many more bytes complete the frame being received (at least 1 if nothing is known yet)."""
        buf = self._buffer
        start = buf.find(HEADER)
        if start < 0 or len(buf) - start < HEADER_LEN:
            return max(1, MIN_FRAME - len(buf))
        length = buf[start + 5] | (buf[start + 6] << 8)
        return max(1, start + HEADER_LEN + length - len(buf))

    def feed(self, data: bytes) -> list[Packet | FrameError]:
        buf = self._buffer
        buf += data
        events: list[Packet | FrameError] = []
        while True:
            start = buf.find(HEADER)
            if start < 0:
                keep = _partial_header_len(buf)
                self.garbage_bytes += len(buf) - keep
                del buf[: len(buf) - keep]
                return events
            if start:
                self.garbage_bytes += start
                del buf[:start]
            if len(buf) < HEADER_LEN:
                return events
            packet_id = buf[4]
            length = buf[5] | (buf[6] << 8)
            if length < 3 or length > MAX_PACKET_BYTES:
                events.append(MalformedPacket(f"id {packet_id}: impossible length field {length}"))
                self._drop_one()
                continue
            end = HEADER_LEN + length
            if len(buf) < end:
                return events
            frame = bytes(buf[:end])
            received = frame[-2] | (frame[-1] << 8)
            expected = crc16(memoryview(frame)[:-2])
            if received != expected:
                events.append(CrcMismatch(expected, received, packet_id))
                self._drop_one()
                continue
            del buf[:end]
            events.append(_packet_from_frame(frame))

    def _drop_one(self) -> None:
        self.garbage_bytes += 1
        del self._buffer[:1]


def _partial_header_len(buf: bytearray) -> int:
    """Length of the longest suffix of ``buf`` that is a prefix of the header (0..3)."""
    for keep in (3, 2, 1):
        if len(buf) >= keep and buf[-keep:] == HEADER[:keep]:
            return keep
    return 0


def _packet_from_frame(frame: bytes) -> Packet | FrameError:
    packet_id = frame[4]
    body = frame[HEADER_LEN:-2]
    instruction = body[0]
    if not is_fast_reply(packet_id, instruction):
        body = unstuff(body)
    return Packet(packet_id, instruction, bytes(body[1:]), frame)
