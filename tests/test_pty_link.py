"""``hil sim ... --pty --pty-link PATH``: a stable name for the pty, kept while serving and removed at exit.

Real subprocesses and a real pty: the link is there once the device prints its address, it reaches the device
(a ping through it answers), it is gone after SIGTERM, a taken path is refused before anything is built, and a
dangling link a killed ``hil sim`` left is replaced.
"""
from __future__ import annotations

import os
import signal
import subprocess

from dynamixel_sdk import COMM_SUCCESS, PacketHandler, PortHandler, port_handler

from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S

from conftest import SimProcess, hil_command


def ping_through(path: str, monkeypatch) -> int:
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 1000 * PEER_PROCESS_LATENCY_S / 2)
    port = PortHandler(path)
    assert port.openPort() and port.setBaudRate(1_000_000)
    try:
        model, result, error = PacketHandler(2.0).ping(port, 1)
        assert (result, error) == (COMM_SUCCESS, 0)
        return model
    finally:
        port.closePort()


def test_the_link_points_at_the_pty_while_serving_and_is_removed_at_exit(tmp_path, monkeypatch):
    link = tmp_path / "ttyHIL0"
    sim = SimProcess("--pty", "--pty-link", str(link))
    try:
        assert os.readlink(link) == sim.where
        assert ping_through(str(link), monkeypatch) == 1020
        sim.proc.send_signal(signal.SIGTERM)
        assert sim.proc.wait(timeout=10) == 0
        assert not os.path.lexists(link)
    finally:
        sim.stop()


def test_a_taken_path_is_refused_and_left_alone(tmp_path):
    taken = tmp_path / "ttyHIL0"
    taken.write_text("a user's file")
    proc = subprocess.run([*hil_command(), "sim", "servo_chain", "--pty", "--pty-link", str(taken)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"hil: error: --pty-link {taken}: the path exists") and "Traceback" not in proc.stderr
    assert taken.read_text() == "a user's file"
    os.symlink("/etc/hostname", tmp_path / "live")  # a live link that is not a pty of ours: refused too
    proc = subprocess.run([*hil_command(), "sim", "servo_chain", "--pty", "--pty-link", str(tmp_path / "live")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "a link to /etc/hostname" in proc.stderr
    assert os.readlink(tmp_path / "live") == "/etc/hostname"


def test_a_link_needs_pty(tmp_path):
    proc = subprocess.run([*hil_command(), "sim", "servo_chain", "--tcp", "0", "--pty-link", str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--pty-link" in proc.stderr and "needs --pty" in proc.stderr


def test_a_dangling_link_left_by_a_killed_sim_is_replaced(tmp_path, monkeypatch):
    link = tmp_path / "ttyHIL0"
    os.symlink("/dev/pts/999999", link)  # what a SIGKILLed hil sim leaves: its pty is gone
    sim = SimProcess("--pty", "--pty-link", str(link))
    try:
        assert os.readlink(link) == sim.where
    finally:
        sim.stop()
    assert not os.path.lexists(link)
