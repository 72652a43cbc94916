"""``hil sim --control``: faults sent while the device serves, to a real ``hil sim`` subprocess with a
robot on its pty and its lockstep clock; bad requests answered with the field at fault, the server serving on."""
from __future__ import annotations

import json
import subprocess

import msgpack
import pytest
import zmq

from conftest import SimProcess, hil_command
from hil.devices.config_path import resolve as resolve_config
from hil.firmware_sim.control import ControlError, send_fault
from hil.runtime.robot import Robot
HZ = 10.0
ELBOW = 26
# under the simulator's clock a ping costs no simulated time (runtime/robot/presence.py, Clock.wait_cost), so a lost
# part on a process peer's pty is pinged every cycle and seen back within a few cycles of its plug
BACK_WITHIN_CYCLES = 3


def served_commbot(*extra: str) -> tuple[SimProcess, str | None, str]:
    """hil sim commbot on a pty with the control (and, with --clock sim in ``extra``, the clock) endpoints."""
    semantics = resolve_config("commbot", "semantics", "semantics")
    sim = SimProcess("--pty", *extra, "--control", "tcp://127.0.0.1:*", "--semantics", str(semantics),
                     assembly="commbot")
    try:
        clock = sim.next_line().split()[1] if "--clock" in extra else None
        control = sim.next_line()
        assert control.startswith("control tcp://127.0.0.1:"), control
        return sim, clock, control.split()[1]
    except BaseException:
        sim.stop()
        raise


def test_an_elbow_unplugged_and_plugged_over_the_control_while_a_robot_runs(tmp_path):
    sim, clock, control = served_commbot("--clock", "sim", "--clock-endpoint", "tcp://127.0.0.1:*",
                                         "--stall-timeout", "120")
    try:
        profile = {"bus": sim.where, "clock": "sim", "clock_endpoint": clock, "semantics": "commbot",
                   "cache_dir": str(tmp_path / "cache"), "stall_timeout_s": 120.0}
        with Robot.open(profile) as robot:
            assert robot.presence.ping_cost_s() == 0.0, "a ping costs the lockstep clock nothing"
            start = robot.clock.now()
            elbow = robot.joints["right_arm.elbow"]
            trace, replies = [], []
            for tick in robot.loop(hz=HZ, duration_s=4.0):
                t = tick.time - start
                if abs(t - 1.0) < 1e-6:  # the command-line client, while the robot waits for its next tick
                    done = subprocess.run([*hil_command(), "sim", "fault", "unplug", "right_arm.elbow", "--control",
                                           control], capture_output=True, text=True, timeout=120)
                    assert done.returncode == 0, done.stderr
                    replies.append(json.loads(done.stdout))
                if abs(t - 2.0) < 1e-6:
                    replies.append(send_fault(control, "plug", {"part": "right_arm.elbow"}))
                if t > 2.0:
                    robot.joints["right_arm.elbow"].target = 0.5
                trace.append((t, elbow.available))
            assert [e.kind for e in robot.part_events] == ["lost", "back"], robot.notes
            assert robot.joints["right_arm.elbow"].position == pytest.approx(0.5, abs=0.05), "re-armed: torque on"
        lost_at = next(t for t, available in trace if not available)
        back_at = next(t for t, available in trace if t > lost_at and available)
        assert 1.0 < lost_at <= 1.0 + 3 / HZ + 1e-6, "unavailable within 3 cycles of the unplug"
        assert 2.0 < back_at <= 2.0 + BACK_WITHIN_CYCLES / HZ + 1e-6, "pinged every cycle of simulated time"
        assert replies[0]["did"].startswith("unplug 'right_arm.elbow' (id 26)")
        assert replies[0]["t"] == pytest.approx(1.0, abs=1.5 / HZ), "applied at the world time the robot was at"
        status = send_fault(control, "status")
        assert [d["did"].split()[0] for d in status["done"]] == ["unplug", "plug"] and status["unplugged"] == []
    finally:
        assert sim.stop() == 0, sim.stderr()


def test_on_the_real_clock_a_ping_on_a_pty_is_charged_its_timeout_and_the_peer_latency(tmp_path):
    from hil.runtime.robot.presence import PING_BUDGET, PING_FALLBACK_S
    from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S

    sim, _, _ = served_commbot("--no-world")
    try:
        profile = {"bus": sim.where, "clock": "real", "semantics": "commbot", "cache_dir": str(tmp_path / "cache")}
        with Robot.open(profile) as robot:
            cost = robot.presence.ping_cost_s()
            assert cost == pytest.approx(robot.profile.bus_timeout_s + PEER_PROCESS_LATENCY_S)
            # with no spare time in a tick, the budget keeps the loop's rate: one ping per cost / PING_BUDGET
            period = max(PING_FALLBACK_S, cost / PING_BUDGET)
            last = robot.presence._last_ping_s
            assert not robot.presence._may_ping(None, last + 0.99 * period)
            assert not robot.presence._may_ping(0.5 * cost, last + 0.99 * period), "too little spare time"
            assert robot.presence._may_ping(cost, last), "spare time for a timeout"
            assert robot.presence._may_ping(None, last + period)
    finally:
        assert sim.stop() == 0, sim.stderr()


def _raw(sock: zmq.Socket, message) -> dict:
    sock.send(message if isinstance(message, bytes) else msgpack.packb(message, use_bin_type=True))
    assert sock.poll(30_000), "the control answered"
    return msgpack.unpackb(sock.recv(), raw=False)


def envelope(kind: str, payload) -> dict:
    return {"v": 2, "type": kind, "seq": 0, "t": 0.0, "payload": payload}


BAD = [
    (b"\x00garbage", None, "not msgpack"),
    (envelope("unplug", {"part": 1.5}), "part", "Expected"),
    (envelope("unplug", {}), None, "missing required field `part`"),
    (envelope("unplug", {"part": 26, "when": 3}), None, "unknown field `when`"),
    (envelope("unplug", {"part": 999}), "part", ""),
    (envelope("unplug", {"part": "left_arm.tail"}), "part", "no such part"),
    (envelope("plug", {"part": 26}), "part", "not unplugged"),
    (envelope("swap", {"part": 26, "with": "toaster"}), "with", "no catalog part 'toaster'"),
    (envelope("noise", {"bitflip": float("nan")}), "bitflip", ""),
    (envelope("reboot", {"part": 26, "boot_s": -1.0}), "boot_s", ""),
    (envelope("plug", {"part": 60, "new": "speaker", "parent": 37, "port": "nowhere"}), "port", "no child port"),
    (envelope("explode", {"part": 26}), None, "unknown message type 'explode'"),
]


def test_bad_requests_are_answered_with_the_field_and_change_nothing():
    sim, _, control = served_commbot("--no-world")
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(control)
    try:
        for message, field, words in BAD:
            reply = _raw(sock, message)
            assert reply["type"] == "error", (message, reply)
            assert reply["payload"]["field"] == field, (message, reply["payload"])
            assert words in reply["payload"]["reason"], (message, reply["payload"])
        dealer = zmq.Context.instance().socket(zmq.DEALER)  # a frame layout a REQ never sends: dropped, counted
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(control)
        dealer.send(b"one frame")
        reply = _raw(sock, envelope("status", {}))
        dealer.close(0)
        assert reply["type"] == "done", reply
        status = reply["payload"]
        assert status["done"] == [] and status["unplugged"] == [], "nothing was applied"
        assert status["refused"] >= len(BAD)
        assert sim.alive
        with pytest.raises(ControlError) as caught:
            send_fault(control, "swap", {"part": "right_arm.elbow", "with": "toaster"})
        assert caught.value.field == "with"
        done = subprocess.run([*hil_command(), "sim", "fault", "plug", "26", "--control", control],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "not unplugged" in done.stderr and "(field part)" in done.stderr
        assert send_fault(control, "reboot", {"part": 32})["did"].startswith("reboot 32 (id 32)")
    finally:
        sock.close(0)
        assert sim.stop() == 0, sim.stderr()


def test_swap_and_a_new_part_over_the_control_are_seen_on_the_bus(tmp_path):
    from hil.runtime.bus import BusHost
    from hil.runtime.transports import open_transport

    sim, _, control = served_commbot("--no-world")
    try:
        assert send_fault(control, "swap", {"part": 37, "with": "head_mount"})["did"] == \
            "swap 37 (id 37) with head_mount"
        reply = send_fault(control, "plug", {"part": 60, "new": "speaker", "parent": 37, "port": "head"})
        assert "plug new speaker at id 60" in reply["did"]
        with BusHost(open_transport(sim.where), retries=1) as bus:
            from hil.devices.catalog import load_part

            assert bus.ping(60)[0] == load_part("speaker").model_number, "the new part answers as what it is"
            assert bus.ping(37)[0] == load_part("head_mount").model_number, "the swapped one too"
        send_fault(control, "noise", {"bitflip": 0.5, "for_s": 1.0})
        assert send_fault(control, "status")["faults"]["bit_flip_rate"] == 0.5
    finally:
        assert sim.stop() == 0, sim.stderr()


def test_the_control_binds_loopback_unless_secured_and_a_secured_one_admits_only_its_clients(tmp_path):
    from hil.bridge.security import Security, create_keys
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.bus_device import VirtualBusDevice
    from hil.firmware_sim.control import FaultControl
    from hil.firmware_sim.fault_plan import assembly_resolver

    device = VirtualBusDevice(load_assembly("servo_chain").parts)
    with pytest.raises(ValueError, match="off loopback the control needs --keys"):
        FaultControl(device, "tcp://0.0.0.0:*", assembly_resolver)
    with pytest.raises(ValueError, match="cannot bind"):
        FaultControl(device, "nonsense", assembly_resolver)
    create_keys(tmp_path / "keys")
    security = Security.load(tmp_path / "keys")
    control = FaultControl(device, "tcp://127.0.0.1:*", assembly_resolver, security=security)
    try:
        assert send_fault(control.endpoint, "unplug", {"part": 3}, security=security)["did"] == "unplug 3 (id 3)"
        with pytest.raises(ConnectionError):
            send_fault(control.endpoint, "plug", {"part": 3}, timeout_s=1.0)  # a plain client is not admitted
        assert control.status()["unplugged"] == [3], "the plain client changed nothing"
    finally:
        control.close()


def test_status_lists_the_latest_requests_and_counts_them_all():
    """``status`` answers the latest KEPT_DONE applied requests and how many there were of each kind: 300 unplug /
    plug rounds over the real socket leave an answer of 100 entries, the newest last, and the counts of all."""
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.bus_device import VirtualBusDevice
    from hil.firmware_sim.control import KEPT_DONE, FaultControl
    from hil.firmware_sim.fault_plan import assembly_resolver

    device = VirtualBusDevice(load_assembly("servo_chain").parts)
    control = FaultControl(device, "tcp://127.0.0.1:*", assembly_resolver)
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(control.endpoint)
    try:
        rounds = 150
        for k in range(rounds):
            part = 3 + k % 5
            assert _raw(sock, envelope("unplug", {"part": part}))["type"] == "done"
            assert _raw(sock, envelope("plug", {"part": part}))["type"] == "done"
        status = _raw(sock, envelope("status", {}))["payload"]
    finally:
        sock.close(0)
        control.close()
    assert KEPT_DONE == 100 and len(status["done"]) == KEPT_DONE, len(status["done"])
    assert status["applied"] == 2 * rounds and status["applied_by_kind"] == {"unplug": rounds, "plug": rounds}
    last = 3 + (rounds - 1) % 5
    assert status["done"][-1]["did"] == f"plug {last} (id {last})" and status["done"][-2]["did"].startswith("unplug")
