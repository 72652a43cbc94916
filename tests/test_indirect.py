"""Indirect addressing of the X-series table, through every instruction of the virtual bus device.

Indirect Address N (168.., 578..) points Indirect Data N (224.., 634..) at a byte of the table; Read, Write,
Sync/Bulk Read and Write, the Fast reads and RegWrite/Action all reach the mapped bytes. The pointers are locked
while torque is on, and a pointer into the indirect blocks, between registers, past the table or into the CPC
block is refused with Data Range and changes nothing. In-process device, fake clock: cheap and exact.
"""
from __future__ import annotations

import pytest

from hil.devices.catalog import compiled_part, load_part
from hil.devices.control_table import XM430_W350 as XM
from hil.devices.control_table import RegisterMemory
from hil.devices.control_table.cpc import CPC_BASE
from hil.devices.protocol import (Action, BulkRead, BulkWrite, DataLengthError, DataRangeError, Packet, Ping, Read,
                                  Reboot, RegWrite, StreamDecoder, SyncRead, SyncWrite, Write, encode_request,
                                  parse_fast_reply)
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.firmware_sim.servo import ServoFirmware

OK, RANGE_ERROR, ACCESS_ERROR = 0, 4, 7
WRITE_POINTERS, WRITE_DATA = 168, 224  # block 1: what ROBOTIS's hardware interface writes through
READ_POINTERS, READ_DATA = 578, 634  # block 2: what it reads through
GOAL, PRESENT_CURRENT, PRESENT_VELOCITY, PRESENT_POSITION, LED = 116, 126, 128, 132, 65


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make_device(ids=(1, 2, 3)) -> VirtualBusDevice:
    return VirtualBusDevice([ServoFirmware(XM, i) for i in ids], clock=FakeClock())


def send(device: VirtualBusDevice, request) -> list[Packet]:
    device.receive(encode_request(request))
    events = StreamDecoder().feed(device.take_output())
    assert all(isinstance(e, Packet) and e.is_status for e in events), events
    return events


def one(device, request) -> Packet:
    [reply] = send(device, request)
    return reply


def le(value: int, size: int) -> bytes:
    return int(value).to_bytes(size, "little", signed=value < 0)


def map_items(device, device_id: int, pointers: int, items: list[tuple[int, int]]) -> int:
    """Point consecutive indirect entries from ``pointers`` at every byte of each (address, size), one 2-byte
    Write per byte as ROBOTIS's hardware interface does; returns the bytes mapped."""
    n = 0
    for address, size in items:
        for i in range(size):
            assert one(device, Write(device_id, pointers + 2 * n, le(address + i, 2))).error == OK
            n += 1
    return n


def test_a_mapped_read_returns_the_bytes_of_the_registers_it_points_at():
    device = make_device()
    part = device.part(1)
    part.memory.set("present_current", -7)
    part.memory.set("goal_position", 3000)
    n = map_items(device, 1, READ_POINTERS, [(PRESENT_CURRENT, 2), (GOAL, 4), (PRESENT_POSITION, 4)])
    direct = one(device, Read(1, PRESENT_CURRENT, 2)).data + one(device, Read(1, GOAL, 4)).data + \
        one(device, Read(1, PRESENT_POSITION, 4)).data
    assert one(device, Read(1, READ_DATA, n)).data == direct
    # one Read over both the registers and the indirect data: the same instant, byte for byte
    span = one(device, Read(1, GOAL, READ_DATA + n - GOAL)).data
    at = {address: span[address - GOAL:address - GOAL + size] for address, size in
          ((PRESENT_CURRENT, 2), (GOAL, 4), (PRESENT_POSITION, 4))}
    assert span[-n:] == at[PRESENT_CURRENT] + at[GOAL] + at[PRESENT_POSITION]
    # unmapped entries past the map are plain storage (their factory pointers point at themselves)
    assert one(device, Write(1, READ_DATA + n, b"\x5a")).error == OK
    assert one(device, Read(1, READ_DATA + n, 1)).data == b"\x5a"


def test_every_group_read_and_fast_read_sees_the_map():
    device = make_device()
    for i in (1, 2, 3):
        device.part(i).memory.set("goal_position", 1000 * i)
        map_items(device, i, READ_POINTERS, [(GOAL, 4), (LED, 1)])
    want = {i: le(1000 * i, 4) + b"\x00" for i in (1, 2, 3)}
    assert {r.id: r.data for r in send(device, SyncRead(READ_DATA, 5, (1, 2, 3)))} == want
    [fast] = send(device, SyncRead(READ_DATA, 5, (1, 2, 3), fast=True))
    assert [(e, i, d) for e, i, d in parse_fast_reply(fast, {1: 5, 2: 5, 3: 5})] == [(0, i, want[i]) for i in (1, 2, 3)]
    assert {r.id: r.data for r in send(device, BulkRead(((2, READ_DATA, 4), (3, READ_DATA + 4, 1))))} == \
        {2: le(2000, 4), 3: b"\x00"}
    [fast] = send(device, BulkRead(((3, READ_DATA, 5), (1, READ_DATA, 4)), fast=True))
    assert parse_fast_reply(fast, {3: 5, 1: 4}) == [(0, 3, want[3]), (0, 1, le(1000, 4))]


def test_every_write_instruction_lands_where_the_map_points():
    device = make_device()
    for i in (1, 2, 3):
        map_items(device, i, WRITE_POINTERS, [(GOAL, 4), (LED, 1)])
    assert one(device, Write(1, WRITE_DATA, le(1111, 4) + b"\x01")).error == OK
    send(device, SyncWrite(WRITE_DATA, 5, ((2, le(2222, 4) + b"\x01"),)))
    send(device, BulkWrite(((3, WRITE_DATA, le(3333, 4)),)))
    got = {i: (device.part(i).memory.get("goal_position"), device.part(i).memory.get("led")) for i in (1, 2, 3)}
    assert got == {1: (1111, 1), 2: (2222, 1), 3: (3333, 0)}
    assert one(device, Read(2, GOAL, 4)).data == one(device, Read(2, WRITE_DATA, 4)).data == le(2222, 4)
    # RegWrite through the map: checked now, applied by Action
    assert one(device, RegWrite(1, WRITE_DATA, le(1500, 4))).error == OK
    assert device.part(1).memory.get("goal_position") == 1111
    assert one(device, Action(1)).error == OK
    assert device.part(1).memory.get("goal_position") == 1500


def test_writes_through_the_map_are_checked_as_writes_of_their_registers_and_change_nothing_when_refused():
    device = make_device()
    map_items(device, 1, WRITE_POINTERS, [(GOAL, 4), (104, 4), (PRESENT_POSITION, 4)])
    one(device, Read(1, 0, 1))
    before = bytes(device.part(1).memory.data)
    # goal velocity 5000 is outside -1023..1023: the whole write, goal position included, is refused
    assert one(device, Write(1, WRITE_DATA, le(1234, 4) + le(5000, 4))).error == RANGE_ERROR
    # present position is read-only
    assert one(device, Write(1, WRITE_DATA + 8, le(1, 4))).error == ACCESS_ERROR
    # goal position outside the position limits: the servo's own rule (Data Limit, 6)
    assert one(device, Write(1, WRITE_DATA, le(5000, 4))).error == 6
    assert bytes(device.part(1).memory.data) == before


@pytest.mark.parametrize("target, why", [(662, "past the table"), (4096, "the CPC block's first byte"),
                                         (63, "below the RAM area"), (WRITE_POINTERS, "the pointers themselves"),
                                         (WRITE_DATA + 1, "another indirect data byte"),
                                         (READ_DATA, "the second block"), (150, "between registers")])
def test_a_pointer_outside_the_registers_is_refused_with_data_range_and_changes_nothing(target, why):
    device = make_device()
    one(device, Read(1, 0, 1))  # the servo publishes its state at its first access: compare the bytes after
    before = bytes(device.part(1).memory.data)
    assert one(device, Write(1, WRITE_POINTERS, le(target, 2))).error == RANGE_ERROR, why
    assert bytes(device.part(1).memory.data) == before


def test_a_cpc_part_refuses_a_pointer_into_its_cpc_block():
    desc = load_part("cpc_servo")
    data, sha = compiled_part("cpc_servo")
    part = build_cpc_part(desc, data, sha, 10, 1234)
    assert part.table.size > CPC_BASE  # the CPC block is in this table, and still out of the pointers' reach
    before = bytes(part.memory.data)
    for target in (CPC_BASE, CPC_BASE + 0x100):
        with pytest.raises(DataRangeError):
            part.write(168, le(target, 2))
    assert bytes(part.memory.data) == before
    part.write(168, le(GOAL, 2))  # a register of the servo below is fine
    assert part.memory.read(224, 1) == part.memory.read(GOAL, 1)


def test_pointers_are_locked_while_torque_is_on_and_the_map_still_works():
    device = make_device()
    map_items(device, 1, WRITE_POINTERS, [(GOAL, 4)])
    assert one(device, Write(1, 64, b"\x01")).error == OK
    assert one(device, Write(1, WRITE_POINTERS + 8, le(LED, 2))).error == ACCESS_ERROR
    assert one(device, Write(1, READ_POINTERS, le(LED, 2))).error == ACCESS_ERROR
    assert one(device, Write(1, WRITE_DATA, le(2500, 4))).error == OK  # data writes go on with torque on
    assert device.part(1).memory.get("goal_position") == 2500


def test_reboot_clears_the_map_as_it_does_all_of_ram():
    device = make_device()
    map_items(device, 1, WRITE_POINTERS, [(GOAL, 4)])
    assert one(device, Reboot(1)).error == OK
    assert one(device, Read(1, WRITE_POINTERS, 2)).data == le(WRITE_DATA, 2)  # the factory pointer
    assert one(device, Write(1, WRITE_DATA, le(1800, 4))).error == OK
    assert device.part(1).memory.get("goal_position") != 1800


def test_a_servo_in_error_raises_the_alert_bit_until_a_reboot():
    device = make_device()
    device.part(2).memory.set("hardware_error_status", 0x20)  # overload, as the real servo latches it
    assert one(device, Ping(2)).error == 0x80
    assert one(device, Read(2, 70, 1)) == Packet(2, 0x55, bytes((0x80, 0x20)))
    assert one(device, Reboot(2)).error & 0x7F == 0
    assert one(device, Ping(2)).error == 0


def test_the_memory_alone_maps_both_ways():
    m = RegisterMemory(XM)
    m.write(READ_POINTERS, le(PRESENT_POSITION, 2))
    m.set("present_position", 0x34)
    assert m.read(READ_DATA, 1) == b"\x34"
    m.write(WRITE_POINTERS, le(LED, 2))
    assert [(reg.name, value) for reg, value in m.write(WRITE_DATA, b"\x01")] == [("led", 1)]
    assert m.get("led") == 1
    with pytest.raises(DataLengthError):
        m.write(WRITE_POINTERS, le(LED, 2) + le(LED, 1)[:1])  # 3 bytes: one pointer and half of the next
