"""Instruction packets as typed requests: one dataclass per instruction, with encode and decode.

The host builds requests and encodes them; the device decodes packets back into the same requests. Decoding
checks the parameter layout of each instruction and raises :class:`MalformedPacket` (a ProtocolError) when it
does not fit, so a device can answer with the right error code instead of crashing.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from .errors import MalformedPacket, ProtocolError
from .instructions import BROADCAST_ID, CLEAR_KEY, CLEAR_MULTI_TURN, MAX_ID, Instruction
from .packets import Packet, encode_packet


class InvalidRequest(ProtocolError, ValueError):
    """A request that cannot be put on the wire (bad ID, address, or data length)."""


def _check_id(packet_id: int, broadcast_ok: bool) -> None:
    if 0 <= packet_id <= MAX_ID or (broadcast_ok and packet_id == BROADCAST_ID):
        return
    raise InvalidRequest(f"ID {packet_id} is out of range 0..{MAX_ID}" + (" or broadcast" if broadcast_ok else ""))


def _check_u16(name: str, value: int) -> None:
    if not 0 <= value <= 0xFFFF:
        raise InvalidRequest(f"{name} {value} does not fit in 16 bits")


def _u16(value: int) -> bytes:
    return value.to_bytes(2, "little")


@dataclass(frozen=True, slots=True)
class Ping:
    id: int


@dataclass(frozen=True, slots=True)
class Read:
    id: int
    address: int
    length: int


@dataclass(frozen=True, slots=True)
class Write:
    id: int
    address: int
    data: bytes


@dataclass(frozen=True, slots=True)
class RegWrite:
    id: int
    address: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Action:
    id: int = BROADCAST_ID


@dataclass(frozen=True, slots=True)
class FactoryReset:
    id: int
    option: int


@dataclass(frozen=True, slots=True)
class Reboot:
    id: int


@dataclass(frozen=True, slots=True)
class Clear:
    id: int
    option: int = CLEAR_MULTI_TURN
    key: bytes = CLEAR_KEY


@dataclass(frozen=True, slots=True)
class SyncRead:
    """Read the same block from several devices; ``fast`` selects Fast Sync Read (one combined reply)."""

    address: int
    length: int
    ids: tuple[int, ...]
    fast: bool = False
    id: int = BROADCAST_ID


@dataclass(frozen=True, slots=True)
class SyncWrite:
    """Write the same block (``length`` bytes at ``address``) with per-device data."""

    address: int
    length: int
    items: tuple[tuple[int, bytes], ...]
    id: int = BROADCAST_ID


@dataclass(frozen=True, slots=True)
class BulkRead:
    """Read a different block from each device: items are (id, address, length)."""

    items: tuple[tuple[int, int, int], ...]
    fast: bool = False
    id: int = BROADCAST_ID


@dataclass(frozen=True, slots=True)
class BulkWrite:
    """Write a different block to each device: items are (id, address, data)."""

    items: tuple[tuple[int, int, bytes], ...]
    id: int = BROADCAST_ID


Request = Union[Ping, Read, Write, RegWrite, Action, FactoryReset, Reboot, Clear, SyncRead, SyncWrite, BulkRead,
                BulkWrite]


def request_instruction(request: Request) -> Instruction:
    if isinstance(request, SyncRead):
        return Instruction.FAST_SYNC_READ if request.fast else Instruction.SYNC_READ
    if isinstance(request, BulkRead):
        return Instruction.FAST_BULK_READ if request.fast else Instruction.BULK_READ
    return _INSTRUCTION_OF[type(request)]


def request_params(request: Request) -> bytes:
    """The parameter bytes of ``request`` (validated)."""
    t = type(request)
    if t is Ping or t is Reboot:
        _check_id(request.id, broadcast_ok=t is Ping)
        return b""
    if t is Action:
        _check_id(request.id, broadcast_ok=True)
        return b""
    if t is Read:
        _check_id(request.id, broadcast_ok=False)
        _check_u16("address", request.address)
        _check_u16("length", request.length)
        return _u16(request.address) + _u16(request.length)
    if t is Write or t is RegWrite:
        _check_id(request.id, broadcast_ok=True)
        _check_u16("address", request.address)
        return _u16(request.address) + bytes(request.data)
    if t is FactoryReset:
        _check_id(request.id, broadcast_ok=True)
        return bytes((request.option & 0xFF,))
    if t is Clear:
        _check_id(request.id, broadcast_ok=True)
        return bytes((request.option & 0xFF,)) + bytes(request.key)
    if t is SyncRead:
        _check_u16("address", request.address)
        _check_u16("length", request.length)
        for i in request.ids:
            _check_id(i, broadcast_ok=False)
        return _u16(request.address) + _u16(request.length) + bytes(request.ids)
    if t is SyncWrite:
        _check_u16("address", request.address)
        _check_u16("length", request.length)
        out = bytearray(_u16(request.address) + _u16(request.length))
        for device_id, data in request.items:
            _check_id(device_id, broadcast_ok=False)
            if len(data) != request.length:
                raise InvalidRequest(f"SyncWrite: id {device_id} has {len(data)} bytes, the block is {request.length}")
            out.append(device_id)
            out += data
        return bytes(out)
    if t is BulkRead:
        out = bytearray()
        for device_id, address, length in request.items:
            _check_id(device_id, broadcast_ok=False)
            _check_u16("address", address)
            _check_u16("length", length)
            out.append(device_id)
            out += _u16(address) + _u16(length)
        return bytes(out)
    if t is BulkWrite:
        out = bytearray()
        for device_id, address, data in request.items:
            _check_id(device_id, broadcast_ok=False)
            _check_u16("address", address)
            _check_u16("length", len(data))
            out.append(device_id)
            out += _u16(address) + _u16(len(data)) + bytes(data)
        return bytes(out)
    raise InvalidRequest(f"not a request: {request!r}")


def encode_request(request: Request) -> bytes:
    """The wire bytes of ``request``."""
    return encode_packet(request.id, request_instruction(request), request_params(request))


_SYNC_WRITE_LAYOUTS: dict[tuple[int, int], struct.Struct] = {}


def encode_sync_write(address: int, length: int, items: Sequence[tuple[int, bytes]]) -> bytes:
    """``encode_request(SyncWrite(address, length, items))``, the same bytes, with the parameters packed by one
    struct compiled per (block length, device count): the control loop sends one every cycle. Anything the
    struct cannot take as it is (an ID out of range, data of another length, an address over 16 bits) goes the
    general way, which raises InvalidRequest as it always did."""
    layout = _SYNC_WRITE_LAYOUTS.get((length, len(items)))
    if layout is None:
        if len(_SYNC_WRITE_LAYOUTS) > 256:
            _SYNC_WRITE_LAYOUTS.clear()
        layout = _SYNC_WRITE_LAYOUTS[(length, len(items))] = struct.Struct(f"<HH{f'B{length}s' * len(items)}")
    flat: list = [address, length]
    for device_id, data in items:
        if not 0 <= device_id <= MAX_ID or len(data) != length:
            return encode_request(SyncWrite(address, length, tuple((i, bytes(d)) for i, d in items)))
        flat.append(device_id)
        flat.append(data)
    try:
        params = layout.pack(*flat)
    except struct.error:
        return encode_request(SyncWrite(address, length, tuple((i, bytes(d)) for i, d in items)))
    return encode_packet(BROADCAST_ID, _SYNC_WRITE, params)


def decode_request(packet: Packet) -> Request:
    """The typed request carried by an instruction packet; MalformedPacket when the parameters do not fit."""
    try:
        instruction = Instruction(packet.instruction)
    except ValueError:
        raise MalformedPacket(f"id {packet.id}: unknown instruction 0x{packet.instruction:02X}") from None
    decoder = _DECODERS.get(instruction)
    if decoder is None:
        raise MalformedPacket(f"id {packet.id}: 0x{packet.instruction:02X} is not an instruction a host sends")
    return decoder(packet.id, packet.params, instruction)


def _need(params: bytes, n: int, what: str, exact: bool = True) -> None:
    if (len(params) != n) if exact else (len(params) < n):
        raise MalformedPacket(f"{what}: {len(params)} parameter bytes, expected {'' if exact else 'at least '}{n}")


def _le(params: bytes, at: int) -> int:
    return params[at] | (params[at + 1] << 8)


def _decode_ping(pid: int, p: bytes, _: Instruction) -> Request:
    _need(p, 0, "Ping")
    return Ping(pid)


def _decode_read(pid: int, p: bytes, _: Instruction) -> Request:
    _need(p, 4, "Read")
    return Read(pid, _le(p, 0), _le(p, 2))


def _decode_write(pid: int, p: bytes, inst: Instruction) -> Request:
    _need(p, 2, inst.name, exact=False)
    cls = Write if inst == Instruction.WRITE else RegWrite
    return cls(pid, _le(p, 0), bytes(p[2:]))


def _decode_simple(pid: int, p: bytes, inst: Instruction) -> Request:
    _need(p, 0, inst.name)
    return Action(pid) if inst == Instruction.ACTION else Reboot(pid)


def _decode_factory_reset(pid: int, p: bytes, _: Instruction) -> Request:
    _need(p, 1, "FactoryReset")
    return FactoryReset(pid, p[0])


def _decode_clear(pid: int, p: bytes, _: Instruction) -> Request:
    _need(p, 5, "Clear")
    return Clear(pid, p[0], bytes(p[1:5]))


def _decode_sync_read(pid: int, p: bytes, inst: Instruction) -> Request:
    _need(p, 4, inst.name, exact=False)
    return SyncRead(_le(p, 0), _le(p, 2), tuple(p[4:]), fast=inst == Instruction.FAST_SYNC_READ, id=pid)


def _decode_sync_write(pid: int, p: bytes, _: Instruction) -> Request:
    _need(p, 4, "SyncWrite", exact=False)
    address, length = _le(p, 0), _le(p, 2)
    slot = length + 1
    body = p[4:]
    if length == 0 or len(body) % slot:
        raise MalformedPacket(f"SyncWrite: {len(body)} bytes of items do not split into slots of 1+{length}")
    items = tuple((body[i], bytes(body[i + 1:i + slot])) for i in range(0, len(body), slot))
    return SyncWrite(address, length, items, id=pid)


def _decode_bulk_read(pid: int, p: bytes, inst: Instruction) -> Request:
    if len(p) % 5:
        raise MalformedPacket(f"{inst.name}: {len(p)} parameter bytes are not a whole number of 5-byte items")
    items = tuple((p[i], _le(p, i + 1), _le(p, i + 3)) for i in range(0, len(p), 5))
    return BulkRead(items, fast=inst == Instruction.FAST_BULK_READ, id=pid)


def _decode_bulk_write(pid: int, p: bytes, _: Instruction) -> Request:
    items = []
    i = 0
    while i < len(p):
        if len(p) - i < 5:
            raise MalformedPacket(f"BulkWrite: item at byte {i} is truncated")
        length = _le(p, i + 3)
        if len(p) - i - 5 < length:
            raise MalformedPacket(f"BulkWrite: item for id {p[i]} announces {length} bytes, {len(p) - i - 5} left")
        items.append((p[i], _le(p, i + 1), bytes(p[i + 5:i + 5 + length])))
        i += 5 + length
    return BulkWrite(tuple(items), id=pid)


_DECODERS = {
    Instruction.PING: _decode_ping,
    Instruction.READ: _decode_read,
    Instruction.WRITE: _decode_write,
    Instruction.REG_WRITE: _decode_write,
    Instruction.ACTION: _decode_simple,
    Instruction.REBOOT: _decode_simple,
    Instruction.FACTORY_RESET: _decode_factory_reset,
    Instruction.CLEAR: _decode_clear,
    Instruction.SYNC_READ: _decode_sync_read,
    Instruction.FAST_SYNC_READ: _decode_sync_read,
    Instruction.SYNC_WRITE: _decode_sync_write,
    Instruction.BULK_READ: _decode_bulk_read,
    Instruction.FAST_BULK_READ: _decode_bulk_read,
    Instruction.BULK_WRITE: _decode_bulk_write,
}

_INSTRUCTION_OF = {
    Ping: Instruction.PING,
    Read: Instruction.READ,
    Write: Instruction.WRITE,
    RegWrite: Instruction.REG_WRITE,
    Action: Instruction.ACTION,
    FactoryReset: Instruction.FACTORY_RESET,
    Reboot: Instruction.REBOOT,
    Clear: Instruction.CLEAR,
    SyncWrite: Instruction.SYNC_WRITE,
    BulkWrite: Instruction.BULK_WRITE,
}

_SYNC_WRITE = int(Instruction.SYNC_WRITE)
