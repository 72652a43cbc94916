"""The native time shim: a compiled program on the simulator's clock, measured side by side in one run.

1. 60 x 1 s: bench/native/sleeps.c doing 60 nanosleeps of 1 s under the shim, on a lockstep clock with nothing to
   step (the clock alone, so the figure is the shim's and the relay's): the wall time it takes against the 60 s
   of simulated time it reads at the end (checked), as the ratio simulated / wall.
2. One lockstep sleep: 20000 sleeps of 1 ms by the same program under the shim (shim -> socket pair -> relay
   thread -> lockstep core and back) against 20000 sleeps of 1 ms by a Python participant on the same kind of
   clock in this process (``LockstepClock.sleep_until``, what a Python controller's time.sleep does under
   ``hil run``), alternating: microseconds per sleep of each and native / Python.
3. One clock_gettime(CLOCK_MONOTONIC): bench/native/clock_cost.c timing N calls with the raw system call (which
   neither the vDSO nor the shim intercepts), plain (glibc's vDSO) and under the shim, alternating: ns per call
   and shim / plain. Under the shim the read is an atomic load plus the spin detector's counter; the detector is
   set out of reach (HIL_CLOCK_SPIN) so that five million reads without a sleep are timed as reads, not as a
   busy-wait getting simulated time in quanta.
4. The commbot: examples/native/commbot_neck.c (Write goal + Read present position at 50 Hz, raw frames over the
   pty of the in-process world, ``hil run --native --profile virtual``) against its Python twin
   examples/native/commbot_neck.py (the same two instructions per tick, straight into the world in this process),
   alternating; each run whole (world built, 5 s of simulated time, closed), traces checked equal.

    .venv/bin/python -m bench.native_clock [--rounds 5] [--sleeps 20000] [--reads 5000000] [--neck-rounds 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from bench.bridge import CpuMeter
from hil.bridge.lockstep import LocalParticipant, LockstepCore
from hil.runtime.clock.sim import LockstepClock
from hil.runtime.native.build import ensure_built, find_compiler
from hil.runtime.native.launch import launch

HERE = Path(__file__).resolve().parent / "native"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "native"
NECK_TICKS = 250
SPIN_OUT_OF_REACH = "1000000000000"


def _bare_clock(name: str) -> LockstepClock:
    return LockstepClock(LocalParticipant(LockstepCore(lambda t: None), threading.Condition(), name), name)


def _compile(out: Path) -> dict[str, Path]:
    cc = find_compiler()
    built = {}
    sources = {"sleeps": HERE / "sleeps.c", "clock_cost": HERE / "clock_cost.c", "neck": EXAMPLES / "commbot_neck.c"}
    for name, source in sources.items():
        built[name] = out / name
        subprocess.run([*cc, "-O2", "-o", str(built[name]), str(source)], check=True)
    return built


def _under_shim(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """(stdout, wall s, simulated s) of ``argv`` under the shim on a bare lockstep clock."""
    clock = _bare_clock(Path(argv[0]).name)
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with tempfile.TemporaryFile("w+") as out:
            start = time.perf_counter()
            result = launch(argv, clock, stdout=out, epoch_ns=0)
            wall = time.perf_counter() - start
            out.seek(0)
            text = out.read()
    finally:
        clock.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} {result.outcome()}")
    return text, wall, result.clock_s


def sixty_seconds(program: Path, rounds: int) -> None:
    walls = []
    with CpuMeter() as cpu:
        for _ in range(rounds):
            out, wall, sim = _under_shim([str(program), "60", "1000000000"])
            if int(out.split()[0]) != 60_000_000_000:
                raise RuntimeError(f"the program read {out.strip()} ns, not 60 s")
            walls.append(wall)
    best, median = min(walls), statistics.median(walls)
    print("1. 60 x 1 s of nanosleep under the shim (bare lockstep clock; each run reads exactly 60.000 s)")
    print(f"   wall per run: best {best * 1e3:.1f} ms, median {median * 1e3:.1f} ms over {rounds} runs "
          f"(process start and exit included)")
    print(f"   simulated / wall: {60 / median:,.0f}x (median), {60 / best:,.0f}x (best)")
    print(f"   {cpu.note()}")


def _python_sleeps(n: int, period_s: float) -> float:
    clock = _bare_clock("python")
    try:
        start = time.perf_counter()
        for k in range(1, n + 1):
            clock.sleep_until(k * period_s)
        return time.perf_counter() - start
    finally:
        clock.close()


def per_sleep(program: Path, n: int, rounds: int) -> None:
    native, python = [], []
    with CpuMeter() as cpu:
        for r in range(rounds):
            sides = ("native", "python") if r % 2 == 0 else ("python", "native")
            for side in sides:
                if side == "native":
                    _, wall, _ = _under_shim([str(program), str(n), "1000000"])
                    native.append(wall / n)
                else:
                    python.append(_python_sleeps(n, 1e-3) / n)
    nat, py = statistics.median(native), statistics.median(python)
    print(f"2. one lockstep sleep, {n} sleeps of 1 ms, {rounds} alternating rounds (median)")
    print(f"   native under the shim (socket pair + relay) {nat * 1e6:7.1f} us/sleep   "
          f"({1 / nat:,.0f} sleeps/s)")
    print(f"   Python participant in process             {py * 1e6:7.1f} us/sleep   ({1 / py:,.0f} sleeps/s)")
    print(f"   native / Python: {nat / py:.2f}x")
    print(f"   {cpu.note()}")


def clock_read(program: Path, reads: int, rounds: int) -> None:
    plain, shim = [], []
    env = {"HIL_CLOCK_SPIN": SPIN_OUT_OF_REACH}
    with CpuMeter() as cpu:
        for r in range(rounds):
            for side in (("plain", "shim") if r % 2 == 0 else ("shim", "plain")):
                if side == "plain":
                    out = subprocess.run([str(program), str(reads)], capture_output=True, text=True, check=True)
                    plain.append(float(out.stdout.split()[0]))
                else:
                    out, _, _ = _under_shim([str(program), str(reads)], env)
                    shim.append(float(out.split()[0]))
    p, s = statistics.median(plain), statistics.median(shim)
    print(f"3. one clock_gettime(CLOCK_MONOTONIC), {reads:,} calls, {rounds} alternating rounds (median)")
    print(f"   plain (vDSO)      {p:6.1f} ns/call   best {min(plain):6.1f}")
    print(f"   under the shim    {s:6.1f} ns/call   best {min(shim):6.1f}")
    print(f"   shim / plain: {s / p:.2f}x")
    print(f"   {cpu.note()}")


def _neck_twin() -> tuple[list[str], float]:
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        import commbot_neck
    finally:
        sys.path.pop(0)
    lines: list[str] = []
    start = time.perf_counter()
    commbot_neck.run("sim://commbot?clock=sim", NECK_TICKS, out=lines.append)
    return lines, time.perf_counter() - start


def _neck_native(program: Path) -> tuple[list[str], float]:
    from hil.runtime.native.session import run_native

    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        result = run_native([str(program), "{bus}", str(NECK_TICKS)], "virtual", stdout=out)
        wall = time.perf_counter() - start
        out.seek(0)
        lines = [line.rstrip("\n") for line in out if line.startswith("tick ")]
    if result.returncode != 0:
        raise RuntimeError(f"commbot_neck {result.outcome()}")
    return lines, wall


def commbot(program: Path, rounds: int) -> None:
    native, python = [], []
    traces = set()
    with CpuMeter() as cpu:
        for r in range(rounds):
            for side in (("native", "python") if r % 2 == 0 else ("python", "native")):
                lines, wall = _neck_native(program) if side == "native" else _neck_twin()
                (native if side == "native" else python).append(wall)
                traces.add(tuple(lines))
    sim = NECK_TICKS * 0.02
    same = "the same trace on every run" if len(traces) == 1 else f"{len(traces)} DIFFERENT traces"
    nat, py = statistics.median(native), statistics.median(python)
    print(f"4. commbot neck, {NECK_TICKS} ticks at 50 Hz = {sim:g} s simulated, whole runs, {rounds} rounds (median); "
          f"{same}")
    print(f"   C over the pty, hil run --native   {nat:6.2f} s wall   {sim / nat:5.1f}x real time")
    print(f"   Python twin, in process            {py:6.2f} s wall   {sim / py:5.1f}x real time")
    print(f"   C / Python wall: {nat / py:.2f}x")
    print(f"   {cpu.note()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.native_clock", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each section (default 5)")
    parser.add_argument("--sleeps", type=int, default=20000, help="sleeps per run in section 2 (default 20000)")
    parser.add_argument("--reads", type=int, default=5_000_000, help="clock reads per run in section 3")
    parser.add_argument("--neck-rounds", type=int, default=2, help="rounds of section 4 (default 2; 0: skip)")
    args = parse_with_smoke(parser, argv, rounds=1, sleeps=200, reads=20_000, neck_rounds=1)
    tools = ensure_built()
    print(f"shim: {tools.shim} (built with {tools.compiler})")
    with tempfile.TemporaryDirectory() as tmp:
        programs = _compile(Path(tmp))
        sixty_seconds(programs["sleeps"], args.rounds)
        per_sleep(programs["sleeps"], args.sleeps, args.rounds)
        clock_read(programs["clock_cost"], args.reads, args.rounds)
        if args.neck_rounds:
            commbot(programs["neck"], args.neck_rounds)


if __name__ == "__main__":
    main()
