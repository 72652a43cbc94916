"""What an environment is: a trial's task and world (:class:`hil.trial.TrialSpec`) plus what the learner sees,
does and is paid (:class:`EnvSpec`), from Python keywords or a YAML file checked with file:line.

The trial keys are the trial's own (``robot``, ``map``, ``crowd``, ``scenario``, ``start``, ``goal``,
``goal_radius``, ``seed``, ``faults``; ``duration`` is the episode's time limit, 30 s unless given); four keys
are the environment's:

    control_hz: 10                  # one action per 1/control_hz s of simulated time
    observation: {ring: ring, goal: true, velocity: true, people: 0, flat: false, depth: none}
    action: {kind: continuous, v_max: 0.5, w_max: 1.0}          # or kind: discrete (speeds x turns)
    reward: {success: 1.0, collision: -0.25, discomfort: 0.5, discomfort_dist: 0.2, progress: 0.1, time: 0.0}

Nothing is started while a spec is checked; the map, scenario, start and goal are resolved here (the trial's
``make_task``), so a bad name fails before any world is built.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hil.devices.yaml_source import ConfigError, SourceDict, load_yaml_file
from hil.trial.spec import TrialSpec, make_spec

DEFAULT_EPISODE_S = 30.0
ENV_KEYS = ("control_hz", "observation", "action", "reward")
OBSERVATION_KEYS = {"ring": "the range ring's sensor name (ring), or none", "goal": "true: the goal in the robot's "
                    "frame", "velocity": "true: the base's (v, w)", "people": "how many nearest people, CrowdNav's "
                    "robot-centric ground truth (0: none; privileged)", "flat": "true: one Box, false: a Dict",
                    "depth": "a camera's sensor name (head_camera): its depth image, downsampled; none (the default)",
                    "depth_block": "pixels per side of a depth block (8: 320x240 -> 40x30); each is its nearest depth"}
ACTION_KEYS = {"kind": "continuous or discrete", "v_max": "m/s", "v_min": "m/s (>= -v_max)", "w_max": "rad/s",
               "speeds": "discrete: how many speeds from v_max/speeds to v_max (and 0)",
               "turns": "discrete: how many turn rates from -w_max to w_max (odd)"}
# CrowdNav's conventions (success +1, collision -0.25, discomfort below 0.2 m at 0.5 per metre per second),
# CrowdNav++'s progress (per metre the goal came closer) and a cost of time (per second)
REWARD_DEFAULTS: Mapping[str, float] = MappingProxyType({
    "success": 1.0, "collision": -0.25, "timeout": 0.0, "discomfort": 0.5, "discomfort_dist": 0.2,
    "progress": 0.1, "time": 0.0})
MAX_PEOPLE = 32


def _env_controller(robot: Any) -> None:
    """The trial's agent slot: in an environment the learner acts, step by step (never called)."""
    raise RuntimeError("an environment's robot is driven by env.step, not by a controller")


@dataclass(frozen=True)
class ObservationSpec:
    ring: str | None = "ring"
    goal: bool = True
    velocity: bool = True
    people: int = 0
    flat: bool = False
    depth: str | None = None  # a camera's depth image, each depth_block x depth_block pixels its nearest
    depth_block: int = 8


@dataclass(frozen=True)
class ActionSpec:
    kind: str = "continuous"
    v_max: float = 0.5
    v_min: float = 0.0
    w_max: float = 1.0
    speeds: int = 2
    turns: int = 5


@dataclass(frozen=True)
class EnvSpec:
    """A checked environment spec; build it with :func:`make_env_spec` or :func:`load_env_file`."""

    trial: TrialSpec
    control_hz: float = 10.0
    observation: ObservationSpec = ObservationSpec()
    action: ActionSpec = ActionSpec()
    reward: Mapping[str, float] = field(default_factory=lambda: REWARD_DEFAULTS)
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def source(self) -> str:
        return self.trial.source

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError at ``key``'s line (``observation.ring``; the section's, else the file's)."""
        lines = dict(self.lines)
        line = lines.get(key) or lines.get(key.split(".")[0]) or self.trial.line_of("") or None
        return ConfigError(self.source, line, message)

    def but(self, **trial_changes: Any) -> EnvSpec:
        """The same environment over a changed trial (an episode's seed)."""
        from dataclasses import replace

        return replace(self, trial=self.trial.but(**trial_changes))


def make_env_spec(source: str = "<python>", lines: Mapping[str, int] | None = None, base: Path | None = None,
                  **keys: Any) -> EnvSpec:
    """A checked EnvSpec from keywords: the trial's keys and control_hz, observation, action, reward."""
    from hil.trial.task import make_task

    lines = dict(lines or {})
    keys = dict(keys)
    env = {k: keys.pop(k) for k in ENV_KEYS if k in keys}
    keys.setdefault("duration", DEFAULT_EPISODE_S)
    keys.setdefault("state_every", None)
    keys.setdefault("camera_rate", 0.0)
    if "controller" in keys:
        raise ConfigError(source, lines.get("controller"), "an environment has no controller: the learner acts "
                                                           "(hil.gym.policy_controller makes one of a policy)")
    trial = make_spec(_env_controller, source=source, lines={k: v for k, v in lines.items() if "." not in k},
                      base=base, **keys)
    if trial.duration is None:
        raise ConfigError(source, lines.get("duration"), "duration: an episode needs a time limit (seconds > 0)")
    make_task(trial)  # map, scenario, start and goal resolved and checked now (file:line)
    spec = EnvSpec(trial=trial, lines=tuple(lines.items()))
    return EnvSpec(trial=trial, control_hz=_control_hz(env.get("control_hz", 10.0), spec),
                   observation=_observation(env.get("observation"), spec), action=_action(env.get("action"), spec),
                   reward=_reward(env.get("reward"), spec), lines=spec.lines)


def load_env_file(path: str | Path, **overrides: Any) -> EnvSpec:
    """An environment file (YAML: trial keys and the environment's), ``overrides`` on top."""
    path = Path(path)
    doc = load_yaml_file(path, "trial")
    if not isinstance(doc, SourceDict):
        raise ConfigError(str(path), getattr(doc, "line", 1) or 1, "an environment file is a mapping of keys "
                                                                    "(map:, goal:, observation:, ...)")
    values = {**doc, **{k: v for k, v in overrides.items() if v is not None}}
    lines = {str(k): doc.line_of(k) for k in doc}
    lines[""] = doc.line
    for key in ("observation", "action", "reward"):
        section = doc.get(key)
        if isinstance(section, SourceDict) and key not in overrides:
            lines.update({f"{key}.{k}": section.line_of(k) for k in section})
    return make_env_spec(source=str(path), lines=lines, base=path.parent, **values)


# --- the checks --------------------------------------------------------------------------------------------------
def _control_hz(value: Any, spec: EnvSpec) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value <= 100:
        raise spec.error("control_hz", f"control_hz must be a number of Hz in [0.5, 100], not {value!r}")
    return float(value)


def _section(value: Any, known: Mapping[str, str], name: str, spec: EnvSpec) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise spec.error(name, f"{name} must be a mapping of {', '.join(known)}, not {value!r}")
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
            raise spec.error(f"{name}.{key}", f"{name}: unknown key {key!r}{hint}")
    return dict(value)


def _flag(section: dict, key: str, default: bool, name: str, spec: EnvSpec) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise spec.error(f"{name}.{key}", f"{name}.{key} must be true or false, not {value!r}")
    return value


def _count(section: dict, key: str, default: int, low: int, high: int, name: str, spec: EnvSpec) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise spec.error(f"{name}.{key}", f"{name}.{key} must be an integer in [{low}, {high}], not {value!r}")
    return value


def _real(section: dict, key: str, default: float, low: float, high: float, name: str, spec: EnvSpec) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise spec.error(f"{name}.{key}", f"{name}.{key} must be a number in [{low:g}, {high:g}], not {value!r}")
    return float(value)


def _observation(value: Any, spec: EnvSpec) -> ObservationSpec:
    section = _section(value, OBSERVATION_KEYS, "observation", spec)
    out = ObservationSpec(ring=_sensor(section, "ring", "ring", spec),
                          goal=_flag(section, "goal", True, "observation", spec),
                          velocity=_flag(section, "velocity", True, "observation", spec),
                          people=_count(section, "people", 0, 0, MAX_PEOPLE, "observation", spec),
                          flat=_flag(section, "flat", False, "observation", spec),
                          depth=_sensor(section, "depth", None, spec),
                          depth_block=_count(section, "depth_block", 8, 1, 256, "observation", spec))
    if out.ring is None and not out.goal and not out.velocity and not out.people and out.depth is None:
        raise spec.error("observation", "observation: nothing to observe (ring, goal, velocity, people and depth "
                                        "all off)")
    if out.goal and spec.trial.goal is None:
        raise spec.error("observation.goal", "observation.goal: the spec has no goal (goal: [x, y] or a place)")
    return out


def _sensor(section: dict, key: str, default: str | None, spec: EnvSpec) -> str | None:
    """A sensor's name, or None for none/off."""
    name = section.get(key, default)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise spec.error(f"observation.{key}", f"observation.{key} must be {OBSERVATION_KEYS[key]}, not {name!r}")
    return None if name is None or name.strip().lower() in ("none", "off") else name


def _action(value: Any, spec: EnvSpec) -> ActionSpec:
    section = _section(value, ACTION_KEYS, "action", spec)
    kind = section.get("kind", "continuous")
    if kind not in ("continuous", "discrete"):
        raise spec.error("action.kind", f"action.kind must be continuous or discrete, not {kind!r}")
    v_max = _real(section, "v_max", 0.5, 0.0, 10.0, "action", spec)
    w_max = _real(section, "w_max", 1.0, 0.0, 20.0, "action", spec)
    v_min = _real(section, "v_min", 0.0, -v_max, v_max, "action", spec)
    turns = _count(section, "turns", 5, 1, 51, "action", spec)
    if turns % 2 == 0:
        raise spec.error("action.turns", f"action.turns must be odd (so that 0 rad/s is one of them), not {turns}")
    if v_max == 0.0 and w_max == 0.0:
        raise spec.error("action", "action: v_max and w_max are both 0: the robot could not move")
    return ActionSpec(kind=kind, v_max=v_max, v_min=v_min, w_max=w_max,
                      speeds=_count(section, "speeds", 2, 1, 50, "action", spec), turns=turns)


def _reward(value: Any, spec: EnvSpec) -> Mapping[str, float]:
    section = _section(value, {k: "" for k in REWARD_DEFAULTS}, "reward", spec)
    out = dict(REWARD_DEFAULTS)
    for key, number in section.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) \
                or abs(number) > 1e6:
            raise spec.error(f"reward.{key}", f"reward.{key} must be a finite number, not {number!r}")
        out[key] = float(number)
    if out["discomfort_dist"] < 0:
        raise spec.error("reward.discomfort_dist", "reward.discomfort_dist is a distance in metres (>= 0)")
    return MappingProxyType(out)


__all__ = ["ActionSpec", "EnvSpec", "ObservationSpec", "REWARD_DEFAULTS", "load_env_file", "make_env_spec"]
