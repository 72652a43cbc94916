"""A run on the simulator's clock whose time stands still ends, saying where the controller waits.

Simulated time moves only when the controller waits on the clock (runtime/clock/waits.py). A controller blocked
anywhere else (a socket read with no timeout, a pipe, a lock held by a thread outside the clock) or waiting for
ever on something only such a thread could end holds the time for good: without this watch the run would hang
with no word. :class:`StallWatch` is a wall-time thread that sees the clock's time not move for ``limit_s``,
writes what every thread of the controller is doing (its innermost frames, and the system call it is blocked in
when it is not in a wait on the clock) and ends the run: it raises :class:`ControllerStalled` in the controller's
thread (through a signal when that is the main thread, so that a blocking system call returns; a thread other than
the main one is reached only when it next runs Python code). A viewer's pause is not a stall.

The lockstep master's own stall timeout (bridge/lockstep.py, a participant awake while others wait) fails the
waiters; this watch ends the controller's side, and also catches a controller that is the clock's only
participant.
"""
from __future__ import annotations

import ctypes
import os
import platform
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from .base import WALL

DEFAULT_STALL_S = 30.0
INTERRUPT = signal.SIGUSR2  # raised in the main thread only while a watch runs; the previous handler comes back
HIL_ROOT = str(Path(__file__).parents[2]) + os.sep  # hil/: frames of hil itself are left out of the stack shown
FRAMES_SHOWN = 6
RUNNER_FRAMES = ("run", "_run_file_main", "run_path", "run_on_clock")  # hil's frames that call a controller
# system calls a blocked thread is seen in (/proc/self/task/TID/syscall): number -> (name, first arg is an fd)
SYSCALLS = {
    "x86_64": {0: ("read", True), 7: ("poll", False), 23: ("select", False), 43: ("accept", True),
               45: ("recvfrom", True), 47: ("recvmsg", True), 61: ("wait4", False), 202: ("futex", False),
               232: ("epoll_wait", True), 270: ("pselect6", False), 271: ("ppoll", False),
               281: ("epoll_pwait", True), 288: ("accept4", True), 35: ("nanosleep", False),
               230: ("clock_nanosleep", False), 42: ("connect", True), 1: ("write", True)},
    "aarch64": {63: ("read", True), 72: ("pselect6", False), 73: ("ppoll", False), 202: ("accept", True),
                207: ("recvfrom", True), 212: ("recvmsg", True), 260: ("wait4", False), 98: ("futex", False),
                22: ("epoll_pwait", True), 242: ("accept4", True), 101: ("nanosleep", False),
                115: ("clock_nanosleep", False), 203: ("connect", True), 64: ("write", True)},
}


class ControllerStalled(BaseException):
    """The simulator's time stood still for the stall limit. A BaseException, so that a controller's ``except
    Exception`` cannot swallow the end of the run."""


class StallWatch:
    """Watch ``now()`` from a wall-time thread; after ``limit_s`` without a change, describe ``thread`` (and the
    other threads ``waits()`` says are on the clock) and raise ControllerStalled in it. ``paused()`` true: no
    stall (a viewer's pause)."""

    def __init__(self, now: Callable[[], float], limit_s: float, thread: threading.Thread | None = None,
                 waits: Callable[[], object] = lambda: None, paused: Callable[[], bool] = lambda: False):
        self.now, self.limit_s, self.waits, self.paused = now, limit_s, waits, paused
        self.thread = thread or threading.current_thread()
        self.report: str | None = None
        self._stop = threading.Event()
        self._saved_handler = None
        self._watcher = threading.Thread(target=self._watch, name="hil-stall-watch", daemon=True)

    def __enter__(self) -> StallWatch:
        if self.thread is threading.main_thread() and threading.current_thread() is self.thread:
            self._saved_handler = signal.signal(INTERRUPT, self._on_signal)
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._watcher.join()
        if self._saved_handler is not None:
            signal.signal(INTERRUPT, self._saved_handler)

    def _on_signal(self, signum, frame) -> None:
        if self.report is not None and not self._stop.is_set():
            raise ControllerStalled(self.report)

    def _watch(self) -> None:
        every = min(0.25, self.limit_s / 8)
        seen, moved_at = self.now(), WALL()
        while not self._stop.wait(every):
            t = self.now()
            if t != seen or self.paused():
                seen, moved_at = t, WALL()
            elif WALL() - moved_at > self.limit_s:
                self.report = describe_stall(self.thread, t, self.limit_s, self.waits())
                self._interrupt()
                return

    def _interrupt(self) -> None:
        ident = self.thread.ident
        if ident is None:
            return
        if self._saved_handler is not None:
            signal.pthread_kill(ident, INTERRUPT)  # a blocking system call returns EINTR and the handler raises
        else:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(ControllerStalled))


def describe_stall(thread: threading.Thread, t: float, limit_s: float, waits: object) -> str:
    """One message: the time that stood still, then each thread of the controller: what it waits on and where."""
    where = waits.where() if waits is not None and hasattr(waits, "where") else {}
    idents = [thread.ident] + [i for i in where if i != thread.ident]
    names = {t_.ident: t_ for t_ in threading.enumerate()}
    lines = [f"the simulator's time stood still at {t:.3f} s for {limit_s:g} s of wall time (stall_s):"]
    frames = sys._current_frames()
    for ident in idents:
        other = names.get(ident)
        if other is None or ident not in frames:
            continue
        lines.append(f"  thread {other.name!r} {_waits_on(other, where.get(ident, ''))}:")
        lines.extend(f"    {line}" for line in _stack(frames[ident]))
    return "\n".join(lines)


def _waits_on(thread: threading.Thread, clock_wait: str) -> str:
    if clock_wait:
        return f"waits on the simulator's clock in {clock_wait}"
    call = blocked_in(thread.native_id)
    return f"is blocked outside the simulator's clock, in {call}" if call else \
        "runs without waiting on the simulator's clock"


def blocked_in(native_id: int | None) -> str:
    """The system call a thread of this process is blocked in ("read on fd 7 (pipe:[1234])"), or ""."""
    try:
        fields = Path(f"/proc/self/task/{native_id}/syscall").read_text().split()
    except (OSError, TypeError):
        return ""
    if not fields or not fields[0].isdigit():
        return ""
    name, has_fd = SYSCALLS.get(platform.machine(), {}).get(int(fields[0]), (f"system call {fields[0]}", False))
    if not has_fd or len(fields) < 2:
        return name
    fd = int(fields[1], 16)
    try:
        return f"{name} on fd {fd} ({os.readlink(f'/proc/self/fd/{fd}')})"
    except OSError:
        return f"{name} on fd {fd}"


def _stack(frame) -> list[str]:
    """The controller's innermost frames (those below hil's runner, hil's own left out), innermost last:
    file:line in function: the line."""
    summary = traceback.extract_stack(frame)
    runner = [k for k, f in enumerate(summary) if f.filename.startswith(HIL_ROOT) and f.name in RUNNER_FRAMES]
    below = summary[runner[-1] + 1:] if runner else summary
    summary = [f for f in below if not f.filename.startswith(HIL_ROOT)]
    return [f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in summary[-FRAMES_SHOWN:]]
