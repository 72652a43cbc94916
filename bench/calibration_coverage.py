"""Do `hil calibrate ring`'s 95 % intervals hold the truth? The virtual commbot is given hidden ring numbers (a
profile's `calibration:`), stood in a rig, turned by `hil calibrate ring` (a subprocess, as a user runs it) and
fitted; the hidden numbers are chosen here, never by the fit. Prints one row per run and, per number, the
coverage (how often the 95 % interval held the truth), the mean bias (estimate - truth) and the mean interval
half-width, so a bias is read against the interval it should fit inside.

    python -m bench.calibration_coverage [--grid small|full] [--seeds N] [--smoke]
    make calibration-coverage      # the full grid

``--grid small`` (the default, what ``python -m bench`` runs): the three settings a user first found biased (angle50
44, 60, 52 deg; width 6, 6, 4 deg). ``--grid full``: angle50 35..65 deg by width 2..10 deg (25 cells), two noise
settings and two rigs taken in turn, ``--seeds`` seeds each (10-20 s a run). ``--smoke``: one run (its figures
mean nothing).
"""
from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from bench._smoke import parse_with_smoke

RIGS = {  # the two walls of a corridor, near and far; the second is the one a user first met a crash on
    "corridor 1.0/-2.6": (1.0, -2.6),
    "corridor 1.1/-2.4": (1.1, -2.4),
}
ANGLE50 = (35.0, 44.0, 52.0, 58.0, 65.0)
WIDTH = (2.0, 4.0, 6.0, 8.0, 10.0)
NOISE = ((0.003, 0.01), (0.01, 0.015))


TURN = "{rate_deg_s: 15, turns: 1.0, step_deg: 6}"
# a smoke run's tenth of a turn in 10 deg steps: with the ring's 12 sensors 30 deg apart, 36 deg still brings each
# wall to every angle the fit needs, with readings enough for it (the fit runs and prints; a 6 deg step, or a 15 deg
# step over a quarter turn, leaves it short of sure echoes); its figures mean nothing either way
SMOKE_TURN = "{rate_deg_s: 15, turns: 0.1, step_deg: 10}"


def rig_text(near: float, far: float, turn: str = TURN) -> str:
    return (f"start: [0.0, 0.0, 0.0]\nwalls:\n  - {{name: front, from: [{near}, -4.0], to: [{near}, 4.0]}}\n"
            f"  - {{name: back, from: [{far}, -4.0], to: [{far}, 4.0]}}\n"
            f"turn: {turn}\n")


def cases(grid: str, seeds: int) -> list[dict]:
    """The hidden numbers of every run: a Latin-square walk over the grid, so that each angle50 meets each width
    and both noise settings and rigs without running the whole product."""
    out = []
    combos = list(itertools.product(ANGLE50, WIDTH)) if grid == "full" else [(44.0, 6.0), (60.0, 6.0), (52.0, 4.0)]
    for k, (angle50, width) in enumerate(combos):
        for s in range(seeds):
            a, b = NOISE[(k + s) % len(NOISE)]
            rig = list(RIGS)[(k // len(NOISE) + s) % len(RIGS)]
            out.append({"angle50": angle50, "width": width, "a": a, "b": b, "rig": rig, "seed": 21 + 7 * s + k})
    return out


def run(case: dict, folder: Path, turn: str = TURN) -> dict:
    """One `hil calibrate ring` on the virtual commbot with the case's hidden numbers; the fit's CAL.yaml entry."""
    folder.mkdir(parents=True)
    (folder / "rig.yaml").write_text(rig_text(*RIGS[case["rig"]], turn))
    hidden = {"dropout_angle50_deg": case["angle50"], "dropout_width_deg": case["width"],
              "noise_sigma_m": [case["a"], case["b"]]}
    (folder / "hidden.yaml").write_text(yaml.safe_dump(
        {"schema": 1, "parts": [{"part": "range_ring", "sensor": "ring", "params": hidden}]}))
    (folder / "real.yaml").write_text(f"bus: sim://commbot?seed={case['seed']}\nclock: sim\nsemantics: commbot\n"
                                      "calibration: hidden.yaml\n")
    done = subprocess.run([sys.executable, "-m", "hil", "calibrate", "ring", "--profile", "real.yaml", "--rig",
                           "rig.yaml", "--out", "out"], cwd=folder, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    entry = yaml.safe_load((folder / "out" / "CAL.yaml").read_text())["parts"][0]
    return {"angle50": entry["params"]["dropout_angle50_deg"], "angle50_ci": entry["fit"]["angle50_ci_deg"],
            "width": entry["params"]["dropout_width_deg"], "width_ci": entry["fit"]["width_ci_deg"]}


def report(rows: list[tuple[dict, dict]]) -> None:
    fitted = [(c, r) for c, r in rows if "error" not in r]
    print(f"{len(fitted)} of {len(rows)} runs fitted")
    for name in ("angle50", "width"):
        if not fitted:
            break
        inside = [r[f"{name}_ci"][0] <= c[name] <= r[f"{name}_ci"][1] for c, r in fitted]
        bias = [r[name] - c[name] for c, r in fitted]
        half = [(r[f"{name}_ci"][1] - r[f"{name}_ci"][0]) / 2 for _, r in fitted]
        print(f"{name:8s} coverage {sum(inside)}/{len(inside)} = {100 * np.mean(inside):.0f} %, mean bias "
              f"{np.mean(bias):+.2f} deg (mean |bias| {np.mean(np.abs(bias)):.2f}), mean 95 % half-width "
              f"{np.mean(half):.2f} deg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calibration_coverage", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1, help="seeds per (angle50, width) cell")
    parser.add_argument("--grid", choices=("full", "small"), default="small")
    args = parse_with_smoke(parser, argv, grid="small")
    todo = cases(args.grid, args.seeds)[: 1 if args.smoke else None]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'rig':18s} {'seed':>4s} {'a50':>5s} {'w':>5s} {'a':>6s} {'b':>6s} | {'angle50 (95 %)':>22s} "
              f"{'width (95 %)':>20s} {'s':>5s}")
        for n, case in enumerate(todo):
            start = time.perf_counter()
            result = run(case, Path(tmp) / f"run{n}", SMOKE_TURN if args.smoke else TURN)
            rows.append((case, result))
            head = (f"{case['rig']:18s} {case['seed']:4d} {case['angle50']:5.1f} {case['width']:5.1f} "
                    f"{case['a']:6.3f} {case['b']:6.3f} | ")
            if "error" in result:
                print(head + "error: " + result["error"], flush=True)
                continue
            a_lo, a_hi = result["angle50_ci"]
            w_lo, w_hi = result["width_ci"]
            print(head + f"{result['angle50']:6.2f} ({a_lo:6.2f}..{a_hi:6.2f}) {result['width']:5.2f} "
                  f"({w_lo:5.2f}..{w_hi:5.2f}) {time.perf_counter() - start:5.1f}", flush=True)
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
