"""The Python twin of commbot_neck.c: the same bus traffic on the same clock, for comparing traces.

    python examples/native/commbot_neck.py "sim://commbot?clock=sim" 250

One servo (default 30, the commbot's neck yaw) gets torque on, then every 20 ms of the simulator's clock a goal
position (the C program's triangle wave) is written and the present position read back, one Write and one Read
per tick as the C program sends them. Prints "tick K t_ns T goal G present P" lines, the C program's format.
"""
from __future__ import annotations

import sys

from hil.devices.control_table import XM430_W350 as XM
from hil.runtime.bus import BusHost
from hil.runtime.clock import open_clock
from hil.runtime.transports import open_transport

PERIOD_NS = 20_000_000


def goal_at(k: int) -> int:
    phase = k % 100
    return 2048 + (phase if phase < 50 else 100 - phase) * 16 - 400


def run(url: str, ticks: int = 250, servo_id: int = 30, out=print) -> None:
    with BusHost(open_transport(url)) as bus:
        clock = open_clock("sim", transport=bus.transport, name="commbot_neck.py")
        try:
            bus.write_register(servo_id, XM["torque_enable"], 1)
            start_ns = round(clock.now() * 1e9)
            for k in range(ticks):
                goal = goal_at(k)
                bus.write_register(servo_id, XM["goal_position"], goal)
                present = bus.read_register(servo_id, XM["present_position"])
                out(f"tick {k} t_ns {round(clock.now() * 1e9) - start_ns} goal {goal} present {present}")
                clock.sleep_until((start_ns + (k + 1) * PERIOD_NS) / 1e9)
        finally:
            clock.close()


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 250, int(sys.argv[3]) if len(sys.argv) > 3 else 30)
