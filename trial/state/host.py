"""The robot runtime's part of a saved state: what the host side carries from one bus cycle to the next.

Each joint's command as last set and as last written (so the cycle after a restore writes exactly what the
original's did), its last readings; the base's odometry (pose, twist, the wheel positions it integrates from);
the robot's tick count; every bus's counters (``/bus/stats`` goes on counting). The controller is not here: it
starts fresh (``robot.resumed_from`` tells it where from). Everything is read and restored through the public
methods of the robot, its joints, its base and its bus statistics.
"""
from __future__ import annotations

import math
from typing import Any


def _num(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _nan(value: Any) -> Any:
    return math.nan if value is None else value


def save_host(robot: Any) -> dict[str, Any]:
    joints = {name: [_num(v) for v in joint.saved_state()] for name, joint in robot.joints.items()}
    base = robot.assembly.base
    stats = {name: host.stats.counters() for name, host in robot.buses.items()}
    return {"joints": joints, "odometry": base.saved_state() if base is not None else None, "ticks": robot.ticks,
            "overruns": robot.overruns, "stats": stats, "mode": robot.mode}


def restore_host(robot: Any, saved: dict[str, Any]) -> None:
    for name, (position, velocity, target, command_raw, written_raw) in saved["joints"].items():
        robot.joints[name].restore_state(_nan(position), _nan(velocity), _nan(target), command_raw, written_raw)
    base = robot.assembly.base
    if base is not None and saved["odometry"] is not None:
        base.restore_state(saved["odometry"])
    # the mode is what the robot was shown doing, until the fresh controller says otherwise
    robot.restore_counters(ticks=saved["ticks"], overruns=saved["overruns"], mode=saved.get("mode"))
    for name, counters in saved["stats"].items():
        robot.buses[name].stats.restore_counters(counters)
