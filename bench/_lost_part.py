"""Section (f) of bench/bus_cycle.py: the Robot's loop rate with one part lost against none lost (issue 26).

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

from runtime.robot import Robot

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
