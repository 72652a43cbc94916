"""The virtual bus device driven with raw bytes: what each instruction does and which replies come back, when.

Everything here talks to VirtualBusDevice directly (receive / take_output) with a fake clock: no transport, no
host, no wall time.
"""
from __future__ import annotations

import pytest

from hil.devices.control_table import XM430_W350 as XM
from hil.devices.protocol import (BROADCAST_ID, CLEAR_ERROR, CLEAR_KEY, CLEAR_MULTI_TURN, RESET_ALL, RESET_ALL_BUT_ID,
                              RESET_ALL_BUT_ID_AND_BAUD, Action, BulkRead, BulkWrite, Clear, FactoryReset, Packet,
                              Ping, Read, Reboot, RegWrite, StreamDecoder, SyncRead, SyncWrite, Write, encode_packet,
                              encode_request, encode_status, parse_fast_reply)
from hil.devices.protocol.instructions import Instruction
from hil.firmware_sim import FaultInjector, VirtualBusDevice, WireTiming
from hil.firmware_sim.servo import ServoFirmware

OK, RESULT_FAIL, INSTRUCTION_ERROR, CRC_ERROR, RANGE_ERROR, LENGTH_ERROR, LIMIT_ERROR, ACCESS_ERROR = 0, 1, 2, 3, 4, 5, 6, 7


class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_device(ids=(1, 2, 3), **kwargs) -> VirtualBusDevice:
    kwargs.setdefault("clock", FakeClock())
    return VirtualBusDevice([ServoFirmware(XM, i) for i in ids], **kwargs)


def send(device: VirtualBusDevice, request_or_bytes) -> list[Packet]:
    """Send one instruction, return every reply (decoded; all must be valid frames)."""
    data = request_or_bytes if isinstance(request_or_bytes, bytes) else encode_request(request_or_bytes)
    device.receive(data)
    events = StreamDecoder().feed(device.take_output())
    assert all(isinstance(e, Packet) and e.is_status for e in events), events
    return events


def one(device, request) -> Packet:
    replies = send(device, request)
    assert len(replies) == 1, replies
    return replies[0]


def write(device, device_id, name, value) -> None:
    reg = XM[name]
    reply = one(device, Write(device_id, reg.address, reg.encode(value)))
    assert reply.error == OK, reply


def get(device, device_id, name) -> int:
    return device.part(device_id).memory.get(name)


def read(device, device_id, name) -> int:
    reg = XM[name]
    reply = one(device, Read(device_id, reg.address, reg.size))
    assert reply.error == OK and reply.id == device_id
    return reg.decode(reply.data)


# ---------------------------------------------------------------------------------------------- basics
def test_ping_and_read_answer_with_the_right_bytes():
    device = make_device()
    reply = one(device, Ping(2))
    assert (reply.id, reply.error, reply.data) == (2, OK, (1020).to_bytes(2, "little") + bytes((46,)))
    reply = one(device, Read(3, 0, 2))
    assert (reply.id, reply.data) == (3, (1020).to_bytes(2, "little"))
    assert read(device, 1, "present_position") == 2048
    assert send(device, Ping(42)) == []  # nobody there


@pytest.mark.parametrize("level", [0, 1, 2])
def test_status_return_level(level):
    device = make_device()
    device.receive(encode_request(Write(2, 68, bytes((level,)))))
    device.take_output()
    assert get(device, 2, "status_return_level") == level
    # ping always answers
    assert len(send(device, Ping(2))) == 1
    # reads answer at level >= 1
    assert len(send(device, Read(2, 132, 4))) == (1 if level >= 1 else 0)
    # writes (and the other instructions) answer only at level 2; they take effect either way
    assert len(send(device, Write(2, 65, b"\x01"))) == (1 if level == 2 else 0)
    assert get(device, 2, "led") == 1
    assert len(send(device, RegWrite(2, 65, b"\x00"))) == (1 if level == 2 else 0)
    assert len(send(device, Action(2))) == (1 if level == 2 else 0)
    assert get(device, 2, "led") == 0
    # errors too: a refused write answers only at level 2
    assert len(send(device, Write(2, 132, bytes(4)))) == (1 if level == 2 else 0)
    # group reads skip a part below level 1
    assert [r.id for r in send(device, SyncRead(132, 4, (1, 2, 3)))] == ([1, 2, 3] if level >= 1 else [1, 3])
    # the other parts are untouched by part 2's level
    assert len(send(device, Write(1, 65, b"\x01"))) == 1


def test_broadcast_write_changes_every_part_and_answers_nothing():
    device = make_device()
    assert send(device, Write(BROADCAST_ID, 65, b"\x01")) == []
    assert [get(device, i, "led") for i in (1, 2, 3)] == [1, 1, 1]
    # a refused broadcast write is silent too and changes nothing
    assert send(device, Write(BROADCAST_ID, 116, (5_000_000).to_bytes(4, "little"))) == []
    assert [get(device, i, "goal_position") for i in (1, 2, 3)] == [0, 0, 0]


def test_broadcast_ping_answers_once_per_part_in_id_order():
    device = make_device(ids=(7, 3, 12, 1), faults=FaultInjector())
    replies = send(device, Ping(BROADCAST_ID))
    assert [r.id for r in replies] == [1, 3, 7, 12]
    assert all(r.error == OK and r.data == b"\xfc\x03\x2e" for r in replies)
    device.faults.vanished.add(3)
    assert [r.id for r in send(device, Ping(BROADCAST_ID))] == [1, 7, 12]


# ---------------------------------------------------------------------------------------------- RegWrite / Action
def test_reg_write_waits_for_action():
    device = make_device()
    reg = XM["goal_position"]
    assert one(device, RegWrite(1, reg.address, reg.encode(1234))).error == OK
    assert get(device, 1, "goal_position") == 0  # nothing changes before Action
    assert read(device, 1, "registered_instruction") == 1
    assert read(device, 2, "registered_instruction") == 0
    assert one(device, Action(1)).error == OK
    assert get(device, 1, "goal_position") == 1234
    assert read(device, 1, "registered_instruction") == 0
    # a second Action has nothing to do
    assert one(device, Action(1)).error == INSTRUCTION_ERROR


def test_action_without_reg_write_is_an_instruction_error():
    device = make_device()
    reply = one(device, Action(2))
    assert (reply.id, reply.error, reply.data) == (2, INSTRUCTION_ERROR, b"")


def test_broadcast_action_applies_every_pending_reg_write_silently():
    device = make_device()
    for i, value in ((1, 10), (3, 30)):
        one(device, RegWrite(i, 116, value.to_bytes(4, "little")))
    assert send(device, Action(BROADCAST_ID)) == []
    assert [get(device, i, "goal_position") for i in (1, 2, 3)] == [10, 0, 30]
    assert [get(device, i, "registered_instruction") for i in (1, 2, 3)] == [0, 0, 0]


def test_reg_write_is_validated_when_registered():
    device = make_device()
    assert one(device, RegWrite(1, 116, (5_000_000).to_bytes(4, "little"))).error == RANGE_ERROR
    assert get(device, 1, "registered_instruction") == 0
    assert one(device, Action(1)).error == INSTRUCTION_ERROR


# ---------------------------------------------------------------------------------------------- Reboot / reset
def test_reboot_restores_ram_and_keeps_eeprom():
    device = make_device()
    write(device, 1, "return_delay_time", 10)  # EEPROM
    write(device, 1, "operating_mode", 4)  # EEPROM
    write(device, 1, "led", 1)  # RAM
    write(device, 1, "profile_velocity", 77)  # RAM
    send(device, Write(1, 68, b"\x01"))  # status return level 1 (RAM): back to 2 after the reboot
    assert send(device, RegWrite(1, 65, b"\x00")) == []  # level 1: no answer to a RegWrite
    assert send(device, Reboot(1)) == []  # level 1: no answer to a Reboot
    assert (get(device, 1, "return_delay_time"), get(device, 1, "operating_mode")) == (10, 4)
    assert (get(device, 1, "led"), get(device, 1, "profile_velocity"), get(device, 1, "status_return_level")) == (0, 0, 2)
    assert get(device, 1, "id") == 1
    assert one(device, Action(1)).error == INSTRUCTION_ERROR  # the pending RegWrite is gone
    assert one(device, Reboot(2)).error == OK


def test_reboot_releases_torque():
    device = make_device()
    write(device, 2, "torque_enable", 1)
    assert one(device, Reboot(2)).error == OK
    assert get(device, 2, "torque_enable") == 0


def _customise(device, device_id):
    write(device, device_id, "baud_rate", 3)
    write(device, device_id, "return_delay_time", 0)
    write(device, device_id, "led", 1)


def test_factory_reset_all_goes_back_to_id_1():
    device = make_device(ids=(5,))
    _customise(device, 5)
    reply = one(device, FactoryReset(5, RESET_ALL))
    assert (reply.id, reply.error) == (5, OK)  # answered under the old ID
    assert send(device, Ping(5)) == []
    assert one(device, Ping(1)).id == 1
    assert (get(device, 1, "baud_rate"), get(device, 1, "return_delay_time"), get(device, 1, "led")) == (1, 250, 0)


def test_factory_reset_all_but_id():
    device = make_device(ids=(5,))
    _customise(device, 5)
    assert one(device, FactoryReset(5, RESET_ALL_BUT_ID)).error == OK
    assert (get(device, 5, "id"), get(device, 5, "baud_rate"), get(device, 5, "return_delay_time")) == (5, 1, 250)


def test_factory_reset_all_but_id_and_baud():
    device = make_device(ids=(5,))
    _customise(device, 5)
    assert one(device, FactoryReset(5, RESET_ALL_BUT_ID_AND_BAUD)).error == OK
    assert (get(device, 5, "id"), get(device, 5, "baud_rate"), get(device, 5, "return_delay_time")) == (5, 3, 250)
    assert get(device, 5, "led") == 0


def test_reboot_and_factory_reset_answer_under_the_level_in_force_before_them():
    device = make_device(ids=(5, 6))
    for i in (5, 6):
        send(device, Write(i, 68, b"\x00"))  # status return level 0: only pings answer
    assert send(device, Reboot(5)) == []
    assert get(device, 5, "status_return_level") == 2  # ...although the reboot put level 2 back
    assert send(device, FactoryReset(6, RESET_ALL_BUT_ID)) == []
    assert get(device, 6, "status_return_level") == 2
    assert one(device, Reboot(6)).error == OK


def test_factory_reset_refusals():
    device = make_device(ids=(5,))
    write(device, 5, "return_delay_time", 0)
    assert one(device, FactoryReset(5, 0x03)).error == RESULT_FAIL  # unknown option
    write(device, 5, "torque_enable", 1)
    assert one(device, FactoryReset(5, RESET_ALL)).error == ACCESS_ERROR  # not while torque is on
    assert (get(device, 5, "id"), get(device, 5, "return_delay_time")) == (5, 0)


# ---------------------------------------------------------------------------------------------- Clear
def _multi_turn(device, device_id, goal):
    write(device, device_id, "operating_mode", 4)  # extended position: multi-turn
    write(device, device_id, "torque_enable", 1)
    write(device, device_id, "goal_position", goal)
    device.clock.t += 5.0  # 100 time constants: settled, not moving
    assert read(device, device_id, "present_position") == goal
    assert read(device, device_id, "moving") == 0


def test_clear_multi_turn_with_the_right_key():
    device = make_device()
    _multi_turn(device, 1, 10_000)
    assert one(device, Clear(1, CLEAR_MULTI_TURN, CLEAR_KEY)).error == OK
    assert read(device, 1, "present_position") == 10_000 % 4096


def test_clear_with_a_wrong_key_changes_nothing():
    device = make_device()
    _multi_turn(device, 1, 10_000)
    reply = one(device, Clear(1, CLEAR_MULTI_TURN, b"\x44\x58\x4c\x23"))
    assert reply.error == RESULT_FAIL
    assert read(device, 1, "present_position") == 10_000


def test_clear_refused_while_moving_and_unknown_option():
    device = make_device()
    write(device, 1, "operating_mode", 4)
    write(device, 1, "torque_enable", 1)
    write(device, 1, "goal_position", 100_000)
    device.clock.t += 0.01  # far from the goal: moving fast
    assert read(device, 1, "moving") == 1
    assert one(device, Clear(1, CLEAR_MULTI_TURN, CLEAR_KEY)).error == RESULT_FAIL
    assert one(device, Clear(1, 0x07, CLEAR_KEY)).error == RESULT_FAIL


def test_clear_error_resets_hardware_error_status():
    device = make_device()
    device.part(2).memory.set("hardware_error_status", 0x04)
    assert one(device, Clear(2, CLEAR_ERROR, CLEAR_KEY)).error == OK
    assert get(device, 2, "hardware_error_status") == 0


# ---------------------------------------------------------------------------------------------- bad instructions
@pytest.mark.parametrize("code", [0x00, 0x07, 0x09, 0x11, 0x83 + 0x40, 0xFF])
def test_unknown_instruction_answers_instruction_error(code):
    device = make_device()
    reply = one(device, encode_packet(2, code, b"\x00\x00"))
    assert (reply.id, reply.error) == (2, INSTRUCTION_ERROR)
    assert device.counters["malformed"] == 1


@pytest.mark.parametrize("instruction,params", [
    (Instruction.READ, b"\x84\x00"), (Instruction.READ, b"\x84\x00\x04\x00\x00"), (Instruction.PING, b"\x01"),
    (Instruction.WRITE, b"\x74"), (Instruction.FACTORY_RESET, b""), (Instruction.CLEAR, b"\x01\x44"),
    (Instruction.REBOOT, b"\x00"), (Instruction.ACTION, b"\x00"),
])
def test_malformed_parameters_answer_data_length_error(instruction, params):
    device = make_device()
    reply = one(device, encode_packet(3, instruction, params))
    assert (reply.id, reply.error, reply.data) == (3, LENGTH_ERROR, b"")
    assert send(device, encode_packet(BROADCAST_ID, instruction, params)) == []  # broadcast: silence


def test_status_packets_on_the_bus_are_ignored():
    device = make_device()
    assert send(device, encode_status(1, 0, b"\x01\x02")) == []
    assert device.counters["packets"] == 0


def test_corrupted_instruction_answers_crc_error():
    device = make_device()
    frame = bytearray(encode_request(Write(2, 65, b"\x01")))
    frame[9] ^= 0x10  # a parameter byte
    reply = one(device, bytes(frame))
    assert (reply.id, reply.error) == (2, CRC_ERROR)
    assert get(device, 2, "led") == 0  # not executed
    assert device.counters["crc_errors"] == 1
    # the next good instruction is executed normally
    assert one(device, Write(2, 65, b"\x01")).error == OK and get(device, 2, "led") == 1
    # a corrupted broadcast, or one for a part that is not there, gets no answer
    bad_broadcast = bytearray(encode_request(Write(BROADCAST_ID, 65, b"\x00")))
    bad_broadcast[-1] ^= 1
    assert send(device, bytes(bad_broadcast)) == []
    bad_absent = bytearray(encode_request(Read(9, 132, 4)))
    bad_absent[-3] ^= 1
    assert send(device, bytes(bad_absent)) == []


def test_garbage_between_instructions_is_skipped():
    device = make_device()
    replies = send(device, b"\x00\xff\x12\xff\xff" + encode_request(Ping(1)) + b"\xfd\x00" + encode_request(Ping(3)))
    assert [r.id for r in replies] == [1, 3]


def test_refused_read_and_write_answer_with_their_error_code():
    device = make_device()
    reply = one(device, Read(1, 660, 4))
    assert (reply.error, reply.data) == (ACCESS_ERROR, b"")
    assert one(device, Write(1, 132, bytes(4))).error == ACCESS_ERROR
    assert one(device, Write(1, 116, bytes(2))).error == LENGTH_ERROR
    assert one(device, Write(1, 104, (2000).to_bytes(4, "little"))).error == RANGE_ERROR
    assert one(device, Write(1, 116, (5000).to_bytes(4, "little"))).error == LIMIT_ERROR  # position limits
    write(device, 1, "torque_enable", 1)
    assert one(device, Write(1, 9, b"\x00")).error == ACCESS_ERROR  # EEPROM locked


# ---------------------------------------------------------------------------------------------- group instructions
def test_sync_and_bulk_reads_answer_in_the_order_asked():
    device = make_device(ids=(1, 2, 3, 4))
    for i in (1, 2, 3, 4):
        write(device, i, "goal_position", 100 * i)
    replies = send(device, SyncRead(116, 4, (3, 1, 9, 4)))
    assert [(r.id, int.from_bytes(r.data, "little")) for r in replies] == [(3, 300), (1, 100), (4, 400)]
    [fast] = send(device, SyncRead(116, 4, (3, 1, 4), fast=True))
    assert parse_fast_reply(fast, {3: 4, 1: 4, 4: 4}) == [(0, 3, (300).to_bytes(4, "little")),
                                                          (0, 1, (100).to_bytes(4, "little")),
                                                          (0, 4, (400).to_bytes(4, "little"))]
    replies = send(device, BulkRead(((2, 116, 4), (4, 0, 2))))
    assert [(r.id, r.data) for r in replies] == [(2, (200).to_bytes(4, "little")), (4, (1020).to_bytes(2, "little"))]
    [fast] = send(device, BulkRead(((2, 116, 4), (4, 0, 2), (1, 660, 4)), fast=True))
    assert parse_fast_reply(fast, {2: 4, 4: 2, 1: 4}) == [(0, 2, (200).to_bytes(4, "little")),
                                                          (0, 4, (1020).to_bytes(2, "little")),
                                                          (ACCESS_ERROR, 1, bytes(4))]


def test_sync_and_bulk_writes_are_silent_and_skip_refused_items():
    device = make_device()
    items = ((1, (11).to_bytes(4, "little")), (2, (5_000_000).to_bytes(4, "little")), (3, (33).to_bytes(4, "little")))
    assert send(device, SyncWrite(116, 4, items)) == []
    assert [get(device, i, "goal_position") for i in (1, 2, 3)] == [11, 0, 33]
    assert send(device, BulkWrite(((1, 65, b"\x01"), (3, 112, (9).to_bytes(4, "little"))))) == []
    assert (get(device, 1, "led"), get(device, 3, "profile_velocity")) == (1, 9)


def test_changing_an_id_takes_effect_at_once():
    device = make_device()
    reply = one(device, Write(2, 7, b"\x09"))
    assert (reply.id, reply.error) == (2, OK)  # the answer still comes from the old ID
    assert send(device, Ping(2)) == []
    assert one(device, Ping(9)).id == 9


# ---------------------------------------------------------------------------------------------- wire timing
REQUEST_BYTES = len(encode_request(Read(1, 132, 4)))  # 14
REPLY_BYTES = 11 + 4  # header 4, id, length 2, instruction, error, CRC 2 + data


def _release_of_one_read(baud: int, start: float = 10.0, delay_units: int | None = None, **timing) -> float:
    clock = FakeClock(start)
    device = make_device(timing=WireTiming(baud=baud, **timing), clock=clock)
    if delay_units is not None:
        device.part(1).memory.set("return_delay_time", delay_units)
    device.receive(encode_request(Read(1, 132, 4)))
    release = device.next_release_s()
    assert release is not None
    # nothing is handed over before its time, then exactly the reply
    assert device.take_output(release - 1e-9) == b""
    reply = device.take_output(release)
    assert len(reply) == REPLY_BYTES
    assert device.next_release_s() is None
    return release


def test_read_reply_release_time_is_exact():
    release = _release_of_one_read(1_000_000)
    request_wire = REQUEST_BYTES * 10 / 1_000_000  # 140 us
    return_delay = 250 * 2e-6  # default return delay time, 500 us
    reply_wire = REPLY_BYTES * 10 / 1_000_000  # 150 us
    assert release == pytest.approx(10.0 + request_wire + return_delay + reply_wire, abs=1e-12)
    assert release - 10.0 == pytest.approx(790e-6, abs=1e-12)


@pytest.mark.parametrize("units", [0, 1, 100, 254])
def test_return_delay_register_sets_the_delay(units):
    release = _release_of_one_read(1_000_000, delay_units=units)
    assert release - 10.0 == pytest.approx((REQUEST_BYTES + REPLY_BYTES) * 1e-5 + units * 2e-6, abs=1e-12)


def test_adapter_latency_and_switched_off_effects():
    base = _release_of_one_read(1_000_000)
    assert _release_of_one_read(1_000_000, adapter_latency_s=0.001) - base == pytest.approx(0.001, abs=1e-12)
    no_delay = _release_of_one_read(1_000_000, return_delay=False)
    assert base - no_delay == pytest.approx(500e-6, abs=1e-12)
    no_wire = _release_of_one_read(1_000_000, wire=False)
    assert no_wire - 10.0 == pytest.approx(500e-6, abs=1e-12)


def test_one_vs_four_megabaud():
    slow = _release_of_one_read(1_000_000) - 10.0
    fast = _release_of_one_read(4_000_000) - 10.0
    wire_bytes = REQUEST_BYTES + REPLY_BYTES
    assert slow == pytest.approx(wire_bytes * 10 / 1_000_000 + 500e-6, abs=1e-12)
    assert fast == pytest.approx(wire_bytes * 10 / 4_000_000 + 500e-6, abs=1e-12)
    assert slow - fast == pytest.approx(wire_bytes * 10 * (1 / 1_000_000 - 1 / 4_000_000), abs=1e-12)
    assert slow > fast


def test_broadcast_ping_replies_follow_one_another_on_the_wire():
    clock = FakeClock(1.0)
    device = make_device(ids=(1, 2, 3), timing=WireTiming(baud=1_000_000), clock=clock)
    for i, units in ((1, 10), (2, 20), (3, 30)):
        device.part(i).memory.set("return_delay_time", units)
    device.receive(encode_request(Ping(BROADCAST_ID)))
    t = 1.0 + 10 * 10e-6  # the 10-byte ping is on the wire
    got = []
    for units in (10, 20, 30):
        t += units * 2e-6 + 14 * 10e-6  # each answer waits for the line, its return delay, then 14 bytes
        release = device.next_release_s()
        assert release == pytest.approx(t, abs=1e-12)
        got += StreamDecoder().feed(device.take_output(release))
    assert [p.id for p in got] == [1, 2, 3]


def test_a_request_sent_while_the_line_is_busy_waits_for_it():
    clock = FakeClock(0.0)
    device = make_device(timing=WireTiming(baud=1_000_000), clock=clock)
    device.part(1).memory.set("return_delay_time", 0)
    device.part(2).memory.set("return_delay_time", 0)
    device.receive(encode_request(Read(1, 132, 4)))  # reply on the wire until 290 us
    first = device.next_release_s()
    assert first == pytest.approx(290e-6, abs=1e-12)
    clock.t = 100e-6  # the host talks over the reply: its bytes follow the line's schedule
    device.receive(encode_request(Read(2, 132, 4)))
    device.take_output(first)
    assert device.next_release_s() == pytest.approx(290e-6 + 290e-6, abs=1e-12)
