"""``hil run CONTROLLER.py --profile P [--duration S] [--bus URL] [--record DIR]``: run a controller file on the
robot a profile describes, unchanged whether that robot is real, virtual in this process, or virtual in another
one.

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

``--record DIR`` records the run as a trial without the controller knowing (runtime/trial/run_log.py, a
``robot.after_cycle`` hook): after every bus cycle ``/clock``, ``/robot/state`` (``/robot/joints`` for a robot
without a base), ``/robot/sensors`` (``ring_real``/``ring_virtual`` apart in a mixed trial), ``/pedestrians``
(the overlay's virtual people), ``/bus/stats`` once a second per bus, once ``/trial/meta`` and ``/map`` (when a
sim:// bus names one), stamped with the robot's clock from the start of the run. However the run ends (returned,
--duration, Ctrl-C, the controller raised) the log is closed and ``DIR/metrics.json`` and ``DIR/topdown.png``
are built from it (``hil report DIR`` rebuilds them); under the sim clock the same run gives the same bytes.
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
    recorded: str = ""  # --record: what was written where (or why the report is missing)

    def text(self) -> str:
        factor = f" ({self.clock_s / self.wall_s:.1f}x real time)" if self.wall_s > 0 else ""
        lines = [f"hil run: {self.controller} ({self.mode}) on {self.bus}, clock {self.clock}: {self.stopped}",
                 f"{self.ticks} ticks in {self.clock_s:.3f} s of clock time, {self.wall_s:.3f} s of wall time{factor}"
                 + (f"; {self.overruns} ticks skipped (controller behind the clock)" if self.overruns else ""),
                 f"bus: {self.stats_text}"]
        if self.recorded:
            lines.append(f"record: {self.recorded}")
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
                   record: str | Path | None = None, out: TextIO | None = None, err: TextIO | None = None,
                   open_robot: Callable[..., Robot] = Robot.open) -> RunSummary:
    """Open the robot, run the controller file on it, close the robot; the summary says how it ended.

    ``record``: a trial folder; the run is logged to RECORD/trial.mcap and reported (metrics.json, topdown.png)
    however it ends. Errors opening the robot (profile, bus, scan, clock) propagate; an exception raised by the
    controller propagates too, after the robot is closed, the log closed and reported, and the summary printed.
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
    recorder = None
    if record is not None:
        try:
            recorder = _start_recording(Path(record), robot, path, inner_clock).attach()
        except BaseException:
            robot.close()
            raise
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
        try:
            if recorder is not None:
                recorder.close()  # before the robot: the log has its footer even if closing the bus fails
        finally:
            robot.close()
        stats = robot.bus_stats
        summary.stats_text = robot.stats.summary() if len(stats) == 1 else \
            "; ".join(f"{name}: {bus.summary()}" for name, bus in stats.items())
        if recorder is not None:
            summary.recorded = _report(recorder)
        print(summary.text(), file=out, flush=True)
    return summary


def _start_recording(out_dir: Path, robot: Robot, controller: Path, clock: Clock):
    """The run's RunRecorder: /trial/meta (profile, controller, clock, buses) and /map when a sim:// bus names a
    map, or else a mixed trial's ``crowd: {map: ...}`` does (the profile's start_pose, if any, as its start)."""
    from ..transports.sim import parse_sim_url
    from ..trial.run_log import RunRecorder, map_message

    prof = robot.profile
    buses = [{"name": name, "url": host.transport.url} for name, host in robot.buses.items()]
    options = [parse_sim_url(bus["url"])[1] for bus in buses if bus["url"].startswith("sim://")]
    map_name = next((o["map"] for o in options if o.get("map")), None)
    if map_name is None and prof.crowd is not None:
        map_name = prof.crowd.map  # the map whose walls hide the virtual people (runtime/mixed.py)
    seed = options[0].get("seed", 0) if options else prof.crowd.seed if prof.crowd is not None else 0
    meta = {"seed": int(seed), "scenario": controller.name, "profile": prof.source, "controller": str(controller),
            "clock": clock.kind or type(clock).__name__, "buses": buses, "versions": _versions()}
    map_msg = map_message(map_name, prof.start_pose) if map_name else None
    return RunRecorder(out_dir, robot, meta, map_msg)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("hil", "mcap"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "unknown"
    return found


def _report(recorder) -> str:
    """Build DIR/metrics.json and DIR/topdown.png from the closed log; the summary's ``record:`` line."""
    from ..trial.report import METRICS_NAME, TOPDOWN_NAME, build_report

    folder = recorder.path.parent
    try:
        build_report(folder)
    except Exception as exc:  # noqa: BLE001 - the run's outcome matters more; the log is there for hil report
        return f"{recorder.path} ({recorder.sets} ticks); the report failed: {type(exc).__name__}: {exc}"
    return f"{recorder.path} ({recorder.sets} ticks), {folder / METRICS_NAME}, {folder / TOPDOWN_NAME}"


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
At the end the wheels are stopped, the servos keep holding, and a summary is printed.

--record DIR logs the run as a trial, unknown to the controller: every bus cycle's clock, odometry and joints,
sensors (a mixed trial's real and virtual ring readings apart), the virtual people of a crowd overlay, bus
statistics once a second, the profile and the map of a sim:// bus, into DIR/trial.mcap; at the end (also after
Ctrl-C or a controller error) DIR/metrics.json and DIR/topdown.png are built from it (hil report DIR)."""


def add_arguments(parser) -> None:
    import argparse

    parser.description = RUN_DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("controller", help="a Python file defining main(robot), or a script using the global robot")
    parser.add_argument("--profile", required=True,
                        help="profile: config/profiles/virtual.yaml (or a name under config/profiles/)")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds of the profile's clock")
    parser.add_argument("--bus", metavar="URL", help="override the profile's bus (e.g. the /dev/pts/N of hil sim --pty)")
    parser.add_argument("--record", metavar="DIR",
                        help="record the run as a trial: DIR/trial.mcap, then DIR/metrics.json and DIR/topdown.png")
    from ..native.cli import add_arguments as add_native_arguments

    add_native_arguments(parser)  # --native PROGRAM -- ARGS: runtime/native


def cli(args) -> int:
    """Exit 0 when the controller returned or ran its duration, 1 when it raised (traceback shown), 2 when the
    robot could not be opened (the message says where and what), 130 on Ctrl-C."""
    import traceback

    from devices.yaml_source import ConfigError

    from ..bus import BusError
    from ..clock.base import ClockError
    from ..model import ModelError
    from ..native.cli import maybe_run

    native_status = maybe_run(args)
    if native_status is not None:
        return native_status
    try:
        summary = run_controller(args.controller, args.profile, duration_s=args.duration, bus=args.bus,
                                 record=getattr(args, "record", None))
    except (ConfigError, ControllerError, BusError, ClockError, ModelError, OSError) as exc:
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    except Exception:  # the controller's own failure: its traceback is what its author needs
        traceback.print_exc()
        return 1
    return 130 if summary.stopped == "interrupted" else 0
