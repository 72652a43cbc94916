"""The suite's own defaults (this file is not in the wheel: users' runs keep hil's defaults).

Trials that do not set ``camera_rate`` record no camera images in the suite: rendering the two head cameras at
the default 5 Hz on a machine without a GPU (Mesa's llvmpipe) adds ~40 % to a trial's loop (bench/README.md
"loop"), and the tests that look at recorded pictures set ``camera_rate`` themselves. Cameras still render
whenever a controller asks for a frame. ``$HIL_CAMERA_RATE`` is hil's own switch (trial/spec.py); a value set
outside wins.

A test still running after ``$HIL_TEST_HANG_S`` (600 s) has hung: it is ended from here, for tests/ and
examples/tests alike (:func:`pytest_runtest_protocol`).
"""
import faulthandler
import os
import sys

import pytest

os.environ.setdefault("HIL_CAMERA_RATE", "0")

HANG_S = float(os.environ.get("HIL_TEST_HANG_S", "600"))  # 0: no bound (make fuzz, whose runs are long)


_STDERR: list[int] = []  # a copy of the terminal's stderr, taken before a test's output capture replaces fd 2


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    _STDERR.append(os.dup(sys.__stderr__.fileno()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test still running after HANG_S has hung: print every thread's stack and end its process, from
    faulthandler's own C thread. A Python-level timeout cannot: a native call that deadlocks holding the GIL
    (foxglove-sdk's, once) freezes every Python thread, and CI then hung to its 90-minute limit. Under xdist the
    test is reported failed ("worker crashed") and a new worker takes the rest. The slowest test takes ~60 s."""
    if HANG_S > 0:
        faulthandler.dump_traceback_later(HANG_S, exit=True, file=_STDERR[0] if _STDERR else sys.__stderr__)
    try:
        yield
    finally:
        if HANG_S > 0:
            faulthandler.cancel_dump_traceback_later()

