"""The ``hil`` command: one entry point above every package, each package owning its subcommands.

``trial/cli.py`` (trial, demo, run, report), ``firmware_sim/cli.py`` (sim), ``runtime/cli.py`` (scan, urdf,
ports, trust, keys) and ``crowd/cli.py`` (crowd) each ``register`` theirs; this module only gathers them, adds
``--version`` and turns the errors that say where and what (config file:line, transport, bus) into one line on
stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hil", description="hardware-in-the-loop bridge and robot runtime: run "
                                                             "your controller on real or virtual parts, in trials "
                                                             "with a crowd, recorded and measured")
    parser.add_argument("--version", action="version", version=f"hil {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from trial.cli import register as register_trial

    register_trial(sub)
    from firmware_sim.cli import register as register_sim

    register_sim(sub)
    from runtime.cli import register as register_runtime

    register_runtime(sub)
    from crowd.cli import register as register_crowd

    register_crowd(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from runtime.bus.errors import BusError

    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError, BusError) as exc:  # config, transport, bus and protocol errors say where/what
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
