"""``hil sweep SPEC.yaml [--out DIR] [--workers N] [--scheduler tcp://HOST:8786]``.

Exit status: 0 every trial has its row (failed and timed-out trials are rows too: the sweep measured them);
2 the sweep could not start (a bad spec, with file:line; Dask not installed; no scheduler there); 130 Ctrl-C
(the table of what was done is written; the same command goes on from there).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DESCRIPTION = """\
Run many trials of one controller and say how often it fails: the trial keys of a trial file plus axes to vary
(grid:, cases:, seeds:), on a local Dask cluster of worker processes (one per core) or on an existing scheduler.
Writes DIR/results.csv and results.jsonl (a row per trial), summary.csv (per condition: success rate with a 95%
interval, metric percentiles), plots/*.png and report.html, and each trial's folder under DIR/trials/.
Trials already done in DIR are skipped: run the same command again after Ctrl-C or a lost machine.

  hil sweep guide                                  # config/sweeps/guide.yaml (or ./config/sweeps, $HIL_PATH)
  hil sweep my_sweep.yaml --out sweeps/mine --workers 2
  hil sweep my_sweep.yaml --scheduler tcp://10.0.0.5:8786    # workers on other machines (docs/SWEEPS.md)
  hil sweep guide --foxglove                       # watch worker 0's trials live in Foxglove (ws://127.0.0.1:8765)

The format (docs/SWEEPS.md):
  controller: my_controller.py
  map: arcade
  crowd: weekday
  duration: 60
  grid: {scenario: [none, child_interacts], crowd_scale: [1, 3], params: {cruise_m_s: [0.3, 0.45]}}
  seeds: 10"""


def register(sub) -> None:
    """Add ``hil sweep``."""
    sweep = sub.add_parser("sweep", help="many trials over seeds, scenarios, crowds, time bands and parameters "
                                         "on Dask: the table and plots of how often a controller fails",
                           description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("spec", help="a sweep file (x.yaml) or a name on the config search path (guide)")
    sweep.add_argument("--out", metavar="DIR", help="output folder (default sweeps/NAME)")
    sweep.add_argument("--workers", type=int, metavar="N", help="local worker processes (default: one per core)")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="an existing Dask scheduler (tcp://HOST:8786) instead of a local cluster")
    sweep.add_argument("--timeout", type=float, metavar="S", dest="timeout_s",
                       help="wall seconds one trial may take (default: the file's timeout_s, else 60 + 10 x "
                            "duration)")
    sweep.add_argument("--retry-failed", action="store_true", help="run again the trials that failed or timed out")
    sweep.add_argument("--check", action="store_true", help="check the sweep and list its trials; run nothing")
    sweep.add_argument("--foxglove", nargs="?", const="", default=None, metavar="[HOST:]PORT",
                       help="serve the trial running on one worker live to Foxglove (a foxglove-sdk WebSocket "
                            "server, loopback port 8765 unless given; 0: any free port); each next trial there "
                            "re-opens the same port: keep Foxglove connected, it reconnects")
    sweep.add_argument("--foxglove-worker", type=int, default=0, metavar="N",
                       help="the worker whose trials are served (default 0, the first)")
    sweep.set_defaults(func=cmd_sweep)


def resolve_spec(name_or_path: str) -> Path:
    """A sweep file by path, or by name on the config search path (``sweeps/NAME.yaml``)."""
    from hil.devices.config_path import resolve

    return resolve(name_or_path, "sweeps", "sweep")


def cmd_sweep(args: argparse.Namespace) -> int:
    from .spec import load_sweep

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, not {args.workers}")
    if args.workers is not None and args.scheduler:
        raise ValueError("--workers starts a local cluster; --scheduler uses an existing one: give one of them")
    foxglove = None
    if args.foxglove is not None:
        from ..foxglove_live.address import parse_address

        foxglove = parse_address(args.foxglove)
    if args.foxglove_worker < 0:
        raise ValueError(f"--foxglove-worker must be 0 or more, not {args.foxglove_worker}")
    sweep = load_sweep(resolve_spec(args.spec), timeout_s=args.timeout_s)
    if args.check:
        for job in sweep.jobs:
            print(f"{job.folder}  {job.condition_label} seed={job.seed}")
        print(f"{len(sweep.jobs)} trials in {len(sweep.conditions)} conditions, {len(sweep.seeds)} seeds each; "
              f"timeout {sweep.timeout_s:g} s per trial")
        return 0
    try:
        import distributed  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as exc:
        from .engine import INSTALL_HINT

        print(f"hil: error: {INSTALL_HINT} ({exc})", file=sys.stderr)
        return 2
    from .run import run_sweep

    outcome = run_sweep(sweep, args.out, workers=args.workers, scheduler=args.scheduler,
                        retry_failed=args.retry_failed, foxglove=foxglove, foxglove_worker=args.foxglove_worker)
    print(outcome.summary_text)
    if outcome.worst:
        print("\nthe worst trials (replay one with hil view FOLDER, or hil report FOLDER):")
        for row in outcome.worst:
            reason = row.get("error") or (f"not met: {row['not_met']}" if row.get("not_met") else "a success")
            reason += f" (why: {row['failure']})" if row.get("failure") else ""
            print(f"  {outcome.out / row['folder']}  {row['status']}: {reason}")
    written = ", ".join(str(p) for key, p in outcome.files.items() if p.exists() and key in
                        ("csv", "jsonl", "summary", "report"))
    print(f"\nwrote {written}")
    return 130 if outcome.interrupted else 0

