"""What a trial is: one frozen :class:`TrialSpec`, from Python keywords, a YAML trial file, or the command line.

The three parts of a trial (dm_control's split) are named here and nowhere mixed:

- the **agent**: ``controller`` (a file, ``package.module[:function]``, or a callable) and its ``params``;
- the **world**: ``robot`` (an assembly on the config search path: the virtual robot in this process) or
  ``profile`` (any profile: real, virtual, several buses, mixed) with an optional ``bus`` override, and the
  ``clock`` (``sim``: lockstep, deterministic; ``real``: wall time);
- the **task**: ``map``, ``crowd`` (rates files, or none), ``crowd_scale``, ``crowd_start`` (day and time band),
  ``scenario`` (a staged script over the crowd), ``start`` and ``goal`` (points or the map's place names; left out:
  the map's own ``start:`` and ``goal:``), ``goal_radius``, ``seed``, ``duration``, how the trial ends
  (``end_on_goal``, ``after_goal_s``) and what it must meet to pass (``success``: trial/verdict.py).

A trial file is YAML with the same keys (:data:`KEY_TABLE`, shown by ``hil trial --keys`` and docs/TRIALS.md);
paths in it are relative to the file, and every error names file:line. Nothing is started while a spec is
checked: a bad spec costs nothing.

    # my_trial.yaml
    controller: guide_robot.py
    map: arcade
    crowd: weekday
    scenario: child_interacts
    start: [-18, 0, 0]
    goal: [18, 0]
    seed: 3
    duration: 120
    params: {cruise_m_s: 0.4}
"""
from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hil.devices.yaml_source import ConfigError, SourceDict, load_yaml_file

CLOCKS = ("sim", "real")
NONE_WORDS = ("none", "off", "")
MAX_DURATION_S = 7 * 24 * 3600.0  # a week of simulated time: beyond it a trial is a mistake, not an experiment
DEFAULT_DURATION_S = 120.0
DEFAULT_ROBOT = "commbot"
DEFAULT_RATES = ("weekday", "weekend")


@dataclass(frozen=True)
class TrialSpec:
    """A validated trial. Build it with :func:`make_spec` (keywords) or :func:`load_trial_file` (YAML)."""

    controller: Any  # str | Path | Callable[[Robot], Any]
    robot: str = DEFAULT_ROBOT
    profile: Any = None  # str | Path | Mapping | Profile | None
    bus: str | None = None
    clock: str | None = None  # None: sim for a robot; the profile's own for a profile
    map: str | None = None
    crowd: tuple[str, ...] = ()  # rates files; () = no background crowd
    crowd_scale: float = 1.0
    crowd_start: str | None = None  # "sat 14:00": the day and time at trial time 0
    crowd_endpoint: str | None = None  # a crowd already served (hil crowd --serve): none is started
    crowd_timeout_s: float = 10.0
    stall_s: float | None = 30.0  # wall seconds the simulator's time may stand still (runtime/clock/stall.py)
    crowd_pipeline: bool = False  # true: the crowd computes tick N+1 while the world steps N (one-tick lag)
    scenario: str | None = None
    start: Any = None  # (x, y, yaw) | place name | None (the profile's start_pose, the map's start, the origin)
    goal: Any = None  # (x, y) | place name | None (the map's goal, if it has one) | NO_GOAL
    goal_radius: float = 0.5
    end_on_goal: bool = True
    after_goal_s: float = 3.0
    seed: int = 0
    duration: float | None = DEFAULT_DURATION_S  # simulated (or wall, on the real clock) seconds; None: no limit
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    gui: bool = False
    camera_rate: float = 2.0  # Hz at which the log records each camera (trial/record/camera_log.py); 0: none
    camera_depth: bool = False  # also record each camera's depth image (foxglove.RawImage)
    name: str = ""  # a label for summaries and sweeps; default: the controller's name
    faults: tuple = ()  # what happens to the virtual robot's parts, and when (firmware_sim/fault_plan.py)
    resume_from: str | None = None  # "DIR@SECONDS": start from a saved state of that trial (key ``from``)
    state_every: float | None = 5.0  # seconds of trial time between saved states (None or 0: none saved)
    success: tuple[str, ...] = ()  # criteria the trial must meet to pass (trial/verdict.py); (): the default
    ros: Mapping[str, Any] | None = None  # the ROS 2 bridge's settings (key ``ros``: rtf, hz, watchdog_s, ...)
    allow_objectives: tuple[str, ...] = ()  # modules a rates file's objectives.user may come from (the crowd's
    # --allow-objectives: importing runs their code, so none unless the trial says so)
    source: str = "<python>"  # where the spec came from (a trial file's path), for messages
    # (key, line) of each key read from the trial file, so checks made later (a goal that is no place of the map)
    # still name file:line; not part of what the trial is
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def has_people(self) -> bool:
        return bool(self.crowd) or self.scenario is not None or self.crowd_endpoint is not None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        c = self.controller
        return Path(str(c)).stem if isinstance(c, (str, Path)) else getattr(c, "__name__", type(c).__name__)

    def but(self, **changes: Any) -> TrialSpec:
        """A copy with some keys changed, checked again (a sweep's or a test's variation of one trial)."""
        lines = {k: v for k, v in self.lines if k not in changes}
        return make_spec(**{**self.as_kwargs(), **changes}, lines=lines)

    def as_kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "lines"}

    def line_of(self, key: str) -> int | None:
        """The trial file's line of ``key`` (None: not from a file, or overridden)."""
        return dict(self.lines).get(key)

    def describe(self) -> dict[str, Any]:
        """A JSON-safe summary of the spec, for the trial log's /trial/meta."""
        def plain(value: Any) -> Any:
            if value is None or isinstance(value, (bool, int, float, str)):
                return value
            if isinstance(value, Mapping):
                return {str(k): plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, Path):
                return str(value)
            return getattr(value, "__qualname__", None) or getattr(value, "source", None) or type(value).__name__

        out = {f.name: plain(getattr(self, f.name)) for f in fields(self) if f.name not in ("gui", "source", "lines", "stall_s")
               and not (f.name == "success" and not self.success)  # the default criteria: as logs always had it
               and not (f.name == "ros" and self.ros is None)}  # no bridge settings: as logs always had it
        out["controller"] = plain(self.controller) if not callable(self.controller) or \
            isinstance(self.controller, (str, Path)) else self.label
        return out


ROS_CONTROLLER = "ros"  # ``controller: ros``: no Python controller, ROS 2 nodes drive (trial/ros_link)
NO_GOAL = "none"  # ``goal: none``: no goal, not even the map's default (a spec's goal None means the map's)


@dataclass(frozen=True)
class Key:
    """One key of a trial file: what it takes, what it is when left out, what it means, a value it accepts (the
    docs show it; a test loads a file with it), and the check the loader runs on it."""

    type: str
    default: str
    meaning: str
    example: Any
    check: Callable | None = None  # (value, key, error, base) -> the value to keep; None: the controller


# KEY_TABLE (below the checks) is the one list of a trial file's keys: the loader accepts these and no other,
# ``hil trial --keys`` prints it and docs/TRIALS.md shows it (trial/spec_doc.py; a test keeps the page true).
FIELD_OF_KEY = {"from": "resume_from"}  # a trial file's key -> the spec's field (``from`` is a Python keyword)


def make_spec(controller: Any = None, *, source: str = "<python>", lines: Mapping[str, int] | None = None,
              base: Path | None = None, **values: Any) -> TrialSpec:
    """A checked TrialSpec from keywords. ``lines`` (key -> line) and ``source`` make errors read file:line;
    ``base`` is the folder relative paths are taken from (a trial file's), None: as given."""
    lines = lines or {}
    if "resume_from" in values:  # the field's own name (spec.but, trial_kwargs) means the key ``from``
        field_value = values.pop("resume_from")
        values.setdefault("from", field_value)

    def error(key: str | None, message: str) -> ConfigError:
        return ConfigError(source, lines.get(key) if key else lines.get(""), message)

    if "camera_rate" not in values and os.environ.get(CAMERA_RATE_ENV, "").strip():
        values["camera_rate"] = _camera_rate_from_env()
    for key in values:
        if key not in KEYS or key == "controller":
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(KEYS)}"
            raise error(key, f"unknown trial key {key!r}{hint}")
    if controller is None:
        raise error(None, f"a trial needs a controller: {KEYS['controller']}")
    spec = TrialSpec(controller=_controller(controller, base, error), source=source,
                     lines=tuple((k, v) for k, v in lines.items() if k and isinstance(v, int)))
    checked: dict[str, Any] = {}
    for key, value in values.items():
        checked[FIELD_OF_KEY.get(key, key)] = _CHECKS[key](value, key, error, base)
    spec = replace(spec, **checked)
    spec = _checked_faults(spec, lines)
    if spec.profile is not None and "robot" in values:
        raise error("robot", "give robot: (the virtual robot of an assembly) or profile:, not both")
    if spec.bus is not None and spec.profile is None:
        raise error("bus", "bus: replaces a profile's bus; with robot: the bus is the virtual robot in this process")
    return spec


CAMERA_RATE_ENV = "HIL_CAMERA_RATE"  # Hz: the camera recording rate of trials that do not set camera_rate


def _camera_rate_from_env() -> float:
    """``$HIL_CAMERA_RATE`` (e.g. 0 on a machine without a GPU, where rendering takes a core: a CI, a sweep)."""
    text = os.environ[CAMERA_RATE_ENV].strip()
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not 0.0 <= rate <= 100.0:
        raise ValueError(f"${CAMERA_RATE_ENV}={text!r}: a camera recording rate is 0..100 Hz (0: none)")
    return rate


def _checked_faults(spec: TrialSpec, lines: Mapping[str, int]) -> TrialSpec:
    """``faults:`` checked as a whole against the duration (file:line), kept as plain entries with their lines."""
    if not spec.faults:
        return spec
    from hil.firmware_sim.fault_plan import parse_faults, stored_faults

    parse_faults(spec.faults, spec.source, lines.get("faults"), spec.duration)
    return replace(spec, faults=stored_faults(spec.faults))


def load_trial_file(path: str | Path, **overrides: Any) -> TrialSpec:
    """A trial file (YAML, the keys of :data:`KEYS`), with ``overrides`` (e.g. from the command line) on top."""
    path = Path(path)
    doc = load_yaml_file(path, "trial")
    if not isinstance(doc, SourceDict):
        raise ConfigError(str(path), getattr(doc, "line", 1) if doc is not None else 1,
                          "a trial file is a mapping of keys (controller:, map:, crowd:, ...)" +
                          (", and this one is empty" if doc is None else f", not a {type(doc).__name__}"))
    for key in doc:
        if not isinstance(key, str):
            raise doc.error(key, f"a trial key is a name (controller:, map:, ...), not {type(key).__name__} {key!r}")
    values = dict(doc)
    values.update({k: v for k, v in overrides.items() if v is not None})
    lines = {k: doc.line_of(k) for k in doc if k not in overrides or overrides[k] is None}
    lines[""] = doc.line
    controller = values.pop("controller", None)
    return make_spec(controller, source=str(path), lines=lines, base=path.parent, **values)


# --- the checks, one per key: (value, key, error, base) -> the value to keep ---------------------------------
def _controller(value: Any, base: Path | None, error) -> Any:
    if callable(value) and not isinstance(value, (str, Path)):
        return value
    if isinstance(value, Path) or (isinstance(value, str) and value.strip()):
        text = str(value)
        from hil.runtime.robot.runner import is_file_target

        if is_file_target(text):
            return _relative(Path(text), base)
        return text
    raise error("controller", f"controller must be {KEYS['controller']}, not {value!r}")


def _relative(path: Path, base: Path | None) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() or base is None else base / path


def _name_or_path(value: Any, key: str, error, base: Path | None) -> str:
    if isinstance(value, Path):
        return str(_relative(value, base))
    if not isinstance(value, str) or not value.strip():
        raise error(key, f"{key} must be {KEYS[key]}, not {value!r}")
    if value.endswith((".yaml", ".yml", ".scn")) or "/" in value:
        return str(_relative(Path(value), base))
    return value


def _optional_name(value: Any, key: str, error, base: Path | None) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS):
        return None
    return _name_or_path(value, key, error, base)


def _profile(value: Any, key: str, error, base: Path | None) -> Any:
    if value is None:
        return None
    if isinstance(value, (str, Path)):
        return _name_or_path(value, key, error, base)
    return value  # a mapping or a Profile, checked when it is loaded (runtime.robot.profile)


def _crowd(value: Any, key: str, error, base: Path | None) -> tuple[str, ...]:
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in NONE_WORDS) or \
            (isinstance(value, (list, tuple)) and not value):  # () is a spec's own "no crowd" (spec.but(...))
        return ()
    if value is True:
        return DEFAULT_RATES
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise error(key, f"crowd must be {KEYS['crowd']}, not {value!r}")
    return tuple(_name_or_path(str(v).strip() if isinstance(v, str) else v, key, error, base) for v in items)


def _clock(value: Any, key: str, error, base: Path | None) -> str | None:
    if value is None:
        return None
    if value not in CLOCKS:
        raise error(key, f"clock must be one of {', '.join(CLOCKS)}, not {value!r}")
    return value


def _number(low: float, high: float, *, low_open: bool = False, allow_none: bool = False) -> Callable:
    def check(value: Any, key: str, error, base: Path | None) -> float | None:
        if value is None and allow_none:
            return None
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            (value > low if low_open else value >= low) and value <= high
        if not ok:
            raise error(key, f"{key} must be {KEYS[key]}, not {value!r}")
        return float(value)

    return check


def _seed(value: Any, key: str, error, base: Path | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 32:
        raise error(key, f"seed must be {KEYS['seed']} (below 2**32), not {value!r}")
    return value


def _flag(value: Any, key: str, error, base: Path | None) -> bool:
    if not isinstance(value, bool):
        raise error(key, f"{key} must be true or false, not {value!r}")
    return value


def _point(size: tuple[int, ...]) -> Callable:
    def check(value: Any, key: str, error, base: Path | None) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS):
            return NO_GOAL if key == "goal" and value is not None else None  # goal: none overrides the map's
        if isinstance(value, str):
            parts = value.split(",")
            try:
                return _point_values([float(v) for v in parts], size, key, error)
            except ValueError:
                if len(parts) == 1 and value.strip().isidentifier():
                    return value.strip()  # a place of the map, checked against the map when the trial starts
                raise error(key, f"{key} must be {KEYS[key]}, not {value!r}") from None
        if isinstance(value, (list, tuple)):
            return _point_values(value, size, key, error)
        raise error(key, f"{key} must be {KEYS[key]}, not {value!r}")

    return check


def _point_values(values: Any, size: tuple[int, ...], key: str, error) -> tuple[float, ...]:
    if len(values) not in size or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                      or not math.isfinite(v) or abs(v) > 1e6 for v in values):
        raise error(key, f"{key} must be {KEYS[key]}, not {list(values)!r}")
    return tuple(float(v) for v in values)


def _params(value: Any, key: str, error, base: Path | None) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise error(key, f"params must be {KEYS['params']}, not {value!r}")
    return MappingProxyType(dict(value))


def _text(value: Any, key: str, error, base: Path | None) -> str:
    if not isinstance(value, str):
        raise error(key, f"{key} must be text, not {value!r}")
    return value


def _crowd_start(value: Any, key: str, error, base: Path | None) -> str | None:
    if value is None:
        return None
    from hil.crowd.population import parse_start

    try:
        parse_start(_text(value, key, error, base))
    except ValueError as exc:
        raise error(key, f"crowd_start: {exc}") from None
    return value


def _bus(value: Any, key: str, error, base: Path | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise error(key, f"bus must be {KEYS['bus']}, not {value!r}")
    return value


def _endpoint(value: Any, key: str, error, base: Path | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("tcp://", "ipc://")):
        raise error(key, f"crowd_endpoint must be a ZeroMQ endpoint (tcp://host:port or ipc://path), not {value!r}")
    return value


def _from_state(value: Any, key: str, error, base: Path | None) -> str | None:
    """``DIR@SECONDS`` (the folder relative to a trial file's); the folder and the time are checked at start."""
    if value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS):
        return None
    text = str(value)
    folder, at, seconds = text.rpartition("@")
    try:
        t = float(seconds)
    except ValueError:
        t = math.nan
    if not at or not folder or not math.isfinite(t) or t < 0:
        raise error(key, f"from must be {KEYS['from']} (e.g. runs/t1@85), not {value!r}")
    return f"{_relative(Path(folder), base)}@{seconds}"


MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _modules(value: Any, key: str, error, base: Path | None) -> tuple[str, ...]:
    """Dotted module names, from a list or a comma-separated string."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise error(key, f"allow_objectives must be a list of module names, not {value!r}")
    names = tuple(str(v).strip() for v in items if str(v).strip())
    bad = [n for n in names if not MODULE_NAME.match(n)]
    if bad:
        raise error(key, f"allow_objectives: {bad[0]!r} is not a module name (e.g. mylab.reactions)")
    return names


def _success(value: Any, key: str, error, base: Path | None) -> tuple[str, ...]:
    """Criteria on the metrics (trial/verdict.py), each checked now: a typo is refused before anything runs."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise error(key, f"success must be {KEYS['success']}, not {value!r}")
    from .verdict import parse_criteria

    probe = error(key, "")
    parse_criteria(items, probe.source, probe.line)
    return tuple(items)


ROS_KEYS = {  # ``ros:``'s keys -> (what it takes, the check's bounds); hil trial's --ros-* options, same meaning
    "rtf": "a number > 0 (at most 1000): trial seconds per wall second, with controller: ros",
    "hz": "a number > 0 (at most 1000): bus cycles (and /odom, /scan, /joint_states) per trial second, with "
          "controller: ros",
    "watchdog_s": "seconds > 0 (at most 3600): stop the base after this long without a /cmd_vel",
    "wait_for": "a node name or a list of them: start the trial's clock once they are on the ROS graph",
    "python": "the path of the Python where rclpy imports (relative to the trial file)",
}
_ROS_BOUNDS = {"rtf": 1000.0, "hz": 1000.0, "watchdog_s": 3600.0}


def _ros(value: Any, key: str, error, base: Path | None) -> Mapping[str, Any] | None:
    """``ros:`` {rtf, hz, watchdog_s, wait_for, python}: each checked here, at its own line when the file has it
    (the command line's --ros-* options win over them, trial/cli.py)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise error(key, f"ros must be a mapping of {', '.join(ROS_KEYS)}, not {value!r}")
    where = value.error if isinstance(value, SourceDict) else (lambda _k, message: error(key, message))
    out: dict[str, Any] = {}
    for name, item in value.items():
        if name not in ROS_KEYS:
            close = difflib.get_close_matches(str(name), list(ROS_KEYS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(ROS_KEYS)}"
            raise where(name, f"unknown key ros.{name}{hint}")
        if name in _ROS_BOUNDS:
            ok = isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item) and \
                0 < item <= _ROS_BOUNDS[name]
            if not ok:
                raise where(name, f"ros.{name} must be {ROS_KEYS[name]}, not {item!r}")
            out[name] = float(item)
        elif name == "wait_for":
            names = [item] if isinstance(item, str) else item
            if not isinstance(names, (list, tuple)) or not names or \
                    not all(isinstance(n, str) and NODE_NAME.match(n) for n in names):
                raise where(name, f"ros.wait_for must be {ROS_KEYS[name]} (name or /ns/name), not {item!r}")
            out[name] = list(names)
        else:
            if not isinstance(item, (str, Path)) or not str(item).strip():
                raise where(name, f"ros.python must be {ROS_KEYS[name]}, not {item!r}")
            text = str(item)
            out[name] = str(_relative(Path(text), base)) if "/" in text else text
    return MappingProxyType(out)


NODE_NAME = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)*/?[A-Za-z_][A-Za-z0-9_]*$")  # a ROS node, with its namespace


def _faults(value: Any, key: str, error, base: Path | None) -> tuple:
    return tuple(value or ())  # checked as a whole against the duration (_checked_faults)


KEY_TABLE: dict[str, Key] = {
    "controller": Key("file, module, ros or callable", "required",
                      "a controller file (x.py), a module (package.module[:function]), ros (ROS 2 nodes drive: "
                      "hil trial starts the ROS 2 bridge, as hil trial --ros with no controller) or, from Python, "
                      "a callable", "my_controller.py"),
    "robot": Key("name or file", DEFAULT_ROBOT, "an assembly on the config search path (commbot) or its file: the "
                 "virtual robot in this process", "servo_chain", _name_or_path),
    "profile": Key("name or file", "none", "a profile (virtual, config/profiles/x.yaml): its bus, clock and names; "
                   "instead of robot:", "virtual", _profile),
    "bus": Key("URL", "the profile's", "a bus URL replacing the profile's main bus (sim://..., /dev/ttyUSB0, "
               "socket://...); with profile: only", "sim://commbot", _bus),
    "clock": Key("sim or real", "sim (a profile: its own)", "sim (lockstep: as fast as the CPU allows, "
                 "deterministic) or real (wall time)", "sim", _clock),
    "map": Key("name or file", "none", "a map on the config search path (arcade, lab, station) or its file",
               "arcade", _optional_name),
    "crowd": Key("rates files or none", "none", "rates files (weekday, [weekday, weekend], a path) for the "
                 "background crowd, or none", "weekday", _crowd),
    "crowd_scale": Key("number", "1", "a number in [0, 100] multiplying every appearance rate (crowd density)", 2,
                       _number(0.0, 100.0)),
    "crowd_start": Key("text", "the rates' first band", "day and time at trial time 0, e.g. 'sat 14:00' (picks "
                       "the rates' time band)", "sat 14:00", _crowd_start),
    "crowd_endpoint": Key("ZeroMQ endpoint", "none (the trial starts a crowd)", "a crowd already served there "
                          "(hil crowd --serve EP): none is started", "tcp://127.0.0.1:5600", _endpoint),
    "crowd_timeout_s": Key("seconds", "10", "seconds of wall time the world waits for the crowd before the trial "
                           "fails (> 0)", 30, _number(0.0, 3600.0, low_open=True)),
    "stall_s": Key("seconds or none", "30", "seconds (> 0) of wall time the simulator's time may stand still "
                   "before a trial on the sim clock ends failed, naming where the controller waits; none: never",
                   2, _number(0.0, 3600.0, low_open=True, allow_none=True)),
    "crowd_pipeline": Key("true or false", "false", "true: the crowd computes the next tick while the world steps "
                          "(the intents lag one tick, as deterministic); false: strict lockstep", True, _flag),
    "scenario": Key("name or file", "none", "a staged script on the config search path (child_interacts) or a .scn "
                    "file, or none", "child_interacts", _optional_name),
    "start": Key("[x, y] | [x, y, yaw] | place", "the profile's start_pose, else the map's start:, else [0, 0, 0]",
                 "the robot's start pose (m, m, rad in the map frame) or a place of the map; a start inside an "
                 "obstacle or a wall is refused, naming it and the nearest free pose", [-18, 0, 0], _point((2, 3))),
    "goal": Key("[x, y] | place | none", "the map's goal: (none when it has none)",
                "the goal (m) or a place of the map; none: no goal, not even the map's", [18, 0], _point((2,))),
    "goal_radius": Key("metres", "0.5", "within this (> 0) of the goal counts as there", 0.8,
                       _number(0.0, 100.0, low_open=True)),
    "end_on_goal": Key("true or false", "true", "true: the trial ends after_goal_s after the goal is reached", False,
                       _flag),
    "after_goal_s": Key("seconds", "3", "seconds (>= 0) the trial goes on after the goal is reached", 1,
                        _number(0.0, 3600.0)),
    "seed": Key("integer", "0", "an integer >= 0: seeds the crowd, the sensors and the faults", 3, _seed),
    "duration": Key("seconds or none", f"{DEFAULT_DURATION_S:g}", "seconds (> 0) of the trial's clock, at most "
                    "MAX_DURATION_S=604800 (a week), or none for no limit", 60, _number(0.0, MAX_DURATION_S,
                                                                                   low_open=True, allow_none=True)),
    "params": Key("mapping", "{} (the controller's PARAMS defaults)", "the controller's parameters (robot.params); "
                  "a controller that declares PARAMS = {name: default} refuses any other name", {"cruise_m_s": 0.4},
                  _params),
    "success": Key("list of criteria", "[goal.reached, collisions.robot_initiated == 0] (goal.reached only with a "
                   "goal)", "what the trial must meet to pass (trial/verdict.py): COLUMN or COLUMN OP VALUE on the "
                   "metrics flattened (docs/METRICS.md), status or stopped; 'or none' lets a missing value pass",
                   ["goal.reached", "min_distance_m >= 0.5 or none"], _success),
    "gui": Key("true or false", "false", "true: the pybullet viewer (needs a display)", True, _flag),
    "camera_rate": Key("Hz", "2 (or $HIL_CAMERA_RATE)", "Hz (0..100) at which the log records each camera's "
                       "images; 0: none", 0, _number(0.0, 100.0)),
    "camera_depth": Key("true or false", "false", "true: the log also records each camera's depth image", True,
                        _flag),
    "name": Key("text", "the controller's name", "a label for summaries and sweeps", "first try", _text),
    "faults": Key("list of mappings", "none", "{at: S, unplug|plug|reboot: PART} / {at: S, swap: PART, with: "
                  "CATALOG_PART} / {at: S, noise: {bitflip: P, for_s: S}} acting on the virtual robot (a part by "
                  "name, tree path or ID)", [{"at": 5, "unplug": "ring"}], _faults),
    "from": Key("DIR@SECONDS", "none", "start from the state a recorded trial in DIR saved at or before SECONDS "
                "(trial/state/)", "trials/first@85", _from_state),
    "state_every": Key("seconds or none", "5", "seconds (>= 0) of trial time between saved states in DIR/states/ "
                       "(0 or none: none saved; about 4 MB per 2 minutes at 5)", 0,
                       _number(0.0, MAX_DURATION_S, allow_none=True)),
    "ros": Key("mapping", "none (the --ros-* options' defaults)", "the ROS 2 bridge's settings for a trial with "
               "controller: ros or --ros: rtf (trial seconds per wall second), hz (bus cycles per trial second), "
               "watchdog_s, wait_for (node names), python (where rclpy imports); the command line's --ros-* options "
               "win", {"rtf": 2, "wait_for": ["nav_stack"]}, _ros),
    "allow_objectives": Key("module names", "none", "modules (a list, or comma-separated) the rates files' "
                            "objectives.user may be imported from (the crowd's --allow-objectives; none by "
                            "default: importing runs their code)", ["mylab.reactions"], _modules),
}
KEYS: dict[str, str] = {name: key.meaning for name, key in KEY_TABLE.items()}  # key -> meaning, for messages
_CHECKS: dict[str, Callable] = {name: key.check for name, key in KEY_TABLE.items() if key.check is not None}


def checked_params(spec: TrialSpec, controller: Any) -> tuple[Mapping[str, Any], bool]:
    """``robot.params`` of a run of ``spec`` with the loaded ``controller``: its declared defaults (``PARAMS``,
    runtime/robot/params.py) with the spec's on top, and whether they were checked (False: it declares none).
    A name it does not declare is a ConfigError at the line of ``params:`` naming the ones it does."""
    from hil.runtime.robot.params import ParamError, check_declared, declared_params

    try:
        declared = declared_params(controller)
        return MappingProxyType(check_declared(spec.params, declared, controller.label)), declared is not None
    except ParamError as exc:
        raise ConfigError(spec.source, spec.line_of("params"), f"params: {exc}") from None


def trial_kwargs(spec: TrialSpec) -> dict[str, Any]:
    """The spec as plain keywords for ``make_spec`` (JSON-safe: paths as text, tuples as lists)."""
    def jsonable(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, Mapping):
            return {str(k): jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [jsonable(v) for v in value]
        return value

    default = TrialSpec(controller=None).as_kwargs()
    return {k: jsonable(v) for k, v in spec.as_kwargs().items()
            if k == "controller" or (k != "source" and jsonable(v) != jsonable(default[k]))}
