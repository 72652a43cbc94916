"""The ``crowd:`` and ``start_pose:`` keys of a profile (a mixed trial, runtime/robot/overlay.py), checked with
file:line before anything opens. Pure parsing: no bridge, no world."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hil.devices.map_format import resolve_map
from hil.devices.yaml_source import ConfigError

MODES = ("realtime",)
ENDPOINT_SCHEMES = ("tcp://", "ipc://")
DEFAULT_TIMEOUT_S = 2.0  # silence (wall time) after which the crowd counts as lost; also the wait at open
ROBOT_RADIUS_M = 0.3  # the commbot's footprint, as the world tells the crowd (firmware_sim crowd_bridge)


@dataclass(frozen=True)
class CrowdSpec:
    """The profile's ``crowd:`` block, validated."""

    endpoint: str
    mode: str = "realtime"
    ring: str = "ring"  # the ring sensor's blueprint name
    seed: int = 0  # of the shadow ring's generator
    timeout_s: float = DEFAULT_TIMEOUT_S
    robot_radius_m: float = ROBOT_RADIUS_M
    pose: str = "odometry"  # or the endpoint of an external pose source (bridge/pose_stream.py)
    map: str | None = None  # the resolved path of the map whose walls hide virtual people (never echo), or None
    walls: str = "hide"  # hide: the map's walls only hide people; echo: the shadow ring reads them too (a twin
    # ring beside the real one: `hil calibrate check` compares the two)


MAX_TIMEOUT_S = 3600.0
MAX_ROBOT_RADIUS_M = 10.0
_CROWD_KEYS: dict[str, str] = {
    "endpoint": "the real-time crowd's control endpoint (tcp://host:port or ipc://path)",
    "mode": f"one of {', '.join(MODES)}",
    "ring": "the blueprint name of the range ring the virtual people are overlaid on",
    "seed": "an integer >= 0 (the shadow ring's noise and dropout)",
    "timeout_s": "a number of seconds > 0, at most MAX_TIMEOUT_S=3600",
    "robot_radius_m": "a number of metres > 0, at most MAX_ROBOT_RADIUS_M=10",
    "pose": "odometry (the wheels) or the endpoint of an external pose source publishing map-frame poses "
            "(tcp://host:port or ipc://path; bridge/pose_stream.py)",
    "map": "a map on the config search path (arcade) or a map file: its walls hide the virtual people behind them",
    "walls": "hide (the map's walls only hide virtual people) or echo (the shadow ring reads them as well: the "
             "twin's ring beside the real one, for `hil calibrate check`; needs map)",
}


def parse_crowd(value: Any, source: str, line: int | None, clock: str) -> CrowdSpec:
    """The ``crowd:`` block of a profile; every error is a ConfigError with file:line."""
    def line_of(key: str | None) -> int | None:
        if key is not None and hasattr(value, "line_of"):
            return value.line_of(key)
        return getattr(value, "line", None) or line

    def error(key: str | None, message: str) -> ConfigError:
        return ConfigError(source, line_of(key), f"crowd: {message}")

    if not isinstance(value, Mapping):
        raise ConfigError(source, line, f"crowd must be a mapping such as {{endpoint: tcp://127.0.0.1:5760, "
                                        f"mode: realtime}}, not {type(value).__name__} {value!r}")
    for key in value:
        if key not in _CROWD_KEYS:
            raise error(key, f"unknown key {key!r}; known: {', '.join(_CROWD_KEYS)}")
    endpoint = value.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint.startswith(ENDPOINT_SCHEMES):
        raise error("endpoint" if "endpoint" in value else None,
                    f"endpoint must be {_CROWD_KEYS['endpoint']}, not {endpoint!r}")
    mode = value.get("mode", "realtime")
    if mode == "lockstep":
        raise error("mode", "mode lockstep is the simulated world's (sim://...?crowd=EP): a physical robot cannot "
                            "wait for the crowd, so a mixed trial streams: mode: realtime")
    if mode not in MODES:
        raise error("mode", f"mode must be {_CROWD_KEYS['mode']}, not {mode!r}")
    if clock != "real":
        raise error(None, f"a real-time crowd needs clock: real, not clock: {clock} (the crowd is paced to wall time)")
    ring = value.get("ring", "ring")
    if not isinstance(ring, str) or not ring:
        raise error("ring", f"ring must be {_CROWD_KEYS['ring']}, not {ring!r}")
    seed = value.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise error("seed", f"seed must be {_CROWD_KEYS['seed']}, not {seed!r}")
    numbers = {}
    for key, default, high in (("timeout_s", DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S),
                               ("robot_radius_m", ROBOT_RADIUS_M, MAX_ROBOT_RADIUS_M)):
        number = value.get(key, default)
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not (math.isfinite(number)
                                                                                   and 0 < number <= high):
            raise error(key, f"{key} must be {_CROWD_KEYS[key]}, not {number!r}")
        numbers[key] = float(number)
    pose = value.get("pose", "odometry")
    if not isinstance(pose, str) or not (pose == "odometry" or pose.startswith(ENDPOINT_SCHEMES)):
        raise error("pose", f"pose must be {_CROWD_KEYS['pose']}, not {pose!r}")
    world_map = _crowd_map(value.get("map"), error) if "map" in value else None
    walls = value.get("walls", "hide")
    if walls not in ("hide", "echo"):
        raise error("walls", f"walls must be {_CROWD_KEYS['walls']}, not {walls!r}")
    if walls == "echo" and world_map is None:
        raise error("walls", "walls: echo needs map: the walls the shadow ring is to read")
    return CrowdSpec(endpoint=endpoint, mode=mode, ring=ring, seed=seed, pose=pose, map=world_map, walls=walls,
                     **numbers)


def _crowd_map(name: Any, error) -> str:
    """``crowd: {map: ...}``: resolved (an unknown name or a missing file names the profile's line) and read with
    the shared wall format (a bad map file names its own line), without importing the world."""
    from hil.devices.map_format import parse_walls
    from hil.devices.yaml_source import load_yaml_file, require

    if not isinstance(name, str) or not name:
        raise error("map", f"map must be {_CROWD_KEYS['map']}, not {name!r}")
    try:
        path = resolve_map(name)
    except ConfigError as exc:
        raise error("map", f"map {name!r}: {exc.message}") from None
    if not path.is_file():
        raise error("map", f"map {name!r}: no such map file")
    doc = load_yaml_file(path, "map")
    require(doc, "name", str, "map")
    parse_walls(doc)
    return str(path)


def parse_start_pose(value: Any, source: str, line: int | None) -> tuple[float, float, float]:
    """``start_pose: [x, y, yaw]`` (m, m, rad in the map frame): where odometry starts."""
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in value)):
        raise ConfigError(source, line, f"start_pose must be [x, y, yaw] (three finite numbers: m, m, rad in the "
                                        f"map frame), not {value!r}")
    return float(value[0]), float(value[1]), float(value[2])
