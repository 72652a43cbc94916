"""Fault injection through the in-process transport: the host never returns a wrong value, and says why not.

Bit flips, dropped replies and vanished parts come from the device's seeded FaultInjector (sim://...?bitflip=..),
so every run is the same run. The sim transport knows when nothing more can come, so timeouts cost no wall time.
"""
from __future__ import annotations

import random

import pytest

from hil.devices.control_table import XM430_W350 as XM
from hil.devices.protocol import StatusError
from hil.firmware_sim import FaultInjector, VirtualBusDevice
from hil.runtime.bus import BusError, BusHost, BusStats, BusTimeout, CorruptReply
from hil.runtime.transports import open_transport
from hil.runtime.transports.sim import SimTransport

IDS = tuple(range(1, 18))  # config/robots/servo_chain.yaml
# In-process, silence is known at once (the transport is idle), so a long timeout costs nothing; it only keeps a
# stalled test machine from turning a slow answer into an extra timeout and upsetting the exact counts below.
TIMEOUT_S = 1.0
REGISTERS = ("goal_position", "profile_velocity", "profile_acceleration", "goal_velocity", "moving_threshold",
             "homing_offset", "velocity_limit")  # all 4 bytes: a stale answer would have the right length


def open_bus(query: str) -> tuple[BusHost, VirtualBusDevice, FaultInjector]:
    transport = open_transport(f"sim://servo_chain?{query}")
    device = transport.device
    assert device.faults is not None
    return BusHost(transport, timeout_s=TIMEOUT_S), device, device.faults


def write_known_values(bus: BusHost, faults: FaultInjector) -> dict[tuple[int, str], int]:
    """Distinct values in every register, written with the faults switched off."""
    saved = faults.bit_flip_rate, faults.drop_rate
    faults.bit_flip_rate = faults.drop_rate = 0.0
    expected = {}
    for i in IDS:
        for k, name in enumerate(REGISTERS):
            value = 1 + (i * 41 + k * 13) % 200
            bus.write_register(i, XM[name], value)
            expected[(i, name)] = value
    assert bus.stats.retries == bus.stats.failures == 0
    faults.bit_flip_rate, faults.drop_rate = saved
    bus.stats = BusStats()
    return expected


def assert_attempts_add_up(stats: BusStats) -> None:
    """Every failed attempt was retried or ended its call, and each has exactly one counted cause.

    Timeouts, corrupted replies (our CRC) and corrupted instructions (the device's CRC error) each end one attempt;
    a malformed reply may end one too, or just be ignored (a stray answer).
    """
    failed_attempts = stats.retries + stats.failures
    definite = stats.timeouts + stats.crc_errors + stats.device_crc_errors
    assert definite <= failed_attempts <= definite + stats.malformed


@pytest.mark.parametrize("seed", [1, 2])
def test_bit_flips_never_give_a_wrong_value(seed):
    bus, device, faults = open_bus(f"bitflip=2e-3&seed={seed}")
    expected = write_known_values(bus, faults)
    rng = random.Random(seed)
    outcomes = {"right": 0, "error": 0}
    n_calls = 0
    for _ in range(2500):
        device_id, name = rng.choice(IDS), rng.choice(REGISTERS)
        n_calls += 1
        try:
            value = bus.read_register(device_id, XM[name])
        except BusError:
            outcomes["error"] += 1
            continue
        assert value == expected[(device_id, name)], (device_id, name)
        outcomes["right"] += 1
    for _ in range(500):
        name = rng.choice(REGISTERS)
        ids = rng.sample(IDS, rng.randint(1, 6))
        kind = rng.randrange(4)
        n_calls += 1
        try:
            if kind < 2:
                values = bus.sync_read_register(XM[name], ids, fast=kind == 1)
            else:
                raw = bus.bulk_read([(i, XM[name].address, 4) for i in ids], fast=kind == 3)
                values = {i: XM[name].decode(d) for i, d in raw.items()}
        except BusError:
            outcomes["error"] += 1
            continue
        assert values == {i: expected[(i, name)] for i in ids}, (kind, name, ids)
        outcomes["right"] += 1

    stats = bus.stats
    # with about one corrupted frame in three, most calls still succeed thanks to the retries
    assert outcomes["right"] > 0.8 * n_calls
    assert stats.failures == outcomes["error"]
    assert stats.transactions == n_calls
    assert stats.status_errors == 0
    assert stats.crc_errors > 0 and stats.device_crc_errors > 0 and stats.retries > 0 and stats.timeouts > 0
    assert_attempts_add_up(stats)
    # and with what the injector did: every detected corruption needs at least one flipped bit
    assert faults.counts["bit_flips"] > 0 and faults.counts["dropped_replies"] == 0
    assert stats.crc_errors + stats.device_crc_errors <= faults.counts["bit_flips"]
    assert stats.device_crc_errors <= device.counters["crc_errors"]


def test_a_partial_instruction_does_not_swallow_the_next_requests():
    """A flipped length bit makes the device wait for bytes that never come; it must give up when the line idles.

    (Otherwise the instructions that follow are swallowed, then executed late, and their stale answers are taken
    for the answers to newer requests.)
    """
    bus, device, faults = open_bus("seed=0")
    expected = write_known_values(bus, faults)
    frame = bytearray(b"\xff\xff\xfd\x00\x01\x07\x04\x02\x74\x00\x04\x00")  # length field 0x0407: 1031 bytes
    bus.transport.write(bytes(frame))
    assert device.counters["incomplete"] == 0 and device.next_release_s() is None  # the device waits for the rest...
    for i in IDS:
        assert bus.read_register(i, XM["goal_position"]) == expected[(i, "goal_position")]
    assert device.counters["incomplete"] == 1  # ...and gave up on it at the first silence
    assert bus.stats.retries == 1 and bus.stats.timeouts == 1 and bus.stats.failures == 0


@pytest.mark.parametrize("seed", [3, 4])
def test_dropped_replies_are_timeouts_and_retries(seed):
    bus, device, faults = open_bus(f"drop=0.05&seed={seed}")
    expected = write_known_values(bus, faults)
    rng = random.Random(seed)
    for _ in range(1500):
        device_id, name = rng.choice(IDS), rng.choice(REGISTERS)
        assert bus.read_register(device_id, XM[name]) == expected[(device_id, name)]
    stats = bus.stats
    dropped = faults.counts["dropped_replies"]
    assert dropped > 30
    # one reply per read: every dropped reply is one timeout, and every timeout one retry (none failed: 0.05**4)
    assert stats.timeouts == dropped
    assert stats.retries == dropped and stats.failures == 0
    assert stats.crc_errors == stats.device_crc_errors == stats.malformed == 0
    assert_attempts_add_up(stats)


def test_dropped_replies_in_group_reads():
    bus, device, faults = open_bus("drop=0.05&seed=9")
    expected = write_known_values(bus, faults)
    rng = random.Random(9)
    for _ in range(400):
        ids = rng.sample(IDS, 5)
        fast = rng.random() < 0.5
        assert bus.sync_read_register(XM["goal_position"], ids, fast=fast) == \
            {i: expected[(i, "goal_position")] for i in ids}
    stats = bus.stats
    assert stats.timeouts > 0 and stats.retries == stats.timeouts and stats.failures == 0
    # a non-fast group read can lose several replies in one attempt, but one timeout per attempt at most
    assert stats.timeouts <= faults.counts["dropped_replies"]


def test_same_seed_same_faults():
    runs = []
    for _ in range(2):
        bus, device, faults = open_bus("bitflip=1e-3&drop=0.02&seed=77")
        for n in range(300):
            try:
                bus.read(1 + n % 17, 132, 4)
            except BusError:
                pass
        stats = bus.stats.as_dict()
        runs.append(({k: v for k, v in stats.items() if not k.startswith("latency")}, dict(faults.counts)))
    assert runs[0] == runs[1]
    assert runs[0][1]["bit_flips"] > 0 and runs[0][1]["dropped_replies"] > 0


# ---------------------------------------------------------------------------------------------- vanished parts
def test_a_vanished_part_times_out_and_comes_back():
    bus, device, faults = open_bus("seed=5")
    expected = write_known_values(bus, faults)
    reg = XM["goal_position"]
    faults.vanished.add(5)

    with pytest.raises(BusTimeout) as info:
        bus.read_register(5, reg)
    assert "id 5" in str(info.value) and info.value.missing_ids == (5,)
    assert bus.stats.retries == bus.retries and bus.stats.timeouts == bus.retries + 1 and bus.stats.failures == 1

    with pytest.raises(BusTimeout) as info:
        bus.write_register(5, XM["led"], 1)
    assert info.value.missing_ids == (5,)

    for fast in (False, True):
        with pytest.raises(BusTimeout) as info:
            bus.sync_read_register(reg, [4, 5, 6], fast=fast)
        assert info.value.missing_ids == (5,), fast
        assert "5" in str(info.value)
        with pytest.raises(BusTimeout) as info:
            bus.bulk_read([(4, reg.address, 4), (5, reg.address, 4)], fast=fast)
        assert info.value.missing_ids == (5,)

    # the others still work, alone and in groups
    assert bus.read_register(4, reg) == expected[(4, "goal_position")]
    assert bus.sync_read_register(reg, [4, 6], fast=True) == {i: expected[(i, "goal_position")] for i in (4, 6)}
    assert 5 not in bus.ping_all()

    faults.vanished.discard(5)
    assert bus.read_register(5, reg) == expected[(5, "goal_position")]
    assert bus.sync_read_register(reg, [4, 5, 6], fast=True) == {i: expected[(i, "goal_position")] for i in (4, 5, 6)}
    assert bus.ping(5) == (1020, 46)


def test_silence_names_the_id():
    bus = BusHost(SimTransport("sim://servo_chain", device=VirtualBusDevice([])), timeout_s=TIMEOUT_S)
    with pytest.raises(BusTimeout) as info:
        bus.ping(3)
    assert "id 3" in str(info.value) and info.value.missing_ids == (3,)
    assert bus.stats.timeouts == bus.retries + 1
    # and on a bus with parts, an ID nobody has
    bus = BusHost(open_transport("sim://servo_chain"), timeout_s=TIMEOUT_S)
    with pytest.raises(BusTimeout) as info:
        bus.read(42, 132, 4)
    assert "id 42" in str(info.value) and info.value.missing_ids == (42,)
    with pytest.raises(BusTimeout) as info:
        bus.sync_read(132, 4, [1, 42, 2])
    assert info.value.missing_ids == (42,)


# ---------------------------------------------------------------------------------------------- targeted corruption
class CorruptSome(FaultInjector):
    """Flips one bit in the next ``replies`` status packets and the next ``instructions`` instruction packets."""

    def __init__(self, replies: int = 0, instructions: int = 0):
        super().__init__()
        self.todo = {"reply": replies, "instruction": instructions}

    def corrupt(self, data: bytes) -> bytes:
        kind = "reply" if len(data) > 7 and data[7] == 0x55 else "instruction"
        if not self.todo[kind]:
            return data
        self.todo[kind] -= 1
        out = bytearray(data)
        out[len(out) // 2 + 2] ^= 0x08  # a parameter byte: the frame's boundaries stay intact
        self.counts["bit_flips"] += 1
        return bytes(out)


def corrupting_bus(**todo) -> tuple[BusHost, VirtualBusDevice]:
    transport = open_transport("sim://servo_chain")
    device = transport.device
    device.faults = CorruptSome(**todo)
    return BusHost(transport, timeout_s=TIMEOUT_S), device


def test_a_corrupted_reply_is_retried_and_the_call_succeeds():
    bus, device = corrupting_bus(replies=1)
    assert bus.read_register(3, XM["present_position"]) == 2048
    assert (bus.stats.retries, bus.stats.crc_errors, bus.stats.failures) == (1, 1, 0)
    assert device.faults.todo["reply"] == 0


def test_a_corrupted_instruction_is_retried_and_the_call_succeeds():
    bus, device = corrupting_bus(instructions=1)
    bus.write_register(2, XM["goal_position"], 1234)
    assert (bus.stats.retries, bus.stats.device_crc_errors, bus.stats.failures) == (1, 1, 0)
    assert device.counters["crc_errors"] == 1
    assert device.part(2).memory.get("goal_position") == 1234


def test_a_corrupted_fast_reply_is_retried():
    bus, device = corrupting_bus(replies=1)
    assert bus.sync_read_register(XM["present_position"], IDS, fast=True) == {i: 2048 for i in IDS}
    assert (bus.stats.retries, bus.stats.crc_errors) == (1, 1)


def test_replies_corrupted_every_time_fail_with_corrupt_reply():
    bus, device = corrupting_bus(replies=100)
    with pytest.raises(CorruptReply) as info:
        bus.read(7, 132, 4)
    assert "CRC" in str(info.value) and f"after {bus.retries} retries" in str(info.value)
    assert (bus.stats.retries, bus.stats.crc_errors, bus.stats.failures) == (bus.retries, bus.retries + 1, 1)
    # a device error code, by contrast, is raised at once, not retried
    bus, device = corrupting_bus()
    with pytest.raises(StatusError):
        bus.write(7, 132, bytes(4))
    assert bus.stats.retries == 0 and bus.stats.status_errors == 1
