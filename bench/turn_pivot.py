"""Where the commbot turns in place about (the "2 cm offset" seen in calibration runs): the ground-truth base
track of the in-process commbot (sim clock, the profile's startup) against its wheel odometry, while it turns
in place at 15 deg/s, continuously (counter-clockwise and clockwise) and stop-and-go as `hil calibrate ring` does.

Prints, per mode: the farthest the base frame gets from the start (truth) and what odometry says at the end,
and for the continuous turn the pivot fitted by least squares (world c = p(t) + R(yaw(t)) q, q the pivot in the
base frame): a pivot at the axle midpoint (q = 0) would keep the base frame still.

    python -m bench.turn_pivot [--smoke]

``--smoke``: one continuous turn of 5 s, its pivot fitted over 3-4 s (the suite's smoke run; its figures mean
little).
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np


def turn(mode: str, turn_s: float | None = None) -> tuple[float, np.ndarray, tuple[float, float]]:
    import pybullet as p

    from hil.runtime import Robot
    from hil.runtime.robot.profile import load_profile

    folder = Path(tempfile.mkdtemp())
    (folder / "p.yaml").write_text("bus: sim://commbot?seed=7\nclock: sim\nsemantics: commbot\n")
    robot = Robot.open(load_profile(folder / "p.yaml"))
    body = robot.bus.transport.embodied.robot
    rate = math.radians(-15 if mode.endswith("cw") else 15)
    end = turn_s if turn_s is not None else (54.0 if mode == "stopgo" else 24.0)
    rows, far = [], 0.0
    try:
        for tick in robot.loop(hz=10):
            t = tick.time
            on = t < end and (mode != "stopgo" or t % 0.9 < 0.4)
            robot.base.drive(0.0, rate if on else 0.0)
            (x, y, _), q = body.base_pose()
            far = max(far, math.hypot(x, y))
            rows.append((t, x, y, p.getEulerFromQuaternion(q)[2]))
            if t > end + 2:
                break
        ox, oy, _ = robot.base.odometry
    finally:
        robot.close()
    return far, np.array(rows), (ox, oy)


def pivot(rows: np.ndarray, end_s: float = 23.0) -> tuple[np.ndarray, float]:
    """(q: the base-frame pivot, m; rms of the fit, m) over the turn's steady part (3 s to ``end_s``)."""
    sel = rows[(rows[:, 0] > 3) & (rows[:, 0] < end_s)]
    yaw = np.unwrap(sel[:, 3])
    a, b = [], []
    for x, y, th in zip(sel[:, 1], sel[:, 2], yaw):
        c, s = math.cos(th), math.sin(th)
        a += [[1, 0, -c, s], [0, 1, -s, -c]]
        b += [x, y]
    sol, *_ = np.linalg.lstsq(np.array(a), np.array(b), rcond=None)
    res = np.array(a) @ sol - np.array(b)
    return sol[2:], float(np.sqrt(np.mean(res ** 2)))


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.turn_pivot", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one continuous turn of 5 s")
    args = parser.parse_args(argv)
    modes, turn_s = (("continuous",), 5.0) if args.smoke else (("continuous", "continuous-cw", "stopgo"), None)
    print(f"{'mode':<13} {'truth max from start':>19} {'odometry at the end':>20}")
    for mode in modes:
        far, rows, (ox, oy) = turn(mode, turn_s)
        print(f"{mode:<13} {100 * far:16.2f} cm {100 * math.hypot(ox, oy):17.2f} cm")
        if mode != "stopgo":
            q, rms = pivot(rows, (turn_s - 1.0) if turn_s is not None else 23.0)
            print(f"{'':<13} pivot in the base frame ({100 * q[0]:+.2f}, {100 * q[1]:+.2f}) cm, fit rms "
                  f"{1000 * rms:.1f} mm")


if __name__ == "__main__":
    main()
