"""Sweep the neck and both arms through sine waves: the same file on the real robot, the virtual bus in this
process, or a virtual device in another process -- only the profile changes.

    hil run examples/joint_sweep.py --profile config/profiles/virtual.yaml --duration 10
    hil run examples/joint_sweep.py --profile config/profiles/real.yaml

Every joint swings about the pose it had when the controller started, never beyond its limits; the waves are
phase-shifted so the robot moves smoothly rather than all at once. Once a second it prints the clock time and the
worst tracking error (target - position) over the swept joints.
"""
from __future__ import annotations

import math

HZ = 50.0
PERIOD_S = 4.0  # one full swing

# joint -> (offset from the start pose, amplitude) in rad; arm rolls stay positive (outward, away from the body)
SWEEP = {
    "head.neck_yaw": (0.0, 0.6),
    "head.neck_pitch": (0.0, 0.25),
    "head.neck_roll": (0.0, 0.15),
    "left_arm.shoulder_pitch": (0.0, 0.5),
    "left_arm.shoulder_roll": (0.25, 0.15),
    "left_arm.shoulder_yaw": (0.0, 0.4),
    "left_arm.elbow": (0.0, 0.5),
    "left_arm.hand": (0.6, 0.5),
    "right_arm.shoulder_pitch": (0.0, 0.5),
    "right_arm.shoulder_roll": (0.25, 0.15),
    "right_arm.shoulder_yaw": (0.0, 0.4),
    "right_arm.elbow": (0.0, 0.5),
    "right_arm.hand": (0.6, 0.5),
}


def clamp(value: float, joint) -> float:
    lo, hi = joint.limits.lower, joint.limits.upper
    return min(max(value, lo), hi) if joint.bounded else value


def main(robot) -> None:
    joints = {name: robot.joints[name] for name in SWEEP}
    centre = {name: joint.position for name, joint in joints.items()}  # the pose at start
    worst = 0.0
    for tick in robot.loop(hz=HZ):
        phase = 2 * math.pi * tick.time / PERIOD_S
        for k, (name, joint) in enumerate(joints.items()):
            offset, amplitude = SWEEP[name]
            ramp = min(1.0, tick.time / 1.0)  # ease in over the first second: no jump from the start pose
            joint.target = clamp(centre[name] + ramp * (offset + amplitude * math.sin(phase - 0.4 * k)), joint)
        worst = max(worst, max(abs(j.target - j.position) for j in joints.values()))
        if tick.index % int(HZ) == 0 and tick.index:
            neck = joints["head.neck_yaw"]
            print(f"t={tick.time:6.2f} s  neck_yaw {neck.position:+.3f} rad (target {neck.target:+.3f})  "
                  f"worst tracking error {worst:.3f} rad", flush=True)
            worst = 0.0


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/virtual.yaml") as opened:
        main(opened)
