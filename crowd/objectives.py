"""Objectives: how a pedestrian reacts when the robot comes into view (as in the crowd-simulation reference).

An objective is a small controller for one agent. Each step the :class:`ObjectiveManager` hook gives it the
:class:`Situation` (where the agent and the robot are, whether the robot is in view, how long the objective has run)
and it steers through the sim's per-step overrides: ``override_velocity`` (the desired velocity: the forces
between people and from walls still act on top and bodies are still kept apart, but the core's robot-avoidance
force is off for that agent, because the objective has decided how to treat the robot), ``override_gaze`` (where
the agent looks) and ``speed_factor`` (scales the route's speed; the robot force stays on). An objective that
returns False from :meth:`Objective.update` is finished and the agent walks on as before (its route, or a
script's ``move`` target); an agent reacts once, so it is not chosen again.

The registry holds the crowd-simulation reference's four objectives and HuNavSim's six behaviours (Pérez-Higueras
et al., "HuNavSim: A ROS 2 Human Navigation Simulator for Benchmarking Human-Aware Robot Navigation", 2023);
``register(name, cls)`` adds more, and a rates file can name a user class as ``"module.path:ClassName"``. Distances to
the robot are centre to centre (m); times are simulated seconds. What each does (``hil crowd objectives`` lists
the parameters):

- interact / observe (the reference's): walk up to Dstop / Dobserve (Dobserve a little farther) and stand there
  facing the robot; duration_s 0 means until the robot leaves.
- pass_by (the reference's): keep walking at the usual pace, eyes on the way. slow_look (the reference's): walk at
  ``factor`` of the pace with the head turned to the robot while passing, until it is more than max_look_deg behind.
- regular (HuNavSim): the robot counts as another pedestrian (the core's robot-interaction force); nothing added.
- impassive: the robot is an obstacle, not a social agent: no anticipatory avoidance, no look; only the short-range
  wall-like push keeps the person off it (HuNavSim puts the robot among the obstacles instead of the agents).
- surprised: when the robot comes within ``distance``, stop and turn the head to it (at most turn_rate rad/s,
  HuNavSim's pi) for duration_s, then walk on (HuNavSim's SurprisedNav: stop and look at the robot).
- curious: approach at max_vel x distance / view distance (HuNavSim's approximateRobot: slower when closer), stop
  at stop_distance and look at the robot.
- scared: while the robot is within ``distance``, walk at runaway_factor x the pace with an extra repulsion
  force_factor x sigma / gap from the robot (HuNavSim's avoidRobot: runaway velocity plus a scary force).
- threatening: hurry (``speed``, HuNavSim 2.0 m/s) to the point front_distance ahead of the robot along its
  heading and stand there facing it, blocking the way, for duration_s (HuNavSim's blockRobot, 40 s once).
"""
from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from hil.devices.yaml_source import SourceDict, check_keys

from . import configfile, navigation
from .population import DEFAULT_TYPES, type_of_model

if TYPE_CHECKING:
    from .sim import CrowdSim

HOLD_GAIN = 0.5  # 1/s: desired speed per metre of distance error; with tau 0.5 s critically damped (k tau = 1/4)
CONTACT_GAP_M = 0.3  # m between surfaces below which an objective that steers itself is pushed off the robot
HOLD_WINDOW_M = 0.1  # within this of the target distance, the person counts as standing there (duration_s runs)
LEAVING_MPS = 0.15  # the robot moving away from a person faster than this...
LEAVING_S = 3.0  # ...for this long ends their interact/observe/curious reaction (they do not follow it)


@dataclass
class Situation:
    """One agent's view of the robot this step, and the levers it may pull."""

    sim: CrowdSim
    row: int
    agent_id: int
    pos: np.ndarray  # (2,)
    robot_pos: np.ndarray  # (2,)
    robot_yaw: float
    robot_radius: float
    radius: float  # the agent's body radius
    preferred_speed: float
    distance: float  # centre to centre, m
    to_robot: np.ndarray  # unit vector from the agent to the robot
    in_view: bool  # robot within the view distance and cone (walls not considered)
    view_distance: float
    elapsed_s: float  # since this objective took over
    dt: float
    shared: dict = field(default_factory=dict)  # per-step values computed once for all agents (route velocities)

    # -- levers ----------------------------------------------------------------------------------------------
    def set_velocity(self, velocity: np.ndarray | tuple[float, float]) -> None:
        self.sim.override_velocity[self.row] = velocity

    def stop(self) -> None:
        self.sim.override_velocity[self.row] = (0.0, 0.0)

    def look(self, direction: np.ndarray) -> None:
        self.sim.override_gaze[self.row] = direction

    def look_at_robot(self) -> None:
        """Gaze at the robot from where this step will take the agent (so the gaze does not lag a step behind)."""
        ahead = self.robot_pos - (self.pos + self.velocity * self.dt)
        n = float(np.hypot(*ahead))
        self.sim.override_gaze[self.row] = ahead / n if n > 1e-9 else self.to_robot

    def set_speed_factor(self, factor: float) -> None:
        self.sim.speed_factor[self.row] = factor

    # -- facts -----------------------------------------------------------------------------------------------
    @property
    def gaze(self) -> np.ndarray:
        return self.sim.agents.gaze[self.row]

    @property
    def velocity(self) -> np.ndarray:
        return self.sim.agents.vel[self.row]

    def walking_direction(self) -> np.ndarray:
        """Unit vector of the current velocity, or of the gaze when standing."""
        v = self.velocity
        n = float(np.hypot(*v))
        return v / n if n > 0.05 else self.gaze

    def route_direction(self) -> np.ndarray:
        """Unit vector toward the waypoint the agent walks to now (zeros when it has nowhere to go)."""
        agents = self.sim.agents
        if not agents.has_route[self.row]:
            return np.zeros(2)
        d = agents.target[self.row] - self.pos
        n = float(np.hypot(*d))
        return d / n if n > 1e-9 else np.zeros(2)

    def route_velocity(self) -> np.ndarray:
        """The desired velocity the crowd core's navigation gives the agent now (the one an override replaces),
        so an objective built on it walks the route exactly as the agent would, braking at its goal."""
        if "route_velocities" not in self.shared:
            self.shared["route_velocities"] = route_velocities(self.sim)
        return self.shared["route_velocities"][self.row]

    @property
    def relaxation_time(self) -> float:
        """tau of the desired force: a force F is added through the desired velocity as tau * F."""
        return float(self.sim.params["desired_force"]["relaxation_time"])


def route_velocities(sim: CrowdSim) -> np.ndarray:
    """Every agent's route velocity from :func:`crowd.navigation.desired_velocities`, fed the navigation
    parameters its signature names; if the core's parameters do not match, preferred speed toward the waypoint."""
    try:
        names = list(inspect.signature(navigation.desired_velocities).parameters)[2:]
        nav = sim.params["navigation"]
        velocity, _ = navigation.desired_velocities(sim.agents, sim.speed_factor, *(nav[n] for n in names))
        return velocity
    except (KeyError, TypeError):
        agents = sim.agents
        rel = agents.target - agents.pos
        dist = np.hypot(rel[:, 0], rel[:, 1])
        moving = agents.has_route & (dist > 1e-9)
        out = np.zeros_like(rel)
        out[moving] = rel[moving] / dist[moving, None] * (agents.v0 * sim.speed_factor)[moving, None]
        return out


class Objective:
    """Base class. Subclasses set ``name``, ``summary``, ``defaults`` (and ``param_docs``) and :meth:`update`."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    defaults: ClassVar[dict[str, float]] = {}
    param_docs: ClassVar[dict[str, str]] = {}

    def __init__(self, **params: float) -> None:
        self.params: dict[str, float] = {**self.defaults, **self.check_params(params)}

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> dict[str, float]:
        """Only declared names, only finite numbers; a wrong name lists the right ones."""
        out = {}
        for key, value in params.items():
            if key not in cls.defaults:
                known = ", ".join(cls.defaults) or "none"
                raise KeyError(f"objective {cls.name!r} has no parameter {key!r} (its parameters: {known})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"objective {cls.name!r}: {key} must be a number, not {value!r}")
            if value < 0:
                raise ValueError(f"objective {cls.name!r}: {key} must not be negative, not {value!r}")
            out[key] = float(value)
        return out

    def update(self, s: Situation) -> bool:
        """Steer the agent for this step; return False when the objective is finished."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v:g}' for k, v in self.params.items())})"


class _Hold(Objective):
    """Shared by interact, observe and curious: walk up to a distance from the robot, stand there facing it.

    The desired speed along the line to the robot is HOLD_GAIN x (distance - target), capped at the top speed:
    with the desired force's relaxation time this is a critically damped approach, so the person slows down
    over the last metres and stands at the distance asked without bumping into the robot. If the robot moves,
    the person keeps the distance (steps back when it comes closer); if it drives away for LEAVING_S, the
    reaction is over and the person walks on (people watch a robot, they do not trail it).
    """

    distance_key: ClassVar[str] = ""

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        self._held_s = 0.0
        self._left_s = 0.0  # how long the robot has been driving away from this person

    def target_distance(self, s: Situation) -> float:
        return max(self.params[self.distance_key], s.radius + s.robot_radius + 0.05)

    def top_speed(self, s: Situation) -> float:
        return s.preferred_speed * self.params["speed_factor"]

    def update(self, s: Situation) -> bool:
        if s.distance > s.view_distance * 1.25:  # the robot went away: the reaction is over
            return False
        robot = s.sim.robot
        leaving = robot is not None and robot.vx * s.to_robot[0] + robot.vy * s.to_robot[1] > LEAVING_MPS
        self._left_s = self._left_s + s.dt if leaving else 0.0
        if self._left_s >= LEAVING_S:  # it drives off: people let it go rather than trail it at their distance
            return False
        duration = self.params["duration_s"]
        if duration and self._held_s >= duration:
            return False
        error = s.distance - self.target_distance(s)
        if abs(error) < HOLD_WINDOW_M:
            self._held_s += s.dt
        top = self.top_speed(s)
        speed = float(np.clip(HOLD_GAIN * error, -0.5 * top, top))
        s.set_velocity(speed * s.to_robot)
        s.look_at_robot()
        return True


class Interact(_Hold):
    name = "interact"
    summary = "walk up to the robot and stand at Dstop from it, facing it, to interact"
    distance_key = "Dstop"
    defaults = {"Dstop": 0.9, "speed_factor": 1.0, "duration_s": 0.0}
    param_docs = {"Dstop": "stop distance, robot centre to person centre (m)",
                  "speed_factor": "approach speed as a fraction of the preferred speed",
                  "duration_s": "time spent near the robot before walking on (s); 0: until the robot leaves"}


class Observe(_Hold):
    name = "observe"
    summary = "stop at Dobserve from the robot (a little farther than Dstop) and watch it"
    distance_key = "Dobserve"
    defaults = {"Dobserve": 2.0, "speed_factor": 1.0, "duration_s": 0.0}
    param_docs = {"Dobserve": "observation distance, robot centre to person centre (m)",
                  "speed_factor": "approach speed as a fraction of the preferred speed",
                  "duration_s": "time spent watching before walking on (s); 0: until the robot leaves"}


class PassBy(Objective):
    name = "pass_by"
    summary = "keep walking the route at the usual pace, eyes on the way"
    defaults: ClassVar[dict[str, float]] = {}

    def update(self, s: Situation) -> bool:
        return s.distance <= s.view_distance  # no levers pulled; over once the robot is out of sight range


class SlowLook(Objective):
    name = "slow_look"
    summary = "slow down and keep looking at the robot while passing it"
    defaults = {"factor": 0.5, "max_look_deg": 120.0}
    param_docs = {"factor": "walking speed as a fraction of the preferred speed while the robot is watched",
                  "max_look_deg": "how far from the walking direction the head turns; beyond it, walk on"}

    def update(self, s: Situation) -> bool:
        heading = s.walking_direction()
        angle = math.degrees(math.acos(float(np.clip(np.dot(heading, s.to_robot), -1.0, 1.0))))
        if s.distance > s.view_distance or angle > self.params["max_look_deg"]:
            return False
        s.set_speed_factor(self.params["factor"])
        s.look_at_robot()
        return True


class Regular(Objective):
    name = "regular"
    summary = ("HuNavSim regular: reacts to the robot as to another pedestrian, through the crowd core's "
               "robot-interaction force; nothing is added to it")
    defaults: ClassVar[dict[str, float]] = {}

    def update(self, s: Situation) -> bool:
        return s.distance <= s.view_distance


class Impassive(Objective):
    name = "impassive"
    summary = ("HuNavSim impassive: the robot is an obstacle, not a social agent: no anticipation, no look, no "
               "slowing; only the short-range push a wall would give (the crowd core's obstacle force)")
    defaults: ClassVar[dict[str, float]] = {}

    def update(self, s: Situation) -> bool:
        if s.distance > s.view_distance:
            return False
        # Walk the route as if the robot were not there, plus the wall-like repulsion of its surface (through the
        # desired velocity as tau * F; the core's social robot force does not act on overridden agents).
        p = s.sim.params["obstacle_force"]
        gap = max(s.distance - s.radius - s.robot_radius, 0.0)
        push = p["factor"] * math.exp(-gap / p["sigma"]) if gap < p["threshold"] else 0.0
        s.set_velocity(s.route_velocity() - s.relaxation_time * push * s.to_robot)
        return True  # the gaze is left alone: the core points it where the person walks


class Surprised(Objective):
    name = "surprised"
    summary = ("HuNavSim surprised: when the robot comes within `distance`, stops and turns to look at it for "
               "`duration_s`, then walks on")
    defaults = {"distance": 3.0, "duration_s": 5.0, "turn_rate": math.pi}
    param_docs = {"distance": "how close the robot must come to surprise (m)",
                  "duration_s": "how long the person stands staring (s)",
                  "turn_rate": "how fast the head turns toward the robot (rad/s; HuNavSim: pi)"}

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        self._since: float | None = None
        self._gaze: np.ndarray | None = None

    def update(self, s: Situation) -> bool:
        if self._since is None:
            if s.distance > self.params["distance"]:
                return True  # waiting for the robot to come close
            self._since = s.elapsed_s
            self._gaze = np.array(s.gaze, dtype=float)
        if s.elapsed_s - self._since >= self.params["duration_s"]:
            return False
        s.stop()
        self._gaze = _turn_toward(self._gaze, s.to_robot, self.params["turn_rate"] * s.dt)
        s.look(self._gaze)
        return True


class Curious(_Hold):
    name = "curious"
    summary = ("HuNavSim curious: approaches the robot slowly, slower the closer it gets "
               "(max_vel * distance / view distance), stops at stop_distance and looks at it")
    distance_key = "stop_distance"
    defaults = {"stop_distance": 1.5, "max_vel": 1.0, "duration_s": 0.0}
    param_docs = {"stop_distance": "where the person stops, robot centre to person centre (m)",
                  "max_vel": "approach speed at the view distance (m/s); proportional to the distance below it",
                  "duration_s": "time spent near the robot before walking on (s); 0: until the robot leaves"}

    def top_speed(self, s: Situation) -> float:
        """HuNavSim's approach speed, max_vel x distance / view distance: the closer, the slower."""
        return self.params["max_vel"] * min(1.0, s.distance / s.view_distance)


class Scared(Objective):
    name = "scared"
    summary = ("HuNavSim scared: while the robot is within `distance`, walks faster (runaway_factor x preferred "
               "speed) and an extra repulsion force_factor x sigma / gap pushes away from the robot")
    defaults = {"distance": 4.0, "force_factor": 20.0, "sigma": 0.2, "runaway_factor": 1.4}
    param_docs = {"distance": "how close the robot must be to frighten (m)",
                  "force_factor": "weight of the fear repulsion (HuNavSim other_force_factor)",
                  "sigma": "its range (m; HuNavSim forceSigmaObstacle 0.2): the force is force_factor sigma / gap",
                  "runaway_factor": "walking speed while frightened, as a multiple of the preferred speed"}

    def update(self, s: Situation) -> bool:
        if s.distance > self.params["distance"]:
            return True  # a disposition: stays scared of the robot for the rest of the walk
        top = s.preferred_speed * self.params["runaway_factor"]
        gap = max(s.distance - s.radius - s.robot_radius, 0.05)
        fear = self.params["force_factor"] * self.params["sigma"] / gap  # m/s^2, away from the robot
        wish = s.route_direction() * top - s.relaxation_time * fear * s.to_robot
        speed = float(np.hypot(*wish))
        s.set_velocity(wish if speed <= top else wish * (top / speed))
        return True


class Threatening(Objective):
    name = "threatening"
    summary = ("HuNavSim threatening: hurries to a point `front_distance` in front of the robot (along its "
               "heading) and stands there facing it, blocking its way, for `duration_s`")
    defaults = {"front_distance": 1.0, "speed": 1.8, "duration_s": 40.0}
    param_docs = {"front_distance": "how far in front of the robot the person plants itself (m)",
                  "speed": "how fast the person hurries there (m/s; HuNavSim: 2.0)",
                  "duration_s": "how long the blocking lasts (s; HuNavSim: 40, once)"}

    def update(self, s: Situation) -> bool:
        if s.elapsed_s >= self.params["duration_s"]:
            return False
        ahead = np.array([math.cos(s.robot_yaw), math.sin(s.robot_yaw)])
        front = max(self.params["front_distance"], s.radius + s.robot_radius + 0.05)
        error = s.robot_pos + front * ahead - s.pos
        n = float(np.hypot(*error))
        speed = min(self.params["speed"], 2 * HOLD_GAIN * n)  # hurried: damping 0.7, a few cm of overshoot
        wish = error / n * speed if n > 1e-9 else np.zeros(2)
        gap = s.distance - s.radius - s.robot_radius
        if gap < CONTACT_GAP_M:  # cutting past the robot's side on the way: the wall-like push, so no bump
            p = s.sim.params["obstacle_force"]
            wish = wish - s.relaxation_time * p["factor"] * math.exp(-max(gap, 0.0) / p["sigma"]) * s.to_robot
        s.set_velocity(wish)
        s.look_at_robot()
        return True


def _turn_toward(current: np.ndarray, target: np.ndarray, max_angle: float) -> np.ndarray:
    a, b = math.atan2(current[1], current[0]), math.atan2(target[1], target[0])
    delta = (b - a + math.pi) % (2 * math.pi) - math.pi
    a += max(-max_angle, min(max_angle, delta))
    return np.array([math.cos(a), math.sin(a)])


# ---------------------------------------------------------------------------------------------------- registry
REGISTRY: dict[str, type[Objective]] = {}


def register(name: str, cls: type[Objective]) -> type[Objective]:
    """Add (or replace) an objective under ``name``; it must subclass :class:`Objective`."""
    if not (isinstance(cls, type) and issubclass(cls, Objective)):
        raise TypeError(f"objective {name!r}: {cls!r} is not a subclass of crowd.objectives.Objective")
    if not name.isidentifier():
        raise ValueError(f"objective name {name!r} must be an identifier")
    REGISTRY[name] = cls
    return cls


# Modules a rates file may import user objectives from. Importing runs the module's code, so a config file must not
# choose it alone: the user opts in (``hil crowd --allow-objectives MODULE``, or :func:`allow_user_modules`).
ALLOWED_USER_MODULES: set[str] = set()


def allow_user_modules(modules) -> None:
    """Let rates files import user objectives from these modules (and their submodules)."""
    ALLOWED_USER_MODULES.update(m.strip() for m in modules if m.strip())


def _allowed(module_name: str) -> bool:
    return any(module_name == m or module_name.startswith(m + ".") for m in ALLOWED_USER_MODULES)


def load_user_objective(name: str, target: str) -> type[Objective]:
    """Import ``"module.path:ClassName"`` and register it under ``name``; only from a module the user allowed
    (nothing is imported before that check)."""
    module_name, sep, class_name = target.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"objective {name!r}: {target!r} is not 'module.path:ClassName'")
    if not _allowed(module_name):
        raise ValueError(f"objective {name!r}: module {module_name!r} is not allowed to be imported from a config "
                         f"file; allow it with `hil crowd --allow-objectives {module_name}` (allowed: "
                         f"{', '.join(sorted(ALLOWED_USER_MODULES)) or 'none'})")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"objective {name!r}: cannot import {module_name!r}: {exc}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ValueError(f"objective {name!r}: module {module_name!r} has no {class_name!r}")
    try:
        return register(name, cls)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def make(name: str, **params: float) -> Objective:
    if name not in REGISTRY:
        raise KeyError(f"unknown objective {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name](**params)


def describe() -> list[dict[str, Any]]:
    """The registry as data: name, summary, parameters with defaults and meaning (``hil crowd objectives``)."""
    return [{"name": name, "summary": cls.summary, "class": f"{cls.__module__}:{cls.__qualname__}",
             "params": {k: {"default": v, "doc": cls.param_docs.get(k, "")} for k, v in cls.defaults.items()}}
            for name, cls in REGISTRY.items()]


for _cls in (Interact, Observe, PassBy, SlowLook, Regular, Impassive, Surprised, Curious, Scared, Threatening):
    register(_cls.name, _cls)


# ---------------------------------------------------------------------------------------------- configuration
@dataclass
class ObjectiveConfig:
    """The ``objectives`` section of a rates file: view, choice probabilities per type, parameter changes."""

    view_distance: float = 8.0
    fov_deg: float = 200.0
    choice: dict[str, dict[str, float]] | None = None  # person type -> objective -> probability (rest: regular)
    params: dict[str, dict[str, float]] | None = None  # objective -> parameter changes

    @classmethod
    def from_section(cls, section: SourceDict) -> ObjectiveConfig:
        """Check and read the section; user objectives are registered first, so choice and params may name them."""
        check_keys(section, ("user", "view", "choice", "params"), "objectives")
        user = configfile.mapping(section, "user", "objectives", required=False)
        for name in user:
            if not isinstance(user[name], str):
                raise user.error(name, f"objectives.user.{name}: expected 'module.path:ClassName'")
            try:
                load_user_objective(str(name), user[name])
            except ValueError as exc:
                raise user.error(name, str(exc)) from None
        view = configfile.mapping(section, "view", "objectives", required=False)
        check_keys(view, ("distance", "fov_deg"), "objectives.view")
        out = cls(view_distance=configfile.number(view, "distance", "objectives.view", low=0.0, high=1000.0, default=8.0),
                  fov_deg=configfile.number(view, "fov_deg", "objectives.view", low=0.0, high=360.0, default=200.0),
                  choice={}, params={})
        choice = configfile.mapping(section, "choice", "objectives", required=False)
        for ptype in choice:
            table = choice[ptype]
            if not isinstance(table, SourceDict):
                raise choice.error(ptype, f"objectives.choice.{ptype} must map objectives to probabilities")
            for name in table:
                if name not in REGISTRY:
                    raise table.error(name, f"objectives.choice.{ptype}: unknown objective {name!r} "
                                            f"(known: {', '.join(sorted(REGISTRY))})")
            out.choice[str(ptype)] = configfile.probabilities(table, f"objectives.choice.{ptype}")
        params = configfile.mapping(section, "params", "objectives", required=False)
        for name in params:
            if name not in REGISTRY:
                raise params.error(name, f"objectives.params: unknown objective {name!r}")
            table = params[name]
            if not isinstance(table, SourceDict):
                raise params.error(name, f"objectives.params.{name} must map parameter names to numbers")
            try:
                out.params[str(name)] = REGISTRY[name].check_params(dict(table))
            except (KeyError, ValueError) as exc:
                raise params.error(name, str(exc.args[0])) from None
        return out


# ----------------------------------------------------------------------------------------------------- manager
class ObjectiveManager:
    """The movement module's objective part, as a sim hook (as the crowd-simulation reference's movement module has).

    When the robot first enters an agent's field of view (within ``view_distance``, inside the ``fov_deg`` cone
    around where the agent looks), the agent's objective is chosen once with the probabilities of its person type
    (``stochastic``), or the objective a script armed for it takes over. Scripted agents (those with a name) never
    draw stochastically. Each step, active objectives steer their agents; a finished one lets the agent walk on.
    """

    def __init__(self, sim: CrowdSim, config: ObjectiveConfig | None = None, *, stochastic: bool = True,
                 config_at: Callable[[float], ObjectiveConfig | None] | None = None) -> None:
        self.sim = sim
        self.config = config or ObjectiveConfig(choice={}, params={})
        self.config_at = config_at  # sim time -> the config of that day (weekday and weekend crowds react apart)
        self.stochastic = stochastic
        self.active: dict[int, Objective] = {}  # agent id -> running objective
        self.armed: dict[int, str] = {}  # agent id -> objective a script set, waiting for the robot to come in view
        self.custom: dict[int, dict[str, dict[str, float]]] = {}  # agent id -> objective -> a script's changes
        self.started_at: dict[int, float] = {}
        self.decided: set[int] = set()  # agents whose reaction was drawn or given
        self.history: list[tuple[float, int, str]] = []  # (sim time, agent id, objective) for every start

    # -- parameters ------------------------------------------------------------------------------------------
    def params_for(self, agent_id: int, name: str, *, stochastic: bool) -> dict[str, float]:
        """The changes to the registry defaults: the rates file's for a reaction drawn by chance (the everyday
        crowd), the script's for one it gave (a script reproduces its situation whatever rates file is loaded)."""
        if stochastic:
            return dict((self.config.params or {}).get(name, {}))
        return dict(self.custom.get(agent_id, {}).get(name, {}))

    def assign(self, agent_id: int, name: str, params: dict[str, float] | None = None, *,
               immediate: bool = False) -> None:
        """Give an agent an objective, changing only the named parameters (the crowd-simulation reference: the script
        changes a part of the objective). Armed until the robot is in the agent's view, or running at once if
        ``immediate``. If the agent already runs this objective, the changes apply to it in place."""
        if name not in REGISTRY:
            raise KeyError(f"unknown objective {name!r} (known: {', '.join(sorted(REGISTRY))})")
        checked = REGISTRY[name].check_params(params or {})
        self.custom.setdefault(agent_id, {}).setdefault(name, {}).update(checked)
        self.decided.add(agent_id)
        running = self.active.get(agent_id)
        if running is not None and running.name == name:
            running.params.update(checked)
            return
        self.active.pop(agent_id, None)
        self.armed[agent_id] = name
        if immediate:
            self._start(agent_id, name)

    def objective_of(self, agent_id: int) -> Objective | None:
        return self.active.get(agent_id)

    def _start(self, agent_id: int, name: str, *, stochastic: bool = False) -> None:
        self.armed.pop(agent_id, None)
        self.active[agent_id] = make(name, **self.params_for(agent_id, name, stochastic=stochastic))
        self.started_at[agent_id] = self.sim.time_s
        self.history.append((self.sim.time_s, agent_id, name))

    def _draw(self, person_type: str) -> str:
        choice = self.config.choice or {}
        table = choice.get(person_type)
        if table is None:
            try:
                table = choice.get(type_of_model(person_type, DEFAULT_TYPES), {})
            except KeyError:
                table = {}
        names = ["regular", *table]
        p = np.array([max(0.0, 1.0 - sum(table.values())), *table.values()])
        return names[int(self.sim.rng.choice(len(names), p=p / p.sum()))]

    # -- the hook --------------------------------------------------------------------------------------------
    def in_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(in view mask, centre distances) of every agent to the robot: within the distance and the cone."""
        agents, robot = self.sim.agents, self.sim.robot
        rel = np.array([robot.x, robot.y]) - agents.pos
        dist = np.hypot(rel[:, 0], rel[:, 1])
        cos_half = math.cos(math.radians(min(self.config.fov_deg, 360.0)) / 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.einsum("ij,ij->i", agents.gaze, rel) / np.where(dist > 0, dist, 1.0)
        visible = (dist <= self.config.view_distance) & ((cos >= cos_half) | (self.config.fov_deg >= 360.0))
        return visible, dist

    def _sees(self, a: tuple[float, float], b: tuple[float, float]) -> bool:
        clear = getattr(self.sim.map, "clear_path", None)
        return True if clear is None else bool(clear(a, b, clearance=0.0))

    def __call__(self, sim: CrowdSim) -> None:
        if self.config_at is not None:
            self.config = self.config_at(sim.time_s) or self.config
        if sim.robot is None or not len(sim.agents):
            return
        agents = sim.agents
        visible, dist = self.in_view()
        ids = agents.ids
        robot_xy = (float(sim.robot.x), float(sim.robot.y))
        for row in np.flatnonzero(visible):
            agent_id = int(ids[row])
            armed = agent_id in self.armed
            if not armed and (agent_id in self.decided or not self.stochastic or agents.names[row]):
                continue
            if not self._sees(tuple(agents.pos[row]), robot_xy):
                continue  # a wall between them
            if armed:
                self._start(agent_id, self.armed[agent_id])
            else:
                self.decided.add(agent_id)
                self._start(agent_id, self._draw(agents.types[row]), stochastic=True)
        if not self.active:
            return
        robot = sim.robot
        robot_pos = np.array([robot.x, robot.y], dtype=float)
        rows = {int(i): r for r, i in enumerate(ids)}
        shared: dict = {}
        for agent_id in list(self.active):
            row = rows.get(agent_id)
            if row is None:  # the agent left the map
                del self.active[agent_id]
                continue
            d = float(dist[row])
            rel = robot_pos - agents.pos[row]
            s = Situation(sim=sim, row=row, agent_id=agent_id, pos=agents.pos[row].copy(), robot_pos=robot_pos,
                          robot_yaw=float(robot.yaw), robot_radius=float(robot.radius),
                          radius=float(agents.radius[row]), preferred_speed=float(agents.v0[row]), distance=d,
                          to_robot=rel / d if d > 1e-9 else np.array([1.0, 0.0]), in_view=bool(visible[row]),
                          view_distance=self.config.view_distance,
                          elapsed_s=sim.time_s - self.started_at[agent_id], dt=sim.dt, shared=shared)
            if not self.active[agent_id].update(s):
                del self.active[agent_id]
        if len(self.decided) > 4 * len(agents) + 256:  # forget the ones who left, now and then
            present = {int(i) for i in ids}
            self.decided &= present
            self.custom = {k: v for k, v in self.custom.items() if k in present}
            self.armed = {k: v for k, v in self.armed.items() if k in present}
            self.started_at = {k: v for k, v in self.started_at.items() if k in present or k in self.active}


def config_from_table(section: SourceDict | None) -> ObjectiveConfig:
    """An :class:`ObjectiveConfig` from a rates table's raw ``objectives`` section (defaults when absent)."""
    if not isinstance(section, SourceDict) or not section:
        return ObjectiveConfig(choice={}, params={})
    return ObjectiveConfig.from_section(section)
