"""``Trial(...).run(out_dir) -> TrialResult``: the one way every entry point runs a controller in a world with a
task (``hil trial``, ``hil demo``, ``hil run``, the pytest plugin, sweeps, the viewer).

A trial composes three things that never reach into each other (dm_control's split):

- the **world** (trial/world.py): the robot opened on its bus and clock; for a virtual robot, the pybullet world
  in this process, whose ground truth (a WorldProbe) only the recording and the task read;
- the **task** (trial/task.py): the map, the crowd process, the scenario, start and goal, and when it ends;
- the **agent** (runtime/robot/runner.py): the controller, which sees nothing but the Robot (and
  ``robot.params``).

The order is: check everything (controller, task files, scenario lines), start the crowd, open the robot,
record (when given a folder), run the controller until it returns, the duration is over, or ``after_goal_s``
after the goal is reached; then close the log before the robot, stop the crowd, and build the report
(metrics.json, topdown.png). A controller that raises, or a crowd that dies, gives a FAILED result with the error
and what was recorded up to then; a bad spec raises before anything starts.
"""
from __future__ import annotations

import math
import sys
import traceback as traceback_mod
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

from .result import FAILED, INTERRUPTED, OK, Metrics, TrialResult
from .spec import ROS_CONTROLLER, TrialSpec, checked_params, load_trial_file, make_spec
from .task import CrowdProcess, Task, TrialError, make_task, map_message, release, start_crowd
from .world import WorldProbe, clock_of, robot_profile

GOAL = "goal"
SCRIPT_END = "script_end"  # the scenario's ``end`` line ended the run
PROGRESS_STEPS = 20  # progress lines per trial (at least one per second of trial time... at most this many)


class Trial:
    """One trial. ``Trial("my_controller.py", map="arcade", scenario="child_interacts", seed=3, duration=120)``;
    keys as in trial/spec.py (or a ready :class:`TrialSpec` as ``spec=``). :meth:`run` may be called more than
    once (each run starts afresh)."""

    def __init__(self, controller: Any = None, *, spec: TrialSpec | None = None, **keys: Any):
        if spec is not None and (controller is not None or keys):
            raise TypeError("give a spec or the trial's keys, not both")
        self.spec = spec if spec is not None else make_spec(controller, **keys)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> Trial:
        """A trial file (YAML; trial/spec.py), with keys overridden (None leaves a key as the file says)."""
        return cls(spec=load_trial_file(path, **overrides))

    def run(self, out_dir: str | Path | None = None, *, progress: Callable[[str], None] | None = None,
            err: TextIO | None = None, hooks: tuple[Callable[[Any], None], ...] = (),
            listeners: tuple[Callable[[str, float, dict], None], ...] = (), taps: tuple = ()) -> TrialResult:
        """Run it; ``out_dir`` gets trial.mcap, metrics.json and topdown.png (None: nothing is recorded).
        ``progress`` receives a line now and then; ``err`` the robot's notes (stderr by default); ``hooks`` run
        after every bus cycle after the recording (the live viewer); ``listeners`` get every message the log
        gets, ``(topic, t, payload)``, as it is written (the live viewer: it sees what a replay will); ``taps``
        get every message's bytes with its channel (TrialRecorder.add_tap: the live Foxglove server)."""
        return _Run(self.spec, Path(out_dir) if out_dir is not None else None, progress, err or sys.stderr,
                    hooks, listeners, taps).go()


def arm_faults(spec: TrialSpec, robot: Any) -> Any:
    """``faults:`` bound to the opened robot's parts (a name it lacks: ConfigError at its line, before the first
    tick) and run at their times in its world (firmware_sim/fault_plan.py); the plan, or None without faults."""
    if not spec.faults:
        return None
    from hil.devices.yaml_source import ConfigError
    from hil.firmware_sim.fault_plan import FaultPlan, parse_faults

    embodied = getattr(robot.bus.transport, "embodied", None)
    if embodied is None:
        raise ConfigError(spec.source, None, "faults: act on the virtual robot in this process (robot:, or a "
                                             "sim:// bus); this trial's bus is " + robot.bus.transport.url)
    plan = FaultPlan(parse_faults(spec.faults, spec.source, None, spec.duration))
    plan.bind(lambda name: _part_id(robot, name))
    plan.attach(embodied.world, embodied.device, spec.seed)
    return plan


def stall_watch(spec: TrialSpec, robot: Any) -> Any:
    """A watch that ends a trial on the sim clock whose time stands still for ``stall_s`` (runtime/clock/stall.py);
    a do-nothing context on the real clock or with ``stall_s: none``."""
    from contextlib import nullcontext

    from hil.runtime.clock.stall import StallWatch

    if robot.clock.kind != "sim" or not spec.stall_s:
        return nullcontext(None)
    inner = robot.clock
    while getattr(inner, "inner", None) is not None:
        inner = inner.inner
    core = getattr(getattr(inner, "participant", None), "core", None)
    return StallWatch(lambda: robot.clock.now(), spec.stall_s, waits=lambda: getattr(robot.clock, "waits", None),
                      paused=lambda: bool(getattr(core, "paused", False)))


def _part_id(robot: Any, name: Any) -> int | None:
    """The bus ID of a part named by blueprint joint or sensor name, tree path or ID; None if there is none."""
    if isinstance(name, int):
        return name if name in robot.virtual.parts else None
    for handles in (robot.joints, robot.sensors):
        try:
            return handles[name].part_id
        except KeyError:
            pass
    return next((pid for pid in robot.virtual.parts if robot.virtual.path(pid) == name), None)


class _Run:
    """The state of one run of a trial, from start to report."""

    def __init__(self, spec: TrialSpec, folder: Path | None, progress, err: TextIO, hooks, listeners=(), taps=()):
        self.spec, self.folder, self.progress, self.err, self.hooks = spec, folder, progress, err, hooks
        self.listeners, self.taps = listeners, taps
        self.crowd: CrowdProcess | None = None
        self.robot: Any = None
        self.log: Any = None
        self.reached_at: float | None = None
        self.script_end_at: float | None = None  # clock time of the scenario's ``end`` line, once the world heard it
        self.t0 = 0.0

    def go(self) -> TrialResult:
        from .interrupts import HeldInterrupt

        with HeldInterrupt(self.err) as self.held:  # Ctrl-C while starting or closing: held until the loop runs
            return self._go()

    def _go(self) -> TrialResult:
        from hil.runtime.clock.base import WALL
        from hil.runtime.clock.stall import ControllerStalled
        from hil.runtime.robot.runner import FAILED as RUN_FAILED
        from hil.runtime.robot.runner import INTERRUPTED as INTERRUPTED_RUN
        from hil.runtime.robot.runner import arm_deadline, load_controller, run_until_done, summarize

        spec = self.spec
        if spec.controller == ROS_CONTROLLER:  # hil trial swaps in the bridge's driver; nothing else starts one
            from hil.devices.yaml_source import ConfigError

            raise ConfigError(spec.source, spec.line_of("controller"), "controller: ros: ROS 2 nodes drive this "
                              "trial through the ROS 2 bridge, which hil trial starts (hil trial FILE)")
        controller = load_controller(spec.controller)  # nothing starts for a controller that cannot load
        params, checked = checked_params(spec, controller)  # nor for a parameter it does not declare
        if spec.params and not checked:
            print(f"note: {controller.label} declares no PARAMS: params {', '.join(spec.params)} are passed "
                  f"unchecked", file=self.err)
        task = make_task(spec)
        from .state.attach import prepare

        resume = prepare(spec)  # a state asked for (--from) is found and its time checked before anything starts
        clock = clock_of(spec)
        wall0 = WALL()
        try:
            endpoint = spec.crowd_endpoint
            if endpoint is None and task.has_crowd:
                self.crowd = start_crowd(spec, task, realtime=clock == "real")
                endpoint = self.crowd.endpoint
            from hil.runtime.robot import Robot

            self.robot = robot = Robot.open(robot_profile(spec, task, endpoint, clock == "real"))
        except BaseException:
            self._stop_crowd()
            raise
        try:
            self._arm_faults(robot)
        except BaseException:
            robot.close()
            self._stop_crowd()
            raise
        for note in robot.notes:
            print(f"note: {note}", file=self.err)
        if self.progress is not None:
            where = f", writing {self.folder}/" if self.folder is not None else ""
            self.progress(f"trial {spec.label}: {robot!r}{where}")
        stopped, error, trace = RUN_FAILED, None, None
        inner = robot.clock
        self.t0 = robot.clock.now()
        probe = WorldProbe.of(robot)
        try:  # a state that does not fit this world is refused (ResumeError) as a bad spec is: nothing has run
            saver = self._states(task, probe, resume)
        except BaseException:
            try:
                robot.close()
            finally:
                self._stop_crowd()
            raise
        try:
            robot.set_run_params(params)
            arm_deadline(robot, spec.duration)
            if resume is not None:  # the end in trial time, as a run from the start would have it
                robot.set_deadline(spec.duration)
                if self.reached_at is not None and spec.end_on_goal:
                    robot.end_by(self.reached_at + spec.after_goal_s)
            if self.crowd is not None:
                self.crowd.watch(probe)  # a crowd process that dies is reported at once, and of what
            if self.folder is not None:
                self.log = self._start_log(task, probe, controller, inner, saver)
            if task.goal is not None:
                robot.after_cycle.append(self._goal_watch(task, probe))
            if task.scenario is not None and probe is not None and probe.crowd is not None:
                robot.after_cycle.append(self._script_end_watch(probe))
                if resume is None:
                    self._script_end_known(task, robot)
            if self.progress is not None:
                robot.after_cycle.append(self._progress_hook(probe))
            robot.after_cycle.extend(self.hooks)
            with self.held.allowed(), stall_watch(spec, robot) as watch:
                stopped = INTERRUPTED_RUN if self.held.pending else run_until_done(controller, robot)
            if stopped == "duration" and self.script_end_at is not None and robot.deadline_s == self.script_end_at:
                stopped = SCRIPT_END
            elif stopped == "duration" and self.reached_at is not None:
                stopped = GOAL
        except (Exception, ControllerStalled) as exc:  # noqa: BLE001 - the controller's (or the world's) failure
            if isinstance(exc, ControllerStalled):  # is the result; a stall says where it waits, no traceback
                error, trace = f"ControllerStalled: {watch.report}", None
            else:
                error, trace = f"{type(exc).__name__}: {exc}", _trace(exc)
            if saver is not None:
                saver.failed()
        finally:
            sim_s = robot.clock.now() - self.t0
            wall_s = WALL() - wall0
            try:
                if saver is not None:
                    saver.close(self.log.t if self.log is not None and self.log.sets else None)
                if self.log is not None:  # before the robot: the log has its footer even if closing the bus fails
                    error, trace = self._close_log(error, trace)
            finally:
                try:
                    robot.close()
                finally:
                    self._stop_crowd(ended_well=error is None)
        status = OK if error is None and stopped != "interrupted" else INTERRUPTED if error is None else FAILED
        run = summarize(controller, robot, inner.kind or type(inner).__name__, stopped, sim_s, wall_s)
        result = TrialResult(label=spec.label, folder=self.folder, status=status, stopped=run.stopped,
                             sim_s=sim_s, wall_s=wall_s, ticks=robot.ticks, error=error, traceback=trace,
                             goal_reached_at_s=self.reached_at, notes=list(robot.notes),
                             states_lost=saver.lost() if saver is not None else None)
        if self.folder is not None:
            result.metrics, report_error = _report(self.folder, status, run.stopped, error)
            result.report_error = report_error
            logged = f"{self.log.path} ({self.log.sets} ticks)" if self.log is not None else \
                f"no log (it could not start: {error})"
            run.recorded = (f"{logged}, {self.folder}/metrics.json, {self.folder}/topdown.png"
                            if report_error is None else f"{logged}; the report failed: {report_error}")
        result.run_text = run.text()
        return result

    # --- pieces -----------------------------------------------------------------------------------------------
    def _arm_faults(self, robot: Any) -> None:
        plan = arm_faults(self.spec, robot)
        if plan is not None:
            self.faults = plan

    def _states(self, task: Task, probe: WorldProbe | None, resume) -> Any:
        """A saved state put back (``from:``), and states saved as the trial runs (trial/state/)."""
        from .state.attach import start

        robot = self.robot

        def task_state() -> dict:
            return {"reached_at": self.reached_at, "deadline_s": robot.deadline_s}

        saver, t_start = start(self.spec, task, robot, probe, self.folder, resume, task_state)
        if resume is not None:
            self.t0 = 0.0  # trial time goes on from the restored time
            self.reached_at = resume.state["task"].get("reached_at")
        return saver

    def _close_log(self, error: str | None, trace: str | None) -> tuple[str | None, str | None]:
        """Close the log; a disk that filled while closing it (the last chunk, the index) fails the trial the
        way a disk that filled during it does (LogDiskFull names the file and the disk), not the command."""
        from .record.recorder import LogDiskFull

        try:
            self.log.close()
        except LogDiskFull as exc:
            return (error or f"{type(exc).__name__}: {exc}"), trace
        return error, trace

    def _start_log(self, task: Task, probe: WorldProbe | None, controller, clock, saver=None) -> Any:
        from .record.tick_log import TickLog
        from .versions import versions

        spec, robot = self.spec, self.robot
        # the crowd this trial started answers on a port picked at random: not part of the record (same seed,
        # same bytes)
        picked = self.crowd.endpoint if self.crowd is not None else None
        buses = [{"name": name, "url": host.transport.url.replace(picked, "CROWD") if picked else host.transport.url}
                 for name, host in robot.buses.items()]
        meta = {"seed": _effective_seed(spec.seed, robot), "scenario": Path(str(task.scenario)).stem if task.scenario else
                ("background" if task.background else "none"), "profile": robot.profile.source,
                "controller": controller.label, "clock": clock.kind or type(clock).__name__, "buses": buses,
                "versions": versions(), "trial": spec.describe()}
        map_msg = map_message(task)
        if map_msg is None and robot.profile.crowd is not None and robot.profile.crowd.map:
            from .record.tick_log import map_message as plain_map

            map_msg = plain_map(robot.profile.crowd.map, robot.profile.start_pose)  # a mixed trial's room
        elif map_msg is None:
            map_msg = _bus_map(robot)
        extra = ((("/crowd/scenario", scenario_message(task.scenario)),) if task.scenario else ())
        if robot.resumed_from is not None:
            meta["resumed_from"] = robot.resumed_from
        user = _user_objectives(task)
        if user:  # the page lists them with the built-in ones (only when there are: other logs stay as they were)
            meta["objectives"] = {"user": user}
        listeners = self.listeners + ((saver.listener,) if saver is not None else ())
        log = TickLog(self.folder, robot, meta, map_msg, probe=probe, listeners=listeners, extra=extra,
                      camera_rate=self.spec.camera_rate, camera_depth=self.spec.camera_depth,
                      taps=self.taps)
        if robot.resumed_from is not None:
            log.t0 = 0.0  # message times are the trial's, from the restored time on
        return log.attach()

    def _goal_watch(self, task: Task, probe: WorldProbe | None) -> Callable[[Any], None]:
        """After each cycle: the goal reached (ground truth when there is a world, else odometry) -> the run ends
        ``after_goal_s`` later (when ``end_on_goal``)."""
        spec = self.spec

        def watch(robot: Any) -> None:
            if self.reached_at is not None:
                return
            x, y, _ = probe.robot_pose() if probe is not None else robot.base.odometry
            if task.goal_reached(x, y):
                self.reached_at = robot.clock.now() - self.t0
                if spec.end_on_goal:
                    robot.end_by(robot.clock.now() + spec.after_goal_s)

        return watch

    def _script_end_known(self, task: Task, robot: Any) -> None:
        """A scenario whose ``end`` follows only ``run`` lines (no ``wait``) ends at a time known before it starts:
        the run ends exactly there (the world hears of the line only with the crowd's next tick, a period later)."""
        from hil.crowd.agents import DEFAULT_DT  # not crowd.sim: this process steps no crowd, needs no numba
        from hil.crowd.script import end_time_s, load_script

        end = end_time_s(load_script(task.scenario), DEFAULT_DT)
        if end is not None:
            self.script_end_at = end
            robot.end_by(end)

    def _script_end_watch(self, probe: WorldProbe) -> Callable[[Any], None]:
        """After each cycle: once the crowd says the scenario reached its ``end`` line, the run ends at that line's
        time (the crowd's time is the world's clock)."""

        def watch(robot: Any) -> None:
            end = probe.crowd.script_end_s
            if end is not None and self.script_end_at is None:
                self.script_end_at = end  # after a 'wait': heard a crowd period after the line's time
                robot.end_by(end)

        return watch

    def _progress_hook(self, probe: WorldProbe | None) -> Callable[[Any], None]:
        from hil.runtime.clock.base import WALL

        spec, wall0 = self.spec, WALL()
        every = max(1.0, (spec.duration or 60.0) / PROGRESS_STEPS)
        state = {"next": 0.0}

        def report(robot: Any) -> None:
            t = robot.clock.now() - self.t0
            if t < state["next"] - 1e-9:
                return
            state["next"] = (math.floor(t / every + 1e-9) + 1) * every
            self.progress(_progress_line(robot, probe, t, spec.duration, WALL() - wall0, self.reached_at))

        return report

    def _stop_crowd(self, ended_well: bool = False) -> None:
        """Stop the crowd process, or keep it idle for this process's next trial when the trial ended well (the
        world has said bye; trial/task.py release)."""
        if self.crowd is not None:
            release(self.crowd, ended_well=ended_well)
            self.crowd = None


def _trace(exc: Exception) -> str | None:
    """The traceback a failed trial shows: none for a full disk (LogDiskFull's one line says which file, which disk
    and what the log still holds: it is no bug to debug)."""
    from .record.recorder import LogDiskFull

    return None if isinstance(exc, LogDiskFull) else traceback_mod.format_exc()


def _progress_line(robot: Any, probe: WorldProbe | None, t: float, duration: float | None, wall_s: float,
                   reached_at: float | None) -> str:
    width = 20
    done = min(width, round(width * t / duration)) if duration else 0
    bar = f"[{'#' * done}{'.' * (width - done)}] " if duration else ""
    try:
        x, y, _ = probe.robot_pose() if probe is not None else robot.base.odometry
        where = f"robot ({x:+6.2f}, {y:+5.2f})"
    except Exception:  # noqa: BLE001 - no base: no position to show
        where = f"{robot.ticks} ticks"
    people = len(probe.crowd.pedestrians.bodies) if probe is not None and probe.crowd is not None else None
    mode = f"{robot.mode:8s} " if getattr(robot, "mode", None) else ""
    return (f"{bar}t={t:6.1f}{f'/{duration:g}' if duration else ''} s  {where} {mode}"
            + (f"{people:3d} people  " if people is not None else "")
            + ("goal  " if reached_at is not None else "") + f"wall {wall_s:5.1f} s")


def scenario_message(path: Any) -> dict[str, Any]:
    """``/crowd/scenario``: the staged script's name and lines, so a log shows every line, not only those run."""
    script = Path(str(path))
    return {"name": script.stem, "file": script.name, "lines": script.read_text(encoding="utf-8").splitlines()}


def _bus_map(robot: Any) -> dict[str, Any] | None:
    """``/map`` of a run whose sim:// bus names a map in its URL (``hil run --bus "sim://commbot?map=lab"``)."""
    from hil.runtime.transports.sim import parse_sim_url

    from .record.tick_log import map_message as plain_map

    for host in robot.buses.values():
        url = host.transport.url
        if url.startswith("sim://"):
            options = parse_sim_url(url)[1]
            if options.get("map"):
                return plain_map(options["map"], robot.profile.start_pose)
    return None


def _report(folder: Path, status: str, stopped: str, error: str | None = None) -> tuple[Metrics | None, str | None]:
    """Build metrics.json (with the verdict) and topdown.png from the closed log; (metrics, None) or (None, why
    not)."""
    from .report.build import build_report

    try:
        return Metrics(build_report(folder, status=status, stopped=stopped, error=error)), None
    except Exception as exc:  # noqa: BLE001 - the run's outcome matters more; the log is there for hil report
        return None, f"{type(exc).__name__}: {exc}"


__all__ = ["Trial", "TrialError", "TrialResult", "arm_faults"]


def _effective_seed(trial_seed: int, robot: Any) -> int:
    """The seed the run really had: the trial's, or (trial seed left at its default 0) the one the profile gives
    its crowd overlay or its bus URL, which then stays (trial/world.py)."""
    if trial_seed != 0:
        return trial_seed
    crowd = getattr(robot.profile, "crowd", None)
    if crowd is not None and crowd.seed:
        return int(crowd.seed)
    for host in robot.buses.values():
        seed = dict(parse_qsl(urlsplit(host.transport.url).query)).get("seed")
        if seed is not None and seed.isdigit():
            return int(seed)
    return 0


def _user_objectives(task: Any) -> dict[str, str]:
    """``objectives.user`` of the trial's rates files (name -> module:Class), for the log's meta."""
    if not getattr(task, "rates", None):
        return {}
    from hil.crowd.population import load_rates, user_objectives

    return user_objectives([load_rates(path) for path in task.rates])
