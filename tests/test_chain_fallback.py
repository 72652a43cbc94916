"""A real bus's Fast Bulk Read stops at the first silent part: the parts after it in the chain wait for a
slot that never comes. ``hil sim --chain-stops`` answers that way over a real pty; the host reads the slots that
came (their running CRCs), reads the parts after the silent one one by one, and names only the silent ones, so one
part unplugged does not make the rest of the robot miss cycles and get lost."""
from __future__ import annotations

import pytest

from conftest import SimProcess
from hil.devices.config_path import resolve as resolve_config
from hil.devices.protocol import StreamDecoder, encode_fast_reply, encode_request, fast_reply_prefix
from hil.devices.protocol import requests as rq
from hil.firmware_sim.control import send_fault
from hil.runtime.bus import BusHost, BusTimeout
from hil.runtime.robot import Robot
from hil.runtime.transports import open_transport
from waiting import HangGuard

PRESENT_POSITION, LENGTH = 132, 4
IDS = tuple(range(1, 18))


def test_a_cut_short_fast_reply_gives_its_intact_slots_and_stops_at_a_bad_one():
    slots = [(0, 1, b"\x01\x02\x03\x04"), (0, 2, b"\x05\x06\x07\x08"), (0, 3, b"\x09\x0a\x0b\x0c")]
    lengths = {1: 4, 2: 4, 3: 4, 4: 4, 5: 4}
    announced = 1 + 5 * (4 + 4)
    frame = encode_fast_reply(slots, length=announced)
    assert frame[5] | frame[6] << 8 == announced, "the first device announces every asked slot"
    assert fast_reply_prefix(frame, lengths) == slots
    decoder = StreamDecoder()
    assert decoder.feed(frame) == [] and decoder.partial_frame() == frame, "the decoder waits for the rest"
    garbled = bytearray(frame)
    garbled[-8] ^= 0x10  # a data byte of the third slot
    assert fast_reply_prefix(bytes(garbled), lengths) == slots[:2], "its running CRC fails: the two before stand"
    assert fast_reply_prefix(frame[:-1], lengths) == slots[:2], "an incomplete slot is not taken"
    assert fast_reply_prefix(b"\xff\xff\xfd\x00\x01\x05\x00\x55", lengths) == [], "not a fast reply"


def served(*extra: str, assembly: str = "servo_chain") -> tuple[SimProcess, str, str | None]:
    sim = SimProcess("--pty", "--chain-stops", "--control", "tcp://127.0.0.1:*", *extra, assembly=assembly)
    try:
        clock = sim.next_line().split()[1] if "--clock" in extra else None
        control = sim.next_line().split()[1]
        return sim, control, clock
    except BaseException:
        sim.stop()
        raise


def raw_reply(path: str, request: bytes, at_least: int) -> bytes:
    """What comes back on the pty for ``request``: at least ``at_least`` bytes (waited for, a hang guard bounding
    it), then whatever else comes before the line has been quiet for 0.3 s (the device writes a reply at once, so
    a longer one would already be there)."""
    transport = open_transport(path)
    try:
        transport.write(request)
        out, guard = b"", HangGuard()
        while len(out) < at_least:
            out += transport.read(4096, 0.05)
            guard.check("the device's reply")
        while True:
            more = transport.read(4096, 0.3)
            if not more:
                return out
            out += more
    finally:
        transport.close()


def test_the_device_cuts_the_chain_and_the_host_names_only_the_silent_parts():
    sim, control, _ = served()
    items = [(i, PRESENT_POSITION, LENGTH) for i in IDS]
    request = encode_request(rq.BulkRead(items, fast=True))
    whole = 8 + len(IDS) * (4 + LENGTH)  # header, id, length, instruction; a slot each (the last CRC: the frame's)
    try:
        assert len(raw_reply(sim.where, request, whole)) == whole, "every part answers: the whole chain"
        send_fault(control, "unplug", {"part": 5})
        cut = raw_reply(sim.where, request, 8 + 4 * (4 + LENGTH))
        assert [i for _, i, _ in fast_reply_prefix(cut, dict.fromkeys(IDS, LENGTH))] == [1, 2, 3, 4]
        assert len(cut) == 8 + 4 * (4 + LENGTH), "nothing after id 4's slot: ids 6..17 waited for id 5"
        send_fault(control, "unplug", {"part": 11})
        with BusHost(open_transport(sim.where), retries=1) as bus:
            with pytest.raises(BusTimeout) as caught:
                bus.bulk_read(items, fast=True)
            assert caught.value.missing_ids == (5, 11), "only the silent parts, not every part after id 5"
            assert "stopped at id 5" in str(caught.value)
            assert bus.stats.chain_fallbacks == 1
            rest = bus.bulk_read([item for item in items if item[0] not in (5, 11)], fast=True)
            assert sorted(rest) == [i for i in IDS if i not in (5, 11)]
            with pytest.raises(BusTimeout) as first:
                bus.bulk_read(items[:1] + items[4:6], fast=True)  # 1, 5, 6: the chain stops after id 1
            assert first.value.missing_ids == (5,)
    finally:
        assert sim.stop() == 0, sim.stderr()


def test_one_part_unplugged_on_a_chain_that_stops_loses_that_part_only(tmp_path):
    semantics = resolve_config("commbot", "semantics", "semantics")
    sim, control, clock = served("--clock", "sim", "--clock-endpoint", "tcp://127.0.0.1:*", "--stall-timeout", "120",
                                 "--semantics", str(semantics), assembly="commbot")
    try:
        profile = {"bus": sim.where, "clock": "sim", "clock_endpoint": clock, "semantics": "commbot",
                   "cache_dir": str(tmp_path / "cache"), "stall_timeout_s": 120.0}
        with Robot.open(profile) as robot:
            start = robot.clock.now()
            for tick in robot.loop(hz=10, duration_s=2.0):
                if abs(tick.time - start - 0.5) < 1e-6:
                    send_fault(control, "unplug", {"part": "left_arm.shoulder_pitch"})  # id 10, early in the read
            assert robot.parts_lost == [10], robot.notes
            assert [(e.kind, e.part_id) for e in robot.part_events] == [("lost", 10)]
            assert robot.joints["right_arm.elbow"].available and robot.joints["head.neck_yaw"].available
            assert robot.bus.stats.chain_fallbacks >= 1, "the device did cut the chain"
    finally:
        assert sim.stop() == 0, sim.stderr()
