"""Folders a run of the suite builds once for all its xdist workers.

A session- or module-scoped fixture is built once per *worker*: with ``-n 2 --dist worksteal`` the tests that use
an expensive one (a recorded demo, two real-clock calibration runs) often land on both workers, and both build
it. A fixture whose product is a folder of files that its tests only read can be built once per run instead:
the first worker to ask builds it under a file lock, the other waits for it (which costs no more than building
it itself) and reads the same files. The pattern is pytest-xdist's own ("Making session-scoped fixtures execute
only once"), with ``fcntl.flock`` for the lock.

Only for folders the tests never write into: two workers read them at once.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

BUILT = ".built"  # written last: a folder without it is a build that failed half-way, built again


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` of this run of the suite, made by ``build(folder)`` in the first worker that asks.

    A build that raises fails the test that asked; the next worker to ask builds again and fails on its own.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common folder
    folder = root / f"once-{name}"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the build raises
        if not (folder / BUILT).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / BUILT).touch()
    return folder
