"""The commbot world: real-time factor of our world against bare pybullet stepping of the same robot.

Side by side in one run, alternating rounds, same time step, same number of steps:
  hil world, merged
              firmware_sim.world: World() + build_robot() from the parts' descriptors and port tables (each chain
              of bodies joined by fixed joints one pybullet link, world/merge.py), stepped with World.step()
              (hooks loop, step counter; no bus, no hooks registered);
  hil world, one link per body
              the same with merge_fixed=False (the world before fixed links were merged);
  bare merged the bare client below with the URDF loaded with URDF_MERGE_FIXED_LINKS as well: the best a
              pybullet user could write for this robot (pybullet 3.2.7's merge misplaces merged CoMs, bullet3
              pull request 4683, which does not change the cost of a step); also with deterministic pairs,
              the one setting our world adds (measured here it costs 10-15 % of a merged step, not 2 us);
  bare        a plain pybullet DIRECT client with the same floor plane, gravity and time step, the robot loaded
              from the URDF `hil urdf --bus sim://commbot` writes (scan of the in-process bus ->
              runtime.model.to_urdf), loaded with URDF_USE_INERTIA_FROM_FILE (else pybullet recomputes the inertia
              from the shapes) and URDF_USE_IMPLICIT_CYLINDER (else it turns cylinders -- the wheels -- into
              convex hulls, which our world does not), stepped with p.stepSimulation().
  bare + deterministic pairs
              the same bare client with the one physics setting our world adds to pybullet's defaults
              (deterministicOverlappingPairs=1: the broadphase pairs sorted so runs repeat bit for bit; it costs
              about 2 us per step here), to tell that setting's cost from the rest.
All robots stand at the same place with the same motors: the 17 servo joints held by POSITION_CONTROL at 0
(what powered servos do), the wheels on a zero-velocity motor with the descriptor's friction. RTF = simulated
time / wall time; the ratio hil/bare says what our world costs beyond pybullet itself (1.00x = nothing).

Then the sensor ring: the cost of one measure of the commbot's range ring (firmware_sim.sensors, 12 ultrasonic
sensors x 13 rays) in the lab map, per physics step, and the RTF with a measure after every step.

    .venv/bin/python -m bench.world [--seconds 10] [--rounds 5] [--smoke]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import pybullet as p

from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.world import (
    DEFAULT_TIME_STEP_S,
    RobotBody,
    World,
    build_robot,
    load_map,
)
from hil.firmware_sim.world.frames import compose, inverse
from hil.firmware_sim.world.world import GRAVITY_Z, SOLVER_ITERATIONS

BASE_XY_YAW = (0.0, 0.0, 0.0)


# --- the two sides ---------------------------------------------------------------------------------------------

def hold_servos(client: int, body: int, joints: list[tuple[int, str, float, float]]) -> None:
    """(pybullet index, part kind, effort, friction) per moving joint: servos held at 0, wheels on friction."""
    for index, kind, effort, friction in joints:
        if kind == "wheel":
            p.setJointMotorControl2(body, index, p.VELOCITY_CONTROL, targetVelocity=0.0, force=friction,
                                    physicsClientId=client)
        else:
            p.setJointMotorControl2(body, index, p.POSITION_CONTROL, targetPosition=0.0, force=effort,
                                    physicsClientId=client)


class HilSide:
    def __init__(self, time_step_s: float, merge_fixed: bool = True):
        self.name = "hil world, merged" if merge_fixed else "hil world, one link per body"
        start = time.perf_counter()
        self.world = World(time_step_s=time_step_s)
        self.robot: RobotBody = build_robot(self.world, load_assembly("commbot").parts, base_xy_yaw=BASE_XY_YAW,
                                            merge_fixed=merge_fixed)
        self.links = p.getNumJoints(self.robot.body_id, physicsClientId=self.world.client) + 1
        self.build_s = time.perf_counter() - start
        hold_servos(self.world.client, self.robot.body_id,
                    [(j.index, self.robot.parts[j.part_id].kind, j.limits.effort, j.friction)
                     for j in self.robot.moving_joints])

    def run(self, steps: int) -> None:
        step = self.world.step
        for _ in range(steps):
            step()

    def base_position(self) -> tuple[float, ...]:
        return self.robot.base_pose()[0]

    def close(self) -> None:
        self.world.close()


def commbot_urdf(directory: Path) -> tuple[Path, object]:
    """What `hil urdf --bus sim://commbot` writes (the same calls, in-process), and the host model."""
    from hil.runtime.bus import BusHost
    from hil.runtime.model import build_model, to_urdf
    from hil.runtime.scan import NoCache, scan_bus
    from hil.runtime.transports import open_transport

    with BusHost(open_transport("sim://commbot")) as bus:
        robot = scan_bus(bus, NoCache())
    model = build_model(robot)
    path = directory / "commbot.urdf"
    path.write_text(to_urdf(model))
    return path, model


class BareSide:
    def __init__(self, time_step_s: float, urdf: Path, model, base_link_frame, deterministic_pairs: bool = False,
                 merged: bool = False):
        self.name = ("bare merged" if merged else "bare") + " + deterministic pairs" if deterministic_pairs else \
            "bare pybullet merged" if merged else "bare pybullet (hil urdf)"
        start = time.perf_counter()
        c = self.client = p.connect(p.DIRECT)
        p.setPhysicsEngineParameter(fixedTimeStep=time_step_s, numSolverIterations=SOLVER_ITERATIONS,
                                    physicsClientId=c)
        if deterministic_pairs:
            p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=c)
        p.setGravity(0, 0, GRAVITY_Z, physicsClientId=c)
        p.createMultiBody(0, p.createCollisionShape(p.GEOM_PLANE, physicsClientId=c), physicsClientId=c)
        flags = p.URDF_USE_INERTIA_FROM_FILE | p.URDF_MAINTAIN_LINK_ORDER | p.URDF_USE_IMPLICIT_CYLINDER
        if merged:
            flags |= p.URDF_MERGE_FIXED_LINKS
        self.body = p.loadURDF(str(urdf), flags=flags, physicsClientId=c)
        self.links = p.getNumJoints(self.body, physicsClientId=c) + 1
        self.build_s = time.perf_counter() - start
        info = p.getDynamicsInfo(self.body, -1, physicsClientId=c)
        self.inertial = (info[3], info[4])  # pybullet places a base by its CoM frame
        com = compose(base_link_frame, self.inertial)
        p.resetBasePositionAndOrientation(self.body, com[0], com[1], physicsClientId=c)
        names = {p.getJointInfo(self.body, j, physicsClientId=c)[1].decode(): j
                 for j in range(p.getNumJoints(self.body, physicsClientId=c))}
        kinds = {part.bus_id: part.kind for part in model.parts}
        hold_servos(c, self.body, [(names[j.name], kinds[j.bus_id], j.limits.effort, j.friction)
                                   for j in model.moving_joints])

    def run(self, steps: int) -> None:
        step, c = p.stepSimulation, self.client
        for _ in range(steps):
            step(physicsClientId=c)

    def base_position(self) -> tuple[float, ...]:
        com = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        return compose(com, inverse(self.inertial))[0]

    def close(self) -> None:
        p.disconnect(self.client)


# --- measuring -------------------------------------------------------------------------------------------------

def timed(run, steps: int) -> float:
    gc.collect()
    start = time.perf_counter()
    run(steps)
    return time.perf_counter() - start


def alternate(sides: list, steps: int, rounds: int) -> dict[str, list[float]]:
    """Elapsed seconds per round per side, the order rotated every round so no side always goes first."""
    out: dict[str, list[float]] = {side.name: [] for side in sides}
    for side in sides:
        side.run(max(1, steps // 4))  # warm-up: contacts settle, caches fill (the first round ran slow)
    for r in range(rounds):
        for side in sides[r % len(sides):] + sides[:r % len(sides)]:
            out[side.name].append(timed(side.run, steps))
    return out


def _row(name: str, links: int, build_s: float, elapsed: list[float], steps: int, dt: float) -> tuple[str, float]:
    per_round = statistics.median(elapsed)
    rtf = steps * dt / per_round
    return (f"  {name:<30} {links:5d} {build_s * 1e3:8.1f} {steps / per_round:11.0f} {rtf:9.1f} "
            f"{per_round / steps * 1e6:10.1f} {min(elapsed) / steps * 1e6:10.1f}"), rtf


# --- the sensor ring -----------------------------------------------------------------------------------------------

def sensor_ring_section(time_step_s: float, steps: int) -> list[str]:
    """The range ring's cost: one measure against one physics step, in the lab map."""
    from hil.firmware_sim.sensors import RangeRingModel

    with World(time_step_s=time_step_s) as world:
        world.add_map(load_map("lab"))
        robot = build_robot(world, load_assembly("commbot").parts, base_xy_yaw=BASE_XY_YAW)
        hold_servos(world.client, robot.body_id, [(j.index, robot.parts[j.part_id].kind, j.limits.effort, j.friction)
                                                  for j in robot.moving_joints])
        ring_part = next(i for i, d in robot.parts.items() if d.kind == "range_sensor_ring")
        sensor = next(s for s in robot.parts[ring_part].sensors if s.kind == "range_ring")
        model = RangeRingModel(sensor, seed=1)

        def measure(_world: World) -> None:
            model.measure(world.client, *robot.link_pose(ring_part, sensor.body))

        bare = timed(lambda n: [world.step() for _ in range(n)], steps)
        alone = timed(lambda n: [measure(world) for _ in range(n)], steps)
        world.add_post_step(measure)
        both = timed(lambda n: [world.step() for _ in range(n)], steps)
    return [f"  sensor ring ({model.n_rays} rays, lab map): {alone / steps * 1e6:.1f} us per measure = "
            f"{alone / bare:.2f}x a physics step ({bare / steps * 1e6:.1f} us); at its 10 Hz update rate that is "
            f"{alone / steps * 1e6 / round(1 / (10 * time_step_s)):.1f} us per step; a measure every step: "
            f"RTF {steps * time_step_s / both:.1f} (without: {steps * time_step_s / bare:.1f})"]


class _Stepper:
    """A world to step in :func:`alternate`, named ``name``."""

    def __init__(self, name, world: World):
        self.name, self.world = name, world

    def run(self, steps: int) -> None:
        step = self.world.step
        for _ in range(steps):
            step()


def embodied_section(steps: int, rounds: int = 2) -> list[str]:
    """The whole virtual robot on the simulator's clock: every part's firmware hooked into the steps (servos
    holding, ring at 10 Hz, contact sensors every step), stepped as the lockstep master will step it; merged
    and unmerged side by side, alternating rounds."""
    from hil.firmware_sim.embodied import embody

    robots = {}
    try:
        for merge in (True, False):
            embodied = embody(load_assembly("commbot"), clock="sim", map_name="lab", watchdog_s=0.0,
                              merge_fixed=merge)
            robots[merge] = embodied
            for part in embodied.parts:
                if hasattr(part, "joint") and part.descriptor.kind != "wheel":
                    part.memory.set("torque_enable", 1)
                    part.on_written(["torque_enable"])
        sides = [_Stepper(merge, e.world) for merge, e in robots.items()]
        elapsed = alternate(sides, steps, rounds)
        dt = robots[True].world.time_step_s
    finally:
        for embodied in robots.values():
            embodied.close()
    per = {merge: statistics.median(times) / steps for merge, times in elapsed.items()}
    return [f"  embodied commbot (firmware hooks, ring 10 Hz, contacts every step, lab map): merged "
            f"{per[True] * 1e6:.1f} us per step (RTF {dt / per[True]:.1f}), one link per body "
            f"{per[False] * 1e6:.1f} us (RTF {dt / per[False]:.1f}): merged/unmerged cost "
            f"{per[True] / per[False]:.2f}x"]


# --- the fair bare world: the demo's own trial replayed in plain pybullet ------------------------------------------
class FairBare:
    """Plain pybullet of a trial's scene, written from its log: the floor, gravity, time step and solver settings
    hil's world uses (World() with nothing in it), the map's walls, `hil urdf`'s commbot loaded with fixed links
    merged at the logged start pose, every moving joint on a velocity motor with its effort as force (the wheels'
    targets the logged wheel speeds over each crowd tick, the servos' 0), and the log's people as upright capsules
    (hil's size and density) on two prismatic joints whose velocity motors take each person's logged velocity once
    per crowd tick with the push limit (m x MAX_DRIVE_ACCEL) as force; people appear and leave as the log says.
    Only p.stepSimulation() between ticks and one batched motor call per body per tick: a pybullet user's cheapest
    faithful scene."""

    def __init__(self, log_path: Path, tmp: Path):
        from urllib.parse import parse_qs, urlsplit

        from hil.firmware_sim.world.pedestrians import BODY_DENSITY_KG_M3, MAX_DRIVE_ACCEL
        from hil.trial.record.log import read_log

        from .loop import _quiet_stdout

        messages = read_log(log_path).messages
        query = parse_qs(urlsplit(messages["/trial/meta"][0].data["buses"][0]["url"]).query)
        x0, y0, yaw0 = (float(v) for v in query["pose"][0].split(","))
        self.world = World()
        c = self.client = self.world.client
        self.walls = len(self.world.add_map(load_map(query["map"][0])))
        urdf, model = commbot_urdf(tmp)
        flags = p.URDF_USE_INERTIA_FROM_FILE | p.URDF_USE_IMPLICIT_CYLINDER | p.URDF_MERGE_FIXED_LINKS
        with _quiet_stdout():  # pybullet's C code narrates every merge on stdout
            self.body = p.loadURDF(str(urdf), basePosition=(x0, y0, 0.2),
                                   baseOrientation=p.getQuaternionFromEuler((0, 0, yaw0)), flags=flags,
                                   physicsClientId=c)
        names = {p.getJointInfo(self.body, j, physicsClientId=c)[1].decode(): j
                 for j in range(p.getNumJoints(self.body, physicsClientId=c))}
        kinds = {part.bus_id: part.kind for part in model.parts}
        self.joints = [(names[j.name], j.limits.effort or 1.0) for j in model.moving_joints]
        wheels = sorted((p.getJointInfo(self.body, names[j.name], physicsClientId=c)[14][1], names[j.name])
                        for j in model.moving_joints if kinds[j.bus_id] == "wheel")
        self.wheels = {"base.wheel_right": wheels[0][1], "base.wheel_left": wheels[-1][1]}  # right: the lower y
        self.links = p.getNumJoints(self.body, physicsClientId=c) + 1
        self.steps_per_tick = max(1, round(0.1 / self.world.time_step_s))
        states = messages.get("/robot/state", [])
        self.ticks = []  # per crowd tick: ({joint: target velocity}, [(id, x, y, vx, vy, radius, height)])
        people = {round(m.t, 6): m.data["people"] for m in messages.get("/pedestrians", [])}
        for before, after in zip(states, states[1:]):
            dt = after.t - before.t
            wheel = {index: (after.data["joints"][name] - before.data["joints"][name]) / dt
                     for name, index in self.wheels.items()}
            crowd = [(q["id"], q["x"], q["y"], q["vx"], q["vy"], q.get("radius", 0.25), q.get("height", 1.7))
                     for q in people.get(round(before.t, 6), [])]
            self.ticks.append((wheel, crowd))
        self.density, self.push_accel = BODY_DENSITY_KG_M3, MAX_DRIVE_ACCEL
        self.mean_people = statistics.fmean(len(t[1]) for t in self.ticks) if self.ticks else 0.0
        self.reset()

    def reset(self) -> None:
        """Everyone removed, the robot's motors to their start."""
        for body in getattr(self, "people", {}).values():
            p.removeBody(body, physicsClientId=self.client)
        self.people: dict[int, int] = {}
        self.masses: dict[int, float] = {}
        for index, effort in self.joints:
            p.setJointMotorControl2(self.body, index, p.VELOCITY_CONTROL, targetVelocity=0.0, force=effort,
                                    physicsClientId=self.client)

    def _spawn(self, pid: int, x: float, y: float, radius: float, height: float) -> None:
        c, zero, still = self.client, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)
        length = max(0.0, height - 2 * radius)
        shape = p.createCollisionShape(p.GEOM_CAPSULE, radius=radius, height=length, physicsClientId=c)
        mass = self.density * 3.141592653589793 * radius ** 2 * (length + 4 * radius / 3)
        body = p.createMultiBody(0.0, -1, -1, basePosition=(x, y, height / 2), linkMasses=[1e-3, mass],
                                 linkCollisionShapeIndices=[-1, shape], linkVisualShapeIndices=[-1, -1],
                                 linkPositions=[zero, zero], linkOrientations=[still, still],
                                 linkInertialFramePositions=[zero, zero], linkInertialFrameOrientations=[still, still],
                                 linkParentIndices=[0, 1], linkJointTypes=[p.JOINT_PRISMATIC] * 2,
                                 linkJointAxis=[(1, 0, 0), (0, 1, 0)], physicsClientId=c)
        p.changeDynamics(body, 1, lateralFriction=0.0, physicsClientId=c)
        p.setCollisionFilterPair(self.world.floor_id, body, -1, 1, 0, physicsClientId=c)
        self.people[pid], self.masses[pid] = body, mass

    def run(self, ticks: int) -> float:
        """Steps ``ticks`` crowd ticks of the log from its start (people from nothing); the simulated seconds."""
        self.reset()
        c, step = self.client, p.stepSimulation
        for wheel, crowd in self.ticks[:ticks]:
            wanted = {row[0] for row in crowd}
            for pid in [pid for pid in self.people if pid not in wanted]:
                p.removeBody(self.people.pop(pid), physicsClientId=c)
            for pid, x, y, vx, vy, radius, height in crowd:
                if pid not in self.people:
                    self._spawn(pid, x, y, radius, height)
                force = self.masses[pid] * self.push_accel
                p.setJointMotorControlArray(self.people[pid], [0, 1], p.VELOCITY_CONTROL, targetVelocities=[vx, vy],
                                            forces=[force, force], physicsClientId=c)
            for index, velocity in wheel.items():
                p.setJointMotorControl2(self.body, index, p.VELOCITY_CONTROL, targetVelocity=velocity,
                                        force=dict(self.joints)[index], physicsClientId=c)
            for _ in range(self.steps_per_tick):
                step(physicsClientId=c)
        return min(ticks, len(self.ticks)) * self.steps_per_tick * self.world.time_step_s

    def close(self) -> None:
        self.world.close()


def drive_section(sizes: tuple[int, ...] = (3, 373), seconds: float = 1.0, rounds: int = 2) -> dict:
    """The people's drive at both ends: hil's Pedestrians (free capsules, rotation locked, two calls a person a
    step) against a planar base (two prismatic joints, velocity motors set once per 0.1 s tick at the drive's force,
    nothing per step), the same people in the arcade (random places and velocities, seed 1), CPU per simulated s
    with a sync every tick; alternating, least of ``rounds``."""
    import random

    from hil.firmware_sim.world.pedestrians import (DRIVE_TAU_S, MAX_DRIVE_ACCEL, PedestrianIntent, Pedestrians)

    def planar(world, intents):
        holder = FairBare.__new__(FairBare)
        holder.world, holder.client, holder.density, holder.people, holder.masses = world, world.client, 985.0, {}, {}
        for it in intents:
            holder._spawn(it.id, it.x, it.y, it.radius, it.height)

        def sync():
            for it in intents:
                body, mass = holder.people[it.id], holder.masses[it.id]
                (_, vx, _, _), (_, vy, _, _) = p.getJointStates(body, [0, 1], physicsClientId=world.client)
                dx, dy = it.vx - vx, it.vy - vy
                k = mass * min(1 / DRIVE_TAU_S, MAX_DRIVE_ACCEL / max(1e-9, (dx * dx + dy * dy) ** 0.5))
                p.setJointMotorControlArray(body, [0, 1], p.VELOCITY_CONTROL, targetVelocities=[it.vx, it.vy],
                                            forces=[k * abs(dx), k * abs(dy)], physicsClientId=world.client)
        return sync

    def run(kind: str, n: int) -> float:
        rng = random.Random(1)
        intents = [PedestrianIntent(i, rng.uniform(-18, 18), rng.uniform(-8, 8), rng.uniform(-1, 1),
                                    rng.uniform(-1, 1)) for i in range(n)]
        with World() as world:
            world.add_map(load_map("arcade"))
            if kind == "hil":
                people = Pedestrians(world)

                def sync():
                    people.states()
                    people.sync(intents)
            else:
                sync = planar(world, intents)
            every = round(0.1 / world.time_step_s)
            steps = round(seconds / world.time_step_s)
            cpu0 = time.process_time()
            for k in range(steps):
                if k % every == 0:
                    sync()
                world.step()
            return (time.process_time() - cpu0) / (steps * world.time_step_s)

    out = {}
    print("the people's drive: CPU s per simulated s, arcade, random people, a sync every 0.1 s, least of "
          f"{rounds} alternating rounds")
    for n in sizes:
        got = {"hil": [], "planar": []}
        for r in range(rounds):
            for kind in (("hil", "planar") if r % 2 == 0 else ("planar", "hil")):
                got[kind].append(run(kind, n))
        out[n] = {k: min(v) for k, v in got.items()}
        print(f"  {n:4d} people: hil's free capsules {out[n]['hil']:.4f}, planar base on motors "
              f"{out[n]['planar']:.4f} (planar / hil {out[n]['planar'] / out[n]['hil']:.2f}x)")
    return out


def fair_section(long_s: float, short_s: float, rounds: int, extra: dict, label: str, smoke: bool = False) -> dict:
    """hil's loop against the fair bare world of its own log: the demo trial (cameras off, ``extra``) LONG and
    SHORT s each in a child process (bench.loop: start-up apart, wall and CPU with the crowd's), the bare world
    of the LONG trial's log stepped LONG - SHORT s; alternating rounds, least of each; hil/bare by wall and CPU.
    A ``smoke`` run runs both trials without warm-ups in this process, whose crowd is warm from the log's trial
    (bench.loop's ``trial_walls(..., here=True)``: the child's code, no second interpreter and crowd)."""
    from hil.trial import Trial
    from hil.trial.presets import demo_spec

    from .loop import ROOT, CpuMeter, trial_walls

    spec_extra = {"camera_rate": 0.0, **extra}
    with tempfile.TemporaryDirectory(prefix="hil-bench-fair-") as tmp, CpuMeter() as cpu:
        Trial(spec=demo_spec(duration=long_s, **spec_extra)).run(Path(tmp) / "log").raise_for_status()
        bare = FairBare(Path(tmp) / "log" / "trial.mcap", Path(tmp))
        hil_wall, hil_cpu, bare_wall, bare_cpu = [], [], [], []
        try:
            ticks = round((long_s - short_s) / 0.1)
            for r in range(rounds):
                for side in (("hil", "bare") if r % 2 == 0 else ("bare", "hil")):
                    if side == "hil":
                        got = trial_walls(ROOT, [(long_s, spec_extra, not smoke), (short_s, spec_extra, not smoke)],
                                          here=smoke)
                        hil_wall.append((got[0]["wall_s"] - got[1]["wall_s"]) / (long_s - short_s))
                        hil_cpu.append((got[0]["cpu_s"] - got[1]["cpu_s"]) / (long_s - short_s))
                    else:
                        bare.run(round(short_s / 0.1))  # warm: the same people, caches
                        start, cpu0 = time.perf_counter(), time.process_time()
                        sim = bare.run(ticks)
                        bare_wall.append((time.perf_counter() - start) / sim)
                        bare_cpu.append((time.process_time() - cpu0) / sim)
            people = bare.mean_people
        finally:
            bare.close()
    row = {"hil_wall": min(hil_wall), "hil_cpu": min(hil_cpu), "bare_wall": min(bare_wall),
           "bare_cpu": min(bare_cpu), "people": people, "others": cpu.others}
    print(f"  {label}: {long_s:g} s - {short_s:g} s trials, {rounds} alternating round(s), least; mean people "
          f"{people:.1f}")
    print(f"    hil loop   {row['hil_wall']:.3f} wall s / sim s (RTF {1 / row['hil_wall']:.2f}), "
          f"{row['hil_cpu']:.3f} CPU s / sim s")
    print(f"    fair bare  {row['bare_wall']:.3f} wall s / sim s (RTF {1 / row['bare_wall']:.2f}), "
          f"{row['bare_cpu']:.3f} CPU s / sim s")
    print(f"    hil at {row['bare_wall'] / row['hil_wall']:.0%} of its fair bare world's speed by wall, "
          f"{row['bare_cpu'] / row['hil_cpu']:.0%} by CPU; {cpu.note()}")
    return row


# --- main ------------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.world", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per round (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side (default 5)")
    parser.add_argument("--smoke", action="store_true", help="smallest settings (0.1 s, 1 round, 3 people, 1 s "
                        "trials): runs, prints")
    parser.add_argument("--fair", default="demo,crowded", help="fair bare world sections: demo, crowded, none "
                                                               "(default demo,crowded)")
    parser.add_argument("--fair-rounds", type=int, default=2, help="alternating rounds of each fair section")
    parser.add_argument("--fair-seconds", default="30,10", help="LONG,SHORT simulated s of the fair sections' "
                                                                 "trials (default 30,10)")
    parser.add_argument("--only-fair", action="store_true", help="the fair bare world sections only")
    parser.add_argument("--only-drive", action="store_true", help="the people's drive section only")
    args = parser.parse_args(argv)
    fair = [] if args.fair == "none" else args.fair.split(",")
    if args.only_fair:
        return fair_sections(fair, args.fair_rounds, args.smoke, args.fair_seconds)
    if args.only_drive:
        return drive_section(*DRIVE_SMOKE if args.smoke else DRIVE_FULL)
    if args.smoke:
        args.seconds, args.rounds = 0.1, 1
    dt = DEFAULT_TIME_STEP_S
    steps = max(1, round(args.seconds / dt))

    with tempfile.TemporaryDirectory(prefix="hil-bench-world-") as tmp:
        urdf, model = commbot_urdf(Path(tmp))
        hil, unmerged = HilSide(dt), HilSide(dt, merge_fixed=False)
        frame = hil.robot.base_pose()
        bares = [BareSide(dt, urdf, model, frame, deterministic_pairs=d) for d in (False, True)]
        merged = BareSide(dt, urdf, model, frame, merged=True)
        merged_det = BareSide(dt, urdf, model, frame, merged=True, deterministic_pairs=True)
        sides = [hil, unmerged, merged, merged_det, *bares]
        try:
            print(f"commbot world: {len(hil.robot.links)} bodies, {len(hil.robot.moving_joints)} moving joints, "
                  f"floor only; {steps} steps of {dt * 1e3:.3f} ms ({steps * dt:g} s simulated) per round, "
                  f"{args.rounds} alternating rounds; {os.cpu_count()} CPU cores")
            print(f"  {'side':<30} {'links':>5} {'build ms':>8} {'steps/s':>11} {'RTF':>9} {'us/step':>10} "
                  f"{'best us':>10}")
            elapsed = alternate(sides, steps, args.rounds)
            rtf = {}
            for side in sides:
                row, rtf[side.name] = _row(side.name, side.links, side.build_s, elapsed[side.name], steps, dt)
                print(row)
            drift = max(abs(a - b) for a, b in zip(hil.base_position(), unmerged.base_position()))
            rtf_hil, rtf_unmerged = rtf[hil.name], rtf[unmerged.name]
            rtf_merged, rtf_bare, rtf_det = rtf[merged.name], rtf[bares[0].name], rtf[bares[1].name]
            print(f"  RTF hil merged / bare merged: {rtf_hil / rtf_merged:.2f}x; hil merged / bare merged + "
                  f"deterministic pairs: {rtf_hil / rtf[merged_det.name]:.2f}x; hil merged / hil unmerged: "
                  f"{rtf_hil / rtf_unmerged:.2f}x; bare merged / bare: {rtf_merged / rtf_bare:.2f}x; "
                  f"hil unmerged / bare: {rtf_unmerged / rtf_bare:.2f}x; hil unmerged / bare + deterministic "
                  f"pairs: {rtf_unmerged / rtf_det:.2f}x (medians of the rounds; the merged and unmerged hil "
                  f"bases end {drift * 1e3:.6f} mm apart)")
        finally:
            for side in sides:
                side.close()
    embodied_rounds = 1 if args.smoke else max(2, args.rounds // 2)
    for line in sensor_ring_section(dt, min(steps, 1200)) + embodied_section(steps, embodied_rounds):
        print(line)
    out = {"rtf_hil": rtf_hil, "rtf_bare_merged": rtf_merged, "rtf_bare": rtf_bare, "ratio": rtf_hil / rtf_merged}
    out["drive"] = drive_section(*DRIVE_SMOKE if args.smoke else DRIVE_FULL)
    out.update(fair_sections(fair, args.fair_rounds, args.smoke, args.fair_seconds))
    return out


DRIVE_FULL = ((3, 30, 100, 373), 1.0, 2)  # the drive section's (people, simulated s, rounds)
DRIVE_SMOKE = ((3,), 0.1, 1)  # a smoke's: one size, a tick's worth of steps, one round (both sides still run)
CROWDED = {"crowd_start": "sat 14:00", "crowd_scale": 100.0, "scenario": None}


def fair_sections(names: list[str], rounds: int, smoke: bool, seconds: str = "30,10") -> dict:
    """The demo (cameras off) and the crowded trial (crowd_scale 100, Saturday 14:00) beside their fair bare worlds."""
    long_s, short_s = (float(x) for x in seconds.split(","))
    out = {}
    if names:
        print("the trial's loop against the fair bare world of its own log (bench.world FairBare)")
    if "demo" in names:
        out["fair_demo"] = fair_section(1.0 if smoke else long_s, 0.5 if smoke else short_s, 1 if smoke else rounds, {},
                                        "the demo", smoke)
    if "crowded" in names and smoke and "demo" in names:  # a smoke's crowded section would run the demo's code again
        print("  crowd_scale 100, Saturday 14:00: left out of a smoke run (the demo's section runs the same code)")
    elif "crowded" in names:
        out["fair_crowded"] = fair_section(1.0 if smoke else long_s, 0.5 if smoke else short_s, 1 if smoke else rounds,
                                           {} if smoke else CROWDED, "crowd_scale 100, Saturday 14:00", smoke)
    return out


if __name__ == "__main__":
    main()
