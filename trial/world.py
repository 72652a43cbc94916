"""The trial's world (physics): which robot is opened on which bus and clock, and the ground truth it can give.

For ``robot: NAME`` the world is the virtual robot in this process (``sim://NAME?...``), in the task's map, at
the task's start pose, with the task's crowd walking in it. For ``profile: P`` it is whatever the profile
opens; a sim:// main bus gets the task's map, seed, pose and crowd added to its URL (a key the URL already
sets differently is an error), and a real bus gets the crowd as an overlay on its ring (a mixed trial, clock
real). The controller only ever sees the Robot; the ground truth (:class:`WorldProbe`) is for the recording
and the task, never handed to the controller.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from hil.devices import config_path
from hil.devices.yaml_source import ConfigError

from .spec import TrialSpec
from .task import Task, load_profile_of as _load

ROBOT_RADIUS_M = 0.3  # the commbot's footprint, as the world and the crowd take it


class TrialSetupError(ConfigError):
    """The spec cannot be put together with the robot or profile it names (a clash, a missing piece)."""


def robot_profile(spec: TrialSpec, task: Task, crowd_endpoint: str | None, realtime_crowd: bool) -> Any:
    """The profile to open: a dict for ``robot:``, a :class:`runtime.robot.profile.Profile` for ``profile:``."""
    if spec.profile is None:
        return _virtual_profile(spec, task, crowd_endpoint, realtime_crowd)
    return _with_task(spec, task, crowd_endpoint, realtime_crowd)


def clock_of(spec: TrialSpec) -> str:
    """The trial's clock: the spec's, else the profile's, else sim."""
    if spec.clock is not None:
        return spec.clock
    if spec.profile is not None:
        return _load(spec).clock
    return "sim"


def _virtual_profile(spec: TrialSpec, task: Task, endpoint: str | None, realtime: bool) -> dict[str, Any]:
    clock = spec.clock or "sim"
    options = _sim_options(spec, task, clock, endpoint, realtime)
    name = spec.robot
    url = f"sim://{name}?{urlencode(options, safe=',:/*')}"
    profile: dict[str, Any] = {"bus": url, "clock": clock, "description": f"hil trial: {name}, virtual, {clock} clock"}
    if task.start is not None:
        profile["start_pose"] = list(task.start)  # odometry starts where the world put the robot (map frame)
    semantics = config_path.find(Path(name).stem, "semantics")
    if semantics is not None:
        profile["semantics"] = str(semantics)
    return profile


def _sim_options(spec: TrialSpec, task: Task, clock: str, endpoint: str | None, realtime: bool) -> dict[str, str]:
    options = {"clock": clock, "seed": str(spec.seed)}
    if task.map_path is not None:
        options["map"] = str(task.map_path)
    if task.start is not None:
        options["pose"] = ",".join(f"{v:g}" for v in task.start)
    if endpoint is not None:
        options["crowd"] = endpoint
        options["crowd_timeout"] = f"{spec.crowd_timeout_s:g}"
        if realtime:
            options["crowd_mode"] = "realtime"
        elif spec.crowd_pipeline:
            options["crowd_mode"] = "pipelined"  # the crowd computes tick N+1 while the world steps N
    if spec.gui:
        options["gui"] = "1"
    return options


def _with_task(spec: TrialSpec, task: Task, endpoint: str | None, realtime: bool):
    """The spec's profile with the task put into it."""
    profile = _load(spec)
    if spec.clock is not None and spec.clock != profile.clock:
        raise TrialSetupError(spec.source, None, f"clock: {spec.clock} but the profile {profile.source} runs on "
                                                 f"clock: {profile.clock}; leave clock out or pick another profile")
    url = profile.bus_url() if not profile.buses else profile.buses[0].url
    if url.startswith("sim://"):
        options = _sim_options(spec, task, profile.clock, endpoint, realtime)
        options.pop("clock")  # the profile puts its clock on the URL itself (Profile.bus_url)
        if spec.seed == 0:
            options.pop("seed")  # the default seed: a URL's own seed stays
        profile = profile.with_bus(_merge_url(url, options, profile.source))
        return replace(profile, start_pose=task.start) if task.start is not None else profile
    # a real (or another process's) bus: people come as an overlay on the ring, the map is for the record
    if endpoint is not None and profile.clock != "real":
        raise TrialSetupError(spec.source, None, f"people beside the bus {url} come as a real-time crowd overlaid "
                                                 f"on its ring, which needs clock: real (the profile {profile.source}"
                                                 f" says clock: {profile.clock})")
    if spec.gui:
        raise TrialSetupError(spec.source, None, "gui: the pybullet viewer shows an in-process world; the "
                                                 f"profile's bus {url} is not one")
    changes: dict[str, Any] = {}
    if task.start is not None:
        changes["start_pose"] = task.start
    if endpoint is not None:
        from hil.runtime.robot.crowd_spec import CrowdSpec

        crowd = profile.crowd or CrowdSpec(endpoint=endpoint)
        changes["crowd"] = replace(crowd, endpoint=endpoint, seed=spec.seed,
                                   map=str(task.map_path) if task.map_path is not None else crowd.map)
    return replace(profile, **changes) if changes else profile


def _merge_url(url: str, options: dict[str, str], source: str) -> str:
    """``url`` with ``options`` added; a key the URL already has with another value is an error."""
    parts = urlsplit(url)
    present = dict(parse_qsl(parts.query))
    for key, value in options.items():
        if key in present and present[key] != value:
            raise TrialSetupError(source, None, f"the bus {url} sets {key}={present[key]} and the trial asks for "
                                                f"{key}={value}; say it in one place")
        present[key] = value
    return parts._replace(query=urlencode(present, safe=",:/*")).geturl()


class WorldProbe:
    """Ground truth of an in-process world, read between physics steps: where the robot really is, who is
    around it, who touched it, which script lines ran. :meth:`of` gives None for a robot with no such world."""

    def __init__(self, embodied: Any):
        self.embodied = embodied

    @classmethod
    def of(cls, robot: Any) -> WorldProbe | None:
        embodied = getattr(robot.bus.transport, "embodied", None)
        return cls(embodied) if embodied is not None else None

    @property
    def crowd(self) -> Any:
        return self.embodied.crowd

    def robot_pose(self) -> tuple[float, float, float]:
        with self.embodied.device.lock:
            pose = self.embodied.robot_pose()
        return pose["x"], pose["y"], pose["yaw"]

    def people(self) -> tuple[list[dict], list[int], list[dict]]:
        """(people's states, ids that touched the robot since the last call, script lines that ran since)."""
        crowd = self.embodied.crowd
        if crowd is None:
            return [], [], []
        with self.embodied.device.lock:
            return crowd.states(), crowd.take_contacts(), crowd.take_script_events()

    @property
    def crowd_period_s(self) -> float | None:
        crowd = self.embodied.crowd
        return getattr(crowd, "period_s", None) if crowd is not None else None


def fault_resolver(spec: TrialSpec):
    """Name -> bus ID over the parts of the virtual robot ``spec`` opens, known before it opens (a sweep checks
    each condition's ``faults:`` with it at load: firmware_sim.fault_plan.assembly_resolver, from the assembly
    file and the semantics the trial would use); None when the robot is not a one-bus virtual one known by name
    (the trial itself refuses faults on another bus when it starts)."""
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.fault_plan import assembly_resolver

    if spec.profile is None:
        name = spec.robot
        semantics = config_path.find(Path(str(name)).stem, "semantics")
    else:
        from hil.runtime.transports.sim import parse_sim_url

        profile = _load(spec)
        if profile.buses or not str(profile.bus or "").startswith("sim://"):
            return None
        name, semantics = parse_sim_url(profile.bus)[0], profile.semantics
    return assembly_resolver(load_assembly(name).parts, str(semantics) if semantics else None)
