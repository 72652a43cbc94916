"""The trial's own cost and scale, side by side in one run; the figures that matter are the ratios.

  (a) loop   the demo trial's loop cost per simulated second, start-up apart: (wall time of a LONG s trial - that
             of a SHORT s one) / (LONG - SHORT), and the same by CPU time (the trial's process and its crowd's: the
             figure other processes' load moves least), each trial in its own child process (same interpreter),
             the sides alternating: this checkout with its cameras off (as a base without cameras has none),
             with its cameras recorded at the default 5 Hz, cameras off with the pipelined crowd, and with
             --against DIR (default /work/main when it exists) that checkout; beside them bare pybullet of the
             merged world: `hil urdf`'s commbot loaded with URDF_MERGE_FIXED_LINKS, the arcade's walls and as
             many people capsules as the trial had on average, p.stepSimulation() as often as the trial steps.
             Printed: cost per simulated second, the loop's share of bare pybullet's speed (target >= 80 %), the
             whole LONG s call's RTF and its ratio against DIR's (target >= 2.5x).
  (b) crowd  the crowd alone in the station (config/maps/station.yaml, 240 m x 90 m, five islands, six lanes):
             3,200 and 10,000 people walking the lanes end to end, steps per second at dt 0.1 of crowd.CrowdSim
             beside JuPedSim's collision-free speed model on the same geometry (a polygon with the islands as
             holes), the same start positions and goals.
  (c) people a trial in the arcade with ~30 and ~300 people (crowd_scale 10 and 100, Saturday 14:00; the
             mean people per crowd tick is printed): RTF of each and their ratio.

    .venv/bin/python -m bench.loop [--smoke] [--only loop|crowd|people] [--long 80 --short 20] [--against DIR]

--smoke: 1 s and 0.5 s trials (cameras off, lockstep, no warm-up trial), 100 people in the station stepped 3
times, 0.5 s trials at crowd_scale 1 and 3; the trials of (a) and (c) in one child process (TrialChild), so
one interpreter and one crowd process serve them all; exits 0, prints the tables; its figures mean nothing.
Figures on a loaded machine are depressed and noisy; every section prints the other processes' CPU.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hil.bridge.process import spawn

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_AGAINST = Path("/work/main")
STATION = "station"
LANES = (-37.5, -22.5, -7.5, 7.5, 22.5, 37.5)  # config/maps/station.yaml: lane centre lines (y)
LANE_HALF_M = 5.0  # people start within this of a lane's centre line (islands' faces are 5.5 m off it)
RADIUS_M = 0.25


# --- CPU of everything else --------------------------------------------------------------------------------------
def _busy_s() -> float:
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores kept busy by everything but this process and its children meanwhile (a loaded machine says so)."""

    def __enter__(self) -> CpuMeter:
        self._t, self._busy, self._ours = time.perf_counter(), _busy_s(), self._own()
        return self

    def __exit__(self, *exc) -> None:
        seconds = time.perf_counter() - self._t
        ours = self._own() - self._ours
        self.others = max(0.0, (_busy_s() - self._busy - ours) / seconds)

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def note(self) -> str:
        loaded = "; other processes were busy: the figures are depressed and noisy" if self.others > 0.25 else ""
        return f"other processes {self.others:.2f} cores{loaded}"


# --- (a) the demo trial's loop against bare pybullet of the merged world ---------------------------------------
# the trial child's functions (also run here: trial_walls(..., here=True)); _TRIAL_CHILD_MAIN runs them on its argv
_TRIAL_CHILD = """
import gc, json, os, resource, statistics, sys, tempfile, time
from pathlib import Path
from hil.trial import Trial
from hil.trial.presets import demo_spec
from hil.trial.record.log import read_log

def crowd_cpu():
    # the CPU of a crowd process kept idle across trials (trial/task.py's pool, where the checkout has one)
    try:
        from hil.trial import task
        idle = list(getattr(task, "_IDLE", ()))
    except ImportError:
        idle = []
    total = 0.0
    for crowd in idle:
        try:
            fields = open(f"/proc/{crowd.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total

def one(duration, extra, warm):
    with tempfile.TemporaryDirectory(prefix="hil-bench-loop-") as tmp:
        if warm:
            Trial(spec=demo_spec(duration=1.0, **extra)).run(Path(tmp) / "warm").raise_for_status()  # imports, caches
        gc.collect()
        cpu0, kids0, crowd0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN), crowd_cpu()
        start = time.perf_counter()
        Trial(spec=demo_spec(duration=duration, **extra)).run(Path(tmp) / "t").raise_for_status()
        wall = time.perf_counter() - start
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (time.process_time() - cpu0) + (kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) \\
            + max(0.0, crowd_cpu() - crowd0)
        log = read_log(Path(tmp) / "t" / "trial.mcap")
        counts = [len(m.data["people"]) for m in log.messages.get("/pedestrians", [])]
    return {"wall_s": wall, "cpu_s": cpu, "mean_people": statistics.fmean(counts) if counts else 0.0,
            "max_people": max(counts, default=0)}

"""
_TRIAL_CHILD_MAIN = """
for line in sys.stdin:  # a JSON list of [duration s, demo_spec extras, warm-up first] jobs a line, until EOF
    for duration, extra, warm in json.loads(line):
        print("RESULT", json.dumps(one(float(duration), extra, bool(warm))), flush=True)
"""
_here: dict = {}  # _TRIAL_CHILD's functions, defined in this process once (trial_walls(..., here=True))
TRIAL_TIMEOUT_S = 3600.0  # a run of trials in a child that takes longer is taken for a hang: the child is killed


class TrialChild:
    """A child process (this interpreter, checkout ``root`` on its path) running demo trials with _TRIAL_CHILD's
    ``one``: each :meth:`run` sends it a list of jobs and reads a result per job, until :meth:`close`. A full run
    starts one per trial (a trial's imports and caches stay out of the next one's figures); a smoke run gives one
    to every section, whose later trials find the imports and the crowd process warm."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._err = tempfile.TemporaryFile("w+")  # the child's log (its crowd's lines): said when it fails
        self.proc = spawn([sys.executable, "-c", _TRIAL_CHILD + _TRIAL_CHILD_MAIN], cwd=str(root),
                          env={**os.environ, "PYTHONPATH": str(root)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=self._err, text=True)  # dies with the bench

    def run(self, jobs: list[tuple[float, dict, bool]]) -> list[dict]:
        """The result of each (duration_s, extra, warm) job, in order; RuntimeError when the child fails."""
        hang = threading.Timer(TRIAL_TIMEOUT_S, self.proc.kill)
        hang.start()
        try:
            self.proc.stdin.write(json.dumps([list(job) for job in jobs]) + "\n")
            self.proc.stdin.flush()
            got = []
            while len(got) < len(jobs):
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the trial in {self.root} failed: {self._said()}")
                if line.startswith("RESULT "):  # other lines are the trial's own (pybullet's banner)
                    got.append(json.loads(line[len("RESULT "):]))
            return got
        except BrokenPipeError:
            raise RuntimeError(f"the trial in {self.root} failed: {self._said()}") from None
        finally:
            hang.cancel()

    def _said(self) -> str:
        self.proc.wait(timeout=60)
        self._err.seek(0)
        return self._err.read().strip()[-2000:]

    def close(self) -> None:
        """Its stdin closed, the child's loop ends and so does it (killed if it has not within a minute)."""
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        self._err.close()

    def __enter__(self) -> TrialChild:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def trial_wall(root: Path, duration_s: float, extra: dict | None = None, warm: bool = True) -> dict:
    """One demo trial of ``duration_s`` simulated seconds in a child process running checkout ``root`` (after a
    1 s warm-up trial unless ``warm`` is False): its wall time and the CPU time of it and its crowd."""
    return trial_walls(root, [(duration_s, extra or {}, warm)])[0]


def trial_walls(root: Path, jobs: list[tuple[float, dict, bool]], one_process: bool = False,
                here: bool = False, child: TrialChild | None = None) -> list[dict]:
    """:func:`trial_wall` of each (duration_s, extra, warm) in ``jobs``, each in a child process of its own, or
    with ``one_process`` all in one (the smoke run: a child's start-up and first trial cost more than a short
    trial; later trials in it find imports and the crowd process warm, so its figures mean nothing), or in
    ``child`` (a smoke run's child for all its sections), or with ``here`` in this process (a smoke run that has
    run a trial already: the child's code, no new interpreter and crowd process; only for this checkout)."""
    if here:
        if Path(root).resolve() != ROOT:
            raise ValueError(f"trials of another checkout ({root}) run in a child process, not here")
        if not _here:
            exec(compile(_TRIAL_CHILD, "<bench.loop child>", "exec"), _here)
        return [_here["one"](float(duration), extra, bool(warm)) for duration, extra, warm in jobs]
    if child is not None:
        if child.root.resolve() != Path(root).resolve():
            raise ValueError(f"a child of {child.root} cannot run the trials of {root}")
        return child.run(jobs)
    if not one_process:
        return [got for job in jobs for got in trial_walls(root, [job], one_process=True)]
    with TrialChild(root) as one_child:
        return one_child.run(jobs)


class BareMerged:
    """What a pybullet user would write for this robot: `hil urdf`'s commbot loaded with fixed links merged, the
    arcade's walls, ``capsules`` people standing in the north passage; only p.stepSimulation()."""

    def __init__(self, capsules: int, tmp: Path):
        import pybullet as p

        from hil.firmware_sim.world import World, load_map
        from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians

        from .world import commbot_urdf

        urdf, _model = commbot_urdf(tmp)
        self.p = p
        self.world = World()  # the floor, gravity, the time step and solver settings hil's world uses
        self.walls = len(self.world.add_map(load_map("arcade")))
        flags = p.URDF_USE_INERTIA_FROM_FILE | p.URDF_USE_IMPLICIT_CYLINDER | p.URDF_MERGE_FIXED_LINKS
        with _quiet_stdout():  # pybullet's C code narrates every merge on stdout
            self.body = p.loadURDF(str(urdf), basePosition=(-18.0, 0.0, 0.2), flags=flags,
                                   physicsClientId=self.world.client)
        self.links = p.getNumJoints(self.body, physicsClientId=self.world.client) + 1
        Pedestrians(self.world).sync([PedestrianIntent(i, -15.0 + 1.5 * i % 30, 8.25 - 1.0 * (i // 20), 0.0, 0.0)
                                      for i in range(capsules)])
        self.capsules = capsules
        self.time_step_s = self.world.time_step_s

    def seconds_per_sim_s(self, sim_s: float) -> tuple[float, float]:
        """(wall s, CPU s) per simulated second of stepping."""
        steps = max(1, round(sim_s / self.time_step_s))
        step, client = self.p.stepSimulation, self.world.client
        for _ in range(min(steps, 200)):
            step(physicsClientId=client)  # warm-up
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step(physicsClientId=client)
        sim = steps * self.time_step_s
        return (time.perf_counter() - start) / sim, (time.process_time() - cpu) / sim

    def close(self) -> None:
        self.world.close()


class _quiet_stdout:
    """File descriptor 1 to /dev/null for a while (C code's prints go around sys.stdout)."""

    def __enter__(self):
        sys.stdout.flush()
        self._saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)

    def __exit__(self, *exc):
        os.dup2(self._saved, 1)
        os.close(self._saved)


SIDES = {  # name: (label, demo_spec extras, this checkout?)
    "this": ("this checkout, cameras off (as the base)", {"camera_rate": 0.0}, True),
    "cameras": ("this checkout, cameras 5 Hz (the default)", {}, True),
    "pipelined": ("this checkout, cameras off, crowd_pipeline", {"camera_rate": 0.0, "crowd_pipeline": True}, True),
    "other": ("", {}, False),
}


def loop_section(long_s: float, short_s: float, against: Path | None, rounds: int, sides=("this", "cameras",
                 "pipelined"), warm: bool = True, out=print, one_process: bool = False,
                 child: TrialChild | None = None) -> dict:
    """(a): every side's loop cost per simulated second (LONG - SHORT), by wall and by CPU (the trial's process
    and its crowd's: what the load of other processes moves least), beside bare pybullet of the merged world."""
    names = [n for n in sides if n != "other"] + (["other"] if against is not None else [])
    roots = {n: ROOT if SIDES[n][2] else against for n in names}
    walls: dict[str, dict[float, list[float]]] = {n: {long_s: [], short_s: []} for n in names}
    cpus: dict[str, dict[float, list[float]]] = {n: {long_s: [], short_s: []} for n in names}
    people: list[float] = []
    with CpuMeter() as cpu, tempfile.TemporaryDirectory(prefix="hil-bench-loop-") as tmp:
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                durations = (long_s, short_s) if r % 2 == 0 else (short_s, long_s)
                gots = trial_walls(roots[name], [(d, SIDES[name][1], warm) for d in durations], one_process,
                                   child=child if roots[name] == ROOT else None)
                for duration, got in zip(durations, gots):
                    walls[name][duration].append(got["wall_s"])
                    cpus[name][duration].append(got.get("cpu_s", float("nan")))
                    if name == names[0] and duration == long_s:
                        people.append(got["mean_people"])
        bare = BareMerged(round(statistics.fmean(people)), Path(tmp))
        try:
            measured = [bare.seconds_per_sim_s(long_s - short_s) for _ in range(rounds)]
            bare_wall = statistics.median(m[0] for m in measured)
            bare_cpu = statistics.median(m[1] for m in measured)
            info = (bare.walls, bare.capsules, bare.links)
        finally:
            bare.close()
    out(f"(a) the demo trial's loop, {long_s:g} s - {short_s:g} s trials, "
        f"{'both in one process' if one_process else 'each in its own process'}"
        f"{' (a 1 s warm-up trial first)' if warm else ''}, {rounds} alternating round(s), medians; bare pybullet: "
        f"merged commbot ({info[2]} links), {info[0]} walls, {info[1]} capsules (the trial's mean people)")
    out(f"  {'side':<46} {'loop wall':>9} {'of bare':>8} {'loop CPU':>9} {'of bare':>8} {'whole RTF':>10}")
    result: dict = {"bare_s_per_sim_s": bare_wall, "bare_cpu_per_sim_s": bare_cpu,
                    "mean_people": statistics.fmean(people), "others_cores": 0.0}
    for name in names:
        long_wall, short_wall = (statistics.median(walls[name][d]) for d in (long_s, short_s))
        long_cpu, short_cpu = (statistics.median(cpus[name][d]) for d in (long_s, short_s))
        cost, cpu_cost = (long_wall - short_wall) / (long_s - short_s), (long_cpu - short_cpu) / (long_s - short_s)
        rtf = long_s / long_wall
        label = SIDES[name][0] or str(roots[name])
        out(f"  {label:<46} {cost:9.3f} {bare_wall / cost:8.0%} {cpu_cost:9.3f} {bare_cpu / cpu_cost:8.0%} "
            f"{rtf:10.2f}")
        result[name] = {"loop_s_per_sim_s": cost, "of_bare": bare_wall / cost, "loop_cpu_per_sim_s": cpu_cost,
                        "cpu_of_bare": bare_cpu / cpu_cost, "whole_rtf": rtf, "long_wall_s": long_wall,
                        "short_wall_s": short_wall, "long_cpu_s": long_cpu}
    out(f"  {'bare pybullet, merged world, stepSimulation':<46} {bare_wall:9.3f} {1:8.0%} {bare_cpu:9.3f} {1:8.0%} "
        f"{1 / bare_wall:10.2f}")
    if "other" in result and "this" in result:
        ratio = result["this"]["whole_rtf"] / result["other"]["whole_rtf"]
        cpu_ratio = result["other"]["long_cpu_s"] / result["this"]["long_cpu_s"]
        result["whole_vs_other"], result["whole_cpu_vs_other"] = ratio, cpu_ratio
        out(f"  whole {long_s:g} s call, cameras off against the other checkout: RTF {ratio:.2f}x, CPU {cpu_ratio:.2f}x "
            f"less (target >= 2.5x); loop at {result['this']['of_bare']:.0%} of bare by wall, "
            f"{result['this']['cpu_of_bare']:.0%} by CPU (target >= 80 %)")
    out(f"  {cpu.note()}")
    result["others_cores"] = cpu.others
    return result


# --- (b) the crowd alone in the station, beside JuPedSim ---------------------------------------------------------
def station_scene(n: int, seed: int = 1) -> list[tuple[tuple[float, float], tuple[float, float], float]]:
    """``n`` people on a jittered grid in the lanes (no two closer than 0.6 m), half walking east, half west, each
    to the far end of their lane; preferred speeds N(1.3, 0.1) m/s. (start, goal, speed) per person."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_lane = -(-n // len(LANES))
    columns = max(2, -(-per_lane // 12))  # 12 rows across a lane, 0.8 m apart; columns >= 1.1 m apart up to 10,000
    xs = np.linspace(-80.0, 80.0, columns)
    people = []
    for lane in LANES:
        for k in range(per_lane):
            if len(people) == n:
                break
            row, col = k % 12, k // 12
            x = xs[col] + rng.uniform(-0.05, 0.05) + (0.4 if row % 2 else 0.0)
            y = lane - 4.4 + 0.8 * row + rng.uniform(-0.05, 0.05)
            east = (len(people) % 2) == 0
            goal = (110.0 if east else -110.0, y)
            people.append(((float(x), float(y)), goal, float(np.clip(rng.normal(1.3, 0.1), 0.8, 1.8))))
    return people


class HilCrowd:
    name = "hil crowd (crowd.CrowdSim)"

    def __init__(self, scene, dt: float):
        from hil.crowd.agents import AgentSpec
        from hil.crowd.maps import load_crowd_map
        from hil.crowd.sim import CrowdSim

        self.sim = CrowdSim(load_crowd_map(STATION), seed=0, dt=dt)
        for start, goal, speed in scene:
            self.sim.add_agent(AgentSpec("adult", RADIUS_M, speed, start, [goal], exit_on_arrival=False))

    def step(self) -> None:
        self.sim.step()

    def count(self) -> int:
        return len(self.sim.agents)


class JupedsimCrowd:
    name = "JuPedSim CFSM"

    def __init__(self, scene, dt: float):
        import jupedsim as jps
        import shapely

        outer = shapely.box(-119.85, -44.85, 119.85, 44.85)
        islands = [shapely.box(-90.15, y - 2.15, 90.15, y + 2.15) for y in (-30.0, -15.0, 0.0, 15.0, 30.0)]
        geometry = outer.difference(shapely.union_all(islands))
        sim = jps.Simulation(model=jps.CollisionFreeSpeedModel(), geometry=geometry, dt=dt)
        east = sim.add_exit_stage([(109, -44), (119, -44), (119, 44), (109, 44)])
        west = sim.add_exit_stage([(-119, -44), (-109, -44), (-109, 44), (-119, 44)])
        journeys = {True: (sim.add_journey(jps.JourneyDescription([east])), east),
                    False: (sim.add_journey(jps.JourneyDescription([west])), west)}
        for start, goal, speed in scene:
            journey, stage = journeys[goal[0] > 0]
            sim.add_agent(jps.CollisionFreeSpeedModelAgentParameters(
                position=start, desired_speed=speed, radius=RADIUS_M, journey_id=journey, stage_id=stage))
        self.sim = sim

    def step(self) -> None:
        self.sim.iterate()

    def count(self) -> int:
        return self.sim.agent_count()


MAX_STEPS = 150  # 15 s at dt 0.1: nobody walks from |x| <= 80 to an exit (|x| >= 109) meanwhile, so N stays put


def steps_per_s(side, seconds: float, min_steps: int = 3) -> tuple[float, int]:
    side.step()
    side.step()  # warm-up (numba's kernels load on first use)
    steps, start = 0, time.perf_counter()
    while steps < min_steps or (time.perf_counter() - start < seconds and steps < MAX_STEPS):
        side.step()
        steps += 1
    return steps / (time.perf_counter() - start), side.count()


def crowd_section(sizes: list[int], seconds: float, dt: float = 0.1, out=print) -> dict:
    try:
        import jupedsim  # noqa: F401  (the bench extra: pip install 'hil[bench]')
        peers = [JupedsimCrowd]
    except ImportError:
        peers = []
    result: dict = {}
    out(f"(b) the crowd alone in the station (240 m x 90 m, five islands, six lanes; people walk their lane end to "
        f"end), dt {dt:g} s, ~{seconds:g} s of stepping per side and size")
    out(f"  {'people':>7}  {'side':<30} {'steps/s':>8} {'RTF':>7} {'agents':>7}")
    with CpuMeter() as cpu:
        for n in sizes:
            scene = station_scene(n)
            row: dict = {}
            for kind in [HilCrowd] + peers:
                side = kind(scene, dt)
                rate, agents = steps_per_s(side, seconds)
                row[kind.name] = rate
                out(f"  {n:7d}  {kind.name:<30} {rate:8.2f} {rate * dt:7.2f} {agents:7d}")
                del side
            if len(row) > 1:
                ours, theirs = row[HilCrowd.name], row[JupedsimCrowd.name]
                out(f"  {n:7d}  hil / JuPedSim steps per second: {ours / theirs:.2f}x")
                row["ratio"] = ours / theirs
            result[n] = row
    if not peers:
        out("  JuPedSim is not installed (pip install 'hil[bench]'): hil's crowd alone")
    out(f"  {cpu.note()}")
    return result


# --- (c) a trial with many people --------------------------------------------------------------------------------
def people_section(duration_s: float, scales: tuple[float, float], warm: bool = True, out=print,
                   one_process: bool = False, child: TrialChild | None = None) -> dict:
    rows = {}
    with CpuMeter() as cpu:
        jobs = [(duration_s, {"crowd_scale": scale, "crowd_start": "sat 14:00", "scenario": None}, warm)
                for scale in scales]
        for scale, got in zip(scales, trial_walls(ROOT, jobs, one_process, child=child)):
            rows[scale] = {"rtf": duration_s / got["wall_s"], **got}
    low, high = (rows[s] for s in scales)
    out(f"(c) the demo trial in the arcade ({duration_s:g} s, background crowd only, Saturday 14:00) at two crowd "
        f"scales")
    out(f"  {'crowd_scale':>11} {'mean people':>12} {'max':>5} {'wall s':>7} {'RTF':>6}")
    for scale, row in rows.items():
        out(f"  {scale:11g} {row['mean_people']:12.1f} {row['max_people']:5d} {row['wall_s']:7.2f} {row['rtf']:6.2f}")
    out(f"  RTF with {high['mean_people']:.0f} people / with {low['mean_people']:.0f}: {high['rtf'] / low['rtf']:.2f}")
    out(f"  {cpu.note()}")
    return {"rows": rows, "ratio": high["rtf"] / low["rtf"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.loop", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="smallest settings (about 20 s)")
    parser.add_argument("--only", choices=("loop", "crowd", "people"), help="one section only")
    parser.add_argument("--long", type=float, default=80.0, help="the long trial, simulated s (default 80)")
    parser.add_argument("--short", type=float, default=20.0, help="the short trial, simulated s (default 20)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of (a) (default 1)")
    parser.add_argument("--against", default=None, help="another checkout for (a) (default /work/main if present; "
                                                        "'none' for none)")
    parser.add_argument("--sizes", default="3200,10000", help="people in the station for (b)")
    parser.add_argument("--crowd-seconds", type=float, default=5.0, help="stepping per side and size in (b)")
    parser.add_argument("--people-duration", type=float, default=20.0, help="simulated s of the trials in (c)")
    parser.add_argument("--scales", default="10,100", help="crowd_scale of the two trials in (c) (default 10,100: ~30 and ~300 people)")
    args = parser.parse_args(argv)
    against = None if args.against == "none" else Path(args.against) if args.against else (
        DEFAULT_AGAINST if (DEFAULT_AGAINST / "trial").is_dir() and DEFAULT_AGAINST.resolve() != ROOT else None)
    if args.smoke:
        args.long, args.short, args.sizes, args.crowd_seconds = 1.0, 0.5, "100", 0.0  # (b): its 3 timed steps
        args.people_duration, args.scales, against = 0.5, "1,3", None
    sizes = [int(s) for s in args.sizes.split(",") if s]
    scales = tuple(float(s) for s in args.scales.split(","))
    results: dict = {}
    with TrialChild(ROOT) if args.smoke else contextlib.nullcontext() as child:  # a smoke's trials: one child
        if args.only in (None, "loop"):
            results["loop"] = loop_section(args.long, args.short, against, args.rounds,
                                           sides=("this",) if args.smoke else ("this", "cameras", "pipelined"),
                                           warm=not args.smoke, one_process=args.smoke, child=child)
        if args.only in (None, "crowd"):
            results["crowd"] = crowd_section(sizes, args.crowd_seconds)
        if args.only in (None, "people"):
            results["people"] = people_section(args.people_duration, scales, warm=not args.smoke,
                                               one_process=args.smoke, child=child)
    return results


if __name__ == "__main__":
    main()
