"""Sweep every servo on a bus with one SyncWrite + one FastSyncRead per cycle, then print the bus statistics.

The same file runs on the virtual device in-process, on a virtual device behind a pty, or on real servos:

    python examples/bus_sweep.py sim://servo_chain
    hil sim servo_chain --pty            # prints /dev/pts/N, then:
    python examples/bus_sweep.py /dev/pts/N
    python examples/bus_sweep.py serial:///dev/ttyUSB0?baud=1000000
"""
from __future__ import annotations

import argparse
import math
import time

from hil.devices.control_table import XM430_W350
from hil.runtime.bus import BusHost
from hil.runtime.transports import open_transport


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="sim://servo_chain")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--amplitude-rad", type=float, default=0.5)
    args = parser.parse_args()

    table = XM430_W350
    goal, present = table["goal_position"], table["present_position"]
    with BusHost(open_transport(args.url)) as bus:
        ids = [i for i, (model, _) in bus.ping_all().items() if model == table.model_number]
        print(f"servos on {args.url}: {ids}")
        bus.sync_write_register(table["torque_enable"], {i: 1 for i in ids})
        start = time.perf_counter()
        cycles = 0
        while (t := time.perf_counter() - start) < args.seconds:
            offset = args.amplitude_rad * math.sin(2 * math.pi * 0.5 * t) * 4096 / (2 * math.pi)
            bus.sync_write_register(goal, {i: 2048 + round(offset) for i in ids})
            positions = bus.sync_read_register(present, ids, fast=True)
            cycles += 1
        bus.sync_write_register(table["torque_enable"], {i: 0 for i in ids})
        print(f"{cycles / args.seconds:.0f} cycles/s; last positions {positions}")
        print(bus.stats.summary())


if __name__ == "__main__":
    main()
