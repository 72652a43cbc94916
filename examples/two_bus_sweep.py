"""Move one joint on each bus of a two-bus robot in one loop: the neck yaw (on the body's bus) and the left
elbow (on the arm's bus), through sine waves, with one controller that does not know there are two buses.

    hil sim left_arm --tcp 5760 --no-world &
    hil run examples/two_bus_sweep.py --profile config/profiles/two_buses.yaml --duration 10

Once a second it prints each joint's bus, position and target, and the per-bus transaction counts.
"""
from __future__ import annotations

import math

HZ = 50.0
PERIOD_S = 4.0  # one full swing
SWEEP = {"head.neck_yaw": 0.5, "left_arm.elbow": 0.5}  # joint -> amplitude (rad) about the start pose


def main(robot) -> None:
    joints = {name: robot.joints[name] for name in SWEEP}
    centre = {name: joint.position for name, joint in joints.items()}
    for tick in robot.loop(hz=HZ):
        ramp = min(1.0, tick.time / 1.0)  # ease in: no jump from the start pose
        for name, joint in joints.items():
            target = centre[name] + ramp * SWEEP[name] * math.sin(2 * math.pi * tick.time / PERIOD_S)
            lo, hi = joint.limits.lower, joint.limits.upper
            joint.target = min(max(target, lo), hi) if joint.bounded else target
        if tick.index % int(HZ) == 0 and tick.index:
            shown = "  ".join(f"{n} [{j.bus}] {j.position:+.3f} (target {j.target:+.3f})" for n, j in joints.items())
            counts = ", ".join(f"{bus} {s.transactions}" for bus, s in robot.bus_stats.items())
            print(f"t={tick.time:6.2f} s  {shown}  transactions: {counts}", flush=True)


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/two_buses.yaml") as opened:
        main(opened)
