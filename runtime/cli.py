"""The runtime's subcommands of ``hil`` (the command itself is hil/cli.py, which gathers every package's):
``hil ports``, ``hil scan``, ``hil urdf``, ``hil trust`` and ``hil keys``: the host side, inspecting buses and
parts. ``hil run`` belongs to the trial layer (trial/cli.py), since it records runs as trials."""
from __future__ import annotations

import argparse
import sys


def _cmd_ports(args: argparse.Namespace) -> int:
    from .ports import format_adapters, list_adapters

    adapters = list_adapters()
    print(format_adapters(adapters))
    return 1 if args.strict and any(a.warnings for a in adapters) else 0


def _scan(url: str, cache_dir: str | None, no_cache: bool, quiet: bool = False):
    from .bus import BusHost
    from .scan import scan_bus
    from .transports import open_transport

    with BusHost(open_transport(url)) as bus:
        return scan_bus(bus, _cache(cache_dir, no_cache), progress=_progress(quiet))


def _cache(cache_dir: str | None, no_cache: bool):
    from .scan import DescriptorCache, NoCache

    return NoCache() if no_cache else DescriptorCache(cache_dir)


def _progress(quiet: bool):
    interactive = sys.stderr.isatty()

    def progress(stage: str, done: int, total: int) -> None:
        if quiet:
            return
        if interactive:  # a live counter on a terminal, one line when done elsewhere (logs, CI)
            print(f"\rreading {stage}: {done}/{total} bytes", end="" if done < total else "\n", file=sys.stderr,
                  flush=True)
        elif done == total:
            print(f"read {stage}: {total} bytes", file=sys.stderr, flush=True)

    return progress


def _scan_profile(args: argparse.Namespace, quiet: bool):
    """(profile, merged virtual robot) of every bus of ``--profile`` (``--bus`` replaces the main bus's URL, as
    in ``hil run``), scanned and merged as Robot.open does; the buses are closed again."""
    from contextlib import ExitStack

    from .robot.multibus import scan_profile
    from .robot.profile import load_profile

    profile = load_profile(args.profile, bus=args.bus)
    cache = _cache(args.cache_dir, args.no_cache) if args.cache_dir or args.no_cache else None  # else the profile's
    with ExitStack() as undo:
        return profile, scan_profile(profile, undo, cache=cache, progress=_progress(quiet)).virtual


def _scanned(args: argparse.Namespace, quiet: bool):
    """(profile or None, virtual robot) for ``hil scan``/``hil urdf``: ``--profile`` (all its buses) or ``--bus``."""
    if args.profile:
        return _scan_profile(args, quiet)
    if not args.bus:
        raise ValueError("give --bus URL (one bus) or --profile P (every bus of a profile)")
    return None, _scan(args.bus, args.cache_dir, args.no_cache, quiet=quiet)


def _cmd_scan(args: argparse.Namespace) -> int:
    from .scan.format import robot_json_text, robot_tree_text

    profile, robot = _scanned(args, quiet=args.json)
    title = profile.source if profile is not None else None  # a profile's tree lists its buses
    print(robot_json_text(robot, buses=profile is not None) if args.json else robot_tree_text(robot, title))
    return 1 if robot.root_id is None else 0


SCAN_PROFILE_NOTE = (". With --profile, each bus is scanned alone and hung from the part and port its mount names, "
                     "as hil run does: parts show as [BUS:ID] (robot-wide ids in --json, with bus and wire_id); "
                     "a bad profile or mount names the profile's file:line, a bus that cannot be opened or does not "
                     "answer names the bus (exit 2).")


def _add_bus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bus", metavar="URL", help="bus URL: sim://commbot, /dev/ttyUSB0, socket://host:port; "
                                                     "with --profile it replaces the main bus's URL (as in hil run)")
    parser.add_argument("--profile", metavar="P",
                        help="every bus of this profile (config/profiles/two_buses.yaml, or a name under "
                             "config/profiles/), each scanned alone and merged at its mount as hil run does")
    parser.add_argument("--cache-dir", help="descriptor cache (default: the profile's cache_dir, $HIL_CACHE_DIR "
                                            "or ~/.cache/hil/descriptors)")
    parser.add_argument("--no-cache", action="store_true", help="read every descriptor from the parts")


def _cmd_urdf(args: argparse.Namespace) -> int:
    from .model import urdf_cli

    from .robot.assembly import cameras_of
    from .robot.semantics import load_semantics

    profile, robot = _scanned(args, quiet=args.output == "-")
    if profile is not None and args.name is None:
        from pathlib import Path

        from .model.model import sanitize

        args.name = sanitize(Path(profile.source).stem)  # the robot is the profile's, not its main bus's
    semantics = load_semantics(profile.semantics) if profile is not None and profile.semantics else None
    return urdf_cli.run(args, robot, cameras_of(robot, semantics))  # named as the robot names its cameras


def _cmd_trust(args: argparse.Namespace) -> int:
    from .drivers import TrustStore

    store = TrustStore.load(args.file)
    if len(args.sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in args.sha256):
        print(f"hil: error: {args.sha256!r} is not a 64-character hex SHA-256", file=sys.stderr)
        return 2
    path = store.add_hash(args.sha256, args.file)
    print(f"trusted driver code {args.sha256[:16]}... in {path}")
    return 0


def _cmd_keys(args: argparse.Namespace) -> int:
    from .keys_cli import run

    return run(args)


def register(sub) -> None:
    """Add the runtime's subcommands to ``hil``'s subparsers."""
    ports = sub.add_parser("ports", help="list serial adapters, their USB identity and latency timers")
    ports.add_argument("--strict", action="store_true", help="exit 1 when an adapter has a warning")
    ports.set_defaults(func=_cmd_ports)

    scan_help = ("scan a bus (--bus) or every bus of a profile (--profile): parts, descriptors and the tree they "
                 "form, with each part's bus and the mounts")
    scan = sub.add_parser("scan", help=scan_help, description=scan_help + SCAN_PROFILE_NOTE)
    _add_bus_arguments(scan)
    scan.add_argument("--json", action="store_true", help="machine-readable output")
    scan.set_defaults(func=_cmd_scan)

    urdf_help = "scan a bus (--bus) or every bus of a profile (--profile, the whole robot) and write its URDF"
    urdf = sub.add_parser("urdf", help=urdf_help, description=urdf_help + SCAN_PROFILE_NOTE)
    _add_bus_arguments(urdf)
    from .model.urdf_cli import add_arguments as add_urdf_arguments

    add_urdf_arguments(urdf)
    urdf.set_defaults(func=_cmd_urdf)

    trust = sub.add_parser("trust", help="allow-list the SHA-256 of driver code carried by a part")
    trust.add_argument("sha256", help="the hash printed in the message of the part whose code did not run")
    trust.add_argument("--file", help="trust file (default $HIL_TRUST_FILE or ~/.config/hil/trust.yaml)")
    trust.set_defaults(func=_cmd_trust)

    keys = sub.add_parser("keys", help="create a CURVE key directory to encrypt and authenticate the bridge "
                                       "(--keys DIR, sim://...&keys=DIR)")
    from .keys_cli import add_arguments as add_keys_arguments

    add_keys_arguments(keys)
    keys.set_defaults(func=_cmd_keys)
