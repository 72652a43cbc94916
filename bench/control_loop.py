"""The controller's loop on the simulator's clock: ticks per wall second of the full commbot, and the real-time
factor of a 50 Hz controller with 240 Hz physics against bare pybullet stepping the same robot, in one run.

The controller side is the whole product path: Robot.open("virtual" profile: sim://commbot?clock=sim), each tick
one bus cycle (write of changed targets + Fast Bulk Read of every joint and sensor) through the in-process
virtual device, the lockstep clock stepping the world (with every part's firmware) between ticks. The bare side
loads the URDF `hil urdf` writes and calls stepSimulation for the same simulated time.

    .venv/bin/python -m bench.control_loop [--seconds 10]
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from bench.world import BareSide, commbot_urdf

HZ = 50.0
PHYSICS_DT = 1.0 / 240


def controller_run(seconds: float) -> tuple[float, int, dict]:
    """(wall seconds, ticks, bus stats) of a 50 Hz controller moving the neck and the base for ``seconds``."""
    from hil.runtime.robot import Robot

    with tempfile.TemporaryDirectory() as cache, Robot.open({"bus": "sim://commbot?clock=sim", "clock": "sim",
                                                              "semantics": "commbot", "cache_dir": cache}) as robot:
        neck = robot.joints["head.neck_yaw"]
        start = time.perf_counter()
        ticks = 0
        for tick in robot.loop(hz=HZ, duration_s=seconds):
            neck.target = 0.5 * math.sin(tick.time)
            robot.base.drive(v=0.2, w=0.2)
            _ = robot.sensors["ring"].ranges
            ticks += 1
        elapsed = time.perf_counter() - start
        return elapsed, ticks, robot.stats.as_dict()


def bare_run(seconds: float, urdf: Path, model, pose) -> float:
    bare = BareSide(PHYSICS_DT, urdf, model, pose)
    try:
        steps = round(seconds / PHYSICS_DT)
        bare.run(steps // 10)
        start = time.perf_counter()
        bare.run(steps)
        return time.perf_counter() - start
    finally:
        bare.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.control_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per side (default 10)")
    args = parse_with_smoke(parser, argv, seconds=1.0)
    with tempfile.TemporaryDirectory() as tmp:
        urdf, model = commbot_urdf(Path(tmp))
        wall, ticks, stats = controller_run(args.seconds)
        bare_wall = bare_run(args.seconds, urdf, model, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    rtf, bare_rtf = args.seconds / wall, args.seconds / bare_wall
    print(f"commbot, {args.seconds:g} s simulated, 50 Hz controller, 240 Hz physics:")
    print(f"  controller via Robot API (sim clock)  {ticks} ticks in {wall:.2f} s wall = {ticks / wall:.0f} ticks/s, "
          f"RTF {rtf:.1f}; bus p50 {stats['latency_p50_ms']:.3f} ms, {stats['transactions']} transactions")
    print(f"  bare pybullet, same robot (URDF)      {round(args.seconds / PHYSICS_DT)} steps in {bare_wall:.2f} s "
          f"wall, RTF {bare_rtf:.1f}")
    print(f"  ratio controller/bare: {rtf / bare_rtf:.2f}x")
    return {"ticks_per_s": ticks / wall, "rtf": rtf, "bare_rtf": bare_rtf}


if __name__ == "__main__":
    main()
