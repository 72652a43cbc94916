"""Does the crowd walk like people? hil against references nobody here wrote, side by side with JuPedSim's two
models and pysocialforce, in one run.

References (each printed next to every model's figure):

  RiMEA test 1      one person, 1.33 m/s, a 40 m corridor 2 m wide: 26-34 s (RiMEA guideline 4.0, test 1)
  RiMEA test 6      20 people round a left-hand corner in a 2 m corridor: all of them, none through a wall
  fundamental diagram   a one-directional crowd's mean speed at 0.5/1/2/3/4 persons/m^2 against Weidmann (1993):
                    v = 1.34 (1 - exp(-1.913 (1/rho - 1/5.4))) m/s; figure: RMS over the densities (target <= 0.15)
  bottleneck        60 people through a 1 m door; steady specific flow (10th to 50th person through) against
                    1.6-2.0 /(m s) (Seyfried et al. 2009; Kretz et al. 2006)

Every side gets the same geometry (walls as polygons for JuPedSim, lines for pysocialforce, the map format for hil),
the same people (positions, preferred speeds and radii from one seed) and the same waypoints; each is measured from
its positions only, the same way. hil runs through its own map, passage graph and routes (``CrowdMap.route``), as
the product does; JuPedSim gets waypoint and exit stages; pysocialforce, which has one goal per person, gets the
next waypoint as its goal when it comes within 1 m of the current one. pysocialforce relaxes toward 1.3 x the
initial speed, so its people start at v0 / 1.3. Time steps: hil 0.1 s (its default) and 0.05 s, JuPedSim 0.01 s
(its default), pysocialforce 0.1 s.

The fundamental diagram is measured by short runs, not periodic boundaries (JuPedSim and pysocialforce have none):
a block of people 16 m long fills a corridor 3 m wide at the density, in a jittered triangular lattice, everyone
at rest and heading east; the mean speed is that of the people who started in the middle third of the block,
from their displacement between t = 2 s and t = 6 s: the block's ends (free road ahead, no one behind) change the
density there slower than that (a disturbance travels at most ~0.5 m/s through a dense crowd).

    .venv/bin/python -m bench.crowd_fidelity [--only hil] [--quick]
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import numpy as np

from bench._smoke import have, parse_with_smoke

WEIDMANN_V0, WEIDMANN_GAMMA, WEIDMANN_RHO_MAX = 1.34, 1.913, 5.4
DENSITIES = (0.5, 1.0, 2.0, 3.0, 4.0)
FD_TARGET_RMS = 0.15
BOTTLENECK_RANGE = (1.6, 2.0)
RIMEA1_RANGE = (26.0, 34.0)
WALL_THICKNESS = 0.02
WAYPOINT_REACH_M = 1.0  # JuPedSim's waypoint distance and pysocialforce's goal switch
FD_RADIUS = 0.23  # m: discs that pack (triangularly) at Weidmann's jam density 5.4 /m^2


def weidmann(rho: float) -> float:
    """Weidmann's (1993) speed at density rho (persons/m^2)."""
    return WEIDMANN_V0 * (1.0 - math.exp(-WEIDMANN_GAMMA * (1.0 / rho - 1.0 / WEIDMANN_RHO_MAX)))


Point = tuple[float, float]


@dataclass
class Scenario:
    """One geometry: the walkable area (outline, holes), the waypoints walked through and the exit (a rectangle
    at the end of the last leg)."""

    name: str
    outline: list[Point]
    holes: list[list[Point]] = field(default_factory=list)
    waypoints: list[Point] = field(default_factory=list)
    exit_rect: tuple[float, float, float, float] = (0, 0, 0, 0)  # x0, y0, x1, y1

    def wall_segments(self) -> list[tuple[Point, Point]]:
        out = []
        for ring in [self.outline, *self.holes]:
            out += [(ring[k], ring[(k + 1) % len(ring)]) for k in range(len(ring))]
        return out

    def exit_gate(self) -> tuple[Point, float]:
        """The exit as a hil gate: the exit rectangle's centre, and its long side as the width."""
        x0, y0, x1, y1 = self.exit_rect
        return ((x0 + x1) / 2, (y0 + y1) / 2), max(x1 - x0, y1 - y0)

    def inside(self, xy: np.ndarray) -> np.ndarray:
        """Centres inside the walkable area (even-odd rule over outline and holes)."""
        inside = np.zeros(len(xy), dtype=bool)
        for ring in [self.outline, *self.holes]:
            for (x0, y0), (x1, y1) in zip(ring, ring[1:] + ring[:1]):
                crosses = (y0 > xy[:, 1]) != (y1 > xy[:, 1])
                with np.errstate(divide="ignore", invalid="ignore"):
                    at = x0 + (xy[:, 1] - y0) * (x1 - x0) / (y1 - y0)
                inside ^= crosses & (xy[:, 0] < at)
        return inside


def rimea1() -> Scenario:
    return Scenario("RiMEA 1", [(-1.0, 0.0), (42.0, 0.0), (42.0, 2.0), (-1.0, 2.0)], exit_rect=(41.0, 0.0, 42.0, 2.0))


def rimea6() -> Scenario:
    """Corridor 2 m wide, 12 m east, then left (north) 12 m; the corner node at the centre of the corner square."""
    return Scenario("RiMEA 6", [(0.0, 0.0), (12.0, 0.0), (12.0, 12.0), (10.0, 12.0), (10.0, 2.0), (0.0, 2.0)],
                    waypoints=[(11.0, 1.0)], exit_rect=(10.0, 11.0, 12.0, 12.0))


def fd_corridor(length: float = 40.0, width: float = 3.0) -> Scenario:
    return Scenario("corridor", [(0.0, 0.0), (length, 0.0), (length, width), (0.0, width)],
                    exit_rect=(length - 1.0, 0.0, length, width))


DOOR_X, DOOR_Y, DOOR_W = 8.0, 4.0, 1.0


def bottleneck() -> Scenario:
    """A closed 8 m x 8 m room with a 1 m door in its east wall (x = 8), open space 4 m deep beyond it."""
    lo, hi = DOOR_Y - DOOR_W / 2, DOOR_Y + DOOR_W / 2
    outline = [(0.0, 0.0), (DOOR_X, 0.0), (DOOR_X, lo), (DOOR_X + 0.1, lo), (DOOR_X + 0.1, 0.0), (12.0, 0.0),
               (12.0, 8.0), (DOOR_X + 0.1, 8.0), (DOOR_X + 0.1, hi), (DOOR_X, hi), (DOOR_X, 8.0), (0.0, 8.0)]
    return Scenario("bottleneck", outline, waypoints=[(DOOR_X + 0.05, DOOR_Y)], exit_rect=(11.0, 3.0, 12.0, 5.0))


# --- people ------------------------------------------------------------------------------------------------------

def bodies(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Preferred speeds N(1.34, 0.1) (Weidmann's free speed) and radii N(0.23, 0.02) (half shoulder widths of the
    project's adults, config/crowd/weekday.yaml), clipped."""
    return np.clip(rng.normal(1.34, 0.1, n), 1.0, 1.7), np.clip(rng.normal(0.23, 0.02, n), 0.19, 0.26)


def scatter(rng: np.random.Generator, n: int, box: tuple[float, float, float, float], radius: np.ndarray,
            gap: float = 0.05) -> np.ndarray:
    """n centres in box (x0, y0, x1, y1), no two bodies closer than gap (random sequential placement)."""
    x0, y0, x1, y1 = box
    pos = np.zeros((0, 2))
    tries = 0
    while len(pos) < n:
        tries += 1
        if tries > 200000:
            raise RuntimeError(f"cannot place {n} people in {box}")
        p = np.array([rng.uniform(x0, x1), rng.uniform(y0, y1)])
        k = len(pos)
        if not k or (np.hypot(*(pos - p).T) - radius[:k] - radius[k]).min() >= gap:
            pos = np.vstack([pos, p])
    return pos


def lattice(rng: np.random.Generator, rho: float, x0: float, x1: float, y0: float, y1: float,
            radius: float) -> np.ndarray:
    """rho persons/m^2 on [x0, x1] x [y0, y1] (the floor between the wall faces): rows along x, each owning an equal
    strip of the width (as many rows as a triangular lattice at rho has), staggered, spaced along x to make the
    density exact; jittered no more than keeps bodies of ``radius`` apart (JuPedSim refuses overlapping people)."""
    width = y1 - y0
    rows = max(1, int(round(width / (math.sqrt(2.0 / (math.sqrt(3.0) * rho)) * math.sqrt(3.0) / 2))))
    h = width / rows
    ax = 1.0 / (rho * h)
    nearest = min(ax, math.hypot(ax / 2, h), 2 * (h / 2 - radius) + 2 * radius)
    jitter = max(0.0, min(0.1 * ax, 0.45 * (nearest - 2 * radius)))
    pts = [(x, y0 + (k + 0.5) * h) for k in range(rows)
           for x in np.arange(x0 + (0.25 + 0.5 * (k % 2)) * ax, x1, ax)]
    return np.array(pts) + rng.uniform(-jitter, jitter, (len(pts), 2))


# --- sides -------------------------------------------------------------------------------------------------------

class HilSide:
    """crowd.CrowdSim on a map built from the scenario: its walls, a graph through the waypoints to the exit gate."""

    def __init__(self, sc: Scenario, dt: float = 0.1, params: dict | None = None, seed: int = 0):
        import yaml

        from hil.crowd.maps import parse_crowd_map
        from hil.crowd.sim import CrowdSim
        from hil.devices.yaml_source import load_yaml_text

        (gx, gy), width = sc.exit_gate()
        nodes = {f"wp{k}": [x, y] for k, (x, y) in enumerate(sc.waypoints)}
        chain = [*nodes, "exit"]
        doc = {"name": sc.name.replace(" ", "_"), "defaults": {"thickness": WALL_THICKNESS},
               "walls": [{"from": list(a), "to": list(b)} for a, b in sc.wall_segments()],
               "entrances": {"exit": {"at": [gx, gy], "width": width, "role": "exit"}},
               "graph": {"nodes": nodes, "edges": [[a, b] for a, b in zip(chain, chain[1:])]}}
        self.map = parse_crowd_map(load_yaml_text(yaml.safe_dump(doc), sc.name), sc.name)
        self.sim = CrowdSim(self.map, seed=seed, dt=dt, params=params)
        self.name, self.dt = f"hil dt {dt:g}", dt
        self.ids: list[int] = []

    def add(self, xy: Point, v0: float, radius: float) -> None:
        from hil.crowd.agents import AgentSpec

        start = (float(xy[0]), float(xy[1]))
        self.ids.append(self.sim.add_agent(AgentSpec("adult", float(radius), float(v0), start,
                                                     self.map.route(start, "exit"))))

    def step(self) -> None:
        self.sim.step()

    def positions(self) -> np.ndarray:
        a = self.sim.agents
        where = dict(zip(a.ids.tolist(), a.pos))
        return np.array([where.get(i, (np.nan, np.nan)) for i in self.ids]).reshape(-1, 2)


class JupedsimSide:
    """JuPedSim (collision-free speed model or social force model) with waypoint stages and an exit stage."""

    def __init__(self, sc: Scenario, model: str, dt: float = 0.01):
        import jupedsim as jps
        from shapely.geometry import Polygon

        self.jps, self.model = jps, model
        geometry = Polygon(sc.outline, holes=sc.holes)
        kind = jps.CollisionFreeSpeedModel() if model == "cfsm" else jps.SocialForceModel()
        self.sim = jps.Simulation(model=kind, geometry=geometry, dt=dt)
        x0, y0, x1, y1 = sc.exit_rect
        stages = [self.sim.add_waypoint_stage(wp, WAYPOINT_REACH_M) for wp in sc.waypoints]
        stages.append(self.sim.add_exit_stage([(x0, y0), (x1, y0), (x1, y1), (x0, y1)]))
        journey = jps.JourneyDescription(stages)
        for a, b in zip(stages, stages[1:]):
            journey.set_transition_for_stage(a, jps.Transition.create_fixed_transition(b))
        self.journey, self.first = self.sim.add_journey(journey), stages[0]
        self.name = f"JuPedSim {'CFSM' if model == 'cfsm' else 'SFM'} dt {dt:g}"
        self.dt = dt
        self.ids: list[int] = []
        self.heading = np.array(sc.waypoints[0] if sc.waypoints else ((x0 + x1) / 2, (y0 + y1) / 2))

    def add(self, xy: Point, v0: float, radius: float) -> None:
        jps = self.jps
        xy = (float(xy[0]), float(xy[1]))
        if self.model == "cfsm":
            params = jps.CollisionFreeSpeedModelAgentParameters(position=xy, desired_speed=float(v0),
                                                                radius=float(radius), journey_id=self.journey,
                                                                stage_id=self.first)
        else:
            d = self.heading - xy
            d = d / max(float(np.hypot(*d)), 1e-9)
            params = jps.SocialForceModelAgentParameters(position=xy, orientation=(float(d[0]), float(d[1])),
                                                         desired_speed=float(v0), radius=float(radius),
                                                         journey_id=self.journey, stage_id=self.first)
        self.ids.append(self.sim.add_agent(params))

    def step(self) -> None:
        self.sim.iterate()

    def positions(self) -> np.ndarray:
        where = {a.id: a.position for a in self.sim.agents()}
        return np.array([where.get(i, (np.nan, np.nan)) for i in self.ids]).reshape(-1, 2)


class PysocialforceSide:
    """pysocialforce 1.1.2: its default config, step 0.1 s, one shared radius; goals switched along the waypoints."""

    def __init__(self, sc: Scenario, dt: float = 0.1):
        self.sc, self.dt, self.name = sc, dt, f"pysocialforce dt {dt:g}"
        self.people: list[tuple[Point, float, float]] = []
        self.sim = None
        x0, y0, x1, y1 = sc.exit_rect
        self.goals = np.array([*sc.waypoints, ((x0 + x1) / 2, (y0 + y1) / 2)])

    def add(self, xy: Point, v0: float, radius: float) -> None:
        self.people.append(((float(xy[0]), float(xy[1])), float(v0), float(radius)))

    def _start(self) -> None:
        import tempfile
        from pathlib import Path

        import pysocialforce as psf

        pos = np.array([p for p, _, _ in self.people])
        v0 = np.array([v for _, v, _ in self.people])
        radius = float(np.mean([r for _, _, r in self.people]))
        self.stage = np.zeros(len(pos), dtype=int)
        goal = self.goals[self.stage]
        d = goal - pos
        d /= np.maximum(np.hypot(*d.T), 1e-9)[:, None]
        state = np.hstack([pos, d * (v0 / 1.3)[:, None], goal])
        # its scene samples each line at 10 points per metre and fails on a line that gets none: the 0.1 m end
        # faces of the door's jambs are left out (the walls either side still bound the door)
        obstacles = [[a[0], b[0], a[1], b[1]] for a, b in self.sc.wall_segments() if math.dist(a, b) * 10 >= 1.5]
        with tempfile.TemporaryDirectory(prefix="hil-bench-psf-") as tmp:
            config = Path(tmp) / "psf.toml"
            config.write_text(f"step_width = {self.dt}\nagent_radius = {radius}\n")
            self.sim = psf.Simulator(state, groups=None, obstacles=obstacles, config_file=str(config))

    def step(self) -> None:
        if self.sim is None:
            self._start()
        self.sim.step_once()
        state = self.sim.peds.state
        last = len(self.goals) - 1
        near = (np.hypot(*(state[:, :2] - self.goals[self.stage]).T) < WAYPOINT_REACH_M) & (self.stage < last)
        if near.any():
            self.stage[near] += 1
            state[near, 4:6] = self.goals[self.stage[near]]

    def positions(self) -> np.ndarray:
        if self.sim is None:
            return np.array([p for p, _, _ in self.people]).reshape(-1, 2)
        return self.sim.peds.pos().copy()


# --- measurements ------------------------------------------------------------------------------------------------

def run_until(side, done, max_s: float, on_step=None) -> float:
    """Step until done(positions, t) or max_s of simulated time; returns the time. ``on_step(side)`` after every
    step (the tests watch hil's people through it)."""
    t = 0.0
    steps = int(round(max_s / side.dt))
    for _ in range(steps):
        side.step()
        t += side.dt
        if on_step is not None:
            on_step(side)
        if done(side.positions(), t):
            break
    return t


def measure_rimea1(make) -> dict:
    side = make(rimea1())
    side.add((0.0, 1.0), 1.33, 0.2)
    crossed: list[float] = []

    def done(pos, t):
        if not crossed and (np.isnan(pos[0, 0]) or pos[0, 0] >= 40.0):
            crossed.append(t)
        return bool(crossed)

    run_until(side, done, 60.0)
    return {"time_s": crossed[0] if crossed else math.inf}


def measure_rimea6(make, seed: int = 0, on_step=None) -> dict:
    sc = rimea6()
    side = make(sc)
    rng = np.random.default_rng(seed)
    v0, radius = bodies(rng, 20)
    for p, v, r in zip(scatter(rng, 20, (0.4, 0.35, 6.0, 1.65), radius), v0, radius):
        side.add(p, v, r)
    outside = [0]

    def done(pos, t):
        here = ~np.isnan(pos[:, 0])
        outside[0] += int((~sc.inside(pos[here])).sum())
        return bool(((pos[:, 1] > 10.5) | ~here).all())

    t = run_until(side, done, 120.0, on_step)
    pos = side.positions()
    out = int(((pos[:, 1] > 10.5) | np.isnan(pos[:, 0])).sum())
    return {"round": out, "time_s": t, "outside": outside[0]}


def measure_fd_point(make, rho: float, seed: int = 0, block: float = 16.0, width: float = 3.0) -> dict:
    sc = fd_corridor(length=block + 30.0, width=width)
    side = make(sc)
    rng = np.random.default_rng(seed)
    face = WALL_THICKNESS / 2
    pos = lattice(rng, rho, 2.0, 2.0 + block, face, width - face, FD_RADIUS)
    v0, _ = bodies(rng, len(pos))
    for p, v in zip(pos, v0):
        side.add(p, v, FD_RADIUS)
    middle = (pos[:, 0] > 2.0 + block / 3) & (pos[:, 0] < 2.0 + 2 * block / 3)
    t, x_at = 0.0, {}
    for _ in range(int(round(6.0 / side.dt))):
        side.step()
        t += side.dt
        for mark in (2.0, 6.0):
            if mark not in x_at and t >= mark - 1e-9:
                x_at[mark] = side.positions()[middle, 0]
    speed = float(np.nanmean(x_at[6.0] - x_at[2.0]) / 4.0)
    return {"rho": rho, "speed": speed, "weidmann": weidmann(rho), "n": len(pos)}


def measure_fd(make, densities=DENSITIES, seed: int = 0) -> dict:
    points = [measure_fd_point(make, rho, seed) for rho in densities]
    rms = math.sqrt(sum((p["speed"] - p["weidmann"]) ** 2 for p in points) / len(points))
    return {"points": points, "rms": rms}


def measure_bottleneck(make, seed: int = 0, n: int = 60, on_step=None) -> dict:
    side = make(bottleneck())
    rng = np.random.default_rng(seed)
    v0, radius = bodies(rng, n)
    for p, v, r in zip(scatter(rng, n, (0.5, 0.5, 6.5, 7.5), radius), v0, radius):
        side.add(p, v, r)
    through: dict[int, float] = {}

    def done(pos, t):
        gone = np.isnan(pos[:, 0]) | (pos[:, 0] > DOOR_X + 0.1)
        for k in np.flatnonzero(gone):
            through.setdefault(int(k), t)
        return len(through) == n

    run_until(side, done, 150.0, on_step)
    times = sorted(through.values())
    flow = (40.0 / (times[49] - times[9])) if len(times) >= 50 else 0.0
    return {"through": len(times), "flow": flow, "specific_flow": flow / DOOR_W,
            "last_s": times[-1] if times else math.inf}


# --- the report --------------------------------------------------------------------------------------------------

def sides(only: str | None, smoke: bool = False):
    """The models compared: hil at two steps and the peers (those installed; a missing one is named and left out)."""
    makers = [("hil dt 0.1", lambda sc: HilSide(sc, 0.1))]
    makers += [] if smoke else [("hil dt 0.05", lambda sc: HilSide(sc, 0.05))]
    if only != "hil" and have("jupedsim", "the JuPedSim models") and have("shapely", "the JuPedSim models"):
        makers += [("JuPedSim CFSM dt 0.01", lambda sc: JupedsimSide(sc, "cfsm")),
                   ("JuPedSim SFM dt 0.01", lambda sc: JupedsimSide(sc, "sfm"))]
    if only != "hil" and have("pysocialforce", "the pysocialforce model"):
        from bench.crowd import _import_pysocialforce_quietly

        _import_pysocialforce_quietly()
        makers += [("pysocialforce dt 0.1", lambda sc: PysocialforceSide(sc))]
    return makers


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def report(results: dict[str, dict]) -> None:
    """Each reference, then every model's figure against it."""
    print(f"RiMEA test 1: one person at 1.33 m/s along a 40 m corridor (allowed {RIMEA1_RANGE[0]:g}-"
          f"{RIMEA1_RANGE[1]:g} s)")
    for name, r in results.items():
        t = r["rimea1"]["time_s"]
        print(f"  {name:<24} {t:6.1f} s   {verdict(RIMEA1_RANGE[0] <= t <= RIMEA1_RANGE[1])}")
    print("RiMEA test 6: 20 people round a left-hand corner of a 2 m corridor (all of them, none through a wall)")
    for name, r in results.items():
        r6 = r["rimea6"]
        print(f"  {name:<24} {r6['round']:2d}/20 in {r6['time_s']:5.1f} s, {r6['outside']} centre-steps outside   "
              f"{verdict(r6['round'] == 20 and r6['outside'] == 0)}")
    low, high = BOTTLENECK_RANGE
    print(f"bottleneck: 60 people through a 1 m door, specific flow 10th-50th person (literature {low:g}-{high:g} "
          "/(m s))")
    for name, r in results.items():
        bn = r["bottleneck"]
        print(f"  {name:<24} {bn['specific_flow']:5.2f} /(m s), {bn['through']}/60 through, last at "
              f"{bn['last_s']:5.1f} s   {verdict(low <= bn['specific_flow'] <= high)}")
    points = next(iter(results.values()))["fd"]["points"]
    print("fundamental diagram: one-directional crowd, mean speed m/s against Weidmann (RMS target <= "
          f"{FD_TARGET_RMS:g} m/s)")
    print(f"  {'density /m^2':<24} " + " ".join(f"{p['rho']:>5g}" for p in points) + "    RMS")
    print(f"  {'Weidmann':<24} " + " ".join(f"{p['weidmann']:5.2f}" for p in points))
    for name, r in results.items():
        fd = r["fd"]
        print(f"  {name:<24} " + " ".join(f"{p['speed']:5.2f}" for p in fd["points"])
              + f"   {fd['rms']:.2f}   {verdict(fd['rms'] <= FD_TARGET_RMS)}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.crowd_fidelity", description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["hil"], help="hil's sides only (no peers)")
    parser.add_argument("--quick", action="store_true", help="the fundamental diagram at 1 and 3 /m^2 only")
    args = parse_with_smoke(parser, argv, only="hil")
    densities = (1.0,) if args.smoke else (1.0, 3.0) if args.quick else DENSITIES
    results: dict[str, dict] = {}
    for name, make in sides(args.only, args.smoke):
        start = time.perf_counter()
        results[name] = {"rimea1": measure_rimea1(make), "rimea6": measure_rimea6(make),
                         "bottleneck": measure_bottleneck(make), "fd": measure_fd(make, densities),
                         "wall_s": time.perf_counter() - start}
    report(results)
    print("  (wall time per model: " + ", ".join(f"{n} {r['wall_s']:.0f} s" for n, r in results.items()) + ")")
    return results


if __name__ == "__main__":
    main()
