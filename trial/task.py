"""The trial's task: the map, the crowd process, the scenario, the start and the goal.

Everything a name stands for is resolved here, in this process, before anything starts: the map, the rates
files and the scenario are looked up on the config search path (devices.config_path: ./config, $HIL_PATH,
hil's own) and checked (a bad script line names its file:line), start and goal may be places of the map. The
crowd process then gets absolute paths, so it finds the same files whatever its working directory.

The crowd is ``hil crowd --serve`` in a child process that dies with this one: ticked by the world in lockstep
on the sim clock, streaming in real time on the real clock.
"""
from __future__ import annotations

import atexit
import collections
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.devices.map_format import parse_map_task
from hil.devices.yaml_source import ConfigError

from .spec import DEFAULT_RATES, NO_GOAL, TrialSpec


class TrialError(RuntimeError):
    """The trial could not start or run to its end (the crowd did not start, the world failed, ...)."""


@dataclass(frozen=True)
class Task:
    """The resolved task of a spec: files as paths, places as points."""

    map_name: str | None
    map_path: Path | None
    start: tuple[float, float, float] | None
    goal: tuple[float, float] | None
    goal_radius: float
    rates: tuple[Path, ...]  # the crowd's rates files (the background's, or a staged scene's person types)
    scenario: Path | None
    background: bool = False  # people come by the rates (else only the scenario's)

    @property
    def has_crowd(self) -> bool:
        return self.background or self.scenario is not None

    def goal_reached(self, x: float, y: float) -> bool:
        return self.goal is not None and math.hypot(x - self.goal[0], y - self.goal[1]) <= self.goal_radius


def make_task(spec: TrialSpec) -> Task:
    """Resolve and check the spec's task; ConfigError (file:line where known) for anything wrong."""
    from hil.crowd.configfile import resolve as resolve_crowd_file
    from hil.devices.map_format import resolve_map

    map_path = _named(spec, "map", lambda: resolve_map(spec.map).resolve()) if spec.map else None
    doc = _map_doc(map_path)
    places = _places(doc) if doc is not None else {}
    start = _where(spec.start, "start", places, spec)
    if start is None:
        start = _default_start(spec, doc)
    if start is not None and len(start) == 2:
        start = (start[0], start[1], 0.0)
    if start is not None and doc is not None:
        _check_start(spec, start, doc)
    goal = None if spec.goal == NO_GOAL else _where(spec.goal, "goal", places, spec)
    if spec.goal is None and doc is not None:
        goal = parse_map_task(doc).goal  # the map's default goal (none when it has none)
    background = bool(spec.crowd)
    scenario = None
    if spec.scenario is not None:
        scenario = _named(spec, "scenario",
                          lambda: resolve_crowd_file(spec.scenario, "scenarios", suffix=".scn").resolve())
    if (background or scenario) and map_path is None and spec.crowd_endpoint is None:
        raise ConfigError(spec.source, None, "a crowd or a scenario needs a map: the people walk in it (map: arcade)")
    # a staged scene alone still has the default rates' person types (and may say `generate on`)
    names = spec.crowd if background else DEFAULT_RATES if scenario is not None else ()
    rates = tuple(_named(spec, "crowd", lambda name=name: resolve_crowd_file(name, "crowd").resolve())
                  for name in names)
    if scenario is not None and spec.crowd_endpoint is None:
        _check_scenario(scenario, map_path, rates)
    return Task(map_name=spec.map, map_path=map_path, start=start, goal=goal[:2] if goal else None,
                goal_radius=spec.goal_radius, rates=rates, scenario=scenario, background=background)


def _named(spec: TrialSpec, key: str, resolve: Any) -> Any:
    """``resolve()`` of a name the spec gives; an unknown name is the trial file's error at that key's line."""
    try:
        return resolve()
    except ConfigError as exc:
        if exc.source == spec.source:
            raise
        raise ConfigError(spec.source, spec.line_of(key), f"{key}: {exc.source}: {exc.message}") from None


def _check_scenario(scenario: Path, map_path: Path, rates: tuple[Path, ...]) -> None:
    """Every line of the script checked against the map and the person types, as the crowd will (file:line)."""
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.population import DEFAULT_TYPES, load_rates
    from hil.crowd.script import check, load_script

    tables = [load_rates(path) for path in rates]
    types = {**DEFAULT_TYPES, **(tables[0].person_types if tables else {})}
    check(load_script(scenario), load_crowd_map(map_path), types=types, can_generate=bool(tables))


def _map_doc(map_path: Path | None) -> Any:
    from hil.devices.yaml_source import load_yaml_file

    return load_yaml_file(map_path, "map") if map_path is not None else None


def _places(doc: Any) -> dict[str, tuple[float, float]]:
    from hil.devices.map_format import point

    out: dict[str, tuple[float, float]] = {}
    for section in ("places", "entrances"):
        table = doc.get(section) or {}
        for name, value in table.items():
            if section == "entrances":
                if isinstance(value, dict) and "at" in value:
                    out.setdefault(str(name), tuple(point(value, "at", f"entrance {name!r}")))
            else:
                out[str(name)] = tuple(point(table, name, f"place {name!r}"))
    graph = (doc.get("graph") or {}).get("nodes") or {}
    for name in graph:
        out.setdefault(str(name), tuple(point(graph, name, f"graph node {name!r}")))
    return out


def _default_start(spec: TrialSpec, doc: Any) -> tuple[float, ...] | None:
    """The start of a trial that gives none: a profile's own ``start_pose`` (where its robot stands), else the
    map's ``start:``, else None (the robot's origin)."""
    if spec.profile is not None:
        pose = load_profile_of(spec).start_pose
        if pose is not None:
            return tuple(pose)
    return parse_map_task(doc).start if doc is not None else None


def load_profile_of(spec: TrialSpec) -> Any:
    """The spec's profile (a name, a file, a mapping or a Profile) loaded, with its bus override."""
    from hil.runtime.robot.profile import Profile, load_profile

    if isinstance(spec.profile, Profile):
        return spec.profile.with_bus(spec.bus)
    return load_profile(spec.profile, bus=spec.bus)


def _check_start(spec: TrialSpec, start: tuple[float, float, float], doc: Any) -> None:
    """A start inside an obstacle or with the robot's body in a wall is refused, naming it and the nearest free
    pose (trial/placement.py); the line is the trial file's ``start:``, else the map's own."""
    from hil.devices.map_format import parse_walls

    from .placement import blocked, format_xy, nearest_free

    walls = parse_walls(doc)
    why = blocked(walls, start[0], start[1], source=Path(doc.source).name)
    if why is None:
        return
    free = nearest_free(walls, start[0], start[1])
    hint = f"; the nearest free pose is {format_xy((*free, start[2]))}" if free is not None else ""
    given = spec.start is not None
    source, line = (spec.source, spec.line_of("start")) if given else (doc.source, doc.line_of("start"))
    whose = "" if given else " (the map's default: the trial gives no start)"
    raise ConfigError(source, line, f"start: {format_xy(start)}{whose} puts the robot {why}{hint}")


def _where(value: Any, key: str, places: dict[str, tuple[float, float]], spec: TrialSpec) -> tuple | None:
    if value is None or isinstance(value, tuple):
        return value
    if not places:
        raise ConfigError(spec.source, spec.line_of(key),
                          f"{key}: {value!r} is a place name, and a place needs a map (map:)")
    if value not in places:
        raise ConfigError(spec.source, spec.line_of(key), f"{key}: the map {spec.map} has no place {value!r}; it has "
                                             f"{', '.join(sorted(places))}")
    return places[value]


def map_message(task: Task) -> dict[str, Any] | None:
    """The log's ``/map``: walls, places, entrances, start and goal (None without a map)."""
    if task.map_path is None:
        return None
    from .record.tick_log import map_message as base_message

    message = base_message(str(task.map_path), task.start)
    message["goal"] = list(task.goal) if task.goal is not None else None
    message["goal_radius"] = task.goal_radius
    return message


# --- the crowd process -------------------------------------------------------------------------------------
IDLE_WAIT_S = 5.0  # after the world's bye, how long the child may take to say it is idle (else it is stopped)


class CrowdProcess:
    """``hil crowd --serve tcp://127.0.0.1:*`` as a child process; :attr:`endpoint` says where it answers.

    A lockstep crowd is started with ``--again`` and, when its trial ended well, kept idle (:func:`release`) for
    the next trial of this process: the next trial sends its options on the child's stdin and the child builds a
    fresh crowd from them, as a new process would (same seed, same bytes: tests/test_crowd_pool.py), without paying
    the interpreter, numpy, numba and the compiled step's cache again (~1 s quiet, 3 s loaded, per trial: a sweep
    worker's or a test session's trials one after another). ``HIL_CROWD_POOL=0`` turns it off."""

    def __init__(self, spec: TrialSpec | None = None, task: Task | None = None, *, realtime: bool = False,
                 command: list[str] | None = None):
        self.command = command if command is not None else crowd_command(spec, task, realtime=realtime)
        self.reusable = _poolable(self.command)
        from hil.bridge.process import spawn  # dies with us, even on SIGKILL

        self.proc = spawn(self.command + (["--again"] if self.reusable else []), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.PIPE if self.reusable else subprocess.DEVNULL,
                          text=True)
        self.last_lines: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT)
        self._stderr_done = threading.Event()
        threading.Thread(target=_relay, args=(self.proc.stderr, self.last_lines, self._stderr_done),
                         daemon=True).start()  # its log reaches ours
        self._said: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_lines_of, args=(self.proc.stdout, self._said), daemon=True).start()
        self.waiting = False  # it refused a session's options and waits for the next (a TrialError said why)
        self.endpoint = self._ready()

    def _ready(self) -> str:
        """The endpoint of the session just asked for (its first stdout line), or TrialError saying why not."""
        line = self._said.get()
        words = (line or "").split()
        if len(words) == 2 and words[0] == "crowd":
            return words[1]
        if line is not None and line.startswith("crowd-error "):  # the child refused these options: it waits on
            self.waiting = True  # for the next session's (start_crowd keeps it for the next trial)
            error = TrialError(f"the crowd did not start: {line[len('crowd-error '):].strip()}")
            error.crowd = self
            raise error
        self.stop()
        self._stderr_done.wait(STDERR_DRAIN_S)
        err = [x.strip() for x in self.last_lines if x.strip()]
        reason = err[-1] if err else f"said {' '.join(words)!r}"
        raise TrialError(f"the crowd did not start: {reason} (exit {self.proc.returncode})")

    def again(self, command: list[str]) -> bool:
        """Serve the next trial's ``command`` from this idle process; False if it cannot (then it is stopped)."""
        if self.proc.poll() is not None:
            return False
        try:
            self.proc.stdin.write(json.dumps(command[command.index("crowd") + 1:]) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            self.stop()
            return False
        self.command = command
        self.last_lines.clear()
        self.waiting = False
        self.endpoint = self._ready()
        return True

    def idle(self, wait_s: float = IDLE_WAIT_S) -> bool:
        """After the world said bye: True once the child says it is idle (then it may serve another trial)."""
        if not self.reusable or self.proc.poll() is not None:
            return False
        try:
            return self._said.get(timeout=wait_s) == "crowd-idle"
        except queue.Empty:
            return False

    def death(self) -> str | None:
        """None while the crowd process runs; else how it ended (exit status or signal) and its last stderr
        lines: what the world's wait for a tick says instead of a timeout."""
        code = self.proc.poll()
        if code is None:
            return None
        how = f"killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        self._stderr_done.wait(STDERR_DRAIN_S)  # its last lines may still be in the pipe (Event: wall time)
        said = " | ".join(line.strip() for line in self.last_lines if line.strip())
        return f"the crowd process (pid {self.proc.pid}) {how}" + (f"; its last words: {said}" if said else
                                                                  "; it said nothing on stderr")

    def watch(self, probe) -> None:
        """Give the world's lockstep crowd client (``probe``: trial.world.WorldProbe) this process's
        :meth:`death`, so a tick waiting for a dead crowd ends at once."""
        client = getattr(getattr(probe, "crowd", None), "client", None) if probe is not None else None
        if client is not None and hasattr(client, "liveness"):
            client.liveness = self.death

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


# --- one idle crowd process kept for the next trial ----------------------------------------------------------
POOL_ENV = "HIL_CROWD_POOL"  # "0": a new crowd process for every trial
_IDLE: list[CrowdProcess] = []
_IDLE_LOCK = threading.Lock()


def _poolable(command: list[str]) -> bool:
    """Lockstep crowds of our own trials only (the child refuses the rest of --again anyway)."""
    return os.environ.get(POOL_ENV, "1") != "0" and not {"--realtime", "--keys", "--allow-objectives"} & set(command)


def start_crowd(spec: TrialSpec, task: Task, *, realtime: bool) -> CrowdProcess:
    """The trial's crowd process: the idle one of an earlier trial if there is one, else a new one."""
    command = crowd_command(spec, task, realtime=realtime)
    crowd = None
    try:
        if _poolable(command):
            with _IDLE_LOCK:
                crowd = _IDLE.pop() if _IDLE else None
            if crowd is not None and crowd.again(command):
                return crowd
        crowd = None
        return CrowdProcess(command=command)
    except TrialError as exc:  # the options were refused: a child that waits for the next is kept for it
        refused = crowd or getattr(exc, "crowd", None)
        if refused is not None and refused.waiting:
            _keep_idle(refused)
        raise


def release(crowd: CrowdProcess, *, ended_well: bool) -> None:
    """After the trial (the world has said bye): keep the process for the next trial if it is idle, else stop it."""
    if ended_well and crowd.idle():
        _keep_idle(crowd)
    else:
        crowd.stop()


def _keep_idle(crowd: CrowdProcess) -> None:
    """An idle crowd process kept for the next trial (at most one per process: another is stopped)."""
    with _IDLE_LOCK:
        if crowd in _IDLE:
            return
        if not _IDLE:
            _IDLE.append(crowd)
            return
    crowd.stop()


@atexit.register
def _stop_idle() -> None:
    with _IDLE_LOCK:
        idle, _IDLE[:] = list(_IDLE), []
    for crowd in idle:
        crowd.stop()


def _lines_of(stream, out: queue.Queue) -> None:
    """The child's stdout lines into ``out`` (None at its end): waits with a bound, and nothing else reads it."""
    try:
        for line in stream:
            out.put(line.rstrip("\n"))
    except (OSError, ValueError):
        pass
    finally:
        out.put(None)


def crowd_command(spec: TrialSpec, task: Task, *, realtime: bool) -> list[str]:
    command = [sys.executable, "-m", "hil", "crowd", "--map", str(task.map_path), "--serve", "tcp://127.0.0.1:*",
               "--seed", str(spec.seed)]
    if task.rates:
        command += ["--rates", ",".join(str(p) for p in task.rates)]
    if spec.crowd_scale != 1.0:
        command += ["--rate-scale", f"{spec.crowd_scale!r}"]
    if spec.crowd_start:
        command += ["--start", spec.crowd_start]
    if task.scenario is not None:
        command += ["--script", str(task.scenario)]
        if task.background:
            command.append("--generate")  # the staged scene plays over the background crowd
    if spec.allow_objectives:
        command += ["--allow-objectives", ",".join(spec.allow_objectives)]
    if realtime:
        command.append("--realtime")
    return command


STDERR_KEPT = 5  # the crowd's last stderr lines kept for the message when it dies
STDERR_DRAIN_S = 0.5  # how long a death report waits for the rest of its stderr


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _relay(stream, last_lines: collections.deque | None = None, done: threading.Event | None = None) -> None:
    """The crowd's stderr into ours (its log reaches the user), the last lines kept for :meth:`CrowdProcess.death`."""
    try:
        for line in stream:
            sys.stderr.write(line)
            if last_lines is not None:
                last_lines.append(line)
    finally:
        if done is not None:
            done.set()
