"""The ``hil`` command: one entry point above every package, each package owning its subcommands.

``trial/cli.py`` (trial, demo, run, report), ``firmware_sim/cli.py`` (sim), ``runtime/cli.py`` (scan, urdf,
ports, trust, keys), ``crowd/cli.py`` (crowd) and ``hil/doctor.py`` (doctor) each ``register`` theirs; this module
only gathers them, adds ``--version`` and turns the errors that say where and what (config file:line, transport,
bus) into one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys

from . import __version__


# Commands that child processes run (a trial's crowd, a served robot), ``hil ros`` (which Python the ROS bridge
# runs in: a check users run while they set ROS up) and ``hil doctor`` (it must answer where the rest of hil does
# not import): only their own package is imported for them, not every package's command line (the crowd child
# started ~0.3 s sooner, once per trial; hil ros ~0.5 s sooner).
ALONE = {"crowd": "hil.crowd.cli", "sim": "hil.firmware_sim.cli", "ros": "hil.trial.ros_link.cli",
         "doctor": "hil.doctor"}
ALL = ("hil.trial.cli", "hil.firmware_sim.cli", "hil.runtime.cli", "hil.crowd.cli", "hil.doctor")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every package's subcommands; for a command in :data:`ALONE` given first on ``argv``, that package's only."""
    parser = argparse.ArgumentParser(prog="hil", description="hardware-in-the-loop bridge and robot runtime: run "
                                                             "your controller on real or virtual parts, in trials "
                                                             "with a crowd, recorded and measured")
    parser.add_argument("--version", action="version", version=f"hil {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    import importlib

    first = (argv if argv is not None else sys.argv[1:])[:1]
    for module in (ALONE[first[0]],) if first and first[0] in ALONE else ALL:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    from hil.runtime.bus.errors import BusError

    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError, BusError) as exc:  # config, transport, bus and protocol errors say where/what
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
