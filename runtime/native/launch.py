"""Start a native program on a clock and watch it to its end: the process side of ``hil run --native``.

:func:`launch` starts ``argv`` with ``bridge.process.spawn`` (it dies with hil: SIGKILL, since a native program
may drive real hardware and may catch SIGTERM), on the real clock untouched, or on the simulator's clock under the
time shim (preloaded into the program alone, ``HIL_CLOCK_PID`` naming it) with a :class:`ClockRelay` as its
participant. It
returns when the program exits (its status or signal is the outcome), when ``duration_s`` of clock time is over,
when the clock fails, or on Ctrl-C; in every case the program is stopped (SIGTERM, then SIGKILL) before it returns.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from hil.bridge.process import spawn

from ..clock.base import WALL, Clock
from . import protocol as proto
from .build import ensure_built
from .relay import ClockRelay

TERM_GRACE_S = 2.0   # SIGTERM, then this long (wall) before SIGKILL
POLL_S = 0.02
DEFAULT_IO_GRACE_MS = 20


@dataclass
class NativeRun:
    """How a native program's run ended."""

    program: str
    clock: str
    stopped: str        # "exited", "duration", "interrupted", "clock failed"
    returncode: int | None
    clock_s: float
    wall_s: float
    sleeps: int = 0
    failure: str = ""   # the clock's error, when it failed
    buses: list[str] = field(default_factory=list)

    def outcome(self) -> str:
        code = self.returncode
        if code is None:
            return "still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by signal {-code} ({name})"
        return f"exited with status {code}"

    @property
    def exit_code(self) -> int:
        """For hil's own exit: 0 at the end of --duration, else the program's status (128 + N for signal N)."""
        if self.stopped == "duration":
            return 0
        if self.stopped == "interrupted":
            return 130
        code = self.returncode or 0
        return 128 - code if code < 0 else code

    def text(self) -> str:
        where = f" on {', '.join(self.buses)}" if self.buses else ""
        ending = {"duration": f"--duration reached; the program {self.outcome()} when stopped",
                  "interrupted": f"interrupted; the program {self.outcome()}",
                  "clock failed": f"the clock failed: {self.failure}; the program {self.outcome()}"}
        head = ending.get(self.stopped, f"the program {self.outcome()}")
        factor = f" ({self.clock_s / self.wall_s:.1f}x real time)" if self.wall_s > 0 else ""
        return (f"hil run --native: {self.program}{where}, clock {self.clock}: {head}\n"
                f"{self.clock_s:.3f} s of clock time in {self.wall_s:.3f} s of wall time{factor}"
                + (f", {self.sleeps} sleeps" if self.clock == "sim" else ""))


def launch(argv: Sequence[str], clock: Clock, *, env: Mapping[str, str] | None = None,
           quiet: Callable[[], None] | None = None, after_wake: Callable[[], None] | None = None,
           duration_s: float | None = None, endpoint: str = "", epoch_ns: int | None = None,
           io_grace_ms: int | None = None, stdout: IO | int | None = None, stderr: IO | int | None = None,
           buses: Sequence[str] = (), on_start: Callable[[subprocess.Popen], None] | None = None) -> NativeRun:
    """Run ``argv`` to its end on ``clock`` (its kind decides: ``real`` runs it untouched, ``sim`` under the shim).

    ``env`` is added to the program's environment (the bus it must open). ``endpoint`` names the clock in the
    program's error messages; ``epoch_ns`` is CLOCK_REALTIME at simulated time 0 (default: ``$HIL_CLOCK_EPOCH_NS``,
    else the wall clock now, as the Python time patch does; fix it for byte-identical traces). ``io_grace_ms``: how
    long (wall) a wait on descriptors gets for data from outside before simulated time moves (default:
    ``$HIL_CLOCK_IO_GRACE_MS``, else 20; 0 suits a program whose every bus is served by hil, which settles them).
    ``on_start`` sees the process as soon as it exists (tests, the bench).
    """
    if not argv:
        raise ValueError("hil run --native: no program given (hil run --native --profile P -- PROGRAM ARGS)")
    tools = ensure_built()
    program = str(argv[0])
    sim = clock.kind == "sim"
    child_env = dict(os.environ)
    child_env.update(env or {})
    relay = None
    pass_fds: tuple[int, ...] = ()
    if sim:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pass_fds = (theirs.fileno(),)
        child_env.update({"HIL_CLOCK_FD": str(theirs.fileno()), "HIL_CLOCK_ENDPOINT": endpoint or "the trial's clock"})
        if epoch_ns is not None or "HIL_CLOCK_EPOCH_NS" not in child_env:
            child_env["HIL_CLOCK_EPOCH_NS"] = str(time.time_ns() if epoch_ns is None else int(epoch_ns))
        if io_grace_ms is not None or "HIL_CLOCK_IO_GRACE_MS" not in child_env:
            child_env["HIL_CLOCK_IO_GRACE_MS"] = str(DEFAULT_IO_GRACE_MS if io_grace_ms is None else int(io_grace_ms))
        deadline = clock.now() + duration_s if duration_s is not None else None
        relay = ClockRelay(ours, clock, Path(program).name, quiet=quiet, after_wake=after_wake, deadline_s=deadline)
    start_wall, start_clock = WALL(), clock.now()
    try:
        process = spawn([str(a) for a in argv], death_signal=signal.SIGKILL, preload=tools.shim if sim else None,
                        pid_env="HIL_CLOCK_PID" if sim else None, env=child_env, pass_fds=pass_fds, stdout=stdout,
                        stderr=stderr)
    except OSError as exc:  # not found, not executable: said in one line, as any error of hil
        if relay is not None:
            relay.close()
        raise OSError(f"hil run --native: cannot start {program}: {exc.strerror or exc}") from None
    finally:
        if sim:
            theirs.close()
    if relay is not None:
        relay.start()
    if on_start is not None:
        on_start(process)
    stopped = "exited"
    try:
        stopped = _watch(process, relay, clock, duration_s, start_wall)
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        _stop(process)
        if relay is not None:
            relay.close()
    failure = relay.failure if relay is not None else ""
    if failure and stopped == "exited" and process.returncode == proto.EXIT_CLOCK_FAILED:
        stopped = "clock failed"
    return NativeRun(program, clock.kind, stopped, process.returncode, clock.now() - start_clock, WALL() - start_wall,
                     relay.sleeps if relay is not None else 0, failure, list(buses))


def _watch(process: subprocess.Popen, relay: ClockRelay | None, clock: Clock, duration_s: float | None,
           start_wall: float) -> str:
    """Wait for the end: the program's exit, or the duration (clock time: the relay's deadline under the sim clock,
    wall time under the real one)."""
    while True:
        try:
            process.wait(POLL_S)
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        if relay is not None and relay.deadline_reached.is_set():
            return "duration"
        if relay is None and duration_s is not None and WALL() - start_wall >= duration_s:
            return "duration"


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
