"""``hil run CONTROLLER.py --profile P [--duration S] [--bus URL]``: run a controller file on the robot a profile
describes, unchanged whether that robot is real, virtual in this process, or virtual in another one.

The contract with the controller file:

- it defines ``main(robot)``: called with an opened :class:`runtime.robot.Robot`; it loops itself with
  ``robot.loop(hz)``. The file is imported as a module, so its ``if __name__ == "__main__":`` block does not run.
- it defines no ``main``: it is run as a script (``__name__ == "__main__"``), with the opened robot as the
  global ``robot``; it may pace itself with ``time.sleep`` and call ``robot.cycle()`` for each bus cycle.

Either way the time patch (runtime.clock.patch) is active while the controller runs, so ``time.time``,
``time.monotonic``, ``time.perf_counter`` and ``time.sleep`` follow the configured clock: code written for wall
time follows simulated time unchanged. ``--duration`` stops the run after that much clock time: ``robot.loop``
stops yielding, and a sleep past the end unwinds the controller with :class:`RunComplete`. At the end the
robot is closed (wheels stopped) and a summary is printed: ticks, clock time, wall time, bus statistics.
"""
from __future__ import annotations

import ast
import importlib.util
import runpy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..clock.base import WALL, Clock
from .robot import END_TOLERANCE_S, Robot

MAIN = "main"
SCRIPT = "script"


class RunComplete(BaseException):
    """The run's --duration is over. A BaseException, so that a controller's ``except Exception`` cannot
    swallow the end of the run."""


class ControllerError(RuntimeError):
    """The controller file cannot be loaded (missing, not Python, main with the wrong signature)."""


class DeadlineClock(Clock):
    """A clock that ends the run when someone sleeps past ``deadline_s``: it sleeps to the deadline, then raises
    RunComplete. Sleeping exactly to the deadline (robot.loop's last step; 50 sleeps of 20 ms, give or take
    float rounding) is allowed."""

    def __init__(self, inner: Clock, deadline_s: float):
        self.inner, self.deadline_s = inner, deadline_s
        self.kind = inner.kind

    def now(self) -> float:
        return self.inner.now()

    def sleep_until(self, t_s: float) -> float:
        if t_s > self.deadline_s + END_TOLERANCE_S:
            self.inner.sleep_until(self.deadline_s)
            raise RunComplete(f"--duration reached at {self.deadline_s:g} s")
        return self.inner.sleep_until(t_s)

    def close(self) -> None:
        self.inner.close()


@dataclass
class RunSummary:
    controller: str
    mode: str
    bus: str
    clock: str
    ticks: int
    clock_s: float
    wall_s: float
    stopped: str  # "returned", "duration", "interrupted", "failed"
    stats_text: str
    overruns: int = 0

    def text(self) -> str:
        factor = f" ({self.clock_s / self.wall_s:.1f}x real time)" if self.wall_s > 0 else ""
        lines = [f"hil run: {self.controller} ({self.mode}) on {self.bus}, clock {self.clock}: {self.stopped}",
                 f"{self.ticks} ticks in {self.clock_s:.3f} s of clock time, {self.wall_s:.3f} s of wall time{factor}"
                 + (f"; {self.overruns} ticks skipped (controller behind the clock)" if self.overruns else ""),
                 f"bus: {self.stats_text}"]
        return "\n".join(lines)


def controller_mode(path: Path) -> str:
    """MAIN when the file defines a top-level ``main``, else SCRIPT (decided without running the file)."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ControllerError(f"{path}: cannot read the controller: {exc.strerror}") from None
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        raise ControllerError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    defines_main = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main"
                       for node in tree.body)
    return MAIN if defines_main else SCRIPT


def run_controller(path: str | Path, profile: str | Path, *, duration_s: float | None = None, bus: str | None = None,
                   out: TextIO | None = None, err: TextIO | None = None,
                   open_robot: Callable[..., Robot] = Robot.open) -> RunSummary:
    """Open the robot, run the controller file on it, close the robot; the summary says how it ended.

    Errors opening the robot (profile, bus, scan, clock) propagate; an exception raised by the controller
    propagates too, after the robot is closed and the summary printed.
    """
    out, err = out or sys.stdout, err or sys.stderr
    path = Path(path)
    mode = controller_mode(path)
    if duration_s is not None and not duration_s >= 0:
        raise ValueError(f"--duration must be >= 0 s, not {duration_s}")
    robot = open_robot(profile, bus=bus)
    for note in robot.notes:
        print(f"note: {note}", file=err)
    inner_clock = robot.clock
    if duration_s is not None:
        robot.deadline_s = inner_clock.now() + duration_s
        robot.clock = DeadlineClock(inner_clock, robot.deadline_s)
    start_wall, start_clock = WALL(), robot.clock.now()
    stopped = "returned"
    try:
        with _controller_context(path, robot.clock):
            _run(path, mode, robot)
    except RunComplete:
        stopped = "duration"
    except KeyboardInterrupt:
        stopped = "interrupted"
    except BaseException:
        stopped = "failed"
        raise
    finally:
        if stopped == "returned" and robot.deadline_s is not None and robot.clock.now() >= robot.deadline_s:
            stopped = "duration"
        urls = " + ".join(host.transport.url for host in robot.buses.values())
        summary = RunSummary(str(path), mode, urls, inner_clock.kind or type(inner_clock).__name__,
                             robot.ticks, robot.clock.now() - start_clock, WALL() - start_wall, stopped, "",
                             robot.overruns)
        robot.close()
        stats = robot.bus_stats
        summary.stats_text = robot.stats.summary() if len(stats) == 1 else \
            "; ".join(f"{name}: {bus.summary()}" for name, bus in stats.items())
        print(summary.text(), file=out, flush=True)
    return summary


@contextmanager
def _controller_context(path: Path, clock: Clock) -> Iterator[None]:
    """The time patch on the clock, the controller's folder importable, argv as if it were run directly."""
    from ..clock.patch import patched

    folder = str(path.resolve().parent)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path)]
    sys.path.insert(0, folder)
    try:
        with patched(clock):
            yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def _run(path: Path, mode: str, robot: Robot) -> None:
    if mode == SCRIPT:
        runpy.run_path(str(path), init_globals={"robot": robot}, run_name="__main__")
        return
    name = f"hil_controller_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ControllerError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        main = getattr(module, MAIN)
        if not callable(main):
            raise ControllerError(f"{path}: main is not a function")
        main(robot)
    finally:
        sys.modules.pop(name, None)


# --- the `hil run` subcommand ------------------------------------------------------------------------------------
RUN_DESCRIPTION = """\
Run a controller file on the robot a profile describes: real (serial port), virtual in this process
(sim://), or virtual in another process (hil sim --pty), on the real or the simulator's clock.

The file either defines main(robot), called with the opened robot (loop with `for tick in robot.loop(hz)`),
or is a plain script that finds the opened robot in the global `robot` (pace it with time.sleep and call
robot.cycle() once per bus cycle). time.time/monotonic/perf_counter/sleep follow the profile's clock.
At the end the wheels are stopped, the servos keep holding, and a summary is printed."""


def add_arguments(parser) -> None:
    import argparse

    parser.description = RUN_DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("controller", help="a Python file defining main(robot), or a script using the global robot")
    parser.add_argument("--profile", required=True,
                        help="profile: config/profiles/virtual.yaml (or a name under config/profiles/)")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds of the profile's clock")
    parser.add_argument("--bus", metavar="URL", help="override the profile's bus (e.g. the /dev/pts/N of hil sim --pty)")


def cli(args) -> int:
    """Exit 0 when the controller returned or ran its duration, 1 when it raised (traceback shown), 2 when the
    robot could not be opened (the message says where and what), 130 on Ctrl-C."""
    import traceback

    from devices.yaml_source import ConfigError

    from ..bus import BusError
    from ..clock.base import ClockError
    from ..model import ModelError

    try:
        summary = run_controller(args.controller, args.profile, duration_s=args.duration, bus=args.bus)
    except (ConfigError, ControllerError, BusError, ClockError, ModelError, OSError) as exc:
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    except Exception:  # the controller's own failure: its traceback is what its author needs
        traceback.print_exc()
        return 1
    return 130 if summary.stopped == "interrupted" else 0
