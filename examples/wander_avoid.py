"""Wander and avoid: drive forward, turn away from obstacles the range ring sees ahead, stop for good on a
bumper contact. The same file runs on the real robot and on the virtual one; only the profile changes.

    hil run examples/wander_avoid.py --profile config/profiles/virtual.yaml --duration 10
    hil run examples/wander_avoid.py --profile config/profiles/virtual.yaml --bus "sim://commbot?clock=sim&map=lab"

The ring's sensor directions come from the robot (its geometry), not from this file: "ahead" is every sensor
pointing within 35 degrees of straight on, "left" and "right" the sensors beside those. Speeds stay well inside
the base's top speed; the turn is away from the nearer side.
"""
from __future__ import annotations

import math

HZ = 20.0
CRUISE_M_S = 0.3
TURN_RAD_S = 0.8
STOP_M = 0.6  # an obstacle this close ahead: turn on the spot
SLOW_M = 1.2  # closer than this: slow down while turning away
AHEAD = math.radians(35)
SIDE = math.radians(100)


def steer(front: float | None, left: float | None, right: float | None, turning: float) -> tuple[float, float]:
    """(v, w) for the nearest ranges ahead, to the left and to the right (None: nothing seen). ``turning`` is
    the turn rate already under way (0 when cruising): a turn keeps its direction until the way ahead is clear,
    so the robot does not dither between left and right in front of a wall it meets head on."""
    if front is None or front > SLOW_M:
        return CRUISE_M_S, 0.0
    if turning:
        away = math.copysign(TURN_RAD_S, turning)
    else:
        nearer_left = (math.inf if left is None else left) < (math.inf if right is None else right)
        away = -TURN_RAD_S if nearer_left else TURN_RAD_S  # turn toward the freer side
    if front < STOP_M:
        return 0.0, away
    return CRUISE_M_S * (front - STOP_M) / (SLOW_M - STOP_M), away / 2


def main(robot) -> None:
    ring, bumper, base = robot.sensors["ring"], robot.sensors["bumper"], robot.base
    state, w = None, 0.0
    for tick in robot.loop(hz=HZ):
        if bumper.any:
            base.stop()
            robot.cycle()  # send the stop now rather than on a next tick that will not come
            zones = ", ".join(zone for zone, on in bumper.pressed.items() if on)
            x, y, _ = base.odometry
            print(f"t={tick.time:6.2f} s  bumper pressed ({zones}): stopped at x={x:.2f} y={y:.2f} m", flush=True)
            return
        front = ring.nearest(-AHEAD, AHEAD)
        left = ring.nearest(AHEAD, SIDE)
        right = ring.nearest(-SIDE, -AHEAD)
        v, w = steer(front, left, right, w)
        base.drive(v, w)
        now = "cruise" if w == 0 else ("turn left" if w > 0 else "turn right")
        if now != state:
            shown = "nothing" if front is None else f"{front:.2f} m"
            print(f"t={tick.time:6.2f} s  ahead: {shown:>8}  -> {now}", flush=True)
            state = now


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/virtual.yaml") as opened:
        main(opened)
