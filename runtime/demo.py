"""``hil demo``: the best end-to-end run there is, on the built-in virtual robot, no hardware.

``hil demo [--out DIR] [--seed N] [--scenario S] [--duration S] [--gui]`` is the full trial (:func:`run_trial`):
a crowd process (``hil crowd --map arcade --serve --script S --generate``: the staged scene of reference 000
FIG. 11 over background generation from the weekday rates) ticked by the world in lockstep, the commbot in the
arcade on the simulator's clock, driven by examples/guide_robot.py through the Robot API, recorded into
DIR/trial.mcap and reported as DIR/metrics.json and DIR/topdown.png. The trial ends a little after the guide
reaches its goal, or at ``duration`` (simulated seconds). The same seed gives the same bytes.
``hil demo --servo-chain`` is the bus-only run: 17 servos at emulated 1 Mbaud moved by a 100 Hz SyncWrite +
FastSyncRead loop. The harness imports firmware_sim and bridge lazily, inside functions.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

from devices.control_table import XM430_W350

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


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# --- the full trial (issue 7 item 4): crowd + world + guide robot + recording + report -----------------------------

TRIAL_MAP = "arcade"
DEFAULT_SCENARIO = "guide_meets_child"  # config/scenarios/guide_meets_child.scn; "none": background crowd only
DEFAULT_DURATION_S = 240.0
AFTER_GOAL_S = 3.0  # the trial goes on this long after the goal is reached, then ends
TRIAL_HZ = 10.0
BUS_STATS_EVERY_S = 1.0
ROBOT_RADIUS_M = 0.3
DEFAULT_CROWD_TIMEOUT_S = 10.0


class TrialError(RuntimeError):
    """The trial could not run to its end (the crowd died, the world failed, ...)."""


def _load_example(name: str):
    import importlib.util

    path = EXAMPLES / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: the demo controller ships with the source checkout")
    spec = importlib.util.spec_from_file_location(f"hil_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_crowd(seed: int, crowd_map: str = TRIAL_MAP, scenario: str | None = None):
    """``hil crowd --map MAP --serve tcp://127.0.0.1:* --seed N [--script S --generate]`` as a subprocess;
    returns (process, endpoint). A bad scenario fails here with the crowd's own file:line message."""
    import subprocess
    import sys

    command = [sys.executable, "-c", "import sys; from runtime.cli import main; sys.exit(main())", "crowd",
               "--map", crowd_map, "--serve", "tcp://127.0.0.1:*", "--seed", str(seed)]
    if scenario:
        command += ["--script", scenario, "--generate"]
    from .process import spawn  # dies with us, even on SIGKILL (issue 18 item 10)
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(EXAMPLES.parent))
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "crowd":
        proc.kill()
        _, err = proc.communicate()
        reason = err.strip().splitlines()[-1] if err.strip() else f"said {' '.join(line)!r}"
        raise TrialError(f"the crowd did not start: {reason} (exit {proc.returncode})")
    import threading

    threading.Thread(target=_relay, args=(proc.stderr,), daemon=True).start()  # its log lines reach our stderr
    return proc, line[1]


def _relay(stream) -> None:
    import sys

    for line in stream:
        sys.stderr.write(line)


def _map_message(name: str, start, goal) -> dict:
    # lazily: the harness, not the runtime, knows the world's files
    from firmware_sim.world import load_map

    the_map = load_map(name)
    return {"name": the_map.name, "walls": [[*w.start, *w.end] for w in the_map.walls],
            "places": {k: list(v) for k, v in the_map.places.items()}, "start": list(start[:2]),
            "goal": list(goal), "goal_radius": 0.5}


def run_trial(out_dir: str | Path | None = None, seed: int = 0, duration_s: float = DEFAULT_DURATION_S,
              crowd_timeout_s: float = DEFAULT_CROWD_TIMEOUT_S, crowd_endpoint: str | None = None, out=print,
              progress: bool = True, scenario: str | None = DEFAULT_SCENARIO, gui: bool = False) -> dict:
    """The full trial: returns the metrics (also in OUT/metrics.json, with OUT/trial.mcap and OUT/topdown.png).

    ``scenario``: a script under config/scenarios/ (or a path) the crowd stages over its background generation;
    None or "none": background only. ``crowd_endpoint``: an already served crowd (``hil crowd --serve``) instead
    of starting one (its own options then decide the scenario). ``gui``: the pybullet viewer (needs a display).
    Raises TrialError naming the crowd's endpoint when it stops answering for ``crowd_timeout_s``."""
    from bridge.crowd_link import CrowdLinkError

    from .robot import Robot
    from .trial import TrialRecorder
    from .trial.report import build_report

    if not duration_s > 0:
        raise TrialError(f"the trial's duration must be > 0 s, not {duration_s:g}")
    scenario = None if scenario in (None, "", "none") else scenario
    if gui:
        from firmware_sim.world import display_available  # the harness, not the runtime, knows the world

        if not display_available():
            raise TrialError("--gui needs a display and DISPLAY is not set; run without --gui (the trial is the "
                             "same, only unwatched) or from a desktop session")
    out_dir = Path(out_dir or f"trials/demo-{seed}")
    guide_mod = _load_example("guide_robot.py")
    start, goal = guide_mod.START, guide_mod.WAYPOINTS[-1]
    proc, endpoint = (None, crowd_endpoint) if crowd_endpoint else start_crowd(seed, scenario=scenario)
    url = (f"sim://commbot?clock=sim&map={TRIAL_MAP}&seed={seed}&crowd={endpoint}&crowd_timeout={crowd_timeout_s:g}"
           f"&pose={start[0]:g},{start[1]:g},{start[2]:g}" + ("&gui=1" if gui else ""))
    profile = {"bus": url, "clock": "sim", "semantics": "commbot",
               "description": "hil demo: the commbot guide in the arcade with a crowd, on the simulator's clock"}
    wall_start = time.perf_counter()
    reached_at = None
    try:
        with TrialRecorder(out_dir) as rec, Robot.open(profile) as robot:
            crowd = robot.bus.transport.embodied.crowd
            rec.write("/trial/meta", 0.0, {"seed": seed, "scenario": scenario or "background",
                                           "profile": "commbot-arcade", "versions": {"hil": "demo"},
                                           "robot_radius": ROBOT_RADIUS_M})
            rec.write("/map", 0.0, _map_message(TRIAL_MAP, start, goal))
            guide = guide_mod.Guide(robot)
            try:
                reached_at = _trial_loop(robot, guide, crowd, rec, duration_s,
                                         (lambda line: out(line)) if progress else None, wall_start)
            except CrowdLinkError as exc:
                raise TrialError(f"trial failed: {exc}") from None
        wall_s = time.perf_counter() - wall_start
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
    metrics = build_report(out_dir)
    simulated = metrics.get("duration_s") or duration_s
    out(f"trial done: {simulated:g} s simulated in {wall_s:.1f} s wall; "
        f"{f'goal reached at {reached_at:.1f} s' if reached_at is not None else 'goal not reached'}, "
        f"{guide.engagements} engagement(s); wrote {out_dir}/trial.mcap, metrics.json, topdown.png")
    return metrics


def _trial_loop(robot, guide, crowd, rec, duration_s: float, progress, wall_start: float) -> float | None:
    """Tick the guide and record everything each tick; returns when the goal was reached (or None)."""
    ring, bumper, base = robot.sensors["ring"], robot.sensors["bumper"], robot.base
    next_stats, next_progress, reached_at = 0.0, 0.0, None
    embodied = robot.bus.transport.embodied
    for tick in robot.loop(hz=TRIAL_HZ, duration_s=duration_s):
        t = tick.time
        if not guide.done:
            guide.step(robot)
        elif reached_at is None:
            reached_at = t
        odometry = base.odometry
        vel = base.velocity
        with embodied.device.lock:  # ground truth from the world, read between steps
            true = crowd.robot_state()
            people, touched, lines = crowd.states(), crowd.take_contacts(), crowd.take_script_events()
        x, y = true["x"], true["y"]  # where the robot is (metrics, picture); odometry is what it believes
        rec.write("/clock", t, {"t": t})
        rec.write("/robot/state", t, {"x": x, "y": y, "yaw": true["yaw"], "vx": vel.v, "w": vel.w, "mode": guide.mode,
                                      "odometry": list(odometry),
                                      "joints": {n: j.position for n, j in robot.joints.items()}})
        rec.write("/robot/sensors", t, {"ring": ring.ranges, "contacts": [z for z, on in bumper.pressed.items() if on]})
        rec.write("/pedestrians", t, {"people": people})
        rec.write("/world/contacts", t, {"people": touched})
        for line in lines:
            rec.write("/crowd/script", t, line)
        if t >= next_stats - 1e-9:
            stats = robot.stats.as_dict()
            rec.write("/bus/stats", t, {k: v for k, v in stats.items() if not k.startswith("latency")})
            next_stats += BUS_STATS_EVERY_S
        if progress is not None and t >= next_progress - 1e-9:
            progress(_progress_line(t, duration_s, x, y, len(people), guide.mode, time.perf_counter() - wall_start))
            next_progress += max(1.0, duration_s / 20)
        if reached_at is not None and t >= reached_at + AFTER_GOAL_S - 1e-9:
            break
    return reached_at


def _progress_line(t: float, duration_s: float, x: float, y: float, people: int, mode: str, wall_s: float) -> str:
    width = 20
    done = min(width, round(width * t / duration_s)) if duration_s > 0 else width
    return (f"[{'#' * done}{'.' * (width - done)}] t={t:5.1f}/{duration_s:g} s  robot ({x:+6.2f}, {y:+5.2f}) "
            f"{mode:6s}  {people:2d} people  wall {wall_s:5.1f} s")
