"""Robot dynamics: our numpy algorithms (runtime.model) against Pinocchio on the same model, side by side, and
what gravity compensation costs a controller's 50 Hz tick.

1. Per robot (the commbot: 19 joints, 59 links; an unbranched arm: 6 joints, 17 links), each algorithm one
   call at a time: ours and Pinocchio's (``pin``, given the model by runtime.model.pinocchio_model) in
   alternating rounds at the same seeded state, per-call time = median over the rounds of the mean of
   ``--calls`` calls; ``ours/pin`` is the ratio. Pinocchio's side is the call that does the same work: frame
   forward kinematics (every link placed, as ours), the frame Jacobian with its forward kinematics, CRBA with
   its forward kinematics. ``(cpu)`` is our process CPU time per call: on a busy machine the wall time also
   counts the waits for a core. The commbot's targets (single call, wall time) are checked; the per-link
   reference implementation (runtime.model.reference) is timed once for scale.
2. Gravity compensation: the commbot opened on ``sim://commbot`` (in-process world, sim clock), one
   ``robot.dynamics.gravity_torques()`` (q from the 19 joints as the last cycle read them, then the gravity
   RNEA) and two ``target_torque`` commands, against the 20 ms of a 50 Hz tick and against the tick's own bus
   cycle (one write + one Fast Bulk Read, no wire timing).

    .venv/bin/python -m bench.dynamics [--calls 300] [--rounds 7]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from bench._smoke import parse_with_smoke
from bench.bus_cycle import CpuMeter
from hil.runtime.bus import BusHost
from hil.runtime.model import (LOCAL_WORLD_ALIGNED, Model, build_model, center_of_mass, create_data, forward_dynamics,
                           forward_kinematics, frame_jacobian, gravity_torques, mass_matrix, reference, rnea)
from hil.runtime.model.pinocchio_model import import_pinocchio, to_pinocchio
from hil.runtime.scan import NoCache, scan_bus
from hil.runtime.transports import open_transport

# an arm in a row (tests/model_helpers.py's SERIAL): shoulder servos turned by L- and J-brackets, upper arm,
# elbow, forearm, opening hand
SERIAL_ARM = """name: serial_arm
parts:
  - {id: 1, part: cpc_servo}
  - {id: 2, part: bracket_l, parent: 1, port: horn}
  - {id: 3, part: cpc_servo, parent: 2, port: mount}
  - {id: 4, part: bracket_j, parent: 3, port: horn}
  - {id: 5, part: cpc_servo, parent: 4, port: mount}
  - {id: 6, part: bracket_l, parent: 5, port: horn}
  - {id: 7, part: cpc_servo, parent: 6, port: mount}
  - {id: 8, part: upper_arm, parent: 7, port: horn}
  - {id: 9, part: cpc_servo, parent: 8, port: elbow}
  - {id: 10, part: forearm, parent: 9, port: horn}
  - {id: 11, part: hand, parent: 10, port: hand}
"""
GRAVITY = (0.0, 0.0, -9.80665)
TICK_S = 1 / 50
TARGETS_US = {"forward kinematics": 200, "rnea": 500, "gravity torques": 500, "crba (mass matrix)": 1000,
              "aba (forward dynamics)": 1000, "frame jacobian": 300}  # the commbot, single call


def scanned_model(url: str) -> Model:
    """The model of the robot on ``url`` as the runtime gets it: scanned over the bus, built from descriptors."""
    with BusHost(open_transport(url)) as bus:
        return build_model(scan_bus(bus, NoCache()))


def random_state(model: Model, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q within the joints' limits (continuous: +-2 pi), qd within +-3, qdd within +-10 (SI)."""
    bounds = [(-2 * math.pi, 2 * math.pi) if j.type == "continuous" else (j.limits.lower, j.limits.upper)
              for j in model.moving_joints]
    q = [rng.uniform(lo, hi) for lo, hi in bounds]
    return np.array(q), rng.uniform(-3.0, 3.0, model.nq), rng.uniform(-10.0, 10.0, model.nq)


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    return timed_us(fn, calls)[0]


def timed_us(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(wall, CPU) microseconds per call: on a busy machine the wall time also counts the time this process
    waited for a core, the CPU time does not."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def algorithms(model, pin, seed: int = 16) -> list[tuple[str, Callable, Callable]]:
    """(name, ours, Pinocchio's) at one seeded random state."""
    pm = to_pinocchio(model, GRAVITY)
    pd = pm.createData()
    data = create_data(model)
    q, qd, qdd = random_state(model, np.random.default_rng(seed))
    tau = rnea(model, data, q, qd, qdd, GRAVITY)
    link = len(model.links) - 1  # the deepest link
    frame = pm.getFrameId(model.links[link].name, pin.BODY)
    return [
        ("forward kinematics", lambda: forward_kinematics(model, data, q),
         lambda: pin.framesForwardKinematics(pm, pd, q)),
        ("rnea", lambda: rnea(model, data, q, qd, qdd, GRAVITY), lambda: pin.rnea(pm, pd, q, qd, qdd)),
        ("gravity torques", lambda: gravity_torques(model, data, q, GRAVITY),
         lambda: pin.computeGeneralizedGravity(pm, pd, q)),
        ("crba (mass matrix)", lambda: mass_matrix(model, data, q), lambda: pin.crba(pm, pd, q)),
        ("aba (forward dynamics)", lambda: forward_dynamics(model, data, q, qd, tau, GRAVITY),
         lambda: pin.aba(pm, pd, q, qd, tau)),
        ("frame jacobian", lambda: frame_jacobian(model, data, q, link, LOCAL_WORLD_ALIGNED),
         lambda: pin.computeFrameJacobian(pm, pd, q, frame, pin.LOCAL_WORLD_ALIGNED)),
        ("centre of mass", lambda: center_of_mass(model, data, q), lambda: pin.centerOfMass(pm, pd, q)),
    ]


def reference_us(model) -> dict[str, float]:
    """The per-link reference implementation, timed with few calls (it is slow)."""
    data = reference.ReferenceData.for_model(model)
    q, qd, qdd = random_state(model, np.random.default_rng(16))
    tau = reference.rnea(model, data, q, qd, qdd, GRAVITY)
    return {"forward kinematics": per_call_us(lambda: reference.forward_kinematics(model, data, q), 20),
            "rnea": per_call_us(lambda: reference.rnea(model, data, q, qd, qdd, GRAVITY), 5),
            "gravity torques": per_call_us(lambda: reference.gravity_torques(model, data, q, GRAVITY), 5),
            "crba (mass matrix)": per_call_us(lambda: reference.mass_matrix(model, data, q), 1),
            "aba (forward dynamics)": per_call_us(lambda: reference.forward_dynamics(model, data, q, qd, tau,
                                                                                      GRAVITY), 1)}


def robot_section(name: str, model, pin, calls: int, rounds: int, with_targets: bool) -> list[str]:
    rows = algorithms(model, pin)
    times: dict[str, dict[str, list[float]]] = {algo: {"ours": [], "pin": [], "cpu": []} for algo, _, _ in rows}
    for r in range(rounds):
        for algo, ours, theirs in rows:
            pair = (("ours", ours), ("pin", theirs)) if r % 2 == 0 else (("pin", theirs), ("ours", ours))
            for side, fn in pair:
                wall, cpu = timed_us(fn, calls)
                times[algo][side].append(wall)
                if side == "ours":
                    times[algo]["cpu"].append(cpu)
    ref = reference_us(model) if with_targets else {}
    lines = [f"{name}: {model.nq} joints, {len(model.links)} links -> {len(model.tree.mass)} bodies, "
             f"{len(model.tree.levels)} levels; {rounds} alternating rounds of {calls} calls",
             f"  {'algorithm':<24}{'ours us':>9}{'(cpu)':>8}{'pin us':>9}{'ours/pin':>10}"
             + (f"{'reference us':>15}{'speed-up':>10}{'target us':>11}" if with_targets else "")]
    verdicts = []
    for algo, _, _ in rows:
        ours, theirs = statistics.median(times[algo]["ours"]), statistics.median(times[algo]["pin"])
        cpu = statistics.median(times[algo]["cpu"])
        line = f"  {algo:<24}{ours:9.1f}{cpu:8.1f}{theirs:9.2f}{ours / theirs:9.0f}x"
        if with_targets:
            line += f"{ref[algo]:15.0f}{ref[algo] / ours:9.0f}x" if algo in ref else f"{'':15}{'':10}"
            target = TARGETS_US.get(algo)
            if target is not None:
                met = "met" if ours <= target else "MISSED" + (" (cpu: met)" if cpu <= target else "")
                line += f"{target:9.0f}  {met}"
                verdicts.append(f"{algo} {ours:.0f} <= {target} us: {met}")
        lines.append(line)
    if verdicts:
        lines.append("  targets: " + "; ".join(verdicts))
    return lines


def gravity_compensation_section(calls: int) -> list[str]:
    from hil.runtime.robot import Robot

    with Robot.open({"bus": "sim://commbot?clock=sim", "clock": "sim", "semantics": "commbot"}) as robot:
        for _ in robot.loop(hz=50, duration_s=0.2):
            pass
        dynamics = robot.dynamics
        robot.set_mode(("left_arm.shoulder_pitch", "left_arm.elbow"), "current")
        pitch, elbow = robot.joints["left_arm.shoulder_pitch"], robot.joints["left_arm.elbow"]
        ip, ie = dynamics.index(pitch.name), dynamics.index(elbow.name)

        def compensate() -> None:
            gravity = dynamics.gravity_torques()
            pitch.target_torque = max(-4.0, min(4.0, gravity[ip]))
            elbow.target_torque = max(-4.0, min(4.0, gravity[ie]))

        gravity_us = statistics.median(per_call_us(dynamics.gravity_torques, calls) for _ in range(5))
        both_us = statistics.median(per_call_us(compensate, calls) for _ in range(5))
        cycle_us = statistics.median(per_call_us(robot.cycle, max(1, calls // 10)) for _ in range(5))
    return [f"gravity compensation in a 50 Hz tick (commbot, sim://commbot in this process, {calls} calls x 5):",
            f"  robot.dynamics.gravity_torques() (q from 19 joints + gravity RNEA): {gravity_us:7.1f} us = "
            f"{gravity_us / (TICK_S * 1e6):.2%} of the 20 ms tick",
            f"  ... + two target_torque commands (what hold_arm.py does per tick):  {both_us:7.1f} us = "
            f"{both_us / (TICK_S * 1e6):.2%} of the tick",
            f"  the tick's bus cycle itself (robot.cycle(): one write + one Fast Bulk Read, no wire): "
            f"{cycle_us:7.1f} us; gravity compensation is {both_us / cycle_us:.0%} of it"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dynamics", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per timing (default 300)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    args = parse_with_smoke(parser, argv, calls=10, rounds=1)
    pin = import_pinocchio()
    print(f"numpy {np.__version__}, Pinocchio {pin.__version__}, {os.cpu_count()} CPU cores, "
          f"load average {os.getloadavg()[0]:.2f} before the run")
    with tempfile.TemporaryDirectory(prefix="hil-bench-dynamics-") as tmp:
        arm = Path(tmp) / "serial_arm.yaml"
        arm.write_text(SERIAL_ARM)
        robots = (("commbot", scanned_model("sim://commbot"), True),
                  ("serial arm", scanned_model(f"sim://{arm}"), False))
    for name, model, with_targets in robots:
        with CpuMeter() as cpu:
            lines = robot_section(name, model, pin, args.calls, args.rounds, with_targets)
        print("\n".join(lines))
        print(f"  {cpu.note()}")
    with CpuMeter() as cpu:
        lines = gravity_compensation_section(args.calls)
    print("\n".join(lines))
    print(f"  {cpu.note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
