"""Our host controller (BusHost over open_transport) against the virtual device, over all three transports.

The ``bus`` fixture (conftest.py) is parametrized: ``sim://servo_chain`` in-process, the pty of a
``hil sim --pty`` subprocess, and the socket:// URL of a ``hil sim --tcp 0`` subprocess. Each test gets a
fresh device with 17 XM430-W350-compatible servos, IDs 1..17, so every test starts from factory state.
"""
from __future__ import annotations

import time

import pytest

from hil.devices.control_table import EXTENDED_POSITION_MODE, POSITION_MODE, XM430_W350
from hil.devices.protocol import (RESET_ALL_BUT_ID_AND_BAUD, AccessError, DataLimitError, DataRangeError,
                              InstructionError, StatusError)
from hil.runtime.bus import BusTimeout

SERVO_IDS = tuple(range(1, 18))  # config/robots/servo_chain.yaml
XM430_MODEL, FIRMWARE_VERSION = 1020, 46
T = XM430_W350  # registers by name

STUFFED_ID = 5
STUFFED_VALUE = -131073
STUFFED_BYTES = b"\xff\xff\xfd\xff"  # needs byte stuffing inside any packet
MAX_POLLS = 400


def u(reg_name: str, value: int) -> bytes:
    return T[reg_name].encode(value)


def get(bus, dxl_id: int, reg_name: str) -> int:
    return bus.read_register(dxl_id, T[reg_name])


def put(bus, dxl_id: int, reg_name: str, value: int) -> None:
    bus.write_register(dxl_id, T[reg_name], value)


def extended_mode(bus, dxl_id: int) -> None:
    put(bus, dxl_id, "operating_mode", EXTENDED_POSITION_MODE)
    assert get(bus, dxl_id, "operating_mode") == EXTENDED_POSITION_MODE


def stuffed_goals(bus) -> dict[int, int]:
    """Goal positions written to all servos with one sync write; STUFFED_ID gets the stuffed value."""
    extended_mode(bus, STUFFED_ID)
    goals = {i: (STUFFED_VALUE if i == STUFFED_ID else 100 * i + 3) for i in SERVO_IDS}
    assert u("goal_position", STUFFED_VALUE) == STUFFED_BYTES
    bus.sync_write(T["goal_position"].address, 4, {i: u("goal_position", g) for i, g in goals.items()})
    return goals


def poll(bus, dxl_id: int, reg_name: str, done, polls: int = MAX_POLLS, pause_s: float = 0.005) -> list[int]:
    """Read a register until ``done(value)`` or ``polls`` reads; returns every value read."""
    values = []
    for _ in range(polls):
        values.append(get(bus, dxl_id, reg_name))
        if done(values[-1]):
            break
        time.sleep(pause_s)
    return values


# ping -----------------------------------------------------------------------------------------------------------

def test_ping(bus):
    assert bus.ping(1) == (XM430_MODEL, FIRMWARE_VERSION)
    assert bus.ping(17) == (XM430_MODEL, FIRMWARE_VERSION)


def test_ping_all_finds_17(bus):
    expected = {i: (XM430_MODEL, FIRMWARE_VERSION) for i in SERVO_IDS}
    assert bus.ping_all(quiet_s=0.1) == expected  # ends once the line stayed quiet: nobody else answers
    assert bus.ping_all(expected_ids=SERVO_IDS, quiet_s=0.5) == expected  # ends with the last expected ID
    assert bus.ping(9) == (XM430_MODEL, FIRMWARE_VERSION)  # nothing left over on the line


def test_read_of_missing_id_raises_bus_timeout_naming_it(bus):
    with pytest.raises(BusTimeout, match=r"\bid 42\b") as info:
        bus.read(42, T["led"].address, 1)
    assert info.value.missing_ids == (42,)
    assert bus.read(1, T["led"].address, 1) == b"\x00"  # the bus recovers


def test_sync_read_with_missing_id_names_it(bus):
    for fast in (False, True):
        with pytest.raises(BusTimeout, match=r"\b42\b") as info:
            bus.sync_read(T["goal_position"].address, 4, [1, 42], fast=fast)
        assert info.value.missing_ids == (42,)
    assert bus.sync_read(T["goal_position"].address, 4, [1, 2]) == {1: bytes(4), 2: bytes(4)}


# read / write ---------------------------------------------------------------------------------------------------

def test_read_write_1_byte(bus):
    led = T["led"].address
    assert bus.read(3, led, 1) == b"\x00"
    bus.write(3, led, b"\x01")
    assert bus.read(3, led, 1) == b"\x01"
    assert bus.read(4, led, 1) == b"\x00"


def test_read_write_2_bytes(bus):
    assert get(bus, 2, "model_number") == XM430_MODEL
    put(bus, 2, "goal_pwm", -300)
    assert bus.read(2, T["goal_pwm"].address, 2) == (-300).to_bytes(2, "little", signed=True)
    assert get(bus, 2, "goal_pwm") == -300
    put(bus, 2, "velocity_p_gain", 0x1234)
    assert get(bus, 2, "velocity_p_gain") == 0x1234


def test_read_write_4_bytes(bus):
    put(bus, 6, "goal_position", 1000)
    assert bus.read(6, T["goal_position"].address, 4) == (1000).to_bytes(4, "little")
    put(bus, 6, "profile_velocity", 300)
    assert get(bus, 6, "profile_velocity") == 300
    assert get(bus, 6, "present_position") == 2048
    # a multi-register block in one read: goal velocity, profile acceleration, profile velocity, goal position
    block = bus.read(6, T["goal_velocity"].address, 16)
    assert block == bytes(8) + (300).to_bytes(4, "little") + (1000).to_bytes(4, "little")


def test_write_and_read_of_a_stuffed_value(bus):
    extended_mode(bus, STUFFED_ID)
    bus.write(STUFFED_ID, T["goal_position"].address, STUFFED_BYTES)
    assert bus.read(STUFFED_ID, T["goal_position"].address, 4) == STUFFED_BYTES


def test_stuffing_at_the_end_of_packets(bus):
    extended_mode(bus, STUFFED_ID)
    bus.write(STUFFED_ID, T["goal_position"].address, STUFFED_BYTES)
    assert bus.read(STUFFED_ID, T["goal_position"].address, 3) == STUFFED_BYTES[:3]  # reply ends in FF FF FD
    with pytest.raises(DataRangeError):  # parameters end in FF FF FD: parsed, then refused
        bus.write(STUFFED_ID, T["goal_position"].address, b"\x00\xff\xff\xfd")
    assert bus.read(STUFFED_ID, T["goal_position"].address, 4) == STUFFED_BYTES
    assert bus.stats.retries == 0 and bus.stats.crc_errors == 0


# group instructions ---------------------------------------------------------------------------------------------

def test_sync_write_with_stuffed_value(bus):
    goals = stuffed_goals(bus)
    for dxl_id, goal in goals.items():
        assert get(bus, dxl_id, "goal_position") == goal, dxl_id


@pytest.mark.parametrize("fast", [False, True], ids=["sync_read", "fast_sync_read"])
def test_sync_read(bus, fast):
    goals = stuffed_goals(bus)
    address = T["goal_position"].address
    raw = bus.sync_read(address, 4, SERVO_IDS, fast=fast)
    assert set(raw) == set(SERVO_IDS)
    assert {i: T["goal_position"].decode(d) for i, d in raw.items()} == goals
    assert raw[STUFFED_ID] == STUFFED_BYTES
    # again, with new values and a different order of IDs
    new_goals = {i: g - 17 for i, g in goals.items()}
    bus.sync_write_register(T["goal_position"], new_goals)
    order = tuple(reversed(SERVO_IDS))
    assert bus.sync_read_register(T["goal_position"], order, fast=fast) == new_goals


@pytest.mark.parametrize("fast", [False, True], ids=["bulk_read", "fast_bulk_read"])
def test_bulk_read(bus, fast):
    put(bus, 1, "goal_position", 1234)
    put(bus, 2, "led", 1)
    put(bus, 3, "goal_pwm", -200)
    extended_mode(bus, STUFFED_ID)
    bus.write(STUFFED_ID, T["goal_position"].address, STUFFED_BYTES)
    wanted = {1: "goal_position", 2: "led", 3: "goal_pwm", 4: "model_number", STUFFED_ID: "goal_position",
              17: "present_position"}
    items = [(i, T[name].address, T[name].size) for i, name in wanted.items()]
    raw = bus.bulk_read(items, fast=fast)
    values = {i: T[wanted[i]].decode(d) for i, d in raw.items()}
    assert values == {1: 1234, 2: 1, 3: -200, 4: XM430_MODEL, STUFFED_ID: STUFFED_VALUE, 17: 2048}
    with pytest.raises(ValueError):
        bus.bulk_read([(1, 65, 1), (1, 116, 4)], fast=fast)


def test_bulk_write(bus):
    extended_mode(bus, STUFFED_ID)
    bus.bulk_write([
        (1, T["led"].address, u("led", 1)),
        (2, T["goal_pwm"].address, u("goal_pwm", -400)),
        (3, T["goal_position"].address, u("goal_position", 3000)),
        (4, T["profile_velocity"].address, u("profile_velocity", 250)),
        (STUFFED_ID, T["goal_position"].address, STUFFED_BYTES),
    ])
    assert get(bus, 1, "led") == 1
    assert get(bus, 2, "goal_pwm") == -400
    assert get(bus, 3, "goal_position") == 3000
    assert get(bus, 4, "profile_velocity") == 250
    assert get(bus, STUFFED_ID, "goal_position") == STUFFED_VALUE
    assert get(bus, 6, "led") == 0


def test_group_write_refused_by_one_servo_still_reaches_the_others(bus):
    # no status packets for group writes: a refused slot is silently dropped, the others apply
    bus.sync_write(T["led"].address, 1, {1: b"\x01", 2: b"\x02", 3: b"\x01"})
    assert {i: get(bus, i, "led") for i in (1, 2, 3)} == {1: 1, 2: 0, 3: 1}


def test_reg_write_and_broadcast_action(bus):
    bus.reg_write(4, T["goal_position"].address, u("goal_position", 2500))
    bus.reg_write(6, T["led"].address, b"\x01")
    assert get(bus, 4, "goal_position") == 0
    assert get(bus, 6, "led") == 0
    assert get(bus, 4, "registered_instruction") == 1
    bus.action()  # broadcast: no status
    assert get(bus, 4, "goal_position") == 2500
    assert get(bus, 6, "led") == 1
    assert get(bus, 4, "registered_instruction") == 0
    assert get(bus, 6, "registered_instruction") == 0


def test_reg_write_and_unicast_action(bus):
    bus.reg_write(6, T["goal_position"].address, u("goal_position", 1500))
    bus.reg_write(7, T["goal_position"].address, u("goal_position", 1600))
    bus.action(6)
    assert get(bus, 6, "goal_position") == 1500
    assert get(bus, 7, "goal_position") == 0  # still registered
    assert get(bus, 7, "registered_instruction") == 1
    with pytest.raises(InstructionError):
        bus.action(6)  # nothing registered any more
    bus.action(7)
    assert get(bus, 7, "goal_position") == 1600


def test_reg_write_is_checked_when_registered(bus):
    with pytest.raises(DataRangeError):
        bus.reg_write(6, T["led"].address, b"\x05")
    assert get(bus, 6, "registered_instruction") == 0


# reboot, factory reset, clear -----------------------------------------------------------------------------------

def test_reboot_restores_ram_and_keeps_eeprom(bus):
    put(bus, 9, "led", 1)
    put(bus, 9, "profile_velocity", 123)
    put(bus, 9, "position_p_gain", 1000)
    put(bus, 9, "return_delay_time", 0)  # EEPROM
    put(bus, 9, "operating_mode", EXTENDED_POSITION_MODE)  # EEPROM
    put(bus, 9, "torque_enable", 1)
    bus.reg_write(9, T["led"].address, b"\x00")
    bus.reboot(9)
    assert get(bus, 9, "led") == 0
    assert get(bus, 9, "profile_velocity") == 0
    assert get(bus, 9, "position_p_gain") == T["position_p_gain"].default
    assert get(bus, 9, "torque_enable") == 0
    assert get(bus, 9, "registered_instruction") == 0
    assert get(bus, 9, "return_delay_time") == 0
    assert get(bus, 9, "operating_mode") == EXTENDED_POSITION_MODE
    assert bus.ping(9) == (XM430_MODEL, FIRMWARE_VERSION)
    with pytest.raises(InstructionError):
        bus.action(9)  # the registered write was dropped by the reboot


def test_factory_reset_keeping_id_and_baud(bus):
    put(bus, 10, "baud_rate", 3)
    put(bus, 10, "return_delay_time", 0)
    put(bus, 10, "operating_mode", EXTENDED_POSITION_MODE)
    put(bus, 10, "led", 1)
    put(bus, 10, "id", 30)  # the servo answers on its new ID from now on
    assert bus.ping(30) == (XM430_MODEL, FIRMWARE_VERSION)
    bus.factory_reset(30, RESET_ALL_BUT_ID_AND_BAUD)
    assert bus.ping(30) == (XM430_MODEL, FIRMWARE_VERSION)
    assert get(bus, 30, "id") == 30
    assert get(bus, 30, "baud_rate") == 3
    assert get(bus, 30, "return_delay_time") == T["return_delay_time"].default
    assert get(bus, 30, "operating_mode") == POSITION_MODE
    assert get(bus, 30, "led") == 0
    bus.retries = 0
    with pytest.raises(BusTimeout, match=r"\bid 10\b"):
        bus.ping(10)
    assert set(bus.ping_all(quiet_s=0.1)) == (set(SERVO_IDS) - {10}) | {30}


def test_clear_multi_turn(bus):
    dxl_id, goal = 8, 2 * 4096 + 1000
    extended_mode(bus, dxl_id)
    put(bus, dxl_id, "goal_position", goal)
    put(bus, dxl_id, "torque_enable", 1)
    positions = poll(bus, dxl_id, "present_position", lambda p: abs(p - goal) <= 2)
    assert abs(positions[-1] - goal) <= 2, positions[-5:]
    put(bus, dxl_id, "torque_enable", 0)  # hold here; with torque on the servo would head back to the goal
    moving = poll(bus, dxl_id, "moving", lambda m: m == 0)
    assert moving[-1] == 0
    before = get(bus, dxl_id, "present_position")
    assert before > 4095
    bus.clear(dxl_id)
    after = get(bus, dxl_id, "present_position")
    assert 0 <= after <= 4095
    assert after == before % 4096


# status errors as typed exceptions ------------------------------------------------------------------------------

def test_out_of_range_write_raises_data_range_error(bus):
    with pytest.raises(DataRangeError) as info:
        put(bus, 3, "led", 2)
    assert info.value.packet_id == 3 and info.value.code == 4
    with pytest.raises(DataRangeError):
        put(bus, 3, "goal_pwm", 886)
    assert get(bus, 3, "led") == 0
    assert get(bus, 3, "goal_pwm") == 0
    assert bus.stats.retries == 0  # a device error is raised at once, not retried


def test_read_only_and_locked_eeprom_raise_access_error(bus):
    with pytest.raises(AccessError) as info:
        put(bus, 3, "present_position", 100)
    assert info.value.packet_id == 3 and info.value.code == 7
    with pytest.raises(AccessError):
        bus.write(3, T["model_number"].address, u("model_number", 1060))
    with pytest.raises(AccessError):
        bus.write(3, 14, b"\x00")  # an address that is no register
    put(bus, 3, "torque_enable", 1)
    with pytest.raises(AccessError):
        put(bus, 3, "operating_mode", EXTENDED_POSITION_MODE)
    assert get(bus, 3, "operating_mode") == POSITION_MODE
    put(bus, 3, "torque_enable", 0)
    extended_mode(bus, 3)


def test_goal_position_outside_position_limits_raises_data_limit_error(bus):
    with pytest.raises(DataLimitError) as info:
        put(bus, 3, "goal_position", 5000)
    assert info.value.packet_id == 3 and info.value.code == 6
    put(bus, 3, "max_position_limit", 3000)
    put(bus, 3, "min_position_limit", 1000)
    for bad in (3001, 999, -1):
        with pytest.raises(DataLimitError):
            put(bus, 3, "goal_position", bad)
    put(bus, 3, "goal_position", 2999)
    assert get(bus, 3, "goal_position") == 2999
    extended_mode(bus, 3)  # extended position mode ignores the limits
    put(bus, 3, "goal_position", 5000)
    assert get(bus, 3, "goal_position") == 5000


def test_status_errors_from_group_reads(bus):
    # reading past the end of the control table: every slot answers an access error
    for fast in (False, True):
        with pytest.raises(StatusError) as info:
            bus.sync_read(650, 20, [1, 2], fast=fast)
        assert isinstance(info.value, AccessError)
    assert bus.sync_read(T["led"].address, 1, [1, 2], fast=True) == {1: b"\x00", 2: b"\x00"}


# status return level --------------------------------------------------------------------------------------------

def test_status_return_level_1_answers_reads_only(bus):
    level = T["status_return_level"].address
    bus.return_levels[3] = 1  # tell the host first: the write that sets level 1 is itself not answered
    bus.write(3, level, b"\x01")
    bus.write(3, T["led"].address, b"\x01")
    bus.reg_write(3, T["goal_position"].address, u("goal_position", 777))
    bus.action(3)
    assert bus.read(3, level, 1) == b"\x01"
    assert get(bus, 3, "led") == 1
    assert get(bus, 3, "goal_position") == 777
    assert bus.ping(3) == (XM430_MODEL, FIRMWARE_VERSION)  # ping is answered at every level
    assert bus.sync_read(T["led"].address, 1, [2, 3, 4], fast=True) == {2: b"\x00", 3: b"\x01", 4: b"\x00"}
    # had the device answered a write, or stayed silent on a read, the host would have retried or discarded
    assert (bus.stats.retries, bus.stats.timeouts, bus.stats.malformed, bus.stats.failures) == (0, 0, 0, 0)


def test_status_return_level_0_answers_ping_only(bus):
    level = T["status_return_level"].address
    bus.return_levels[4] = 0
    bus.write(4, level, b"\x00")
    bus.write(4, T["led"].address, b"\x01")
    assert bus.read(4, T["led"].address, 1) == b""  # nothing comes back, and the host does not wait for it
    assert bus.ping(4) == (XM430_MODEL, FIRMWARE_VERSION)
    # group reads leave the silent servo out of the reply, and the host out of its expectations
    for fast in (False, True):
        assert bus.sync_read(T["led"].address, 1, [3, 4, 5], fast=fast) == {3: b"\x00", 5: b"\x00"}
        assert bus.bulk_read([(3, 65, 1), (4, 65, 1), (5, 116, 4)], fast=fast) == {3: b"\x00", 5: bytes(4)}
    bus.return_levels[4] = 2  # the write that restores level 2 is answered
    bus.write(4, level, b"\x02")
    assert bus.read(4, T["led"].address, 1) == b"\x01"  # the unanswered write did happen
    assert (bus.stats.retries, bus.stats.timeouts, bus.stats.malformed, bus.stats.failures) == (0, 0, 0, 0)
