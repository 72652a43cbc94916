"""``python -m bench``: run every benchmark module in this package, one after the other."""
from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def main() -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))
    for n, name in enumerate(names):
        module = importlib.import_module(f"bench.{name}")
        if n:
            print()
        print(f"=== bench.{name} ===")
        start = time.perf_counter()
        module.main([])
        print(f"--- bench.{name}: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
