"""`hil demo` (for now the servo chain run) moves every servo and reports clean bus statistics."""
from __future__ import annotations

import subprocess
import sys

from hil.runtime.servo_chain_demo import CENTER, run_servo_chain_demo


def test_demo_moves_all_servos_without_bus_errors():
    lines: list[str] = []
    result = run_servo_chain_demo(url="sim://servo_chain", duration_s=0.6, out=lines.append)
    assert result["ids"] == list(range(1, 18))
    assert result["cycles"] > 10
    assert all(abs(p - CENTER) > 5 for p in result["positions"].values()), "every servo left the centre"
    stats = result["stats"]
    assert stats["failures"] == 0 and stats["retries"] == 0 and stats["crc_errors"] == 0
    assert any(line.startswith("bus:") for line in lines)


def test_hil_demo_servo_chain_runs_end_to_end():
    proc = subprocess.run([sys.executable, "-m", "hil", "demo", "--servo-chain", "--duration", "0.5"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "found 17" in proc.stdout and "bus:" in proc.stdout


def test_hil_sim_unknown_assembly_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "hil", "sim", "nope", "--pty"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no assembly of that name" in proc.stderr and "servo_chain" in proc.stderr
