"""Every bench module runs at its smallest settings (``--smoke``), so a benchmark that breaks (as
bench/bus_cycle.py did: a NameError after the shared /proc reader moved) is caught before it lands.

The modules are discovered (pkgutil over bench/, private ``_`` helpers and ``__main__`` left out), not listed, so a
new benchmark is covered the day it is added. Each runs as ``python -m bench.NAME --smoke`` in a subprocess: it must
exit 0 and print its table; no figure is asserted (a smoke run's figures mean nothing). Peers only in the bench
extra (jupedsim, pysocialforce) are skipped by the benchmark itself with a printed line. The wait is a hang guard
(SMOKE_HANG_S), not a timing check: a smoke run takes ~1-25 s on a loaded two-core machine.
"""
from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import bench

ROOT = Path(__file__).resolve().parent.parent
SMOKE_HANG_S = 300.0


def bench_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def test_the_bench_package_is_discovered():
    names = bench_modules()
    assert "bus_cycle" in names and "viewer" in names and not any(n.startswith("_") for n in names), names


@pytest.mark.parametrize("name", bench_modules())
def test_every_bench_module_runs_its_smoke_settings(name, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-m", f"bench.{name}", "--smoke"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=SMOKE_HANG_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bench.{name} --smoke still running after {SMOKE_HANG_S:g} s (a hang, not a timing check)")
    said = f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, said
    assert "Traceback" not in proc.stderr, said
    table = [row for row in proc.stdout.splitlines() if row.strip()]
    assert len(table) >= 3, said  # a heading and rows: the table was printed
