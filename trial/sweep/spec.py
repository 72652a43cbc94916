"""What a sweep is: one trial (the keys of trial/spec.py) and the axes to vary, expanded into checked trials.

A sweep file is a trial file with a few more keys, so any trial file is a sweep of one trial:

    controller: ../../examples/guide_robot.py     # paths relative to this file, as in a trial file
    map: arcade
    crowd: weekday
    start: [-18, 0, 0]
    goal: [18, 0]
    duration: 240
    grid:                                         # every combination of these values
      scenario: [none, child_interacts, guide_meets_child]
      crowd_scale: [1, 3]
      params: {cruise_m_s: [0.3, 0.45]}           # controller parameters, each its own axis (robot.params)
    cases:                                        # a list of variations, combined with the grid
      - {crowd_start: "tue 10:00"}
      - {crowd_start: "sat 15:00", crowd: weekend}
    seeds: 10                                     # seeds 0..9 (or a list: [3, 7, 11])
    timeout_s: 900                                # wall seconds one trial may take
    success: [goal.reached, collisions.robot_initiated == 0]

The conditions are cases x grid, in the order the file gives them; every condition runs with every seed. Seeds
come from the file, never from the order trials happen to run in, and are the same for every condition (common
random numbers: two controller parameters meet the same crowds, so their difference is the parameters', not
luck's). Nothing is started while a sweep is checked: every trial is made with ``make_spec`` (an axis value's
error names the line of that value), and its task is resolved (maps, rates, scenario lines, places) and its
controller found, so a bad sweep is refused at file:line before anything runs.
"""
from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.devices.yaml_source import ConfigError, SourceDict, SourceList, load_yaml_file, plain

from ..spec import KEYS as TRIAL_KEYS
from ..spec import TrialSpec, checked_params, make_spec, trial_kwargs

FORMAT = 1  # of the done markers and the trial hash: a change here reruns every trial
SWEEP_KEYS = {
    "grid": "a mapping of axis -> list of values: every combination runs (params: {name: [values]})",
    "cases": "a list of mappings of trial keys: each is one variation, combined with the grid",
    "seeds": "a number N (seeds 0..N-1) or a list of seeds, the same for every condition",
    "timeout_s": "wall seconds one trial may take (> 0) before it is stopped and recorded as timed out",
    "success": "a list of conditions on a row's metrics, e.g. [goal.reached, collisions.robot_initiated == 0] (the "
               "trial key: each trial's verdict and the table's success judge by the same criteria)",
    "worst": "how many of the worst trials the report lists (default 10)",
}
# trial keys a sweep cannot set, and why; NOT_AXES: keys that cannot vary either
NOT_IN_SWEEP = {"gui": "a sweep runs without a viewer",
                "crowd_endpoint": "trials running side by side cannot share one served crowd"}
NOT_AXES = {**NOT_IN_SWEEP, "seed": "vary seeds with seeds:", "name": "name: labels the whole sweep",
            "success": "success: judges every trial of the sweep alike"}
MAX_SEEDS = 100_000
DEFAULT_WORST = 10
PARAMS = "params"


@dataclass(frozen=True)
class Job:
    """One trial of a sweep: its condition (axis -> value), its seed, its checked spec and where it goes."""

    index: int
    condition: tuple[tuple[str, Any], ...]  # (axis, value) in axis order; params axes as "params.NAME"
    condition_index: int
    seed: int
    spec: TrialSpec
    folder: str  # relative to the sweep's output folder
    hash: str  # of everything that makes the trial's result: same hash, same result (done markers)

    @property
    def condition_label(self) -> str:
        return condition_label(self.condition)

    @property
    def id(self) -> str:
        return self.folder.removeprefix("trials/")

    def payload(self, out: Path, timeout_s: float) -> dict[str, Any]:
        """What a worker gets: plain data (no code, no objects), enough to rebuild the same spec."""
        return {"id": self.id, "hash": self.hash, "folder": str((out / self.folder).resolve()),
                "source": self.spec.source, "trial": trial_kwargs(self.spec), "timeout_s": timeout_s}


@dataclass(frozen=True)
class Sweep:
    """A checked sweep: its jobs in table order and its settings."""

    source: str
    name: str
    axes: tuple[str, ...]
    jobs: tuple[Job, ...]
    seeds: tuple[int, ...]
    timeout_s: float
    success: tuple[str, ...]  # raw criteria; trial/sweep/table.py parses them
    worst: int
    success_line: int | None = None

    @property
    def conditions(self) -> list[str]:
        """The conditions' labels, in order."""
        return list(dict.fromkeys(job.condition_label for job in self.jobs))


def condition_label(condition: tuple[tuple[str, Any], ...]) -> str:
    return " ".join(f"{axis}={format_value(value)}" for axis, value in condition) or "all"


def format_value(value: Any) -> str:
    """An axis value as people write it: none, 0.5, -18,0,0, weekday+weekend."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return ",".join(format_value(float(v)) for v in value)
        return "+".join(format_value(v) for v in value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{format_value(v)}" for k, v in value.items())
    return str(value)


# --- loading ------------------------------------------------------------------------------------------------
def load_sweep(path: str | Path, *, timeout_s: float | None = None) -> Sweep:
    """A sweep file, checked and expanded (ConfigError with file:line for anything wrong; nothing is started)."""
    path = Path(path)
    doc = load_yaml_file(path, "sweep")
    if not isinstance(doc, SourceDict):
        raise ConfigError(str(path), getattr(doc, "line", 1) if doc is not None else 1,
                          "a sweep file is a mapping of trial keys (controller:, map:, ...) and axes (grid:, "
                          "cases:, seeds:)" + (", and this one is empty" if doc is None else ""))
    return _Expander(doc, path).sweep(timeout_s)


class _Expander:
    def __init__(self, doc: SourceDict, path: Path):
        self.doc, self.path, self.source = doc, path, str(path)

    def error(self, line: int | None, message: str) -> ConfigError:
        return ConfigError(self.source, line, message)

    def sweep(self, timeout_override: float | None) -> Sweep:
        doc = self.doc
        for key in doc:
            if key not in TRIAL_KEYS and key not in SWEEP_KEYS:
                close = difflib.get_close_matches(str(key), [*TRIAL_KEYS, *SWEEP_KEYS], n=1)
                hint = f"did you mean {close[0]!r}?" if close else \
                    f"sweep keys: {', '.join(SWEEP_KEYS)}; trial keys: {', '.join(TRIAL_KEYS)}"
                raise doc.error(key, f"unknown key {key!r}; {hint}")
        for key, why in NOT_IN_SWEEP.items():
            if key in doc and not (key == "gui" and doc[key] is False):
                raise doc.error(key, f"{key}: not in a sweep ({why})")
        base = {k: v for k, v in doc.items() if k in TRIAL_KEYS and k not in ("seed", "name")}
        if "controller" not in base:
            raise doc.error(None, f"a sweep needs a controller: {TRIAL_KEYS['controller']}")
        variations = self._variations()
        seeds = self._seeds()
        timeout_s = timeout_override if timeout_override is not None else self._timeout(base)
        jobs = self._jobs(base, variations, seeds)
        axes = tuple(dict.fromkeys(axis for _, condition, _ in variations for axis, _ in condition))
        worst = doc.get("worst", DEFAULT_WORST)
        if isinstance(worst, bool) or not isinstance(worst, int) or worst < 0:
            raise doc.error("worst", f"worst must be {SWEEP_KEYS['worst']}: a number >= 0, not {worst!r}")
        success = doc.get("success")
        if success is not None and (not isinstance(success, list) or not all(isinstance(s, str) for s in success)):
            raise doc.error("success", f"success must be {SWEEP_KEYS['success']}, not {success!r}")
        name = doc.get("name") or self.path.stem
        return Sweep(self.source, str(name), axes, tuple(jobs), seeds, timeout_s,
                     tuple(success) if success is not None else (), worst,
                     doc.line_of("success") if success is not None else None)

    # --- the axes --------------------------------------------------------------------------------------------
    def _variations(self) -> list[tuple[dict[str, Any], tuple[tuple[str, Any], ...], dict[str, int]]]:
        """Every condition as (trial key overrides, (axis, value)..., key -> line of the value)."""
        cases = self._cases()
        grid = self._grid()
        out = []
        for case, combo in itertools.product(cases, itertools.product(*[values for _, values in grid])):
            overrides, condition, lines = dict(case[0]), list(case[1]), dict(case[2])
            for (axis, _), (value, line) in zip(grid, combo):
                _set(overrides, axis, value)
                condition.append((axis, plain(value)))
                lines[axis.split(".")[0]] = line
            out.append((overrides, tuple(condition), lines))
        labels: dict[str, int] = {}
        for _, condition, lines in out:
            label = condition_label(condition)
            if label in labels:
                raise self.error(min(lines.values(), default=None),
                                 f"the condition {label} appears twice (cases and grid give the same trial)")
            labels[label] = 1
        return out

    def _grid(self) -> list[tuple[str, list[tuple[Any, int]]]]:
        grid = self.doc.get("grid")
        if grid is None:
            return []
        if not isinstance(grid, SourceDict) or not grid:
            raise self.doc.error("grid", f"grid must be {SWEEP_KEYS['grid']}, not {grid!r}")
        axes = []
        for key, values in grid.items():
            self._check_axis(grid, key)
            if key == PARAMS:
                if not isinstance(values, SourceDict) or not values:
                    raise grid.error(key, "grid: params must be a mapping of parameter -> list of values "
                                          "(params: {cruise_m_s: [0.3, 0.45]})")
                for name, items in values.items():
                    axes.append((f"{PARAMS}.{name}", self._values(values, name, items, f"params.{name}")))
            else:
                axes.append((key, self._values(grid, key, values, key)))
        return axes

    def _values(self, parent: SourceDict, key: str, values: Any, axis: str) -> list[tuple[Any, int]]:
        if not isinstance(values, SourceList) or not values:
            raise parent.error(key, f"grid: {axis} must be a non-empty list of values, not {values!r}")
        seen = []
        for i, value in enumerate(values):
            if plain(value) in seen:
                raise ConfigError(self.source, values.line_of(i), f"grid: {axis} lists {value!r} twice")
            seen.append(plain(value))
        # faults keep their entries' lines (each entry is checked at its own line, in every condition)
        return [(v if key == "faults" else plain(v), values.line_of(i)) for i, v in enumerate(values)]

    def _cases(self) -> list[tuple[dict[str, Any], list[tuple[str, Any]], dict[str, int]]]:
        cases = self.doc.get("cases")
        if cases is None:
            return [({}, [], {})]
        if not isinstance(cases, SourceList) or not cases:
            raise self.doc.error("cases", f"cases must be {SWEEP_KEYS['cases']}, not {cases!r}")
        out = []
        for i, case in enumerate(cases):
            if not isinstance(case, SourceDict) or not case:
                raise ConfigError(self.source, cases.line_of(i), f"cases: item {i + 1} must be a mapping of trial "
                                                                 f"keys ({{scenario: none, crowd_scale: 2}})")
            overrides, condition, lines = {}, [], {}
            for key, value in case.items():
                self._check_axis(case, key)
                if key == PARAMS:
                    if not isinstance(value, SourceDict):
                        raise case.error(key, "cases: params must be a mapping of parameter -> value")
                    for name, v in value.items():
                        _set(overrides, f"{PARAMS}.{name}", plain(v))
                        condition.append((f"{PARAMS}.{name}", plain(v)))
                else:
                    overrides[key] = value if key == "faults" else plain(value)  # faults: each entry's own line
                    condition.append((key, plain(value)))
                lines[key] = case.line_of(key)
            out.append((overrides, condition, lines))
        return out

    def _check_axis(self, parent: SourceDict, key: Any) -> None:
        if key in NOT_AXES:
            raise parent.error(key, f"{key}: cannot vary in a sweep ({NOT_AXES[key]})")
        if key not in TRIAL_KEYS:
            close = difflib.get_close_matches(str(key), list(TRIAL_KEYS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"axes are trial keys: {', '.join(TRIAL_KEYS)}"
            raise parent.error(key, f"unknown axis {key!r}; {hint}")

    def _seeds(self) -> tuple[int, ...]:
        doc = self.doc
        seeds = doc.get("seeds")
        if seeds is not None and "seed" in doc:
            raise doc.error("seed", f"give seeds: (line {doc.line_of('seeds')}) or seed:, not both")
        if seeds is None:  # a trial file as a sweep of one trial
            seed = doc.get("seed", 0)
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 32:
                raise doc.error("seed", f"seed must be {TRIAL_KEYS['seed']}, not {seed!r}")
            return (seed,)
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            if not 1 <= seeds <= MAX_SEEDS:
                raise doc.error("seeds", f"seeds: {seeds} is not a count of seeds from 1 to {MAX_SEEDS}")
            return tuple(range(seeds))
        if isinstance(seeds, SourceList) and seeds:
            for i, s in enumerate(seeds):
                if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2 ** 32:
                    raise ConfigError(self.source, seeds.line_of(i), f"seeds: {s!r} is not a seed (an integer "
                                                                     f"from 0 to 2**32 - 1)")
            if len(set(seeds)) != len(seeds):
                raise doc.error("seeds", "seeds: a seed is listed twice")
            return tuple(seeds)
        raise doc.error("seeds", f"seeds must be {SWEEP_KEYS['seeds']}, not {seeds!r}")

    def _timeout(self, base: Mapping[str, Any]) -> float:
        value = self.doc.get("timeout_s")
        if value is None:
            duration = base.get("duration", 120.0)
            return default_timeout_s(duration if isinstance(duration, (int, float)) else None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 7 * 24 * 3600:
            raise self.doc.error("timeout_s", f"timeout_s must be {SWEEP_KEYS['timeout_s']}, not {value!r}")
        return float(value)

    # --- the trials ------------------------------------------------------------------------------------------
    def _jobs(self, base: dict[str, Any], variations, seeds: tuple[int, ...]) -> list[Job]:
        doc = self.doc
        base_lines = {k: doc.line_of(k) for k in base}
        base_lines[""] = doc.line
        folders = _folders([condition for _, condition, _ in variations])
        jobs: list[Job] = []
        checked: dict[str, None] = {}
        for c, (overrides, condition, lines) in enumerate(variations):
            values = {**base, **{k: v for k, v in overrides.items() if k != PARAMS}}
            if PARAMS in overrides:
                params = base.get(PARAMS)
                if params is not None and not isinstance(params, Mapping):
                    raise doc.error(PARAMS, f"params must be {TRIAL_KEYS['params']}, not {params!r}")
                values[PARAMS] = {**(params or {}), **overrides[PARAMS]}
            controller = values.pop("controller")
            where = {**base_lines, **lines}
            label = str(doc.get("name") or _label(controller))
            try:
                spec = make_spec(controller, source=self.source, lines=where, base=self.path.parent,
                                 name=f"{label} {condition_label(condition)}" if condition else label, **values)
            except ConfigError as exc:
                raise _in_condition(exc, condition) from None
            self._check_task(spec, where, condition, checked)
            self._check_faults(spec, condition, checked)
            for seed in seeds:
                trial = spec.but(seed=seed)
                jobs.append(Job(len(jobs), condition, c, seed, trial, f"trials/{folders[c]}/seed={seed}",
                                trial_hash(trial)))
        return jobs

    def _check_task(self, spec: TrialSpec, lines: dict[str, int], condition, checked: dict[str, None]) -> None:
        """The controller found and the task resolved now (map, rates, scenario lines, places), with the line of
        the value that brought it in."""
        from hil.runtime.robot.runner import ControllerError, load_controller

        from ..task import make_task

        try:
            key = json.dumps(trial_kwargs(spec), sort_keys=True)
        except (TypeError, ValueError) as exc:  # a YAML date or the like in params: workers get plain data
            raise self.error(lines.get(PARAMS), f"params: every value must be plain data (numbers, text, lists, "
                                                f"mappings): {exc}") from None
        if key in checked:
            return
        checked[key] = None
        varied = [axis.split(".")[0] for axis, _ in condition]
        try:
            controller = load_controller(spec.controller)
        except ControllerError as exc:
            raise self.error(lines.get("controller"), f"controller: {exc}") from None
        try:
            checked_params(spec, controller)  # a name the controller does not declare (PARAMS)
        except ConfigError as exc:
            raise _in_condition(exc, condition) from None
        if callable(spec.controller) and not isinstance(spec.controller, (str, Path)):
            raise self.error(lines.get("controller"), "a sweep's controller is a file or a module (workers import "
                                                      "it), not a Python callable")
        try:
            make_task(spec)
        except ConfigError as exc:
            suspects = [k for k in TASK_KEYS if _mentions(exc, spec, k)]
            blame = next((k for k in suspects if k in varied), suspects[0] if suspects else None)
            label = condition_label(condition)
            raise self.error(lines.get(blame) if blame else lines.get(""),
                             f"{blame + ': ' if blame else ''}{exc}" + (f" (in condition {label})"
                                                                       if condition else "")) from None


    def _check_faults(self, spec: TrialSpec, condition, checked: dict[str, None]) -> None:
        """Each condition's ``faults:`` bound to the parts of the robot it runs (firmware_sim.fault_plan, as the
        trial binds them when it starts): a part that robot lacks, a plug at an ID taken, is refused now at the
        entry's line, naming the condition, not in every one of its trials after the sweep started."""
        if not spec.faults:
            return
        from hil.firmware_sim.fault_plan import FaultPlan, parse_faults

        from ..world import fault_resolver

        key = "faults " + json.dumps([spec.robot, str(spec.profile), spec.bus, spec.faults], sort_keys=True,
                                     default=str)
        if key in checked:
            return
        checked[key] = None
        try:
            resolve = fault_resolver(spec)
            if resolve is not None:
                FaultPlan(parse_faults(spec.faults, spec.source, None, spec.duration)).bind(resolve)
        except ConfigError as exc:
            raise _in_condition(exc, condition) from None


def _in_condition(exc: ConfigError, condition) -> ConfigError:
    """``exc`` saying which condition it is about (the same file:line can be wrong in one condition only: a fault
    past one of the durations the grid varies)."""
    if not condition:
        return exc
    return ConfigError(exc.source, exc.line, f"{exc.message} (in condition {condition_label(condition)})")


TASK_KEYS = ("scenario", "map", "crowd", "start", "goal")


def _mentions(exc: ConfigError, spec: TrialSpec, key: str) -> bool:
    """Whether the task's error is about ``key``'s value: its file (a name that does not resolve, a bad line in
    it) or its own message (a place the map lacks)."""
    value = getattr(spec, key)
    if value is None or value == ():
        return False
    if exc.message.startswith(f"{key}:"):
        return True
    names = value if key == "crowd" else (value,)
    source = Path(str(exc.source))
    return any(isinstance(n, (str, Path)) and (str(n) == str(exc.source) or Path(str(n)).stem == source.stem)
               for n in names)


def _label(controller: Any) -> str:
    return Path(str(controller)).stem if isinstance(controller, (str, Path)) and \
        (str(controller).endswith(".py") or "/" in str(controller)) else str(controller).rpartition(".")[2]


def _set(overrides: dict[str, Any], axis: str, value: Any) -> None:
    if axis.startswith(f"{PARAMS}."):
        overrides.setdefault(PARAMS, {})[axis[len(PARAMS) + 1:]] = value
    else:
        overrides[axis] = value


def default_timeout_s(duration: float | None) -> float:
    """A trial stuck this long is stuck: a minute to start, plus ten wall seconds per simulated second (the sim
    clock runs near real time on a loaded 2-core machine), at least 10 minutes without a duration."""
    return 600.0 if duration is None else 60.0 + 10.0 * float(duration)


# --- folders and hashes -------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._,=+-]+")
MAX_FOLDER = 96


def _folders(conditions: list[tuple[tuple[str, Any], ...]]) -> list[str]:
    """A readable folder name per condition (``scenario=none,crowd_scale=2``), unique, short enough."""
    names = []
    for condition in conditions:
        parts = []
        for axis, value in condition:
            text = format_value(value)
            if isinstance(value, str) and ("/" in value or value.endswith((".yaml", ".yml", ".scn"))):
                text = Path(value).stem
            parts.append(f"{axis.removeprefix(PARAMS + '.')}={text}")
        name = _UNSAFE.sub("-", ",".join(parts)).strip(".") or "all"
        names.append(name)
    out = []
    for condition, name in zip(conditions, names):
        digest = hashlib.sha256(condition_label(condition).encode()).hexdigest()[:8]
        if names.count(name) > 1 or len(name) > MAX_FOLDER:
            name = f"{name[:MAX_FOLDER - 9]}~{digest}"
        out.append(name)
    return out


def trial_hash(spec: TrialSpec) -> str:
    """SHA-256 of what decides a trial's result: its keys but ``success`` and its controller file's bytes (an
    edited controller reruns its trials; a moved sweep folder or new success criteria do not)."""
    kwargs = trial_kwargs(spec)
    kwargs.pop("success", None)  # judged from the results: changing the criteria reruns nothing
    content = {"format": FORMAT, "trial": kwargs}
    controller = spec.controller
    if isinstance(controller, (str, Path)) and Path(str(controller)).is_file():
        content["controller_sha256"] = hashlib.sha256(Path(str(controller)).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
