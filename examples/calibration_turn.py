"""One stop-and-go turn in place, as `hil calibrate ring` drives it: for a mixed trial whose log `hil calibrate check`
compares (the real ring against the twin's shadow ring; docs/CALIBRATION.md).

    hil run examples/calibration_turn.py --profile mixed.yaml --record mixed_trial/
    hil calibrate check mixed_trial/trial.mcap --rig rig.yaml

The profile is a mixed one standing the robot at the rig's start (`start_pose:`), with `crowd: {map: RIG_MAP,
walls: echo}` so that the shadow ring reads the rig's walls, and `calibration:` for the twin's numbers. The robot
turns once, STEP_DEG at a time at RATE_DEG_S, still for PAUSE_S after each step, then stops. Bus data only.
"""
from __future__ import annotations

import math

HZ = 10.0
RATE_DEG_S = 15.0
STEP_DEG = 6.0
PAUSE_S = 0.5
TURNS = 1.0
SETTLE_S = 0.5


def schedule(t: float) -> float | None:
    """The turn rate (rad/s) at ``t`` s after the start; None once the turn is done."""
    steps = round(TURNS * 360.0 / STEP_DEG)
    step_s = STEP_DEG / RATE_DEG_S
    if t < SETTLE_S:
        return 0.0
    k, into = divmod(t - SETTLE_S, step_s + PAUSE_S)
    if k >= steps:
        return None if into > SETTLE_S or k > steps else 0.0
    return math.radians(RATE_DEG_S) if into < step_s else 0.0


def main(robot) -> None:
    start = None
    for tick in robot.loop(hz=HZ):
        start = tick.time if start is None else start
        rate = schedule(tick.time - start)
        if rate is None:
            break
        robot.base.drive(0.0, rate)
    robot.base.stop()
