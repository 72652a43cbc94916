"""A mixed trial's overlay latency: from a pose change to the merged ring reading that reflects it,
pose -> crowd -> shadow world -> merged range, as percentiles, against the limit the pacing alone sets.

The "real" robot is the commbot served by another process on a pty with the real clock (`hil sim commbot --pty
--clock real --map arcade`), the crowd a `hil crowd --serve --realtime` process (background people on a Saturday
afternoon plus a scripted guest who comes to interact); this process opens the robot with a `crowd:` profile
(runtime/robot/overlay.py) and drives it east down the arcade's middle passage (turning on the spot while the merged front
reading is short), so the pose changes on every tick.

How the latency is measured: every world message carries the robot clock's time ``t`` of the pose in it, and
the crowd echoes the ``t`` of the newest world message it applied before each step (``world_t`` in its intents,
crowd/serve_realtime.py). So for each tick's pose change at t0 we know
  crowd  when the first intents stepped with that pose (or a newer one) arrived here: publish -> world SUB ->
         crowd step -> intents PUB -> our poll;
  merged when the first ring cast placed the people of such intents: the above plus the wait for the shadow
         ring's next measure (its update rate, 10 Hz for the catalog ring), i.e. the controller's reading.
The limit is what pacing alone costs at worst: a tick period (the pose waits for the cycle), the crowd's step
(it applies the world only at its step), a tick period (the intents wait for our next poll), a ring period (the
cast waits for its slot). Ratios p50/limit and p99/limit are printed.

The readings are recorded in a trial log (trial/record, MCAP): /robot/sensors with ``ring`` (what the
controller read), ``ring_real`` and ``ring_virtual`` apart; /robot/state, /pedestrians (the crowd's people), /clock.

    .venv/bin/python -m bench.mixed [--seconds 20] [--hz 20] [--out DIR]
"""
from __future__ import annotations

import argparse
import math
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from hil.bridge.process import spawn
from bench._pty_process import ROOT, PtyProcess, hil_command, stop

START = (-18.0, 0.0, 0.0)  # west hall, facing east down the middle passage
SCRIPT = f"""\
generate on
spawn guest = man01 at {START[0] + 6:g} 0
objective guest interact Dstop=1.2
move guest to {START[0] + 2.5:g} 0
run 10min
"""
SPEED_MPS, TURN_RADPS = 0.25, 0.4
CLEAR_M = 0.9  # the merged front reading below which the robot turns instead of driving on
STARTUP_S = 20.0


class CrowdProcess:
    """``hil crowd ... --serve tcp://127.0.0.1:* --realtime``; its first stdout line names the endpoint."""

    def __init__(self, script: Path):
        cmd = [*hil_command(), "crowd", "--map", "arcade", "--seed", "0", "--start", "sat 14:00", "--script",
               str(script), "--generate", "--serve", "tcp://127.0.0.1:*", "--realtime"]
        self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)  # dies with the bench
        line = _first_line(self.proc, STARTUP_S).split()
        if len(line) != 2 or line[0] != "crowd":
            self.close()
            raise RuntimeError(f"{' '.join(cmd)} did not say where it serves: {line}")
        self.endpoint = line[1]

    def close(self) -> None:
        stop(self.proc)


def _first_line(proc: subprocess.Popen, timeout_s: float) -> str:
    fd, buf = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf and time.monotonic() < deadline:
            if sel.select(0.1):
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
    return buf.decode().split("\n")[0]


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1]}


def first_after(events: list[tuple[float, float | None]], t0: float) -> float | None:
    """The time of the first event whose echoed pose time is t0 or later (events in time order)."""
    for when, echoed in events:
        if echoed is not None and echoed >= t0:
            return when
    return None


def latencies(ticks: list[tuple[float, bool]], arrivals: list[tuple[float, float | None]],
              casts: list[tuple[float, float | None]]) -> tuple[list[float], list[float]]:
    """(crowd, merged) latencies of every pose change that a later event reflects."""
    crowd, merged = [], []
    for t0, changed in ticks:
        if not changed:
            continue
        got, shown = first_after(arrivals, t0), first_after(casts, t0)
        if got is not None and shown is not None:
            crowd.append(got - t0)
            merged.append(shown - t0)
    return crowd, merged


def run(seconds: float, hz: float, out: Path, work: Path) -> dict:
    from hil.runtime import Robot
    from hil.trial.record import TrialRecorder

    script = work / "guest.scn"
    script.write_text(SCRIPT)
    pose = ",".join(f"{v:g}" for v in START)
    with PtyProcess([*hil_command(), "sim", "commbot", "--pty", "--clock", "real", "--map", "arcade",
                     f"--pose={pose}"]) as device:
        crowd = CrowdProcess(script)
        try:
            profile = {"bus": device.path, "clock": "real", "semantics": "commbot", "cache_dir": str(work / "cache"),
                       "start_pose": list(START), "crowd": {"endpoint": crowd.endpoint, "mode": "realtime"}}
            with Robot.open(profile) as robot, TrialRecorder(out) as log:
                return _drive(robot, log, seconds, hz)
        finally:
            crowd.close()


def _drive(robot, log, seconds: float, hz: float) -> dict:
    overlay, ring = robot.overlay, robot.sensors["ring"]
    front = min(range(len(ring.angles)), key=lambda i: abs(ring.angles[i]))
    ticks: list[tuple[float, bool]] = []
    arrivals: list[tuple[float, float | None]] = []
    casts: list[tuple[float, float | None]] = []
    t_start, last_pose, virtual_seen = robot.time, None, 0
    for tick in robot.loop(hz=hz, duration_s=seconds):
        t = overlay.published_t
        ticks.append((t, last_pose is not None and math.dist(overlay.pose, last_pose) > 1e-4))
        last_pose = overlay.pose
        if overlay.intents_time_s is not None and (not arrivals or arrivals[-1][0] != overlay.intents_time_s):
            arrivals.append((overlay.intents_time_s, overlay.world_t))
        if overlay.cast_time_s is not None and (not casts or casts[-1][0] != overlay.cast_time_s):
            casts.append((overlay.cast_time_s, overlay.cast_world_t))
        merged = ring.ranges
        virtual_seen += any(v is not None for v in ring.virtual_ranges)
        clear = merged[front] is None or merged[front] > CLEAR_M
        robot.base.drive(v=SPEED_MPS if clear else 0.0, w=0.0 if clear else TURN_RADPS)
        _record(log, tick.time - t_start, robot, overlay)
    crowd, shown = latencies(ticks, arrivals, casts)
    return {"ticks": len(ticks), "changes": sum(c for _, c in ticks), "crowd": crowd, "merged": shown,
            "crowd_dt": overlay.link.crowd_dt_s, "ring_period": overlay.period_s, "tick": 1.0 / hz,
            "virtual_ticks": virtual_seen, "counters": overlay.counters(), "odometry": tuple(robot.base.odometry)}


def _record(log, t: float, robot, overlay) -> None:
    t = max(0.0, t)
    readings = overlay.readings()
    x, y, yaw = readings["pose"]
    velocity = robot.base.velocity
    log.write("/clock", t, {"t": t})
    log.write("/robot/state", t, {"x": x, "y": y, "yaw": yaw, "vx": velocity.v, "w": velocity.w})
    log.write("/robot/sensors", t, {"ring": readings["merged"], "ring_real": readings["real"],
                                    "ring_virtual": readings["virtual"], "contacts": []})
    log.write("/pedestrians", t, {"people": [
        {"id": pid, "x": p["x"], "y": p["y"], "vx": p.get("vx", 0.0), "vy": p.get("vy", 0.0),
         "radius": p.get("radius", 0.25)} for pid, p in overlay.people.items()]})


def report(result: dict, out: Path, kept: bool = True) -> None:
    limit = 2 * result["tick"] + result["crowd_dt"] + result["ring_period"]
    print(f"mixed trial: {result['ticks']} ticks at {1 / result['tick']:g} Hz, the pose changed on "
          f"{result['changes']}; crowd step {result['crowd_dt']:g} s, ring update {result['ring_period']:g} s; "
          f"virtual people in the ring on {result['virtual_ticks']} ticks; odometry at the end "
          f"({result['odometry'][0]:.2f}, {result['odometry'][1]:.2f}, {result['odometry'][2]:.2f})")
    print(f"link: {result['counters']}")
    print(f"{'latency from a pose change (ms)':<44}{'n':>6}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    for name, values in (("pose -> crowd -> intents here", result["crowd"]),
                         ("pose -> crowd -> shadow -> merged range", result["merged"])):
        q = percentiles(values)
        cells = "".join(f"{q[k] * 1e3:9.1f}" for k in ("p50", "p90", "p99", "max")) if q else "  (none)"
        print(f"  {name:<42}{len(values):>6}{cells}")
    q = percentiles(result["merged"])
    if q:
        print(f"pacing limit (2 ticks + crowd step + ring period) {limit * 1e3:.0f} ms: merged p50/limit "
              f"{q['p50'] / limit:.2f}, p99/limit {q['p99'] / limit:.2f}")
    print(f"trial log (real and virtual ring readings apart): {out / 'trial.mcap'}"
          + ("" if kept else " (temporary: give --out DIR to keep it)"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mixed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="wall seconds of driving (default 10)")
    parser.add_argument("--hz", type=float, default=20.0, help="control loop rate (default 20)")
    parser.add_argument("--out", type=Path, help="trial folder (default: a temporary one, removed at the end)")
    args = parse_with_smoke(parser, argv, seconds=0.5)
    with tempfile.TemporaryDirectory(prefix="hil-bench-mixed-") as tmp:
        out = args.out or Path(tmp) / "trial"
        result = run(args.seconds, args.hz, out, Path(tmp))
        report(result, out, kept=args.out is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
