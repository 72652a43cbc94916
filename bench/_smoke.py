"""``--smoke`` for every bench module: its smallest settings, so the suite can run each one (tests/test_bench_smoke.py)
and a benchmark that breaks is caught before it lands. A smoke run exits 0 and prints its table; its figures mean
nothing (no warm-up, one short round) and nothing asserts them."""
from __future__ import annotations

import argparse
import importlib.util
from typing import Any

SMOKE_HELP = "smallest settings (the suite's smoke run, ~20 s at most): exits 0 and prints the table; figures mean nothing"


def add_smoke(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def parse_with_smoke(parser: argparse.ArgumentParser, argv: list[str] | None, **smallest: Any) -> argparse.Namespace:
    """``parser``'s arguments plus ``--smoke``, which puts each of ``smallest`` (dest -> value) in place of a value
    left at its default (one given on the command line wins)."""
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        for dest, value in smallest.items():
            if getattr(args, dest) == parser.get_default(dest):
                setattr(args, dest, value)
    return args


def have(module: str, why: str) -> bool:
    """Whether an optional peer (one of the bench extra: jupedsim, pysocialforce) is installed; when it is not, say
    so in one line and let the benchmark go on without it (``pip install hil[bench]`` brings it)."""
    if importlib.util.find_spec(module) is not None:
        return True
    print(f"  (skipped: {why}: {module} is not installed; pip install 'hil[bench]')")
    return False
