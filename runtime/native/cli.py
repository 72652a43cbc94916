"""``hil run --native --profile P [--duration S] [--bus URL] -- PROGRAM [ARGS...]`` (or ``native: true`` in P).

``hil run`` (trial/cli.py) adds these arguments with :func:`add_arguments` and hands the run over when
:func:`maybe_run` says it is native; everything else about native programs lives in this package.
"""
from __future__ import annotations

import argparse
import sys

NATIVE_HELP = """\
--native: CONTROLLER is a native program (C, C++, any compiled binary), started with ARGS after `--`. It opens
the bus itself: $HIL_BUS (and {bus} in ARGS) is the profile's bus, a pty of the in-process virtual device for a
sim:// bus. On clock: real it runs untouched; on clock: sim under an LD_PRELOAD time shim that puts its
clock_gettime/gettimeofday/time, its sleeps and its poll/select/epoll timeouts on the simulator's clock (built
with the system C compiler on first use). hil's exit status is the program's (128+N for signal N)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--native", action="store_true",
                        help="CONTROLLER is a native program run with ARGS (after --), on the profile's clock "
                             "through the time shim (also: native: true in the profile)")
    parser.add_argument("program_args", nargs="*", metavar="ARGS",
                        help="with --native: the program's arguments ({bus} is replaced by the bus it must open)")
    parser.epilog = ((parser.epilog + "\n\n") if parser.epilog else "") + NATIVE_HELP


def _profile_says_native(profile: str) -> bool:
    from hil.devices.yaml_source import ConfigError

    from ..robot.profile import load_profile

    try:
        return load_profile(profile, bus="-").native
    except (ConfigError, OSError, ValueError):
        return False  # the runner's own loading reports what is wrong with it


def maybe_run(args: argparse.Namespace) -> int | None:
    """None when the run is not native (the runner goes on); else hil's exit status for it."""
    native = getattr(args, "native", False) or _profile_says_native(args.profile)
    extra = getattr(args, "program_args", None) or []
    if not native:
        if extra:
            print(f"hil: error: arguments after the controller ({' '.join(extra)}) are for a native program: "
                  "add --native", file=sys.stderr)
            return 2
        return None
    if getattr(args, "record", None):
        print("hil: error: --record does not apply to --native (the program's bus traffic is its own)",
              file=sys.stderr)
        return 2
    if getattr(args, "param", None):
        print("hil: error: --param is for Python controllers (robot.params); give a native program its arguments "
              "after --", file=sys.stderr)
        return 2
    return run(args)


def run(args: argparse.Namespace) -> int:
    from hil.devices.yaml_source import ConfigError

    from ..bus import BusError
    from ..clock.base import ClockError
    from ..transports import TransportError
    from .build import NativeBuildError
    from .session import run_native

    try:
        result = run_native([args.controller, *args.program_args], args.profile, bus=args.bus,
                            duration_s=args.duration)
    except (ConfigError, NativeBuildError, BusError, ClockError, TransportError, OSError, ValueError) as exc:
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    print(result.text(), file=sys.stdout, flush=True)
    return result.exit_code
