"""The demo's loop split by part: where its CPU goes beyond the physics, per simulated second.

One demo trial (cameras off, seed 0) in this process with a timer around each part of the loop, then the same
trial under cProfile for the functions inside them:

  physics      p.stepSimulation
  per step     each pre- and post-step hook of the world by name: the servos' position loops (PositionDrives),
               the people's drive, the crowd's tick (its hook runs every 24th step: a request to the crowd process
               and the wait for its answer), the contact check (the first ContactFirmware hook of a step queries
               and attributes the robot's contact points for all), the people's contact check, the ring (its
               rays every 24th step)
  per tick     the bus cycle (host: encode, decode, the drivers; device: the parts' firmware answering), the base's
               odometry, each after-cycle hook (recording: TickLog, with its Foxglove channels; the goal watch ...)
  clock        LockstepClock.sleep_until less the world steps it takes
  controller   the rest of the loop (the guide robot's own code, robot.loop)
  crowd        the crowd process's CPU (/proc), beside the round trip it makes the world wait

The timers are perf_counter (wall): on a loaded machine a part's figure includes the time the process waited for a
core, so read the shares, not the absolute numbers; the process's CPU over the loop is printed beside them.

    .venv/bin/python -m bench.loop_parts [--seconds 20] [--seed 0] [--top 30] [--no-cprofile] [--smoke] [--crowded]

``--crowded``: the crowded trial of ``python -m bench.world --fair crowded`` instead (crowd_scale 100 from Saturday
14:00, background crowd only: ~150 people on average over 12 s, ~380 over 30 s), where the people's parts lead.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pybullet as p

TIMES: dict[str, float] = defaultdict(float)
COUNTS: dict[str, int] = defaultdict(int)


def _label(hook) -> str:
    name = getattr(hook, "__qualname__", type(hook).__name__)
    return {"PositionDrives.pre_step": "servos' position loops (PositionDrives)",
            "Pedestrians._drive": "people's drive",
            "CrowdBridge._pre_step": "crowd tick (round trip)",
            "ContactFirmware._post_step": "contact sensors (query + attribution)",
            "CrowdBridge._post_step": "people's contact check",
            "RangeRingFirmware._post_step": "ring (rays)"}.get(name, name)


def _instrument() -> None:
    """Timers around the loop's parts (class attributes patched for this process only)."""
    from hil.firmware_sim.bus_device import VirtualBusDevice
    from hil.firmware_sim.world.world import World
    from hil.runtime.clock.sim import LockstepClock
    from hil.runtime.robot import cycle as cycle_mod
    from hil.runtime.robot.robot import Robot
    from hil.runtime.robot import runner
    from hil.trial.record.tick_log import TickLog

    clock = time.perf_counter
    step_sim = p.stepSimulation

    def step(self) -> None:
        self._check_open()
        for hook in tuple(self._pre):
            t = clock()
            hook(self)
            TIMES[_label(hook)] += clock() - t
        t = clock()
        step_sim(physicsClientId=self.client)
        TIMES["physics (stepSimulation)"] += clock() - t
        COUNTS["steps"] += 1
        self.steps += 1
        for hook in tuple(self._post):
            t = clock()
            hook(self)
            TIMES[_label(hook)] += clock() - t

    World.step = step

    def timed(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                TIMES[label] += clock() - t
                COUNTS[label] += 1

        setattr(owner, name, wrapper)

    timed(cycle_mod.BusCycle, "run", "bus cycle")
    timed(VirtualBusDevice, "_receive", "bus cycle: device")
    timed(TickLog, "after_cycle", "recording (TickLog + Foxglove)")
    timed(Robot, "_cycle", "tick: Robot._cycle")
    timed(LockstepClock, "sleep_until", "clock: sleep_until")
    timed(runner, "run_until_done", "loop: run_until_done")


def _crowd_cpu() -> float:
    from hil.trial import task

    total = 0.0
    for crowd in list(getattr(task, "_IDLE", ())):
        fields = open(f"/proc/{crowd.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _trial(seconds: float, seed: int, out: Path, extra: dict | None = None):
    from hil.trial import Trial
    from hil.trial.presets import demo_spec

    return Trial(spec=demo_spec(duration=seconds, seed=seed, camera_rate=0.0, **(extra or {}))).run(out)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_parts", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated s of the demo trial (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=30, help="cProfile rows (by own time) to print")
    parser.add_argument("--no-cprofile", action="store_true", help="the timed split only")
    parser.add_argument("--smoke", action="store_true", help="0.5 s trials, no warm-up, 10 cProfile rows: runs, "
                        "prints")
    parser.add_argument("--crowded", action="store_true", help="the crowded trial (crowd_scale 100, Saturday 14:00)")
    args = parser.parse_args(argv)
    from .world import CROWDED

    extra = CROWDED if args.crowded else {}
    if args.smoke:
        args.seconds, args.top = 0.5, 10
    with tempfile.TemporaryDirectory(prefix="hil-bench-parts-") as tmp:
        if not args.smoke:  # a smoke's figures mean nothing: its timed trial pays the imports and starts the crowd
            _trial(1.0, args.seed, Path(tmp) / "warm", extra).raise_for_status()  # imports, caches, the crowd idle
        _instrument()
        TIMES.clear()
        COUNTS.clear()
        crowd0, cpu0 = _crowd_cpu(), time.process_time()
        result = _trial(args.seconds, args.seed, Path(tmp) / "timed", extra)
        result.raise_for_status()
        cpu, crowd = time.process_time() - cpu0, _crowd_cpu() - crowd0
        sim = result.sim_s
        rows = _split(dict(TIMES), sim)
        print(f"the {'crowded trial' if args.crowded else 'demo'}'s loop by part, {sim:g} simulated s ({COUNTS['steps']} steps, "
              f"{COUNTS['tick: Robot._cycle']} ticks), ms per simulated s (wall timers; load average "
              f"{os.getloadavg()[0]:.1f})")
        for label, ms in rows:
            print(f"  {label:<48} {ms:8.2f}")
        print(f"  {'(this process CPU over the whole trial run)':<48} {cpu / sim * 1e3:8.2f}")
        print(f"  {'(the crowd process CPU)':<48} {crowd / sim * 1e3:8.2f}")
        if not args.no_cprofile:
            profile = cProfile.Profile()
            profile.enable()
            _trial(args.seconds, args.seed, Path(tmp) / "profiled", extra).raise_for_status()
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
            print(text.getvalue())
    return {"parts_ms_per_sim_s": dict(rows), "cpu_ms_per_sim_s": cpu / sim * 1e3,
            "crowd_cpu_ms_per_sim_s": crowd / sim * 1e3}


def _split(times: dict[str, float], sim: float) -> list[tuple[str, float]]:
    """The timers as disjoint parts, ms per simulated s: nested timers are taken out of the ones around them."""
    per = {k: v / sim * 1e3 for k, v in times.items()}
    loop = per.pop("loop: run_until_done", 0.0)
    sleep = per.pop("clock: sleep_until", 0.0)
    tick = per.pop("tick: Robot._cycle", 0.0)
    bus = per.pop("bus cycle", 0.0)
    device = per.pop("bus cycle: device", 0.0)
    recording = per.pop("recording (TickLog + Foxglove)", 0.0)
    steps = sum(per.values())  # everything left is World.step's
    rows = sorted(per.items(), key=lambda kv: -kv[1])
    rows += [("bus cycle: host (encode, decode, drivers)", bus - device), ("bus cycle: device (firmware)", device),
             ("recording (TickLog + Foxglove)", recording),
             ("rest of the tick (odometry, other after-cycle hooks)", tick - bus - recording),
             ("clock (sleep_until less the steps)", sleep - steps),
             ("controller (the rest of the loop)", loop - sleep - tick),
             ("total (run_until_done)", loop)]
    return rows


if __name__ == "__main__":
    main()
