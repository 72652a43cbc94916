"""``hil sim ASSEMBLY --pty | --tcp PORT``: serve a virtual bus device until SIGINT/SIGTERM.

The first line on stdout is where to connect (the pty path, or the socket:// URL), so scripts and tests can
start the device as a subprocess and read one line.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from .assembly import load_assembly
from .bus_device import VirtualBusDevice
from .faults import FaultInjector
from .serve import serve_pty, serve_tcp
from .timing import WireTiming


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assembly", help="name under config/robots/ (e.g. servo_chain) or a path to a YAML file")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--pty", action="store_true", help="serve on a new pseudo-terminal; prints its path")
    where.add_argument("--tcp", type=int, metavar="PORT", help="serve on TCP (0 picks a free port)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address to bind (default loopback only)")
    timing = parser.add_argument_group("wire-timing emulation (off unless asked)")
    timing.add_argument("--baud", type=int, help="emulate wire time at this baud rate")
    timing.add_argument("--latency-ms", type=float, help="emulate a USB adapter latency timer")
    timing.add_argument("--no-return-delay", action="store_true", help="ignore the parts' return delay time")
    faults = parser.add_argument_group("fault injection (off unless asked)")
    faults.add_argument("--bitflip", type=float, default=0.0, help="probability of a flipped bit, per bit")
    faults.add_argument("--drop", type=float, default=0.0, help="probability of a dropped reply, per reply")
    faults.add_argument("--seed", type=int, default=0, help="seed of the fault injector")


def build_device(args: argparse.Namespace) -> VirtualBusDevice:
    assembly = load_assembly(args.assembly)
    timing = WireTiming.parse(args.baud, args.latency_ms, return_delay=not args.no_return_delay)
    faults = None
    if args.bitflip or args.drop:
        faults = FaultInjector(seed=args.seed, bit_flip_rate=args.bitflip, drop_rate=args.drop)
    return VirtualBusDevice(assembly.parts, timing=timing, faults=faults)


def run(args: argparse.Namespace) -> int:
    device = build_device(args)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def ready(where: str) -> None:
        print(where, flush=True)
        print(f"serving {len(device.parts)} parts of {args.assembly}; stop with Ctrl-C", file=sys.stderr, flush=True)

    if args.pty:
        serve_pty(device, stop, ready)
    else:
        serve_tcp(device, stop, ready, port=args.tcp, host=args.host)
    return 0
