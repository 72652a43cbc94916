"""Section (f) of bench/bus_cycle.py: the Robot's loop rate with one part lost against none lost.

The commbot's parts served without a world by a device subprocess on a pty (``hil sim commbot --pty
--no-world``); the Robot runs back-to-back cycles (``robot.cycle()``, no spare time in any tick, the worst case
for the presence watch: its pings to the lost part go out at the fallback rate, PING_FALLBACK_S, each costing one
reply timeout). A part is lost for real: its ID is changed on the device (the part stops answering at its old
ID), then restored, so the slices alternate: none lost, one lost, none lost, one lost. ``rescan_s`` is left at its
default in both arms (the broadcast ping costs the same either way); the renumbered part would be adopted as a
new one by that rescan, so the lost slices are kept shorter than rescan_s.
"""
from __future__ import annotations

import time

from hil.runtime.robot import Robot

from ._pty_process import PtyProcess, hil_command

LOST_ID, PARKED_ID = 26, 99  # the right elbow, moved out of the way while "lost"
ID_REGISTER, TORQUE_REGISTER = 7, 64


class CommbotDevice(PtyProcess):
    def __init__(self) -> None:
        super().__init__(hil_command() + ["sim", "commbot", "--pty", "--no-world"])


def _rate(robot: Robot, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        robot.cycle()
        n += 1
    return n / (time.perf_counter() - start)


def _renumber(robot: Robot, old: int, new: int) -> None:
    robot.bus.write(old, TORQUE_REGISTER, b"\x00")
    robot.bus.write(old, ID_REGISTER, bytes([new]))


def lost_part_rates(seconds: float, rounds: int, cache_dir: str) -> dict[str, float]:
    """Cycles/s with none lost and with the right elbow lost, alternating ``rounds`` times."""
    seconds = min(seconds, 1.5)  # below rescan_s (2 s): the parked part must not be adopted as a new one
    rates: dict[str, list[float]] = {"none lost": [], "one lost": []}
    with CommbotDevice() as dev:
        profile = {"bus": dev.path, "clock": "real", "semantics": "commbot", "cache_dir": cache_dir}
        with Robot.open(profile) as robot:
            for _ in range(20):
                robot.cycle()
            for _ in range(rounds):
                rates["none lost"].append(_rate(robot, seconds))
                _renumber(robot, LOST_ID, PARKED_ID)
                while LOST_ID not in robot.parts_lost:
                    robot.cycle()
                rates["one lost"].append(_rate(robot, seconds))
                _renumber(robot, PARKED_ID, LOST_ID)
                while LOST_ID in robot.parts_lost:
                    robot.cycle()
    return {k: sum(v) / len(v) for k, v in rates.items()}


HZ = 10.0


def _sim_device() -> tuple[PtyProcess, str, str]:
    """hil sim commbot on a pty under its lockstep clock, with the live fault control: (device, clock, control)."""
    dev = PtyProcess(hil_command() + ["sim", "commbot", "--pty", "--clock", "sim", "--clock-endpoint",
                                      "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--stall-timeout",
                                      "120"])
    try:
        clock = dev.proc.stdout.readline().split()[1]
        control = dev.proc.stdout.readline().split()[1]
    except BaseException:
        dev.close()
        raise
    return dev, clock, control


def _wall_per_sim_s(ticks) -> float:
    """Wall seconds per simulated second over the ticks of one robot.loop slice."""
    first = None
    for tick in ticks:
        if first is None:
            first = (tick.time, time.perf_counter())
    last = (tick.time, time.perf_counter())
    return (last[1] - first[1]) / (last[0] - first[0])


def sim_clock_replug(seconds: float, cache_dir: str) -> dict[str, float]:
    """Section (g): a robot at 10 Hz on a ``hil sim --clock sim`` pty. Wall seconds per simulated second with
    none lost and with the right elbow unplugged (each cycle pings it: a reply timeout of wall time, no simulated
    time), then the cycles of simulated time from its plug to its being available again."""
    from hil.firmware_sim.control import send_fault

    seconds = max(seconds, 1.0)
    dev, clock, control = _sim_device()
    with dev:
        profile = {"bus": dev.path, "clock": "sim", "clock_endpoint": clock, "semantics": "commbot",
                   "cache_dir": cache_dir, "stall_timeout_s": 120.0}
        with Robot.open(profile) as robot:
            elbow = robot.joints["right_arm.elbow"]
            none_lost = _wall_per_sim_s(robot.loop(hz=HZ, duration_s=seconds))
            send_fault(control, "unplug", {"part": LOST_ID})
            for _ in robot.loop(hz=HZ, duration_s=10.0):
                if not elbow.available:
                    break
            one_lost = _wall_per_sim_s(robot.loop(hz=HZ, duration_s=seconds))
            send_fault(control, "plug", {"part": LOST_ID})
            cycles = 0
            for _ in robot.loop(hz=HZ, duration_s=30.0):
                cycles += 1
                if elbow.available:
                    break
    return {"wall_per_sim_s none lost": none_lost, "wall_per_sim_s one lost": one_lost, "back_after_cycles": cycles}
