"""Folders a run of the suite builds once for all its xdist workers.

A session- or module-scoped fixture is built once per *worker*: with ``-n 2 --dist worksteal`` the tests that use
an expensive one (a recorded demo, two real-clock calibration runs) often land on both workers, and both build
it. A fixture whose product is a folder of files that its tests only read can be built once per run instead:
the first worker to ask builds it under a file lock, the other waits for it (which costs no more than building
it itself) and reads the same files. The pattern is pytest-xdist's own ("Making session-scoped fixtures execute
only once"), with ``fcntl.flock`` for the lock.

Only for folders the tests never write into: two workers read them at once.

A build that mostly waits on the real clock (a real-clock calibration recording) holds a worker idle for minutes.
:func:`start_in_background` starts such a build at the start of the session, in a child process of the controller
that holds the folder's lock from before the first test runs: the recording overlaps with the CPU-bound tests, and
the fixture that asks for the folder waits on the lock as it would on another worker. The child dies with the
session; a build that raises leaves ``once-NAME.failed`` (its traceback and stderr), which fails the tests that ask.
"""
from __future__ import annotations

import fcntl
import importlib
import os
import shutil
import subprocess
import sys
import traceback
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
        failed = root / f"once-{name}.failed"
        if failed.exists() and not (folder / BUILT).exists():
            pytest.fail(f"the background build of {name} failed:\n{failed.read_text()[-6000:]}", pytrace=False)
        if not (folder / BUILT).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / BUILT).touch()
    return folder


def start_in_background(config: pytest.Config, name: str, builder: str) -> subprocess.Popen:
    """Start building the folder ``name`` of this run (what :func:`once_per_run` would build) in a child process;
    ``builder`` is ``"module:function"`` of a module in tests/. Called in the session's controller before any
    test runs: the lock is taken here and handed to the child, so no worker can ask first and build it twice."""
    from hil.bridge.process import spawn

    root = config._tmp_path_factory.getbasetemp()  # the controller's: the workers' common folder
    folder = root / f"once-{name}"
    lock = os.open(root / f"once-{name}.lock", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        with open(root / f"once-{name}.stderr", "w") as err:
            return spawn([sys.executable, __file__, str(lock), str(folder), builder], pass_fds=(lock,),
                         cwd=config.rootpath, stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
    finally:
        os.close(lock)  # the child holds the lock from here on, until it ends


def build_in_background(folder: Path, builder: str) -> None:
    """The child of :func:`start_in_background`: build ``folder``, mark it built, or leave the failure beside it."""
    # spawn() tied this process to the session; what the build starts goes through spawn() too (tied to this
    # process), so killing this one (the session ends, or is stopped midway) ends all of it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    module, function = builder.split(":")
    try:
        getattr(importlib.import_module(module), function)(folder)
        (folder / BUILT).touch()
    except BaseException:
        stderr = folder.parent / f"{folder.name}.stderr"
        sys.stdout.flush()
        sys.stderr.flush()
        said = stderr.read_text() if stderr.exists() else ""
        (folder.parent / f"{folder.name}.failed").write_text(said + traceback.format_exc())
        raise


if __name__ == "__main__":  # the child: python once.py LOCK_FD FOLDER MODULE:FUNCTION (the lock's fd is held)
    build_in_background(Path(sys.argv[2]), sys.argv[3])
