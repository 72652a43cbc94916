"""The robot's own Dynamixel software drives ``hil sim`` unchanged, over a real pty.

ROBOTIS's ros2_control ``dynamixel_hardware_interface`` is replayed call for call with the official
``dynamixel_sdk`` (tests/dxl_hardware_interface.py): ping and model lookup, reboot, torque off, operating mode, the
indirect map written at 578 and 168, Fast Sync Read of Indirect Data Read at 634 and Sync Write of goal positions
at 224, torque on; the joints follow, and reading the same items directly agrees byte for byte. Then
``dynamixel_easy_sdk``'s connector finds every servo of the commbot by model and moves one. Real subprocesses
(``hil sim servo_chain --pty``, ``hil sim commbot --pty``); the servo in error latched an overload through
``hil sim``'s fault control before the interface starts.
"""
from __future__ import annotations

import time

import pytest
from dynamixel_easy_sdk import Connector, OperatingMode
from dynamixel_easy_sdk.control_table import ControlTable
from dynamixel_sdk import COMM_SUCCESS, port_handler

from hil.firmware_sim.control import send_fault
from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S

from conftest import SimProcess
from dxl_hardware_interface import Gpio, HardwareInterfaceReplay

BAUD = 1_000_000
CHAIN_IDS = tuple(range(1, 18))  # config/robots/servo_chain.yaml
IN_ERROR = 7  # latched an overload before the interface starts (hil sim fault overload)
# config/robots/commbot.yaml: the 17 servo DoF (arms, hands, neck, eyes) and the two wheels are XM430-W350
# compatible; every other ID is one of hil's own parts, whose model numbers ROBOTIS's list does not have
COMMBOT_SERVOS = (10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 40, 42, 45, 47)
COMMBOT_WHEELS = (2, 3)
MOVED = {30: 120, 40: -120, 45: 120}  # neck yaw and the eye pans: no load from gravity, room to turn
PRESENT_CURRENT, GOAL_POSITION, WRITE_DATA, READ_DATA = 126, 116, 224, 634
MAX_CYCLES = 400  # bounded control loops; each cycle is a read and a write, plus a short sleep


@pytest.fixture
def sdk_latency(monkeypatch):
    # the SDK's reply allowance is a wire's; the device is a process on a pty. The SDK waits twice the latency
    # timer for a reply: 0.8 s here, so a two-core machine under a full suite's load does not read a late reply as
    # none (it costs nothing when the reply comes; this test has no servo that is meant to stay silent)
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 1000 * PEER_PROCESS_LATENCY_S * 2)


@pytest.fixture(scope="module")
def commbot():
    sim = SimProcess("--pty", assembly="commbot")
    try:
        yield sim.where
    finally:
        sim.stop()


def run_loop(replay: HardwareInterfaceReplay, goals: dict[int, int], tolerance: int) -> dict[int, dict[str, int]]:
    """read() and write() as the controller manager calls them, until every joint is within ``tolerance``."""
    for _ in range(MAX_CYCLES):
        state = replay.read()
        replay.write({i: {"Goal Position": g} for i, g in goals.items()})
        if all(abs(state[i]["Present Position"] - g) <= tolerance for i, g in goals.items()):
            return state
        time.sleep(0.005)
    raise AssertionError(f"joints did not follow: {[(i, state[i]['Present Position'], g) for i, g in goals.items()]}")


def assert_direct_reads_agree(replay: HardwareInterfaceReplay, ids) -> None:
    """One Read from Present Current(126) to the end of the indirect read data: the registers and their mapped
    copies at the same instant, compared byte for byte; the same for Goal Position and the write data."""
    ph, port = replay.ph, replay.port
    for dxl_id in ids:
        end = READ_DATA + 10
        data, result, error = ph.readTxRx(port, dxl_id, PRESENT_CURRENT, end - PRESENT_CURRENT)
        assert result == COMM_SUCCESS and error == 0, (dxl_id, ph.getTxRxResult(result), error)
        data = bytes(data)
        current, velocity, position = data[0:2], data[2:6], data[6:10]
        assert data[READ_DATA - PRESENT_CURRENT:] == position + velocity + current, dxl_id
        data, result, error = ph.readTxRx(port, dxl_id, GOAL_POSITION, WRITE_DATA + 4 - GOAL_POSITION)
        assert result == COMM_SUCCESS and error == 0
        assert bytes(data[-4:]) == bytes(data[:4]), dxl_id


def assert_startup_as_the_interface_does_it(replay: HardwareInterfaceReplay, ids) -> None:
    assert replay.model_names == {i: "xm430_w350.model" for i in ids}
    assert [e for e in replay.log if e[0] == "map"] == \
        [("map", i, "Indirect Address Read", 10) for i in ids] + [("map", i, "Indirect Address Write", 4) for i in ids]
    assert (replay.read_data_address, replay.write_data_address) == (READ_DATA, WRITE_DATA)
    for i in ids:  # the pointers as the servo holds them: Present Position, Velocity, Current, then Goal Position
        ph, port = replay.ph, replay.port
        pointers, result, error = ph.readTxRx(port, i, 578, 20)
        assert result == COMM_SUCCESS and error == 0
        assert [pointers[k] | pointers[k + 1] << 8 for k in range(0, 20, 2)] == [*range(132, 136), *range(128, 132),
                                                                                  126, 127]


def test_the_hardware_interface_drives_servo_chain(sdk_latency):
    sim = SimProcess("--pty", "--control", "tcp://127.0.0.1:*")
    replay = HardwareInterfaceReplay(sim.where, BAUD, [Gpio(i, reboot=(i == 5)) for i in CHAIN_IDS])
    try:
        send_fault(sim.next_line().split()[1], "overload", {"part": IN_ERROR})  # hil sim fault overload 7
        replay.on_init()
        assert replay.log[0] == ("reboot", 5)  # the GPIO's Reboot parameter, before any ping
        # the servo in error: its ping has the Alert bit, the interface reads why, reboots it and pings again
        assert [e for e in replay.log if e[1] == IN_ERROR][:3] == \
            [("error", IN_ERROR, 0x80, 0x20), ("reboot", IN_ERROR), ("ping", IN_ERROR, 1020)]
        assert_startup_as_the_interface_does_it(replay, CHAIN_IDS)
        state = replay.start()
        assert all(replay.ph.read1ByteTxRx(replay.port, i, 64) == (1, COMM_SUCCESS, 0) for i in CHAIN_IDS)
        goals = {i: state[i]["Present Position"] + 40 * i for i in CHAIN_IDS}
        run_loop(replay, goals, tolerance=0)
        for i, goal in goals.items():  # the goal landed in Goal Position(116) through the write map
            value, result, error = replay.ph.read4ByteTxRx(replay.port, i, GOAL_POSITION)
            assert (result, error, value) == (COMM_SUCCESS, 0, goal)
        assert_direct_reads_agree(replay, CHAIN_IDS)
    finally:
        replay.close()
        sim.stop()


def test_the_hardware_interface_drives_the_commbots_servos(sdk_latency, commbot):
    replay = HardwareInterfaceReplay(commbot, BAUD, [Gpio(i) for i in COMMBOT_SERVOS])
    try:
        replay.on_init()
        assert_startup_as_the_interface_does_it(replay, COMMBOT_SERVOS)
        state = replay.start()
        start = {i: state[i]["Present Position"] for i in COMMBOT_SERVOS}
        goals = {i: start[i] + MOVED.get(i, 0) for i in COMMBOT_SERVOS}
        final = run_loop(replay, {i: goals[i] for i in MOVED}, tolerance=12)
        # the joints that moved moved by about what was asked; the pybullet joints, not just the registers
        for i, delta in MOVED.items():
            assert abs(final[i]["Present Position"] - start[i] - delta) <= 12, (i, final[i], start[i])
        assert_direct_reads_agree(replay, COMMBOT_SERVOS)
    finally:
        replay.close()


def test_easy_sdk_finds_every_commbot_servo_by_model_and_moves_one(sdk_latency, commbot):
    connector = Connector(commbot, BAUD)
    try:
        ids = connector.broadcastPing()
        assert len(ids) == 40
        known = {}
        for dxl_id in ids:
            model = connector.ping(dxl_id)
            try:
                ControlTable.getModelName(model)
            except Exception:  # hil's own parts: not in ROBOTIS's model list, left alone
                continue
            known[dxl_id] = model
        assert sorted(known) == sorted(COMMBOT_SERVOS + COMMBOT_WHEELS)
        motors = {i: connector.createMotor(i) for i in known}
        assert {m.model_name for m in motors.values()} == {"xm430_w350.model"}
        neck = motors[30]
        neck.disableTorque()
        neck.setOperatingMode(OperatingMode.POSITION)
        neck.enableTorque()
        start = neck.getPresentPosition()
        neck.setGoalPosition(start - 150)
        for _ in range(MAX_CYCLES):
            position = neck.getPresentPosition()
            if abs(position - (start - 150)) <= 12:
                break
            neck.setGoalPosition(start - 150)  # keeps the bus watchdog fed, as a control loop does
            time.sleep(0.005)
        assert abs(position - (start - 150)) <= 12, (start, position)
        neck.disableTorque()
    finally:
        connector.closePort()
