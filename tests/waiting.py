"""Waiting for something that must happen, and tests that need a tool this machine may lack; shared by the tests.

A :class:`HangGuard` is not a timing check: it bounds how long a test waits for an event that has to come (a
reply, a progress line, a person standing somewhere) so that a hang fails the test, naming what never came,
instead of stalling the suite. Its bounds are generous (minutes, far above the expected time) and nothing asserts
that anything was fast; timing lives in bench/.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

HANG_S = 120.0  # default bound on waiting for one event


class HangGuard:
    """A bound on waiting; :meth:`renew` when the awaited process shows progress."""

    def __init__(self, seconds: float = HANG_S):
        self.seconds = seconds
        self.renew()

    def renew(self) -> None:
        self._end = time.monotonic() + self.seconds

    def check(self, what: str | Callable[[], Any]) -> None:
        """Fail the test naming ``what`` (a callable is asked only then) once the bound has passed."""
        if time.monotonic() > self._end:
            said = what() if callable(what) else what
            pytest.fail(f"gave up waiting for {said}: nothing in {self.seconds:g} s (a hang, not a timing check)")


def wait_for(condition: Callable[[], Any], what: str = "the condition", seconds: float = HANG_S,
             step: Callable[[], Any] = lambda: time.sleep(0.05)) -> Any:
    """Call ``step`` until ``condition()`` gives something truthy (returned); a hang fails naming ``what``."""
    guard = HangGuard(seconds)
    while True:
        value = condition()
        if value:
            return value
        guard.check(what)
        step()


def needs(message: str) -> None:
    """A test needs something this machine lacks (a system tool, an optional package): under CI (``CI`` set) it
    fails, because CI installs everything the tests need; on a developer's machine it is skipped, saying what to
    install."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
