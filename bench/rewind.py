"""Saved states: what saving costs a trial, and how long starting from a state takes.

Side by side in one run, alternating rounds, the demo's trial (the guide among the weekday/weekend crowd with the
staged child, arcade, seed 0):
  saving      states every 5 s of trial time (the default: states/, journals of commands and crowd ticks)
  no states   --state-every 0
RTF = simulated s / wall s of the whole trial; the cost is 1 - RTF(saving) / RTF(no states) (target <= 2 %),
after a short warm-up trial that neither side counts. On a shared machine the ratio of two whole trials carries
several per cent of noise; the wall time inside the saves themselves is measured directly beside it.

Then ``--from DIR@T`` from the saving trial: the restore (fingerprint check, bodies re-created, .bullet loaded,
firmware and host state, the crowd's ticks replayed) timed apart from the re-simulated cycles, at a time on a
saved state and at 4.9 s after one (the most a 5 s interval re-simulates).

    .venv/bin/python -m bench.rewind [--seconds 60] [--rounds 2] [--smoke]

--smoke: 1.2 s trials saving every 0.5 s, one round, no warm-up; the starts at 0.5 s (on a state) and 0.7 s
(0.2 s re-simulated): every section runs, its figures mean nothing.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


EVERY_S = 5.0  # the saving side's state interval (the default)
SMOKE_EVERY_S = 0.5  # a smoke run's: two states within its 1.2 s trial


def trial_keys(seconds: float) -> dict:
    from hil.trial.presets import demo_spec

    return {**demo_spec(seed=0).as_kwargs(), "duration": seconds}


def run(keys: dict, folder: Path, every: float) -> tuple:
    """The trial's result and the wall seconds spent inside its saves (wall time: the controller's thread runs
    under the sim clock's time patch)."""
    from hil.runtime.clock.base import WALL
    from hil.trial.run import Trial
    from hil.trial.spec import make_spec
    from hil.trial.state.saver import StateSaver

    inside = [0.0]
    real_save = StateSaver.save

    def save(self, t, why):
        t0 = WALL()
        try:
            return real_save(self, t, why)
        finally:
            inside[0] += WALL() - t0

    StateSaver.save = save
    try:
        spec = make_spec(**{**keys, "state_every": every})
        return Trial(spec=spec).run(folder), inside[0]
    finally:
        StateSaver.save = real_save


def timed_resume(keys: dict, folder: Path, out: Path, t: float) -> tuple[float, float, float, int]:
    """(restore s, re-simulation s, whole start s, cycles re-simulated) of a trial started from ``folder@t``
    that runs 0.1 s."""
    from hil.trial.state import attach, resume
    from hil.trial.run import Trial
    from hil.trial.spec import make_spec

    times = {"restore": 0.0, "resim": 0.0, "cycles": 0}
    real_restore, real_resim = attach.restore, resume.resimulate

    def resim(*args, **kw):
        t0 = time.perf_counter()
        n = real_resim(*args, **kw)
        times["resim"] += time.perf_counter() - t0
        times["cycles"] = n
        return n

    def restore(*args, **kw):
        t0 = time.perf_counter()
        out_ = real_restore(*args, **kw)
        times["restore"] += time.perf_counter() - t0
        return out_

    attach.restore, resume.resimulate = restore, resim
    try:
        spec = make_spec(**{**keys, "from": f"{folder}@{t:g}", "duration": t + 0.1, "state_every": 0})
        t0 = time.perf_counter()
        Trial(spec=spec).run(out).raise_for_status()
        whole = time.perf_counter() - t0
    finally:
        attach.restore, resume.resimulate = real_restore, real_resim
    return times["restore"] - times["resim"], times["resim"], whole, times["cycles"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per trial (default 60)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--smoke", action="store_true", help="smallest settings: 1.2 s trials saving every 0.5 s, "
                        "one round, no warm-up")
    args = parser.parse_args(argv)
    seconds, rounds = (1.2, 1) if args.smoke else (args.seconds, args.rounds)
    every_s = SMOKE_EVERY_S if args.smoke else EVERY_S
    keys = trial_keys(seconds)
    rtf = {"saving": [], "no states": []}
    inside_share: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hil-bench-rewind-") as tmp:
        root = Path(tmp)
        if not args.smoke:  # a smoke run's figures mean nothing: no warm-up
            run({**keys, "duration": 2.0}, root / "warm-up", 0.0)  # first-time costs (imports, caches) counted nowhere
        for k in range(rounds):
            for name, every in (("saving", every_s), ("no states", 0.0)) if k % 2 == 0 else \
                    (("no states", 0.0), ("saving", every_s)):
                result, inside = run(keys, root / f"{name}-{k}", every)
                result.raise_for_status()
                rtf[name].append(result.sim_s / result.wall_s)
                if every:
                    inside_share.append(inside / result.wall_s)
        saving_dir = root / "saving-0"
        print(f"demo trial, {seconds:g} s, {rounds} round(s) (a loaded machine: read the ratio, not the RTFs)")
        print(f"{'':12s} {'RTF':>8s}")
        for name, values in rtf.items():
            print(f"{name:12s} {sum(values) / len(values):8.2f}")
        cost = 1.0 - (sum(rtf["saving"]) / len(rtf["saving"])) / (sum(rtf["no states"]) / len(rtf["no states"]))
        print(f"saving costs {100 * cost:+.1f} % of the RTF (target <= 2 %); the saves themselves took "
              f"{100 * sum(inside_share) / len(inside_share):.2f} % of the saving trial's wall time")
        print()
        print(f"{'--from':14s} {'restore s':>10s} {'re-sim s':>9s} {'cycles':>7s} {'whole start s':>14s}")
        at_state = every_s if seconds > every_s else 0.0
        late = every_s - 0.1 if not args.smoke else 0.2  # the most an interval re-simulates (a smoke's: a little)
        for label, t in (("on a state", at_state), (f"+{late:g} s", min(at_state + late, seconds - 0.5))):
            restore_s, resim_s, whole, cycles = timed_resume(keys, saving_dir, root / f"from-{t:g}", t)
            print(f"{label:14s} {restore_s:10.3f} {resim_s:9.3f} {cycles:7d} {whole:14.3f}")
        print("(restore target <= 1 s; 'whole start' includes starting the crowd process and opening the robot)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
