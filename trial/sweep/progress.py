"""The sweep's progress on stderr: done / running / failed and an estimate of the time left.

On a terminal one line is redrawn in place (at most every ``REDRAW_S``, and whenever a trial ends), with a
failed trial's reason printed above it as it happens; elsewhere (a log file, CI) one line per finished trial.
Counting and drawing are apart from Dask: :class:`Progress` is told what happened (``started``, ``finished``)
from whichever thread knows it.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

BAR = 24
REDRAW_S = 1.0


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Counters of one sweep and their one-line rendering."""

    def __init__(self, name: str, total: int, skipped: int, *, stream: TextIO | None = None,
                 tty: bool | None = None, clock=time.monotonic):
        self.name, self.total, self.skipped = name, total, skipped
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.ok = self.failed = self.timeouts = 0
        self.running: set[str] = set()
        self.started_at: float | None = None
        self._lock = threading.Lock()
        self._drawn = 0.0
        self._width = 0

    @property
    def done(self) -> int:
        return self.skipped + self.ok + self.failed + self.timeouts

    def begin(self) -> None:
        with self._lock:
            self.started_at = self.clock()
            self._draw(force=True)

    def started(self, trial_id: str) -> None:
        with self._lock:
            self.running.add(trial_id)
            self._draw()

    def finished(self, trial_id: str, status: str, error: str | None = None) -> None:
        with self._lock:
            self.running.discard(trial_id)
            if status == "ok":
                self.ok += 1
            elif status == "timeout":
                self.timeouts += 1
            else:
                self.failed += 1
            if status != "ok":
                self._say(f"{status}: {trial_id}: {error or status}")
            self._draw(force=True)

    def note(self, text: str) -> None:
        """A line above the progress line (where a trial is served to Foxglove)."""
        with self._lock:
            self._say(text)
            self._draw(force=self.tty)

    def tick(self) -> None:
        """Redraw now and then (the ETA and the running count change without a trial ending)."""
        with self._lock:
            self._draw()

    def end(self, note: str = "") -> None:
        with self._lock:
            if self.tty:
                self._draw(force=True)
                self.stream.write("\n")
            if note:
                self.stream.write(note + "\n")
            self.stream.flush()

    def eta_s(self) -> float | None:
        ran = self.ok + self.failed + self.timeouts
        left = self.total - self.done
        if left == 0:
            return 0.0
        if not ran or self.started_at is None:
            return None
        return (self.clock() - self.started_at) / ran * left

    def line(self) -> str:
        filled = round(BAR * self.done / self.total) if self.total else BAR
        bar = "#" * filled + "." * (BAR - filled)
        parts = [f"sweep {self.name}: [{bar}] {self.done}/{self.total} done", f"{len(self.running)} running",
                 f"{self.failed} failed"]
        if self.timeouts:
            parts.append(f"{self.timeouts} timed out")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (done before)")
        elapsed = self.clock() - self.started_at if self.started_at is not None else 0.0
        parts.append(f"{format_duration(elapsed)} elapsed, ETA {format_duration(self.eta_s())}")
        return ", ".join(parts)

    # --- drawing (the lock is held) ---------------------------------------------------------------------------
    def _draw(self, force: bool = False) -> None:
        now = self.clock()
        if not self.tty:
            if force:
                self.stream.write(self.line() + "\n")
                self.stream.flush()
            return
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        text = self.line()
        self.stream.write("\r" + text + " " * max(0, self._width - len(text)))
        self._width = len(text)
        self.stream.flush()

    def _say(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text + " " * max(0, self._width - len(text)) + "\n")
            self._width = 0
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
