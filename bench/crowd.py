"""The crowd's step against pysocialforce and JuPedSim on the same corridor, in one run, at the same time step.

The scenario, the same for every side: a corridor 200 m long and 6 m wide (two walls), N pedestrians placed at
random (seeded, no two closer than 0.6 m) in its middle 100 m, half walking east and half west (counterflow), each
to a goal 0.5 m before the far end, preferred speeds N(1.3, 0.1) m/s, radius 0.25 m. No one reaches a goal within
the simulated time measured (at most 20 s), so N stays constant. Sides:

  hil crowd            crowd.CrowdSim (ours): the compiled step (crowd/kernel.py): route following, social force
                       and headway over a cell grid, walls, contacts; at dt 0.1 s and 0.05 s
  JuPedSim CFSM        jupedsim.CollisionFreeSpeedModel (Tordeux et al.'s collision-free speed model, first order),
                       exit stages at both ends; at dt 0.1 and 0.05 s (ours), and its default 0.01 s
  JuPedSim SFM         jupedsim.SocialForceModel (Helbing, Farkas & Vicsek 2000, body forces), the same three dt
  pysocialforce        pysocialforce.Simulator, its default config plus step_width (its dt) 0.1 s and
                       agent_radius 0.25 m; walls as its obstacle lines (sampled at its default 10 points per metre)

Each side is built, stepped twice (warm-up: numba compiles its kernels on first use), then stepped for about
--seconds / 4 of wall time (capped at 20 s simulated), four times, rebuilt each time, in turn with the others and
the order flipped every round, so a load that comes and goes meets every side alike; steps and wall time add up. v m/s is the mean progress along each person's walking direction
over the measured steps (a jammed crowd is cheap; this shows the sides did comparable work). steps/s = steps / wall
time; RTF (real-time factor) = simulated time / wall time = steps/s x dt. The figure that matters comes first: hil's
steps/s over each JuPedSim model's at the same dt (the target: >= 1x at 100, 400 and 800 agents, dt 0.1 and 0.05).
An RTF against JuPedSim at its default 0.01 s (what an earlier comparison used) mixes the step size into the figure.

    .venv/bin/python -m bench.crowd [--seconds 2] [--sizes 100,400,800]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._smoke import have, parse_with_smoke

LENGTH_M = 200.0
WIDTH_M = 6.0
RADIUS_M = 0.25
MAX_SIM_S = 20.0
ROUNDS = 4  # each side is measured in this many slices, interleaved with the others


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
    def __init__(self, sc: dict[str, np.ndarray], dt: float = 0.1):
        from hil.crowd.agents import AgentSpec
        from hil.crowd.maps import parse_crowd_map
        from hil.devices.yaml_source import load_yaml_text
        from hil.crowd.sim import CrowdSim

        text = (f"name: corridor\nwalls:\n  - {{from: [0, 0], to: [{LENGTH_M}, 0]}}\n"
                f"  - {{from: [0, {WIDTH_M}], to: [{LENGTH_M}, {WIDTH_M}]}}\n")
        crowd_map = parse_crowd_map(load_yaml_text(text, "<bench corridor>"), "<bench corridor>")
        self.name, self.dt = f"hil crowd dt {dt:g}", dt
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
    def __init__(self, sc: dict[str, np.ndarray], tmp: Path, dt: float = 0.1):
        import pysocialforce as psf

        config = tmp / "psf.toml"
        # Top-level keys: its PedState reads step_width (its dt), agent_radius, tau and max_speed_multiplier from
        # the root of the config, not from [scene] (whose step_width = 1.0 is never used; the fallback is 0.4).
        config.write_text(f"step_width = {dt}\nagent_radius = 0.25\n")
        direction = np.where(sc["east"], 1.0, -1.0)
        vel = np.stack([direction * sc["v0"], np.zeros(len(direction))], axis=1)
        state = np.hstack([sc["pos"], vel, sc["goals"]])
        obstacles = [[0.0, LENGTH_M, 0.0, 0.0], [0.0, LENGTH_M, WIDTH_M, WIDTH_M]]  # (x0, x1, y0, y1)
        self.name, self.dt = f"pysocialforce dt {dt:g}", dt
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


SAME_DT = (0.1, 0.05)
PEERS = ("JuPedSim CFSM", "JuPedSim SFM")


def makers(sc: dict[str, np.ndarray], tmp: Path, jps: bool = True, psf: bool = True) -> list:
    """Every side at the same dt (0.1 and 0.05 s), then JuPedSim at its default 0.01 s (for the RTF figures); a
    peer that is not installed (``jps``/``psf`` False) is left out."""
    out = []
    for dt in SAME_DT:
        out += [lambda dt=dt: HilSide(sc, dt)]
        out += [lambda dt=dt: JupedsimSide(sc, "cfsm", dt), lambda dt=dt: JupedsimSide(sc, "sfm", dt)] if jps else []
    out += [lambda: PysocialforceSide(sc, tmp, 0.1)] if psf else []
    out += [lambda: JupedsimSide(sc, "cfsm", 0.01), lambda: JupedsimSide(sc, "sfm", 0.01)] if jps else []
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.crowd", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="wall seconds per side and size (default 2)")
    parser.add_argument("--sizes", default="100,400,800", help="agent counts (default 100,400,800)")
    args = parse_with_smoke(parser, argv, seconds=0.4, sizes="50")
    sizes = [int(s) for s in args.sizes.split(",")]
    jps = have("jupedsim", "the JuPedSim sides")
    psf = have("pysocialforce", "the pysocialforce side")
    if psf:
        _import_pysocialforce_quietly()
    from importlib.metadata import version

    rows: list[str] = []
    results: dict[tuple[int, str], float] = {}
    failed: dict[tuple[int, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="hil-bench-crowd-") as tmp:
        for n in sizes:
            sc = scenario(n)
            sides = makers(sc, Path(tmp), jps, psf)
            totals: dict[int, list] = {k: [0, 0.0, 0.0, 0, "", 0.0] for k in range(len(sides))}
            for rnd in range(ROUNDS):  # short slices, side after side, order flipped each round: load evens out
                order = range(len(sides)) if rnd % 2 == 0 else reversed(range(len(sides)))
                for k in order:
                    side = sides[k]()
                    side.east = sc["east"]
                    if (n, side.name) in failed:
                        continue
                    try:
                        steps, wall, progress = measure(side, args.seconds / ROUNDS)
                    except RuntimeError as exc:  # JuPedSim's social force model is unstable at large steps
                        failed[(n, side.name)] = str(exc)
                        continue
                    total = totals[k]
                    total[0] += steps
                    total[1] += wall
                    total[2], total[3], total[4], total[5] = progress, side.count(), side.name, side.dt
            for k, (steps, wall, progress, count, name, dt) in totals.items():
                if not name:
                    continue
                sps = steps / wall
                results[(n, name)] = sps
                rows.append(f"  {n:>6}  {name:<24} {dt:>5g} {sps:>9.1f} {sps * dt:>8.2f} "
                            f"{1e3 / sps:>8.2f}  {count:>5} {progress:>6.2f}")
            rows += [f"  {n:>6}  {name:<24}  failed: {why}" for (m, name), why in failed.items() if m == n]
    print(f"corridor {LENGTH_M:g} m x {WIDTH_M:g} m, counterflow, agents in the middle {LENGTH_M / 2:g} m; "
          f"~{args.seconds:g} s of wall time per side (<= {MAX_SIM_S:g} s simulated); {os.cpu_count()} CPU cores; "
          f"pysocialforce {version('pysocialforce') if psf else 'absent'}, "
          f"JuPedSim {version('jupedsim') if jps else 'absent'}")
    print("  same dt, hil steps/s over the peer's (the target: >= 1x everywhere):")
    met = True
    for dt in SAME_DT:
        for peer in PEERS:
            cells = []
            for n in sizes:
                theirs = results.get((n, f"{peer} dt {dt:g}"))
                if theirs is None:  # the peer cannot run this dt (or is absent): nothing to be slower than
                    cells.append(f"{n} agents  (peer {'fails' if jps else 'absent'})")
                    continue
                ratio = results[(n, f"hil crowd dt {dt:g}")] / theirs
                met &= ratio >= 1.0
                cells.append(f"{n} agents {ratio:5.2f}x")
            print(f"    dt {dt:<5g} hil/{peer:<14} " + "  ".join(cells))
    print(f"  target: at least JuPedSim's steps/s at the same dt at every size: {('met' if met else 'missed') if jps else 'not measured (JuPedSim absent)'}")
    for (n, name), why in sorted(failed.items()):
        print(f"  {name} failed at {n} agents ({why.split(':')[0]}): it cannot run at that step")
    for n in sizes if jps and psf else ():
        ours = results[(n, "hil crowd dt 0.1")]
        print(f"  {n} agents: hil dt 0.1 / pysocialforce dt 0.1 {ours / results[(n, 'pysocialforce dt 0.1')]:.0f}x; "
              f"real-time factor hil dt 0.1 / JuPedSim CFSM at its default dt 0.01 "
              f"{ours * 0.1 / (results[(n, 'JuPedSim CFSM dt 0.01')] * 0.01):.1f}x")
    print(f"  {'agents':>6}  {'side':<24} {'dt s':>5} {'steps/s':>9} {'RTF':>8} {'ms/step':>8}  {'end N':>5} "
          f"{'v m/s':>6}")
    for row in rows:
        print(row)
    return {f"{n}:{name}": value for (n, name), value in results.items()}


if __name__ == "__main__":
    main()
