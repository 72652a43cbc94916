"""``hil demo --servo-chain``: the bus-only demo, 17 servos at emulated 1 Mbaud moved by a 100 Hz SyncWrite +
FastSyncRead loop (no world, no trial: the bus host alone). The full demo is a trial preset (trial/presets.py).
"""
from __future__ import annotations

import math
import time

from hil.devices.control_table import XM430_W350

from .bus import BusHost
from .transports import open_transport

TICKS_PER_RAD = 4096 / (2 * math.pi)
CENTER = 2048


def run_servo_chain_demo(url: str = "sim://servo_chain?baud=1000000&latency_ms=0.1", duration_s: float = 3.0,
                         rate_hz: float = 100.0, amplitude_rad: float = 0.6, out=print) -> dict:
    table = XM430_W350
    goal, present, torque = table["goal_position"], table["present_position"], table["torque_enable"]
    with BusHost(open_transport(url)) as bus:
        found = bus.ping_all()
        ids = sorted(i for i, (model, _) in found.items() if model == table.model_number)
        out(f"{url}: found {len(ids)} XM430-W350-compatible servos: {ids}")
        for i in ids:
            bus.write(i, table["return_delay_time"].address, b"\x00")  # 0 us: the usual setting for fast loops
        bus.sync_write_register(torque, {i: 1 for i in ids})
        period = 1.0 / rate_hz
        start = time.perf_counter()
        next_tick, cycles, worst_error = start, 0, 0.0
        positions: dict[int, int] = {}
        while (now := time.perf_counter()) - start < duration_s:
            t = now - start
            goals = {i: CENTER + round(amplitude_rad * TICKS_PER_RAD * math.sin(2 * math.pi * 0.5 * t - 0.3 * i))
                     for i in ids}
            bus.sync_write_register(goal, goals)
            positions = bus.sync_read_register(present, ids, fast=True)
            cycles += 1
            if t > 0.5:
                worst_error = max(worst_error, max(abs(goals[i] - positions[i]) for i in ids) / TICKS_PER_RAD)
            if cycles % int(rate_hz / 2) == 0:
                shown = "  ".join(f"{i}:{(positions[i] - CENTER) / TICKS_PER_RAD:+.2f}" for i in ids[:6])
                out(f"t={t:4.1f}s  present [rad] {shown} ...")
            next_tick += period
            delay = next_tick - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        bus.sync_write_register(torque, {i: 0 for i in ids})
        elapsed = time.perf_counter() - start
        out(f"{cycles} cycles in {elapsed:.2f} s ({cycles / elapsed:.1f} Hz); worst tracking error after 0.5 s: "
            f"{worst_error:.3f} rad (first-order servo, tau 50 ms)")
        out(f"bus: {bus.stats.summary()}")
        return {"cycles": cycles, "ids": ids, "stats": bus.stats.as_dict(), "positions": positions}
