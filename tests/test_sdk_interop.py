"""The official client judges the virtual device: ROBOTIS ``dynamixel_sdk`` over a real pty.

Every test talks to a freshly started ``hil sim servo_chain --pty`` subprocess (17 XM430-W350-compatible
servos, IDs 1..17) through the SDK's own PortHandler/PacketHandler and group helpers, and requires
COMM_SUCCESS, the right error byte and the right values. Nothing here uses our host code.
"""
from __future__ import annotations

import time

import pytest
from dynamixel_sdk import (BROADCAST_ID, COMM_RX_TIMEOUT, COMM_SUCCESS, GroupBulkRead, GroupBulkWrite, GroupSyncRead,
                           GroupSyncWrite, PacketHandler, PortHandler)
from dynamixel_sdk import port_handler
from dynamixel_sdk.protocol2_packet_handler import PKT_ERROR, PKT_ID, PKT_INSTRUCTION

from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S

BAUD = 1_000_000
SERVO_IDS = tuple(range(1, 18))  # config/robots/servo_chain.yaml
XM430_MODEL, FIRMWARE_VERSION = 1020, 46

# XM430-W350 control table (e-Manual addresses)
ADDR_OPERATING_MODE = 11  # 1 byte, EEPROM
ADDR_TORQUE_ENABLE = 64  # 1 byte
ADDR_LED = 65  # 1 byte
ADDR_REGISTERED_INSTRUCTION = 69  # 1 byte, read-only
ADDR_VELOCITY_P_GAIN = 78  # 2 bytes
ADDR_GOAL_PWM = 100  # 2 bytes, signed, -885..885
ADDR_PROFILE_ACCELERATION = 108  # 4 bytes
ADDR_PROFILE_VELOCITY = 112  # 4 bytes
ADDR_GOAL_POSITION = 116  # 4 bytes, signed
ADDR_MOVING = 122  # 1 byte, read-only
ADDR_PRESENT_POSITION = 132  # 4 bytes, signed, read-only
ADDR_MODEL_NUMBER = 0  # 2 bytes, read-only

EXTENDED_POSITION_MODE = 4
DATA_RANGE_ERROR, DATA_LIMIT_ERROR, ACCESS_ERROR, INSTRUCTION_ERROR = 4, 6, 7, 2

STUFFED_VALUE = -131073  # little-endian FF FF FD FF: the SDK must stuff it, the device must unstuff it
STUFFED_BYTES = [0xFF, 0xFF, 0xFD, 0xFF]
STUFFED_ID = 5
MAX_POLLS = 400  # bounded loops: at most this many reads (each ~1 ms) plus short sleeps


def le_bytes(value: int, size: int) -> list[int]:
    return list(int(value).to_bytes(size, "little", signed=value < 0))


def signed(value: int, size: int) -> int:
    bits = 8 * size
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


class Sdk:
    """The SDK's port and packet handler, with asserting helpers for the plain read/write calls."""

    def __init__(self, port: PortHandler, ph: PacketHandler):
        self.port, self.ph = port, ph

    def _check(self, what: str, result: int, error: int, expected_error: int = 0) -> None:
        assert result == COMM_SUCCESS, f"{what}: {self.ph.getTxRxResult(result)}"
        assert error == expected_error, f"{what}: error byte {error} ({self.ph.getRxPacketError(error)})"

    def read(self, dxl_id: int, address: int, size: int) -> int:
        fn = {1: self.ph.read1ByteTxRx, 2: self.ph.read2ByteTxRx, 4: self.ph.read4ByteTxRx}[size]
        value, result, error = fn(self.port, dxl_id, address)
        self._check(f"read{size} id {dxl_id} @{address}", result, error)
        return value

    def read_signed(self, dxl_id: int, address: int, size: int) -> int:
        return signed(self.read(dxl_id, address, size), size)

    def write(self, dxl_id: int, address: int, size: int, value: int, expected_error: int = 0) -> None:
        fn = {1: self.ph.write1ByteTxRx, 2: self.ph.write2ByteTxRx, 4: self.ph.write4ByteTxRx}[size]
        result, error = fn(self.port, dxl_id, address, value)
        self._check(f"write{size} id {dxl_id} @{address}={value}", result, error, expected_error)

    def extended_mode(self, dxl_id: int) -> None:
        self.write(dxl_id, ADDR_OPERATING_MODE, 1, EXTENDED_POSITION_MODE)
        assert self.read(dxl_id, ADDR_OPERATING_MODE, 1) == EXTENDED_POSITION_MODE

    def read_status(self, dxl_id: int) -> list[int]:
        """The next status packet on the line (for a unicast Action, whose status the SDK does not read)."""
        self.port.setPacketTimeout(11)
        packet, result = self.ph.rxPacket(self.port, False)
        assert result == COMM_SUCCESS, f"status of id {dxl_id}: {self.ph.getTxRxResult(result)}"
        assert packet[PKT_INSTRUCTION] == 0x55 and packet[PKT_ID] == dxl_id, packet
        return packet


@pytest.fixture
def sdk(sim_pty, monkeypatch):
    # The SDK waits 2 x its adapter latency timer (16 ms) + 2 ms for a reply, a wire's allowance; the device here is
    # a process on a pty, answering when the OS schedules it: give the SDK the allowance our host gives a process
    # peer (PEER_PROCESS_LATENCY_S, as tests/test_embodied.py does; it only lengthens the one test that waits for
    # an absent ID). 50 ms timed out once with make fuzz running beside the suite.
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 1000 * PEER_PROCESS_LATENCY_S / 2)
    port = PortHandler(sim_pty)
    assert port.openPort(), f"cannot open {sim_pty}"
    assert port.setBaudRate(BAUD)
    try:
        yield Sdk(port, PacketHandler(2.0))
    finally:
        port.closePort()


def stuffed_goal_positions() -> dict[int, int]:
    """Distinct goal positions for every servo, the stuffed value for STUFFED_ID (in extended mode)."""
    return {i: (STUFFED_VALUE if i == STUFFED_ID else 100 * i + 7) for i in SERVO_IDS}


def sync_write_goals(sdk: Sdk, goals: dict[int, int]) -> None:
    sw = GroupSyncWrite(sdk.port, sdk.ph, ADDR_GOAL_POSITION, 4)
    for dxl_id, goal in goals.items():
        assert sw.addParam(dxl_id, le_bytes(goal, 4))
    assert sw.txPacket() == COMM_SUCCESS


# ping -----------------------------------------------------------------------------------------------------------

def test_ping_every_servo_answers_with_xm430_model(sdk):
    for dxl_id in SERVO_IDS:
        model, result, error = sdk.ph.ping(sdk.port, dxl_id)
        assert (model, result, error) == (XM430_MODEL, COMM_SUCCESS, 0), dxl_id


def test_ping_of_absent_id_times_out(sdk):
    _, result, _ = sdk.ph.ping(sdk.port, 42)
    assert result == COMM_RX_TIMEOUT
    model, result, error = sdk.ph.ping(sdk.port, 1)  # and the line is still usable afterwards
    assert (model, result, error) == (XM430_MODEL, COMM_SUCCESS, 0)


def test_broadcast_ping_finds_all_17(sdk):
    found, result = sdk.ph.broadcastPing(sdk.port)
    assert result == COMM_SUCCESS
    assert sorted(found) == list(SERVO_IDS)
    assert all(found[i] == [XM430_MODEL, FIRMWARE_VERSION] for i in SERVO_IDS), found


# plain read / write ---------------------------------------------------------------------------------------------

def test_read_write_1_byte_led(sdk):
    assert sdk.read(3, ADDR_LED, 1) == 0
    sdk.write(3, ADDR_LED, 1, 1)
    assert sdk.read(3, ADDR_LED, 1) == 1
    assert sdk.read(4, ADDR_LED, 1) == 0  # only the addressed servo changed
    sdk.write(3, ADDR_LED, 1, 0)
    assert sdk.read(3, ADDR_LED, 1) == 0


def test_read_write_2_bytes(sdk):
    assert sdk.read(2, ADDR_MODEL_NUMBER, 2) == XM430_MODEL
    sdk.write(2, ADDR_GOAL_PWM, 2, 500)
    assert sdk.read(2, ADDR_GOAL_PWM, 2) == 500
    sdk.write(2, ADDR_GOAL_PWM, 2, -300)
    assert sdk.read_signed(2, ADDR_GOAL_PWM, 2) == -300
    sdk.write(2, ADDR_VELOCITY_P_GAIN, 2, 0x1234)
    assert sdk.read(2, ADDR_VELOCITY_P_GAIN, 2) == 0x1234


def test_read_write_4_bytes(sdk):
    sdk.write(6, ADDR_GOAL_POSITION, 4, 1000)
    assert sdk.read(6, ADDR_GOAL_POSITION, 4) == 1000
    sdk.write(6, ADDR_PROFILE_VELOCITY, 4, 300)
    sdk.write(6, ADDR_PROFILE_ACCELERATION, 4, 0x7ABC)
    assert sdk.read(6, ADDR_PROFILE_VELOCITY, 4) == 300
    assert sdk.read(6, ADDR_PROFILE_ACCELERATION, 4) == 0x7ABC
    assert sdk.read(6, ADDR_PRESENT_POSITION, 4) == 2048  # torque off: the servo holds its start position


def test_write_and_read_of_a_value_that_needs_stuffing(sdk):
    sdk.extended_mode(STUFFED_ID)
    sdk.write(STUFFED_ID, ADDR_GOAL_POSITION, 4, STUFFED_VALUE)
    assert sdk.read_signed(STUFFED_ID, ADDR_GOAL_POSITION, 4) == STUFFED_VALUE


def test_stuffing_at_the_end_of_packets(sdk):
    sdk.extended_mode(STUFFED_ID)
    sdk.write(STUFFED_ID, ADDR_GOAL_POSITION, 4, STUFFED_VALUE)
    # a read reply whose data ends in FF FF FD: the stuffed FD is the last byte before the CRC
    data, result, error = sdk.ph.readTxRx(sdk.port, STUFFED_ID, ADDR_GOAL_POSITION, 3)
    sdk._check("read3", result, error)
    assert list(data) == STUFFED_BYTES[:3]
    # an instruction whose parameters end in FF FF FD (a value out of range): parsed, then refused
    sdk.write(STUFFED_ID, ADDR_GOAL_POSITION, 4, 0xFDFFFF00, expected_error=DATA_RANGE_ERROR)
    assert sdk.read_signed(STUFFED_ID, ADDR_GOAL_POSITION, 4) == STUFFED_VALUE


# group instructions ---------------------------------------------------------------------------------------------

def test_sync_write_with_stuffed_value(sdk):
    assert le_bytes(STUFFED_VALUE, 4) == STUFFED_BYTES
    sdk.extended_mode(STUFFED_ID)
    goals = stuffed_goal_positions()
    sync_write_goals(sdk, goals)
    for dxl_id, goal in goals.items():
        assert sdk.read_signed(dxl_id, ADDR_GOAL_POSITION, 4) == goal, dxl_id


@pytest.mark.parametrize("how", ["txRxPacket", "fastSyncRead"])
def test_sync_read(sdk, how):
    sdk.extended_mode(STUFFED_ID)
    goals = stuffed_goal_positions()
    sync_write_goals(sdk, goals)
    sr = GroupSyncRead(sdk.port, sdk.ph, ADDR_GOAL_POSITION, 4)
    for dxl_id in SERVO_IDS:
        assert sr.addParam(dxl_id)
    assert getattr(sr, how)() == COMM_SUCCESS
    for dxl_id in SERVO_IDS:
        assert sr.isAvailable(dxl_id, ADDR_GOAL_POSITION, 4), dxl_id
        assert signed(sr.getData(dxl_id, ADDR_GOAL_POSITION, 4), 4) == goals[dxl_id], dxl_id

    # a second round sees new values (nothing stale from the first reply)
    new_goals = {i: g + 11 for i, g in goals.items()}
    sync_write_goals(sdk, new_goals)
    assert getattr(sr, how)() == COMM_SUCCESS
    assert {i: signed(sr.getData(i, ADDR_GOAL_POSITION, 4), 4) for i in SERVO_IDS} == new_goals


def _bulk_read_setup(sdk: Sdk) -> dict[int, tuple[int, int, int]]:
    """Different registers on different servos; returns {id: (address, length, expected signed value)}.

    The IDs are chosen so that none appears as an earlier byte of the SDK's parameter list: its fast bulk read
    looks an ID up with ``param.index(id)``, which would otherwise find an address or length byte.
    """
    sdk.write(1, ADDR_GOAL_POSITION, 4, 1234)
    sdk.write(2, ADDR_LED, 1, 1)
    sdk.write(3, ADDR_GOAL_PWM, 2, -200)
    sdk.extended_mode(STUFFED_ID)
    sdk.write(STUFFED_ID, ADDR_GOAL_POSITION, 4, STUFFED_VALUE)
    return {
        1: (ADDR_GOAL_POSITION, 4, 1234),
        2: (ADDR_LED, 1, 1),
        3: (ADDR_GOAL_PWM, 2, -200),
        9: (ADDR_MODEL_NUMBER, 2, XM430_MODEL),
        STUFFED_ID: (ADDR_GOAL_POSITION, 4, STUFFED_VALUE),
        17: (ADDR_PRESENT_POSITION, 4, 2048),
    }


@pytest.mark.parametrize("how", ["txRxPacket", "fastBulkRead"])
def test_bulk_read(sdk, how):
    items = _bulk_read_setup(sdk)
    br = GroupBulkRead(sdk.port, sdk.ph)
    for dxl_id, (address, length, _) in items.items():
        assert br.addParam(dxl_id, address, length)
    assert getattr(br, how)() == COMM_SUCCESS
    for dxl_id, (address, length, expected) in items.items():
        assert br.isAvailable(dxl_id, address, length), dxl_id
        assert signed(br.getData(dxl_id, address, length), length) == expected, dxl_id


def test_bulk_write(sdk):
    sdk.extended_mode(STUFFED_ID)
    bw = GroupBulkWrite(sdk.port, sdk.ph)
    assert bw.addParam(1, ADDR_LED, 1, [1])
    assert bw.addParam(2, ADDR_GOAL_PWM, 2, le_bytes(-400, 2))
    assert bw.addParam(3, ADDR_GOAL_POSITION, 4, le_bytes(3000, 4))
    assert bw.addParam(4, ADDR_PROFILE_VELOCITY, 4, le_bytes(250, 4))
    assert bw.addParam(STUFFED_ID, ADDR_GOAL_POSITION, 4, STUFFED_BYTES)
    assert bw.txPacket() == COMM_SUCCESS
    assert sdk.read(1, ADDR_LED, 1) == 1
    assert sdk.read_signed(2, ADDR_GOAL_PWM, 2) == -400
    assert sdk.read(3, ADDR_GOAL_POSITION, 4) == 3000
    assert sdk.read(4, ADDR_PROFILE_VELOCITY, 4) == 250
    assert sdk.read_signed(STUFFED_ID, ADDR_GOAL_POSITION, 4) == STUFFED_VALUE
    assert sdk.read(6, ADDR_LED, 1) == 0  # not in the bulk write


def test_reg_write_then_broadcast_action(sdk):
    result, error = sdk.ph.regWriteTxRx(sdk.port, 4, ADDR_GOAL_POSITION, 4, le_bytes(2500, 4))
    sdk._check("regWrite id 4", result, error)
    result, error = sdk.ph.regWriteTxRx(sdk.port, 6, ADDR_LED, 1, [1])
    sdk._check("regWrite id 6", result, error)
    # registered, not applied
    assert sdk.read(4, ADDR_GOAL_POSITION, 4) == 0
    assert sdk.read(6, ADDR_LED, 1) == 0
    assert sdk.read(4, ADDR_REGISTERED_INSTRUCTION, 1) == 1
    assert sdk.read(6, ADDR_REGISTERED_INSTRUCTION, 1) == 1

    assert sdk.ph.action(sdk.port, BROADCAST_ID) == COMM_SUCCESS
    assert sdk.read(4, ADDR_GOAL_POSITION, 4) == 2500
    assert sdk.read(6, ADDR_LED, 1) == 1
    assert sdk.read(4, ADDR_REGISTERED_INSTRUCTION, 1) == 0
    assert sdk.read(6, ADDR_REGISTERED_INSTRUCTION, 1) == 0


def test_reg_write_then_unicast_action(sdk):
    result, error = sdk.ph.regWriteTxRx(sdk.port, 6, ADDR_GOAL_POSITION, 4, le_bytes(1500, 4))
    sdk._check("regWrite id 6", result, error)
    assert sdk.read(6, ADDR_GOAL_POSITION, 4) == 0
    # the SDK sends a unicast Action without reading its status: read that status ourselves
    assert sdk.ph.action(sdk.port, 6) == COMM_SUCCESS
    assert sdk.read_status(6)[PKT_ERROR] == 0
    assert sdk.read(6, ADDR_GOAL_POSITION, 4) == 1500
    # a second Action has nothing registered: instruction error
    assert sdk.ph.action(sdk.port, 6) == COMM_SUCCESS
    assert sdk.read_status(6)[PKT_ERROR] == INSTRUCTION_ERROR
    assert sdk.read(6, ADDR_GOAL_POSITION, 4) == 1500


# the servo moves ------------------------------------------------------------------------------------------------

def test_torque_on_present_position_converges_to_goal(sdk):
    dxl_id, goal = 7, 3000
    start = sdk.read_signed(dxl_id, ADDR_PRESENT_POSITION, 4)
    assert start == 2048
    sdk.write(dxl_id, ADDR_GOAL_POSITION, 4, goal)
    sdk.write(dxl_id, ADDR_TORQUE_ENABLE, 1, 1)
    positions = [start]
    for _ in range(MAX_POLLS):
        positions.append(sdk.read_signed(dxl_id, ADDR_PRESENT_POSITION, 4))
        if abs(positions[-1] - goal) <= 2:
            break
        time.sleep(0.005)
    assert abs(positions[-1] - goal) <= 2, f"did not converge: last positions {positions[-5:]}"
    # a first-order response approaches the goal without overshoot or going back
    assert all(b >= a for a, b in zip(positions, positions[1:])), positions
    assert all(p <= goal for p in positions), positions
    for _ in range(MAX_POLLS):
        if sdk.read(dxl_id, ADDR_MOVING, 1) == 0:
            break
        time.sleep(0.005)
    assert sdk.read(dxl_id, ADDR_MOVING, 1) == 0
    assert sdk.read(8, ADDR_PRESENT_POSITION, 4) == 2048  # the neighbour did not move


def test_clear_multi_turn(sdk):
    dxl_id, goal = 8, 2 * 4096 + 1000
    sdk.extended_mode(dxl_id)
    sdk.write(dxl_id, ADDR_GOAL_POSITION, 4, goal)
    sdk.write(dxl_id, ADDR_TORQUE_ENABLE, 1, 1)
    position = None
    for _ in range(MAX_POLLS):
        position = sdk.read_signed(dxl_id, ADDR_PRESENT_POSITION, 4)
        if abs(position - goal) <= 2:
            break
        time.sleep(0.005)
    assert abs(position - goal) <= 2, position
    sdk.write(dxl_id, ADDR_TORQUE_ENABLE, 1, 0)
    for _ in range(MAX_POLLS):
        if sdk.read(dxl_id, ADDR_MOVING, 1) == 0:
            break
        time.sleep(0.005)
    before = sdk.read_signed(dxl_id, ADDR_PRESENT_POSITION, 4)
    assert before > 4095
    result, error = sdk.ph.clearMultiTurn(sdk.port, dxl_id)
    sdk._check("clearMultiTurn", result, error)
    after = sdk.read_signed(dxl_id, ADDR_PRESENT_POSITION, 4)
    assert 0 <= after <= 4095 and after == before % 4096


# reboot and factory reset ---------------------------------------------------------------------------------------

ADDR_ID, ADDR_RETURN_DELAY_TIME = 7, 9


def test_reboot_restores_ram_and_keeps_eeprom(sdk):
    sdk.write(9, ADDR_LED, 1, 1)
    sdk.write(9, ADDR_PROFILE_VELOCITY, 4, 123)
    sdk.write(9, ADDR_RETURN_DELAY_TIME, 1, 0)
    result, error = sdk.ph.reboot(sdk.port, 9)
    sdk._check("reboot", result, error)
    assert sdk.read(9, ADDR_LED, 1) == 0
    assert sdk.read(9, ADDR_PROFILE_VELOCITY, 4) == 0
    assert sdk.read(9, ADDR_RETURN_DELAY_TIME, 1) == 0


def test_factory_reset_keeping_id_and_baud(sdk):
    sdk.write(10, ADDR_RETURN_DELAY_TIME, 1, 0)
    sdk.write(10, ADDR_OPERATING_MODE, 1, EXTENDED_POSITION_MODE)
    sdk.write(10, ADDR_ID, 1, 30)
    assert sdk.ph.ping(sdk.port, 30) == (XM430_MODEL, COMM_SUCCESS, 0)
    result, error = sdk.ph.factoryReset(sdk.port, 30, 0x02)
    sdk._check("factoryReset", result, error)
    assert sdk.ph.ping(sdk.port, 30) == (XM430_MODEL, COMM_SUCCESS, 0)
    assert sdk.read(30, ADDR_RETURN_DELAY_TIME, 1) == 250
    assert sdk.read(30, ADDR_OPERATING_MODE, 1) == 3


# errors in the status packet ------------------------------------------------------------------------------------

def test_out_of_range_write_answers_data_range_error(sdk):
    sdk.write(3, ADDR_LED, 1, 2, expected_error=DATA_RANGE_ERROR)  # LED is 0..1
    sdk.write(3, ADDR_GOAL_PWM, 2, 886, expected_error=DATA_RANGE_ERROR)  # goal PWM is -885..885
    assert sdk.read(3, ADDR_LED, 1) == 0
    assert sdk.read(3, ADDR_GOAL_PWM, 2) == 0


def test_goal_position_outside_limits_answers_data_limit_error(sdk):
    sdk.write(3, ADDR_GOAL_POSITION, 4, 5000, expected_error=DATA_LIMIT_ERROR)  # position mode: 0..4095
    assert sdk.read(3, ADDR_GOAL_POSITION, 4) == 0
    sdk.extended_mode(3)
    sdk.write(3, ADDR_GOAL_POSITION, 4, 5000)
    assert sdk.read(3, ADDR_GOAL_POSITION, 4) == 5000


def test_write_to_read_only_register_answers_access_error(sdk):
    sdk.write(3, ADDR_PRESENT_POSITION, 4, 100, expected_error=ACCESS_ERROR)
    sdk.write(3, ADDR_MODEL_NUMBER, 2, 1060, expected_error=ACCESS_ERROR)
    assert sdk.read(3, ADDR_PRESENT_POSITION, 4) == 2048
    assert sdk.read(3, ADDR_MODEL_NUMBER, 2) == XM430_MODEL


def test_eeprom_write_with_torque_on_answers_access_error(sdk):
    sdk.write(8, ADDR_TORQUE_ENABLE, 1, 1)
    sdk.write(8, ADDR_OPERATING_MODE, 1, EXTENDED_POSITION_MODE, expected_error=ACCESS_ERROR)
    assert sdk.read(8, ADDR_OPERATING_MODE, 1) == 3
    sdk.write(8, ADDR_TORQUE_ENABLE, 1, 0)
    sdk.write(8, ADDR_OPERATING_MODE, 1, EXTENDED_POSITION_MODE)  # unlocked with torque off
    assert sdk.read(8, ADDR_OPERATING_MODE, 1) == EXTENDED_POSITION_MODE
