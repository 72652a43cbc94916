"""Hold the left arm straight out in front against gravity, three ways, and log how well each holds:

  A. position mode only, the servos' own loop at their default Position P Gain (800);
  B. position mode only at half that gain (400);
  C. current mode: every tick the host computes the gravity torques of the arm where it is, from the scanned
     parts' masses, centres of mass and inertias (``robot.dynamics``), and commands them as a feed-forward
     current, plus a position loop of its own with the stiffness of gain 400 (B's).

    hil run examples/hold_arm.py --profile config/profiles/virtual.yaml --duration 10

A servo's position loop answers a load with an error: at rest it gives stall torque x KPP x error / 885, so it
holds a load L with an error of L / stiffness (18.9 N m/rad at gain 800 on an XM430-W350). Held out, the arm
weighs about 1.7 N m on the shoulder pitch, 0.5 N m on the elbow: A sags by about 0.09 rad, B by twice that.
With the load fed forward, C's loop only has to overcome what the model does not know (the gear train's
friction, 0.6 N m in the descriptor, which holds the joint wherever the remaining error torque falls below it),
so at B's gain it holds tighter than A does at twice the gain. Each hold is the same motion: raise the arm over
1.2 s, hold it 1.3 s (the error is the mean over the last 0.5 s), lower it over 0.5 s.

The torque constant comes from the XM430-W350 datasheet (4.1 N m at 2.3 A) through ``target_torque``; on a part
whose motor is not known, command ``target_current`` instead.
"""
from __future__ import annotations

import math

from hil.devices.control_table import XM430_W350, position_stiffness

HZ = 50.0
POSE = {"left_arm.shoulder_pitch": -math.pi / 2, "left_arm.shoulder_roll": 0.0, "left_arm.shoulder_yaw": 0.0,
        "left_arm.elbow": 0.0}  # the arm straight out in front (pitch -90 degrees about +y)
LOADED = ("left_arm.shoulder_pitch", "left_arm.elbow")  # the joints that carry the arm's weight held out
RAISE_S, HOLD_S, LOWER_S, MEASURE_S = 1.2, 1.3, 0.5, 0.5
FULL_GAIN, HALF_GAIN = 800, 400
DAMPING_NM_S = 0.4  # the host loop's damping (N m per rad/s)


def smooth(s: float) -> float:
    """0 -> 1 with zero speed at both ends (no jerk into the hold)."""
    s = min(max(s, 0.0), 1.0)
    return s * s * (3.0 - 2.0 * s)


def set_p_gain(robot, gain: int) -> None:
    """Position P Gain (register 84) of the arm's servos, written straight to the parts."""
    for name in POSE:
        joint = robot.joints[name]
        joint.host.write_register(joint.part_id, XM430_W350["position_p_gain"], gain)


def hold(robot, label: str, feed_forward: bool, stiffness: float) -> tuple[dict[str, float], dict[str, float]] | None:
    """Raise, hold, lower; returns the mean held error (target - position, rad) and the mean gravity load
    (N m, from the model) of each loaded joint over the last MEASURE_S of the hold (None when the run ended
    first)."""
    joints = {name: robot.joints[name] for name in POSE}
    start = {name: joint.position for name, joint in joints.items()}
    dynamics = robot.dynamics
    errors = {name: [] for name in LOADED}
    loads = {name: [] for name in LOADED}
    worst = 0.0
    t0 = None
    for tick in robot.loop(hz=HZ):
        t0 = tick.time if t0 is None else t0
        t = tick.time - t0
        up = smooth(t / RAISE_S) if t < RAISE_S + HOLD_S else 1.0 - smooth((t - RAISE_S - HOLD_S) / LOWER_S)
        goal = {name: start[name] + up * (POSE[name] - start[name]) for name in joints}
        gravity = dynamics.gravity_torques()  # at q as this tick's bus cycle read it
        if feed_forward:
            for name in LOADED:
                joint = joints[name]
                error = goal[name] - joint.position
                effort = joint.limits.effort
                torque = gravity[dynamics.index(name)] + stiffness * error - DAMPING_NM_S * joint.velocity
                joint.target_torque = max(-effort, min(effort, torque))
        for name, joint in joints.items():
            if not (feed_forward and name in LOADED):
                joint.target = goal[name]
        if RAISE_S + HOLD_S - MEASURE_S <= t < RAISE_S + HOLD_S:
            for name in LOADED:
                errors[name].append(goal[name] - joints[name].position)
                loads[name].append(gravity[dynamics.index(name)])
        if t < RAISE_S + HOLD_S:
            worst = max(worst, max(abs(goal[n] - joints[n].position) for n in LOADED))
        if t >= RAISE_S + HOLD_S + LOWER_S:
            break
    if not errors[LOADED[0]]:
        print(f"{label}: the run ended before the hold was measured (it needs about 9 s)", flush=True)
        return None
    held = {name: sum(values) / len(values) for name, values in errors.items()}
    load = {name: sum(values) / len(values) for name, values in loads.items()}
    print(f"{label}: held error " + ", ".join(f"{n.split('.')[1]} {held[n]:+.4f} rad" for n in LOADED)
          + " under " + ", ".join(f"{load[n]:+.2f} N m" for n in LOADED)
          + f"; worst while raising and holding {worst:.4f} rad (t={tick.time:.2f} s)", flush=True)
    return held, load


def main(robot) -> None:
    elbow = robot.joints["left_arm.elbow"]
    full = position_stiffness(FULL_GAIN, elbow.limits.effort, 2 * math.pi / 4096)
    half = position_stiffness(HALF_GAIN, elbow.limits.effort, 2 * math.pi / 4096)
    print(f"holding the left arm out: servo stiffness {full:.1f} N m/rad at P gain {FULL_GAIN}, "
          f"{half:.1f} at {HALF_GAIN}", flush=True)
    a = hold(robot, f"A position mode, P gain {FULL_GAIN} ({full:.1f} N m/rad)", False, full)
    set_p_gain(robot, HALF_GAIN)
    b = a and hold(robot, f"B position mode, P gain {HALF_GAIN} ({half:.1f} N m/rad)", False, half)
    robot.set_mode(LOADED, "current")
    c = b and hold(robot, f"C current mode, gravity feed-forward + {half:.1f} N m/rad", True, half)
    robot.set_mode(LOADED, "position")
    set_p_gain(robot, FULL_GAIN)
    if c is None:
        return
    (a, load), (b, _), (c, _) = a, b, c
    dynamics = robot.dynamics
    for name in LOADED:
        joint_model = robot.model.moving_joints[dynamics.index(name)]
        short = name.split(".")[1]
        line = f"{short}: |held error| A {abs(a[name]):.4f}, B {abs(b[name]):.4f}, C {abs(c[name]):.4f} rad"
        ratio_a, ratio_b = abs(a[name]) / max(abs(c[name]), 1e-6), abs(b[name]) / max(abs(c[name]), 1e-6)
        if ratio_a > 1.0:
            line += (f": with the gravity fed forward, half the gain holds {ratio_a:.1f}x tighter than position "
                     f"mode at the full gain ({ratio_b:.1f}x tighter than at the same gain)")
        else:
            line += (f": friction-limited; the gear train's {joint_model.friction:g} N m (descriptor) is more than "
                     f"the {abs(load[name]):.2f} N m feed-forward takes off this joint, so C holds about as B does "
                     f"({ratio_b:.1f}x)")
        print(line, flush=True)


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/virtual.yaml") as opened:
        main(opened)
