"""``hil sim ... --bitflip --drop`` says what it injected, at exit and in its clock's status, so a
host's figures (CRC errors, timeouts) can be checked against the injector's own counts.

Real subprocesses (tests/conftest.py SimProcess), a real pty, our host; the waits are hang guards.
"""
from __future__ import annotations

import re
import signal
import subprocess

from hil.devices.control_table import XM430_W350 as XM
from hil.runtime.bus import BusError, BusHost
from hil.runtime.transports import open_transport
from tests.conftest import SimProcess

SUMMARY = re.compile(r"faults injected \(seed 3\): (\d+) bit flips in (\d+) chunks of (\d+) bits \(rate 0\.002\), "
                     r"(\d+) of (\d+) replies dropped \(rate 0\.05\)")


# reads through the faults (2e-3 bit flips, 5 % drops). Every count the test checks must be above 0, and 60 reads
# leave each far above it: seed 3 gives 39 flips in 32 chunks, 7 of 82 replies dropped, 19 CRC errors and 20
# timeouts at the host, 52 of 60 answered (the same figures in each of several runs at a load of 8). Each timeout
# waits out the host's 0.2 s, so the 150 reads this was once took ~23 s.
READS = 60
CLOCKED_READS = 10  # with no clock participant many replies wait out the timeout, so a few reads only


def test_the_injected_faults_are_printed_at_exit_and_bound_the_hosts_errors():
    sim = SimProcess("--pty", "--bitflip", "2e-3", "--drop", "0.05", "--seed", "3")
    try:
        # a timeout well above a pty's reply time (~1 ms) even on a loaded machine: every timeout is a fault's
        bus = BusHost(open_transport(sim.where), timeout_s=0.2, retries=1)
        answered = 0
        for n in range(READS):
            try:
                bus.read_register(1 + n % 17, XM["present_position"])
                answered += 1
            except BusError:
                pass
        stats = bus.stats
        bus.close()
        status, said = stop_and_read(sim)
    finally:
        sim.stop()
    assert status == 0
    found = SUMMARY.search(said)
    assert found, said
    flips, chunks, bits, dropped, replies = map(int, found.groups())
    assert 0 < chunks <= flips and bits >= 8 * 10 * READS  # every instruction (10+ bytes) went through the injector
    assert 0 < dropped < replies and replies >= answered
    crc = stats.crc_errors + stats.device_crc_errors
    assert 0 < crc <= flips, (crc, flips)  # the host saw flips, and each CRC error needs a flipped bit
    # each timeout needs a dropped reply or a corrupted instruction (an ID or length flipped: no reply)
    assert 0 < stats.timeouts <= dropped + chunks, (stats.timeouts, dropped, chunks)
    assert 0 < answered < READS


def stop_and_read(sim: SimProcess) -> tuple[int, str]:
    """SIGTERM (as Ctrl-C would), the exit status and everything it wrote to stderr; the wait is a hang guard."""
    sim.proc.send_signal(signal.SIGTERM)
    try:
        sim.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("hil sim did not exit within 60 s of SIGTERM (a hang, not a timing check)") from None
    return sim.proc.returncode, sim.stderr()


def test_the_clock_status_carries_the_fault_counts():
    from hil.bridge.lockstep import clock_status

    sim = SimProcess("--pty", "--clock", "sim", "--clock-endpoint", "tcp://127.0.0.1:0", "--bitflip", "5e-3",
                     "--drop", "0.05", "--seed", "7", assembly="commbot")
    try:
        endpoint = sim.next_line().removeprefix("clock ")
        bus = BusHost(open_transport(sim.where), timeout_s=0.1, retries=1)
        answered = 0
        # model numbers (address 0, 2 bytes) of the commbot's first parts; with no clock participant many replies
        # wait out the timeout, so a few reads only
        for n in range(CLOCKED_READS):
            try:
                bus.read(1 + n % 17, 0, 2)
                answered += 1
            except BusError:
                pass
        bus.close()
        status = clock_status(endpoint, timeout_s=30.0)
        code, said = stop_and_read(sim)
    finally:
        sim.stop()
    assert code == 0
    faults = status["faults"]
    assert faults["seed"] == 7 and faults["bit_flip_rate"] == 5e-3 and faults["drop_rate"] == 0.05, status
    assert status["participants"] == [] and status["dropped"] == 0
    # the status counts what went through the injector: the same numbers it prints at exit (nothing came after)
    found = re.search(r"faults injected \(seed 7\): (\d+) bit flips in (\d+) chunks of (\d+) bits \(rate 0\.005\), "
                      r"(\d+) of (\d+) replies dropped", said)
    assert found, said
    printed = dict(zip(("bit_flips", "corrupted_chunks", "bits_seen", "dropped_replies", "replies_seen"),
                       map(int, found.groups())))
    assert {key: faults[key] for key in printed} == printed, (faults, printed)
    assert faults["bits_seen"] >= 8 * 10 * (CLOCKED_READS) and faults["replies_seen"] >= answered > 0
    assert 0 < faults["bit_flips"] and faults["dropped_replies"] < faults["replies_seen"]
