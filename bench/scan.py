"""Scan cost: cold and warm scans of the commbot over a pty at emulated 1 and 4 Mbaud against the wire-time
limit of the bytes they exchange, and scan time against part count (8 to 128 parts).

The wire-time limit is what the bytes alone cost on the wire (10 bits per byte, both directions, every
request and reply of the scan, counted by the host's BusStats); the ratio time/limit says how much the host,
the device and the waiting add. A warm scan reads only the CPC headers (descriptors come from the cache). The
broadcast ping ends after 20 ms of quiet on a real line (the host cannot know that no later ID will answer),
which the warm figures include.

    .venv/bin/python -m bench.scan [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench._pty_process import PtyProcess, hil_command
from bench._smoke import parse_with_smoke
from hil.runtime.bus import BusHost
from hil.runtime.scan import DescriptorCache, NoCache, ScanReport, scan_bus
from hil.runtime.transports import open_transport

BAUDS = (1_000_000, 4_000_000)
PART_COUNTS = (8, 16, 32, 64, 128)


class PtyDevice(PtyProcess):
    def __init__(self, assembly: str, baud: int):
        super().__init__(hil_command() + ["sim", assembly, "--pty", "--baud", str(baud)])


def timed_scan(url: str, baud: int, cache) -> tuple[float, float, int]:
    """(seconds, wire-time limit in seconds, parts found) of one scan."""
    with BusHost(open_transport(url)) as bus:
        start = time.perf_counter()
        robot = scan_bus(bus, cache, report=ScanReport())
        elapsed = time.perf_counter() - start
        wire_bytes = bus.stats.bytes_tx + bus.stats.bytes_rx
    return elapsed, wire_bytes * 10 / baud, len(robot.parts)


def commbot_section(repeats: int, bauds: tuple[int, ...] = BAUDS) -> list[str]:
    rows = []
    for baud in bauds:
        device = PtyDevice("commbot", baud)
        try:
            with tempfile.TemporaryDirectory() as cache_dir:
                cold = [timed_scan(device.path, baud, NoCache()) for _ in range(repeats)]
                cache = DescriptorCache(cache_dir)
                timed_scan(device.path, baud, cache)  # fill the cache
                warm = [timed_scan(device.path, baud, cache) for _ in range(repeats)]
        finally:
            device.close()
        for label, runs in (("cold", cold), ("warm", warm)):
            t = statistics.median(r[0] for r in runs)
            limit = statistics.median(r[1] for r in runs)
            rows.append(f"  commbot over pty  {baud / 1e6:.0f} Mbaud  {label}  {runs[0][2]:3d} parts  "
                        f"{1000 * t:8.1f} ms  wire limit {1000 * limit:8.1f} ms  ratio {t / limit:5.2f}x")
    return rows


def chain_assembly(n: int, directory: Path) -> Path:
    """n self-describing servo modules, each on the previous one's horn."""
    lines = [f"name: chain{n}", "parts:", "  - {id: 1, part: cpc_servo}"]
    lines += [f"  - {{id: {i}, part: cpc_servo, parent: {i - 1}, port: horn}}" for i in range(2, n + 1)]
    path = directory / f"chain{n}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def part_count_section(counts: tuple[int, ...] = PART_COUNTS) -> list[str]:
    rows = []
    baud = BAUDS[0]
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            # world=0: the scan needs no physics, and 128 two-body parts exceed what one pybullet body can hold
            url = f"sim://{chain_assembly(n, Path(tmp))}?baud={baud}&world=0"
            cold = timed_scan(url, baud, NoCache())
            cache = DescriptorCache(Path(tmp) / f"cache{n}")
            timed_scan(url, baud, cache)
            warm = timed_scan(url, baud, cache)
            rows.append(f"  chain of {n:3d} parts (in-process, 1 Mbaud emulated)  cold {1000 * cold[0]:8.1f} ms "
                        f"(limit {1000 * cold[1]:8.1f}, {cold[0] / cold[1]:4.2f}x)  warm {1000 * warm[0]:6.1f} ms "
                        f"(limit {1000 * warm[1]:6.1f})")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_with_smoke(parser, argv, repeats=1)
    print("scan of the commbot (40 parts, 17 DoF + 2 wheels) over a pty, wire timing emulated by the device:")
    for row in commbot_section(args.repeats, BAUDS[-1:] if args.smoke else BAUDS):
        print(row)
    print("scan time against part count:")
    for row in part_count_section(PART_COUNTS[:1] if args.smoke else PART_COUNTS):
        print(row)
    print("targets: warm scan under 100 ms; cold scan within 1.2x of the wire-time limit")


if __name__ == "__main__":
    main()
