"""The robot runtime's part of a saved state: what the host side carries from one bus cycle to the next.

Each joint's command as last set and as last written (so the cycle after a restore writes exactly what the
original's did), its last readings; the base's odometry (pose, twist, the wheel positions it integrates from);
the robot's tick count; every bus's counters (``/bus/stats`` goes on counting). The controller is not here: it
starts fresh (``robot.resumed_from`` tells it where from).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

JOINT_FIELDS = ("_position", "_velocity", "_target", "_command_raw", "_written_raw")


def _num(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def save_host(robot: Any) -> dict[str, Any]:
    joints = {name: [_num(getattr(joint, f)) for f in JOINT_FIELDS] for name, joint in robot.joints.items()}
    base = getattr(robot, "_base", None)
    odometry = None
    if base is not None:
        odometry = {"pose": list(base._pose), "twist": list(base._twist),
                    "last": base._last.tolist() if base._last is not None else None}
    stats = {name: {k: v for k, v in vars(host.stats).items() if k != "latencies_s"}
             for name, host in robot.buses.items()}
    return {"joints": joints, "odometry": odometry, "ticks": robot.ticks, "overruns": robot.overruns,
            "stats": stats, "mode": getattr(robot, "mode", None)}


def restore_host(robot: Any, saved: dict[str, Any]) -> None:
    from hil.runtime.robot.base import Pose2D, Twist2D

    for name, values in saved["joints"].items():
        joint = robot.joints[name]
        for field, value in zip(JOINT_FIELDS, values):
            setattr(joint, field, math.nan if value is None and field in ("_position", "_velocity", "_target")
                    else value)
    base = getattr(robot, "_base", None)
    odometry = saved["odometry"]
    if base is not None and odometry is not None:
        base._pose, base._twist = Pose2D(*odometry["pose"]), Twist2D(*odometry["twist"])
        base._last = np.asarray(odometry["last"], dtype=float) if odometry["last"] is not None else None
    robot.ticks, robot.overruns = saved["ticks"], saved["overruns"]
    robot.mode = saved.get("mode")  # what the robot was shown doing, until the fresh controller says otherwise
    for name, counters in saved["stats"].items():
        stats = robot.buses[name].stats
        for key, value in counters.items():
            setattr(stats, key, value)
        stats.latencies_s.clear()
