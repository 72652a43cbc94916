"""Running a controller on an opened robot: the agent's side of every run (``hil run``, ``hil trial``, tests).

A controller is one of:

- **a file** defining ``main(robot)``: called with the opened :class:`runtime.robot.Robot`; it loops itself with
  ``robot.loop(hz)``. The file is imported as a module, so its ``if __name__ == "__main__":`` block does not run.
- **a file** defining no ``main``: run as a script (``__name__ == "__main__"``) with the opened robot as the
  global ``robot``; it may pace itself with ``time.sleep`` and call ``robot.cycle()`` for each bus cycle.
- **a module** importable from ``sys.path``: ``package.module`` (its ``main``) or ``package.module:function``.
- **a callable** taking the robot (from Python: ``Trial(my_function, ...)``).

Either way the time patch (runtime.clock.patch) is active while the controller runs, so ``time.time``,
``time.monotonic``, ``time.perf_counter`` and ``time.sleep`` follow the configured clock: code written for wall
time follows simulated time unchanged. The run ends when the controller returns, or at ``robot.deadline_s``
(the run's duration, or an earlier end set while running, e.g. by a trial whose goal was reached):
``robot.loop`` stops yielding, and a sleep past the end unwinds the controller with :class:`RunComplete`.

Recording a run and composing it with a world and a crowd is the trial layer's job (trial/), not this module's.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import math
import runpy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..clock.base import WALL, Clock
from .robot import END_TOLERANCE_S, Robot

MAIN = "main"
SCRIPT = "script"
MODULE = "module"
CALLABLE = "callable"


class RunComplete(BaseException):
    """The run's end time has come. A BaseException, so that a controller's ``except Exception`` cannot swallow
    the end of the run."""


class ControllerError(RuntimeError):
    """The controller cannot be loaded (missing, not Python, no main, main with the wrong signature)."""


class DeadlineClock(Clock):
    """A clock that ends the run when someone sleeps past the robot's ``deadline_s``: it sleeps to the deadline,
    then raises RunComplete. The deadline is read at every sleep, so it can move while the run goes on.
    Sleeping exactly to the deadline (robot.loop's last step; 50 sleeps of 20 ms, give or take float rounding)
    is allowed."""

    def __init__(self, inner: Clock, robot: Robot):
        self.inner, self.robot = inner, robot
        self.kind = inner.kind

    def now(self) -> float:
        return self.inner.now()

    def wait_cost(self, wall_s: float) -> float:
        return self.inner.wait_cost(wall_s)

    def sleep_until(self, t_s: float) -> float:
        deadline = self.robot.deadline_s
        if deadline is not None and t_s > deadline + END_TOLERANCE_S:
            self.inner.sleep_until(deadline)
            raise RunComplete(f"the run's end at {deadline:g} s")
        return self.inner.sleep_until(t_s)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class Controller:
    """A loaded (checked, not yet run) controller. ``label`` names it in summaries and logs."""

    label: str
    mode: str  # MAIN, SCRIPT (files), MODULE, CALLABLE
    path: Path | None = None  # the file, for MAIN and SCRIPT
    module: str | None = None  # for MODULE
    attribute: str = MAIN  # the function of a MODULE
    function: Callable[[Robot], Any] | None = None  # for CALLABLE

    def run(self, robot: Robot) -> None:
        """Run it on ``robot`` (time patch on the robot's clock); returns when the controller returns."""
        with _controller_context(self.path, robot):
            if self.mode == SCRIPT:
                runpy.run_path(str(self.path), init_globals={"robot": robot}, run_name="__main__")
            elif self.mode == MAIN:
                _run_file_main(self.path, robot)
            elif self.mode == MODULE:
                _entry(importlib.import_module(self.module), self.attribute, self.label)(robot)
            else:
                self.function(robot)


def is_file_target(target: str | Path) -> bool:
    """A controller named by a path (``x.py``, ``dir/x``, an existing file) rather than a module path."""
    text = str(target)
    return text.endswith(".py") or "/" in text or Path(text).is_file()


def load_controller(target: str | Path | Callable[[Robot], Any]) -> Controller:
    """Check a controller without running it: a file must exist and parse, a module must be importable (found,
    not imported: importing runs its code, which happens under the time patch), a callable must be callable."""
    if callable(target) and not isinstance(target, (str, Path)):
        name = getattr(target, "__qualname__", None) or type(target).__name__
        module = getattr(target, "__module__", None)
        return Controller(f"{module}.{name}" if module else name, CALLABLE, function=target)
    if is_file_target(target):
        path = Path(target)
        return Controller(str(path), controller_mode(path), path=path)
    module, _, attribute = str(target).partition(":")
    if not module or not all(part.isidentifier() for part in module.split(".")) or \
            (attribute and not attribute.isidentifier()):
        raise ControllerError(f"{target!r}: not a controller file (x.py), module (package.module) or "
                              "module:function")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        found, reason = None, str(exc)
    else:
        reason = "no such module on sys.path"
    if found is None:
        raise ControllerError(f"{target!r}: cannot import {module!r}: {reason}")
    return Controller(str(target), MODULE, module=module, attribute=attribute or MAIN)


def controller_mode(path: Path) -> str:
    """MAIN when the file defines a top-level ``main``, else SCRIPT (decided without running the file)."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ControllerError(f"{path}: cannot read the controller: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ControllerError(f"{path}: not a Python source file (not UTF-8 text: {exc.reason})") from None
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        raise ControllerError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    defines_main = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == MAIN
                       for node in tree.body)
    return MAIN if defines_main else SCRIPT


def _entry(module: Any, attribute: str, label: str) -> Callable[[Robot], Any]:
    function = getattr(module, attribute, None)
    if function is None:
        raise ControllerError(f"{label}: the module has no {attribute!r}")
    if not callable(function):
        raise ControllerError(f"{label}: {attribute} is not a function")
    return function


def _run_file_main(path: Path, robot: Robot) -> None:
    name = f"hil_controller_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ControllerError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        _entry(module, MAIN, str(path))(robot)
    finally:
        sys.modules.pop(name, None)


@contextmanager
def _controller_context(path: Path | None, robot: Robot) -> Iterator[None]:
    """The time patch on the robot's clock (which the robot sleeps on meanwhile: on the simulator's clock,
    ``robot.loop`` is one of the controller's waits); for a file, its folder importable and argv as if it were
    run directly."""
    from ..clock.patch import patched

    saved_argv, saved_path, clock = sys.argv, list(sys.path), robot.clock
    if path is not None:
        sys.argv = [str(path)]
        sys.path.insert(0, str(path.resolve().parent))
    try:
        with patched(clock) as controller_clock:
            robot.use_clock(controller_clock)
            yield
    finally:
        robot.use_clock(clock)
        sys.argv = saved_argv
        sys.path[:] = saved_path


# --- one run: how it ends -----------------------------------------------------------------------------------
RETURNED, DURATION, INTERRUPTED, FAILED = "returned", "duration", "interrupted", "failed"


def arm_deadline(robot: Robot, duration_s: float | None) -> Clock:
    """Put a DeadlineClock over the robot's clock, ending the run ``duration_s`` from now (None: no end yet; a
    later ``robot.deadline_s`` still ends it). Returns the clock that was there before (the summary's kind)."""
    if duration_s is not None and not (isinstance(duration_s, (int, float)) and duration_s > 0
                                       and math.isfinite(duration_s)):
        raise ValueError(f"the run's duration must be a number of seconds > 0, not {duration_s!r}")
    inner = robot.clock
    if duration_s is not None:
        robot.set_deadline(inner.now() + duration_s)
    if not isinstance(inner, DeadlineClock):
        robot.use_clock(DeadlineClock(inner, robot))
    return inner


def run_until_done(controller: Controller, robot: Robot) -> str:
    """Run the controller; how it ended: RETURNED, DURATION (deadline), INTERRUPTED (Ctrl-C). Any exception of
    the controller propagates (the caller records FAILED)."""
    try:
        controller.run(robot)
    except RunComplete:
        return DURATION
    except KeyboardInterrupt:
        return INTERRUPTED
    if robot.deadline_s is not None and robot.clock.now() >= robot.deadline_s - END_TOLERANCE_S:
        return DURATION
    return RETURNED


@dataclass
class RunSummary:
    controller: str
    mode: str
    bus: str
    clock: str
    ticks: int
    clock_s: float
    wall_s: float
    stopped: str  # RETURNED, DURATION, INTERRUPTED, FAILED
    stats_text: str
    overruns: int = 0
    recorded: str = ""  # a recorded run: what was written where (or why the report is missing)

    def text(self) -> str:
        factor = f" ({self.clock_s / self.wall_s:.1f}x real time)" if self.wall_s > 0 else ""
        lines = [f"hil run: {self.controller} ({self.mode}) on {self.bus}, clock {self.clock}: {self.stopped}",
                 f"{self.ticks} ticks in {self.clock_s:.3f} s of clock time, {self.wall_s:.3f} s of wall time{factor}"
                 + (f"; {self.overruns} ticks skipped (controller behind the clock)" if self.overruns else ""),
                 f"bus: {self.stats_text}"]
        if self.recorded:
            lines.append(f"record: {self.recorded}")
        return "\n".join(lines)


def summarize(controller: Controller, robot: Robot, clock_kind: str, stopped: str, clock_s: float,
              wall_s: float) -> RunSummary:
    """The summary of a run whose robot is closed (its statistics are final)."""
    urls = " + ".join(host.transport.url for host in robot.buses.values())
    stats = robot.bus_stats
    text = robot.stats.summary() if len(stats) == 1 else \
        "; ".join(f"{name}: {bus.summary()}" for name, bus in stats.items())
    return RunSummary(controller.label, controller.mode, urls, clock_kind, robot.ticks, clock_s, wall_s, stopped,
                      text, robot.overruns)


def run_controller(target: str | Path | Callable[[Robot], Any], profile: Any, *, duration_s: float | None = None,
                   bus: str | None = None, out: TextIO | None = None, err: TextIO | None = None,
                   open_robot: Callable[..., Robot] = Robot.open) -> RunSummary:
    """Open the robot, run the controller on it, close the robot; the summary (also printed) says how it ended.

    Errors opening the robot (profile, bus, scan, clock) propagate; an exception raised by the controller
    propagates too, after the robot is closed and the summary printed. ``hil run`` (trial/cli.py) goes through
    the trial layer instead, which adds recording; this is the bare run for tools and tests."""
    out, err = out or sys.stdout, err or sys.stderr
    controller = load_controller(target)
    robot = open_robot(profile, bus=bus)
    for note in robot.notes:
        print(f"note: {note}", file=err)
    try:
        inner = arm_deadline(robot, duration_s)
    except BaseException:
        robot.close()
        raise
    start_wall, start_clock = WALL(), robot.clock.now()
    stopped = FAILED
    try:
        stopped = run_until_done(controller, robot)
    finally:
        clock_s, wall_s = robot.clock.now() - start_clock, WALL() - start_wall
        robot.close()
        summary = summarize(controller, robot, inner.kind or type(inner).__name__, stopped, clock_s, wall_s)
        print(summary.text(), file=out, flush=True)
    return summary
