"""``hil sweep`` on Dask against the same trials in a plain loop, and on 1 against 2 workers.

The sweep is the tests' 2 x 2 x 2 (tests/test_sweep.py): a controller driving east in the arcade among the weekday
crowd, crowd_scale 0.5 and 1.5, speed 0.2 and 0.4 m/s, seeds 0 and 1, ``--duration`` simulated seconds each.
Three variants, each a fresh Python process (so each pays its own imports), run side by side in one run, in
alternating order over ``--rounds`` rounds:

  loop   ``for job in sweep.jobs: Trial(spec=job.spec).run(folder)`` - what the sweep must not be much slower than;
  1w     ``run_sweep(spec, out, workers=1)``: a LocalCluster of 1 worker process (cluster start, trial process,
         table, plots and report.html included);
  2w     the same with 2 workers.

Figures: wall seconds end to end; CPU seconds of the whole process tree (the variant's process and everything it
waited for: Dask's workers, the trial processes, the crowds: ``RUSAGE_CHILDREN``); the cores the machine's other
processes kept busy meanwhile (from /proc/stat: on a shared 2-core machine they take what 2 workers would use).
and each trial's own CPU seconds (its process and its crowd, measured around each trial: by the loop around
``Trial.run``, by the sweep's trial process around each trial it runs), so that what the sweep costs splits
into a per-trial part and a once-per-sweep part (Dask's cluster, the trial process's imports, matplotlib and
report.html). Ratios: 2w speedup over 1w (wall, target >= 1.8x on an idle 2-core machine; and CPU per trial
side by side against alone) and the sweep's overhead over the loop (1w against loop, wall and CPU, target
<= 10 %).

    .venv/bin/python -m bench.sweep [--rounds 2] [--duration 10]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from bench.bridge import _busy_s

ROOT = Path(__file__).resolve().parents[1]
CONTROLLER = textwrap.dedent('''\
    """Drive east at robot.params["speed"]; stop when something is close ahead. With params for the tests
    (tests/test_sweep.py): ``fragile`` raises when faster than 0.3 m/s; ``spin`` never ticks the bus again (a
    busy loop on a clock that no longer moves)."""
    import time

    def main(robot):
        speed = robot.params.get("speed", 0.3)
        if robot.params.get("fragile") and speed > 0.3:
            raise ValueError(f"too fast for me: {speed}")
        for tick in robot.loop(hz=10):
            if robot.params.get("spin"):
                while True:
                    time.time()
            ahead = robot.sensors["ring"].nearest(-0.5, 0.5)
            robot.base.drive(v=0.0 if ahead is not None and ahead < 0.8 else speed, w=0.0)
''')
# the 2 x 2 x 2 of the tests (tests/test_sweep.py, with a goal and 2 s) and of this benchmark
SPEC = textwrap.dedent('''\
    controller: east.py
    map: arcade
    crowd: weekday
    start: [-18, 0, 0]{goal}
    duration: {duration}
    grid:
      crowd_scale: [0.5, 1.5]
      params: {{speed: [0.2, 0.4]}}
    seeds: 2
''')
VARIANTS = ("loop", "1w", "2w")


def child(variant: str, spec: Path, out: Path) -> None:
    """One variant in this (fresh) process; prints a JSON line with each trial's own wall and CPU seconds (the
    loop measures them around each Trial.run, the sweep's trial process around each trial it runs)."""
    start = time.perf_counter()
    if variant == "loop":
        from hil.trial import Trial
        from hil.trial.sweep import load_sweep
        from hil.trial.sweep.runner import cpu_s

        walls, cpus = [], []
        for job in load_sweep(spec).jobs:
            cpu0 = cpu_s()
            result = Trial(spec=job.spec).run(out / job.folder, err=open(os.devnull, "w"))
            cpus.append(cpu_s() - cpu0)
            if not result.ok:
                raise SystemExit(f"{job.id}: {result.error}")
            walls.append(result.wall_s)
    else:
        from hil.trial.sweep import run_sweep
        from hil.trial.sweep.store import read_done

        outcome = run_sweep(spec, out, workers=int(variant[0]), stream=open(os.devnull, "w"))
        if not all(r["status"] == "ok" for r in outcome.rows) or outcome.ran != len(outcome.rows):
            raise SystemExit(f"the sweep did not run every trial: {[r['error'] for r in outcome.rows]}")
        walls = [r["wall_s"] for r in outcome.rows]
        cpus = [read_done(out / job.folder, job.hash)["cpu_s"] for job in outcome.sweep.jobs]
    print(json.dumps({"wall_s": time.perf_counter() - start, "trial_wall_s": walls, "trial_cpu_s": cpus}))


def measure(variant: str, spec: Path, out: Path) -> dict:
    """Run one variant in a fresh process: its wall time, its tree's CPU time, the other processes' load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, t0 = _busy_s(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.sweep", "--child", variant, "--spec", str(spec), "--out",
                           str(out)], capture_output=True, text=True, cwd=ROOT, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    busy = _busy_s() - busy0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} failed: {proc.stderr[-2000:]}")
    inner = json.loads(proc.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "others_cores": max(0.0, (busy - cpu) / wall),
            "trials_wall_s": sum(inner["trial_wall_s"]), "trials_cpu_s": sum(inner["trial_cpu_s"]),
            "trials": len(inner["trial_wall_s"])}


def run(rounds: int, duration: float, seeds: int = 2, variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory(prefix="hil-bench-sweep-") as tmp:
        folder = Path(tmp)
        (folder / "east.py").write_text(CONTROLLER)
        spec = folder / "bench.yaml"
        text = SPEC.format(duration=duration, goal="")
        if seeds != 2:  # the smoke run: one trial (one scale, one speed, one seed): the sweep's path end to end
            text = text.replace("seeds: 2", f"seeds: {seeds}").replace("[0.5, 1.5]", "[1.0]")
            text = text.replace("[0.2, 0.4]", "[0.3]")
        spec.write_text(text)
        for r in range(rounds):
            order = variants if r % 2 == 0 else tuple(reversed(variants))
            for variant in order:
                result = measure(variant, spec, folder / f"{variant}-{r}")
                result["round"] = r
                results.append(result)
                print(f"  round {r + 1} {variant:<4} wall {result['wall_s']:6.1f} s  cpu {result['cpu_s']:6.1f} s  "
                      f"(trials {result['trials_cpu_s']:5.1f} s)  other processes {result['others_cores']:.2f} "
                      f"cores", flush=True)
    return results


def report(results: list[dict], duration: float) -> None:
    def median(variant: str, key: str) -> float:
        return statistics.median(r[key] for r in results if r["variant"] == variant)

    variants = [v for v in VARIANTS if any(r["variant"] == v for r in results)]
    loop, one = (median(v, "wall_s") for v in ("loop", "1w"))
    cpu_loop, cpu_one = (median(v, "cpu_s") for v in ("loop", "1w"))
    trial_loop, trial_one = (median(v, "trials_cpu_s") for v in ("loop", "1w"))
    others = statistics.mean(r["others_cores"] for r in results)
    n = results[0]["trials"]
    print(f"\n  {n} trials of {duration:g} simulated s each; medians over {len(results) // len(variants)} rounds")
    print(f"  {'variant':<8}{'wall s':>8}{'cpu s':>8}{'trials cpu s':>14}{'cpu s/trial':>13}{'fixed cpu s':>13}")
    for variant in variants:
        cpu, trials = median(variant, "cpu_s"), median(variant, "trials_cpu_s")
        print(f"  {variant:<8}{median(variant, 'wall_s'):8.1f}{cpu:8.1f}{trials:14.1f}{trials / n:13.2f}"
              f"{cpu - trials:13.1f}")
    if "2w" in variants:
        _two_workers(median, one, cpu_one, trial_one)
    else:
        print("  2 workers: not run (--smoke)")
    print(f"  sweep (1 worker) over the plain loop: {100 * (one / loop - 1):+.1f}% wall, "
          f"{100 * (cpu_one / cpu_loop - 1):+.1f}% CPU (target <= +10%); per trial "
          f"{100 * (trial_one / trial_loop - 1):+.1f}% CPU, and "
          f"{cpu_one - trial_one - (cpu_loop - trial_loop):.1f} s of CPU once per sweep (cluster, trial process, "
          f"plots and report)")
    note = "" if others <= 0.25 else "; the machine was shared: wall figures are depressed and noisy, CPU ones hold"
    print(f"  CPU: other processes kept {others:.2f} of {os.cpu_count()} cores busy on average{note}")


def _two_workers(median, one: float, cpu_one: float, trial_one: float) -> None:
    """The 2w lines: its speedup over 1 worker, measured and projected from CPU seconds."""
    two, cpu_two, trial_two = (median("2w", key) for key in ("wall_s", "cpu_s", "trials_cpu_s"))
    print(f"  2 workers over 1: {one / two:.2f}x wall (target >= 1.8x on an idle 2-core machine); CPU per trial "
          f"{trial_two / trial_one:.2f}x of 1 worker's, whole sweep {cpu_two / cpu_one:.2f}x (1.00: side by side "
          f"costs nothing extra)")
    projected = (cpu_one) / ((cpu_two - trial_two) + trial_two / 2)
    print(f"  projected from CPU seconds for an idle 2-core machine (each trial ~1 core: world and crowd take turns "
          f"in lockstep; the once-per-sweep part serial): {projected:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three variants (default 2)")
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds per trial (default 10)")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parse_with_smoke(parser, argv, rounds=1, duration=1.0)
    if args.child:
        child(args.child, args.spec, args.out)
        return 0
    # the smoke run: the loop and 1 worker (the sweep's path end to end); a second worker only doubles the cluster
    results = run(args.rounds, args.duration, seeds=1 if args.smoke else 2,
                  variants=VARIANTS[:2] if args.smoke else VARIANTS)
    report(results, args.duration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
