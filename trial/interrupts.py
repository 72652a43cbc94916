"""Ctrl-C during a trial is taken where the trial can stop cleanly: in its controller's loop.

A Ctrl-C (SIGINT) that lands while a trial starts (the world, the crowd, the log's first records) or while it
closes its log would cut the log short, its footer unwritten. :class:`HeldInterrupt` holds one that comes then:
the trial starts, and its controller's loop ends at once as Ctrl-C ends it, with the log complete. A second
Ctrl-C while one is held stops at once, as before. Only the main thread can have a signal handler: a trial run
on another thread (the viewer, the tests) is left as it was, and so is a process that ignores Ctrl-C.
"""
from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class HeldInterrupt:
    """``with HeldInterrupt() as held: ...; with held.allowed(): stopped = run(...)``; ``held.pending``: one came."""

    def __init__(self, err: Any = None):
        self.err = err
        self.pending = False
        self.armed = False
        self._previous: Any = None

    def __enter__(self) -> HeldInterrupt:
        # a process that ignores Ctrl-C (a sweep's trial process: its engine handles Ctrl-C) keeps ignoring it
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            try:
                self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            except ValueError:  # not the main interpreter
                self._previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.armed or self.pending:  # in the loop, or asked twice: now
            raise KeyboardInterrupt
        self.pending = True
        print("hil: Ctrl-C: the trial stops as soon as it has started, its log complete (Ctrl-C again: at once)",
              file=self.err or sys.stderr, flush=True)

    @contextmanager
    def allowed(self) -> Iterator[None]:
        """Inside, Ctrl-C raises KeyboardInterrupt as usual (the controller's loop, which ends on it)."""
        self.armed = True
        try:
            yield
        finally:
            self.armed = False
