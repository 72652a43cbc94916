"""A Python controller's waits on the simulator's clock (runtime/clock/waits.py), measured side by side in one run.

1. The asyncio example: examples/async_wander.py (asyncio.sleep pacing, a planner thread on queue.get(timeout=0.1),
   Event.wait(0.05), datetime.now()) as a trial on the lab map (cameras not recorded), whole (world built, crowd
   none, closed): wall time against its simulated seconds, as simulated / wall (above 1: faster than real time);
   the rounds' logs compared message by message.
2. One wait of 1 ms on a bare lockstep clock (nothing to step, so the figure is the waits' own), N of each kind
   in one thread under the time patch: the lockstep sleep itself (``LockstepClock.sleep_until``, what robot.loop
   and time.sleep did before every wait was on the clock), time.sleep, threading.Event.wait, queue.get(timeout=),
   asyncio.sleep, select.select: microseconds per wait, and each / the lockstep sleep.
3. The other way to put asyncio on the clock: the same N asyncio.sleep(0.001) in a Python program run under the
   native time shim (LD_PRELOAD: its epoll_wait and clock_gettime are simulated, docs/CLOCKS.md), against the
   loop in this process under the patch: microseconds per wait of each (interpreter start and exit included
   for the shim's side, subtracted by a run with no sleeps), shim / patch.
4. Two threads: a main thread asking the example's planner thread through a queue and waiting for the answer
   with Event.wait(0.05), the planner on queue.get(timeout=0.1), N round trips: microseconds per round trip (each
   hand-off rings the waiter's bell: the lock's release wakes it at once).

    .venv/bin/python -m bench.clock_waits [--rounds 3] [--waits 2000] [--duration 20] [--trips 300]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import queue
import select
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from bench.bridge import CpuMeter
from hil.bridge.lockstep import LocalParticipant, LockstepCore
from hil.runtime.clock.patch import patched
from hil.runtime.clock.sim import LockstepClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "async_wander.py"
ASYNC_PROGRAM = """
import asyncio, sys, time
async def paced(n):
    for _ in range(n):
        await asyncio.sleep(0.001)
asyncio.run(paced(int(sys.argv[1])))
print(time.monotonic())
"""


def _bare_clock(name: str = "controller") -> LockstepClock:
    return LockstepClock(LocalParticipant(LockstepCore(lambda t: None), threading.Condition(), name), name)


def example_trial(duration: float, rounds: int) -> None:
    from hil.trial import Trial
    from hil.trial.record.log import read_log

    walls, logs = [], []
    with CpuMeter() as cpu, tempfile.TemporaryDirectory() as out:
        for r in range(rounds):
            start = time.perf_counter()
            result = Trial(EXAMPLE, map="lab", duration=duration, camera_rate=0).run(Path(out) / str(r))
            walls.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"the example failed: {result.error}")
            log = read_log(Path(out) / str(r) / "trial.mcap")
            logs.append({k: [(m.t, m.data) for m in v] for k, v in log.messages.items()})
    same = all(log == logs[0] for log in logs)
    median = statistics.median(walls)
    print(f"1. examples/async_wander.py, {duration:g} s of simulated time on the lab map, {rounds} runs (whole trial)")
    print(f"   wall per run: median {median:.2f} s, best {min(walls):.2f} s")
    print(f"   simulated / wall: {duration / median:.1f}x (median), {duration / min(walls):.1f}x (best)")
    print(f"   the {rounds} logs' messages: {'identical' if same else 'DIFFERENT'}")
    print(f"   {cpu.note()}")


def _kinds(n: int) -> dict:
    """Each kind of wait: a function doing n waits of 1 ms in the calling thread (under the patch)."""
    read_end, _ = _PIPE

    def lockstep(clock):
        for k in range(n):
            clock.sleep_until(clock.now() + 1e-3)

    def sleeps(clock):
        for _ in range(n):
            time.sleep(1e-3)

    def events(clock):
        event = threading.Event()
        for _ in range(n):
            event.wait(1e-3)

    def queues(clock):
        waiting = queue.Queue()
        for _ in range(n):
            try:
                waiting.get(timeout=1e-3)
            except queue.Empty:
                pass

    def asyncio_sleeps(clock):
        async def paced():
            for _ in range(n):
                await asyncio.sleep(1e-3)
        asyncio.run(paced())

    def selects(clock):
        for _ in range(n):
            select.select([read_end], [], [], 1e-3)

    return {"lockstep sleep_until": lockstep, "time.sleep": sleeps, "Event.wait": events,
            "queue.get(timeout=)": queues, "asyncio.sleep": asyncio_sleeps, "select.select": selects}


_PIPE = os.pipe()


def per_wait(n: int, rounds: int) -> float:
    times: dict[str, list[float]] = {name: [] for name in _kinds(n)}
    with CpuMeter() as cpu:
        for _ in range(rounds):
            for name, run in _kinds(n).items():
                clock = _bare_clock()
                try:
                    with patched(clock):
                        wall0 = _wall()
                        run(clock)
                        times[name].append((_wall() - wall0) / n)
                        if abs(clock.now() - n * 1e-3) > 1e-6 * n:
                            raise RuntimeError(f"{name}: the clock reads {clock.now()} s after {n} waits of 1 ms")
                finally:
                    clock.close()
    base = statistics.median(times["lockstep sleep_until"])
    print(f"2. one wait of 1 ms on a bare lockstep clock, {n} per kind, {rounds} rounds (median); each ends at "
          f"exactly {n} ms")
    for name, values in times.items():
        each = statistics.median(values)
        print(f"   {name:22s} {each * 1e6:7.1f} us/wait   ({1e-3 / each:,.0f}x real time)   "
              f"{each / base:5.2f}x the lockstep sleep")
    print(f"   {cpu.note()}")
    return statistics.median(times["asyncio.sleep"])


def _wall() -> float:
    from hil.runtime.clock.base import WALL

    return WALL()


def asyncio_under_shim(n: int, rounds: int, patched_each: float) -> None:
    try:
        from hil.runtime.native.build import find_compiler

        find_compiler()
    except Exception as exc:  # noqa: BLE001 - no compiler: the shim cannot be built here
        print(f"3. asyncio under the native shim: skipped ({exc})")
        return
    graces = (None, 0)  # the default wall-time grace for data on descriptors hil does not serve (20 ms), and none
    walls: dict = {(grace, count): [] for grace in graces for count in (0, n)}
    simulated: dict = {}
    with tempfile.TemporaryDirectory() as folder, CpuMeter() as cpu:
        program = Path(folder) / "paced.py"
        program.write_text(ASYNC_PROGRAM)
        for _ in range(rounds):
            for key in walls:
                wall, simulated[key] = _paced_under_shim(program, *key)
                walls[key].append(wall)
    print(f"3. {n} x asyncio.sleep(0.001): a Python program under the native shim against the loop in this process "
          f"under the patch ({rounds} rounds, median; the shim's side less a run with no sleeps: interpreter start "
          f"{statistics.median(walls[(0, 0)]):.2f} s)")
    for grace in graces:
        each = (statistics.median(walls[(grace, n)]) - statistics.median(walls[(grace, 0)])) / n
        label = "default I/O grace (20 ms)" if grace is None else f"HIL_CLOCK_IO_GRACE_MS={grace}"
        print(f"   under the shim, {label:26s} {each * 1e6:9.1f} us/wait   shim / patch: {each / patched_each:7.2f}x"
              f"   (read {simulated[(grace, n)]:.3f} s at the end)")
    print(f"   in process, patched                       {patched_each * 1e6:9.1f} us/wait   (reads exactly "
          f"{n * 1e-3:.3f} s)")
    print("   (asyncio rounds an epoll timeout up to whole milliseconds, so under the shim a 1 ms sleep often lasts "
          "2; in process the patched selector gets the exact float)")
    print(f"   {cpu.note()}")


def _paced_under_shim(program: Path, grace: int | None, count: int) -> tuple[float, float]:
    from hil.runtime.native.launch import launch

    clock = _bare_clock("python")
    try:
        with tempfile.TemporaryFile("w+") as out:
            start = _wall()
            result = launch([sys.executable, str(program), str(count)], clock, stdout=out, io_grace_ms=grace)
            wall = _wall() - start
            out.seek(0)
            read = float(out.read().split()[-1])
    finally:
        clock.close()
    if result.returncode != 0 or read < count * 1e-3:
        raise RuntimeError(f"under the shim: {result.outcome()}, the program read {read} s")
    return wall, read


def round_trips(trips: int, rounds: int) -> None:
    sys.path.insert(0, str(EXAMPLE.parent))
    from async_wander import planner  # the example's planner thread, asked as the example asks it

    walls = []
    with CpuMeter() as cpu:
        for _ in range(rounds):
            clock = _bare_clock()
            try:
                with patched(clock):
                    asks, answers, answered, stop = queue.Queue(), queue.Queue(), threading.Event(), threading.Event()
                    thread = threading.Thread(target=planner, args=(asks, answers, answered, stop))
                    thread.start()
                    start = _wall()
                    for _ in range(trips):
                        asks.put((None, None, None))
                        answered.wait(0.05)
                        answered.clear()
                        answers.get_nowait()
                        time.sleep(0.01)
                    walls.append((_wall() - start) / trips)
                    stop.set()
                    thread.join()
            finally:
                clock.close()
    each = statistics.median(walls)
    print(f"4. two threads: {trips} round trips to examples/async_wander.py's planner (queue.put, Event.wait(0.05), "
          f"then time.sleep(0.01)), {rounds} rounds (median)")
    print(f"   {each * 1e6:,.0f} us per round trip of 10 ms simulated   ({0.01 / each:,.1f}x real time)")
    print(f"   {cpu.note()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waits", type=int, default=2000)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--trips", type=int, default=300)
    args = parse_with_smoke(parser, argv, rounds=1, waits=50, duration=0.5, trips=10)
    example_trial(args.duration, max(2, args.rounds))
    print()
    patched_each = per_wait(args.waits, args.rounds)
    print()
    asyncio_under_shim(args.waits, args.rounds, patched_each)
    print()
    round_trips(args.trips, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
