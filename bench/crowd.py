"""The crowd's social force against pysocialforce and JuPedSim on the same corridor, in one run.

The scenario, the same for every side: a corridor 200 m long and 6 m wide (two walls), N pedestrians placed at
random (seeded, no two closer than 0.6 m) in its middle 100 m, half walking east and half west (counterflow), each
to a goal 0.5 m before the far end, preferred speeds N(1.3, 0.1) m/s, radius 0.25 m. No one reaches a goal within
the simulated time measured (at most 20 s), so N stays constant. Sides:

  hil crowd            crowd.CrowdSim (ours): social force with neighbour grid, walls, contacts; dt 0.1 s
  pysocialforce        pysocialforce.Simulator, its default config plus step_width (its dt) 0.1 s so simulated
                       time compares and agent_radius 0.25 m; walls as its obstacle lines (sampled at its default
                       10 points per metre)
  JuPedSim CFSM        jupedsim.CollisionFreeSpeedModel (Tordeux et al.'s collision-free speed model, first order),
                       exit stages at both ends; at its default dt 0.01 s, and at 0.1 s (same dt as ours)
  JuPedSim SFM         jupedsim.SocialForceModel (Helbing, Farkas & Vicsek 2000, body forces), default dt 0.01 s

Each side is built, stepped twice (warm-up: numba compiles pysocialforce's kernels on first use), then stepped
for about --seconds of wall time (capped at 20 s simulated). v m/s is the mean progress along each person's
walking direction over the measured steps (a jammed crowd is cheap; this shows the sides did comparable work). steps/s = steps / wall time; RTF (real-time factor)
= simulated time / wall time = steps/s x dt. The targets (issue 6) at 400 agents: >= 10x pysocialforce's steps/s
at the same dt, and an RTF at least JuPedSim's (we compare with JuPedSim at its default dt, and show 0.1 s too).

    .venv/bin/python -m bench.crowd [--seconds 2] [--sizes 100,400,800]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

LENGTH_M = 200.0
WIDTH_M = 6.0
RADIUS_M = 0.25
MAX_SIM_S = 20.0


def scenario(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Start positions, walking directions (+1 east, -1 west), goals and preferred speeds, shared by all sides."""
    rng = np.random.default_rng(seed)
    pos = np.zeros((0, 2))
    while len(pos) < n:
        p = np.array([rng.uniform(LENGTH_M / 4, 3 * LENGTH_M / 4), rng.uniform(0.5, WIDTH_M - 0.5)])
        if not len(pos) or np.min(np.hypot(*(pos - p).T)) >= 0.6:
            pos = np.vstack([pos, p])
    east = np.arange(n) % 2 == 0
    goal_x = np.where(east, LENGTH_M - 0.5, 0.5)
    goals = np.stack([goal_x, pos[:, 1]], axis=1)
    v0 = np.clip(rng.normal(1.3, 0.1, n), 0.8, 1.8)
    return {"pos": pos, "east": east, "goals": goals, "v0": v0}


class HilSide:
    def __init__(self, sc: dict[str, np.ndarray]):
        from crowd.agents import AgentSpec
        from crowd.maps import parse_crowd_map
        from devices.yaml_source import load_yaml_text
        from crowd.sim import CrowdSim

        text = (f"name: corridor\nwalls:\n  - {{from: [0, 0], to: [{LENGTH_M}, 0]}}\n"
                f"  - {{from: [0, {WIDTH_M}], to: [{LENGTH_M}, {WIDTH_M}]}}\n")
        crowd_map = parse_crowd_map(load_yaml_text(text, "<bench corridor>"), "<bench corridor>")
        self.name, self.dt = "hil crowd", 0.1
        self.sim = CrowdSim(crowd_map, seed=0, dt=self.dt)
        for p, g, v in zip(sc["pos"], sc["goals"], sc["v0"]):
            self.sim.add_agent(AgentSpec("adult", RADIUS_M, float(v), tuple(p), [tuple(g)], exit_on_arrival=False))

    def step(self) -> None:
        self.sim.step()

    def count(self) -> int:
        return len(self.sim.agents)

    def positions(self) -> np.ndarray:
        return self.sim.agents.pos.copy()  # rows in scenario order: no one has left


class PysocialforceSide:
    def __init__(self, sc: dict[str, np.ndarray], tmp: Path):
        import pysocialforce as psf

        config = tmp / "psf.toml"
        # Top-level keys: its PedState reads step_width (its dt), agent_radius, tau and max_speed_multiplier from
        # the root of the config, not from [scene] (whose step_width = 1.0 is never used; the fallback is 0.4).
        config.write_text("step_width = 0.1\nagent_radius = 0.25\n")
        direction = np.where(sc["east"], 1.0, -1.0)
        vel = np.stack([direction * sc["v0"], np.zeros(len(direction))], axis=1)
        state = np.hstack([sc["pos"], vel, sc["goals"]])
        obstacles = [[0.0, LENGTH_M, 0.0, 0.0], [0.0, LENGTH_M, WIDTH_M, WIDTH_M]]  # (x0, x1, y0, y1)
        self.name, self.dt = "pysocialforce", 0.1
        self.sim = psf.Simulator(state, groups=None, obstacles=obstacles, config_file=str(config))

    def step(self) -> None:
        self.sim.step_once()

    def count(self) -> int:
        return self.sim.peds.size()

    def positions(self) -> np.ndarray:
        return self.sim.peds.pos().copy()


class JupedsimSide:
    def __init__(self, sc: dict[str, np.ndarray], model: str, dt: float):
        import jupedsim as jps

        geometry = [(0.0, 0.0), (LENGTH_M, 0.0), (LENGTH_M, WIDTH_M), (0.0, WIDTH_M)]
        if model == "cfsm":
            self.name = f"JuPedSim CFSM dt {dt:g}"
            sim = jps.Simulation(model=jps.CollisionFreeSpeedModel(), geometry=geometry, dt=dt)
        else:
            self.name = f"JuPedSim SFM dt {dt:g}"
            sim = jps.Simulation(model=jps.SocialForceModel(), geometry=geometry, dt=dt)
        self.dt = dt
        east_exit = sim.add_exit_stage([(LENGTH_M - 1, 0), (LENGTH_M, 0), (LENGTH_M, WIDTH_M), (LENGTH_M - 1, WIDTH_M)])
        west_exit = sim.add_exit_stage([(0, 0), (1, 0), (1, WIDTH_M), (0, WIDTH_M)])
        self.ids: list[int] = []
        journeys = {True: (sim.add_journey(jps.JourneyDescription([east_exit])), east_exit),
                    False: (sim.add_journey(jps.JourneyDescription([west_exit])), west_exit)}
        for p, e, v in zip(sc["pos"], sc["east"], sc["v0"]):
            journey, stage = journeys[bool(e)]
            if model == "cfsm":
                params = jps.CollisionFreeSpeedModelAgentParameters(
                    position=tuple(p), desired_speed=float(v), radius=RADIUS_M, journey_id=journey, stage_id=stage)
            else:
                params = jps.SocialForceModelAgentParameters(
                    position=tuple(p), orientation=(1.0 if e else -1.0, 0.0), desired_speed=float(v),
                    radius=RADIUS_M, journey_id=journey, stage_id=stage)
            self.ids.append(sim.add_agent(params))
        self.sim = sim

    def step(self) -> None:
        self.sim.iterate()

    def count(self) -> int:
        return self.sim.agent_count()

    def positions(self) -> np.ndarray:
        where = {a.id: a.position for a in self.sim.agents()}
        return np.array([where.get(i, (np.nan, np.nan)) for i in self.ids])


def _import_pysocialforce_quietly() -> None:
    """pysocialforce sets the root logger to DEBUG with a console handler and opens ./file.log at import: import
    it from a scratch directory, then take its handlers off again (else numba's compiler logs every pass)."""
    import logging

    root = logging.getLogger("root")
    before = list(root.handlers)
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="hil-bench-psf-") as scratch:
        os.chdir(scratch)
        logging.disable(logging.INFO)  # what its import itself logs (matplotlib's font cache...)
        try:
            import pysocialforce  # noqa: F401
        finally:
            logging.disable(logging.NOTSET)
            os.chdir(here)
            for handler in root.handlers[:]:
                if handler not in before:
                    root.removeHandler(handler)
                    handler.close()
    root.setLevel(logging.WARNING)


def measure(side: object, seconds: float) -> tuple[int, float, float]:
    """Steps taken, wall time, and the mean progress speed (m/s along each one's walking direction: a jammed
    crowd is cheap to simulate, so this says whether the sides did comparable work); after two warm-up steps,
    at most MAX_SIM_S simulated."""
    side.step()
    side.step()
    before = side.positions()
    max_steps = int(MAX_SIM_S / side.dt) - 2
    steps = 0
    start = time.perf_counter()
    deadline = start + seconds
    chunk = max(1, int(0.02 / side.dt))  # check the clock every few steps only
    while steps < max_steps and time.perf_counter() < deadline:
        k = min(chunk, max_steps - steps)
        for _ in range(k):
            side.step()
        steps += k
    wall = time.perf_counter() - start
    direction = np.where(side.east, 1.0, -1.0)
    progress = float(np.nanmean((side.positions()[:, 0] - before[:, 0]) * direction)) / (steps * side.dt)
    return steps, wall, progress


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.crowd", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="wall seconds per side and size (default 2)")
    parser.add_argument("--sizes", default="100,400,800", help="agent counts (default 100,400,800)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    import jupedsim

    _import_pysocialforce_quietly()
    from importlib.metadata import version

    print(f"corridor {LENGTH_M:g} m x {WIDTH_M:g} m, counterflow, agents in the middle {LENGTH_M / 2:g} m; "
          f"~{args.seconds:g} s of wall time per side (<= {MAX_SIM_S:g} s simulated); {os.cpu_count()} CPU cores; "
          f"pysocialforce {version('pysocialforce')}, JuPedSim {jupedsim.__version__}")
    print(f"  {'agents':>6}  {'side':<24} {'dt s':>5} {'steps/s':>9} {'RTF':>8} {'ms/step':>8}  {'end N':>5} "
          f"{'v m/s':>6}")
    results: dict[tuple[int, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="hil-bench-crowd-") as tmp:
        for n in sizes:
            sc = scenario(n)
            sides = [
                lambda: HilSide(sc),
                lambda: PysocialforceSide(sc, Path(tmp)),
                lambda: JupedsimSide(sc, "cfsm", 0.01),
                lambda: JupedsimSide(sc, "cfsm", 0.1),
                lambda: JupedsimSide(sc, "sfm", 0.01),
            ]
            for make in sides:
                side = make()
                side.east = sc["east"]
                steps, wall, progress = measure(side, args.seconds)
                sps = steps / wall
                results[(n, side.name)] = sps * side.dt
                results[(n, side.name + " steps/s")] = sps
                print(f"  {n:>6}  {side.name:<24} {side.dt:>5g} {sps:>9.1f} {sps * side.dt:>8.2f} "
                      f"{1e3 / sps:>8.2f}  {side.count():>5} {progress:>6.2f}")
    for n in sizes:
        ours = results.get((n, "hil crowd steps/s"))
        psf = results.get((n, "pysocialforce steps/s"))
        jps_rtf = results.get((n, "JuPedSim CFSM dt 0.01"))
        sfm_rtf = results.get((n, "JuPedSim SFM dt 0.01"))
        line = f"  {n} agents: hil/pysocialforce {ours / psf:.1f}x (same dt); RTF hil/JuPedSim CFSM {results[(n, 'hil crowd')] / jps_rtf:.2f}x"
        line += f", hil/JuPedSim SFM {results[(n, 'hil crowd')] / sfm_rtf:.2f}x (their default dt 0.01 s)"
        print(line)
    if 400 in sizes:
        ratio = results[(400, "hil crowd steps/s")] / results[(400, "pysocialforce steps/s")]
        rtf_ratio = results[(400, "hil crowd")] / results[(400, "JuPedSim CFSM dt 0.01")]
        print(f"  targets at 400 agents: >= 10x pysocialforce: {ratio:.1f}x ({'met' if ratio >= 10 else 'missed'}); "
              f"RTF >= JuPedSim's (CFSM, dt 0.01): {rtf_ratio:.2f}x ({'met' if rtf_ratio >= 1 else 'missed'})")
    return {f"{n}:{name}": value for (n, name), value in results.items()}


if __name__ == "__main__":
    main()
