"""The bus's compiled fast paths give the bytes, values and errors of the general code they stand in for.

The control loop's SyncWrite is packed by one struct per (block length, device count), a fast reply
whose slots come complete and in order is unpacked by one struct per request, and a control table's host write
is checked against a layout worked out once per span. Each is compared here with the general path on the same
inputs, including the inputs the fast path must hand back to it (stuffing patterns, bad IDs, slots out of
order or missing, refused spans, EEPROM locked by torque).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hil.devices.control_table import XM430_W350 as XM
from hil.devices.control_table import RegisterMemory
from hil.devices.protocol import (BROADCAST_ID, AccessError, DataLengthError, DataRangeError, InvalidRequest,
                              MalformedPacket, StatusError, SyncWrite, decode_frame, encode_fast_reply,
                              encode_request, encode_sync_write, parse_fast_reply)
from hil.devices.protocol import status as status_module


@settings(max_examples=200, deadline=None)
@given(address=st.integers(0, 0xFFFF), length=st.integers(1, 6),
       rows=st.lists(st.tuples(st.integers(0, 252), st.binary(min_size=0, max_size=7)), max_size=8))
def test_compiled_sync_write_is_byte_identical_to_the_general_encoder(address, length, rows):
    items = [(i, data[:length].ljust(length, b"\xff")) for i, data in rows]  # FF runs exercise the stuffing
    assert encode_sync_write(address, length, items) == encode_request(SyncWrite(address, length, tuple(items)))


def test_compiled_sync_write_hands_what_it_cannot_pack_to_the_general_encoder():
    with pytest.raises(InvalidRequest, match="ID 253"):
        encode_sync_write(116, 4, [(1, bytes(4)), (253, bytes(4))])
    with pytest.raises(InvalidRequest, match="id 2 has 3 bytes"):
        encode_sync_write(116, 4, [(1, bytes(4)), (2, bytes(3))])
    with pytest.raises(InvalidRequest, match="address 70000"):
        encode_sync_write(70000, 4, [(1, bytes(4))])
    stuffed = encode_sync_write(116, 4, [(1, b"\xff\xff\xfd\x00")])
    assert b"\xff\xff\xfd\xfd" in stuffed[7:]  # the pattern inside the body is stuffed, as on the wire


def _walk(packet, lengths):
    """parse_fast_reply with the compiled layout out of the way (the general slot walk)."""
    saved = status_module._fast_layout
    status_module._fast_layout = lambda lengths: (status_module.struct.Struct("<0s"), ())  # never matches
    try:
        return parse_fast_reply(packet, lengths)
    finally:
        status_module._fast_layout = saved


@pytest.mark.parametrize("order,asked", [
    ((1, 2, 3), {1: 4, 2: 4, 3: 4}),  # complete, in order: the compiled layout
    ((3, 1, 2), {1: 4, 2: 4, 3: 4}),  # out of order: the walk
    ((1, 3), {1: 4, 2: 4, 3: 4}),  # one missing: the walk, which returns what came
    ((5, 6), {5: 2, 6: 7}),  # mixed lengths (a bulk read)
])
def test_compiled_fast_reply_parse_equals_the_walk(order, asked):
    slots = [(i & 1, i, bytes(range(i, i + asked[i]))) for i in order]
    packet = decode_frame(encode_fast_reply(slots))
    assert parse_fast_reply(packet, asked) == _walk(packet, asked) == slots


def test_compiled_fast_reply_parse_still_refuses_what_the_walk_refuses():
    packet = decode_frame(encode_fast_reply([(0, 1, bytes(4)), (0, 9, bytes(4))]))
    with pytest.raises(MalformedPacket, match="id 9, which was not asked"):
        parse_fast_reply(packet, {1: 4, 2: 4})
    assert packet.id == BROADCAST_ID


def _refusal(memory, address, data):
    try:
        memory.check_write(address, data)
    except StatusError as exc:
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("address,data,error", [
    (116, (5000).to_bytes(4, "little"), None),  # goal position, in range
    (116, (5000).to_bytes(4, "little", signed=True)[:3], DataLengthError),  # part of a register
    (117, bytes(4), DataLengthError),  # not at a register's start
    (132, bytes(4), AccessError),  # present position: read-only
    (64, bytes((7,)), DataRangeError),  # torque enable = 7
    (XM.size, bytes(1), AccessError),  # outside the table
])
def test_compiled_write_layout_refuses_as_the_byte_walk(address, data, error):
    fast = RegisterMemory(XM)
    got = _refusal(fast, address, data)
    assert _refusal(fast, address, data) == got  # the second write goes through the cached layout
    walked = RegisterMemory(XM)._check_write_walk
    try:
        walked(address, data)
        expected = None
    except StatusError as exc:
        expected = (type(exc), str(exc))
    assert got == expected
    assert (got[0] if got else None) is error


def test_compiled_write_layout_sees_the_eeprom_lock_change_with_torque():
    memory = RegisterMemory(XM)
    operating_mode = XM["operating_mode"].address
    assert memory.check_write(operating_mode, bytes((3,)))  # torque off: EEPROM writable, layout now cached
    memory.set("torque_enable", 1)
    with pytest.raises(AccessError, match="locked while torque is enabled"):
        memory.check_write(operating_mode, bytes((3,)))
    memory.set("torque_enable", 0)
    assert [(reg.name, value) for reg, value in memory.check_write(operating_mode, bytes((4,)))] == [("operating_mode", 4)]


def test_getter_and_setter_agree_with_get_and_set():
    memory = RegisterMemory(XM)
    get, put = memory.getter("present_position"), memory.setter("present_position")
    put(-1234)
    assert get() == memory.get("present_position") == -1234
    with pytest.raises(OverflowError):
        put(1 << 40)  # as set() refuses it
    with pytest.raises(KeyError, match="no register"):
        memory.getter("present_positoin")
