"""The environment's world: a trial's virtual robot, task and crowd, opened once and driven one control period at
a time from :meth:`EpisodeWorld.advance` (the environment is the robot's only lockstep participant, so advancing
the clock steps the world in this thread: no controller thread, no queue).

A new episode never restarts a process: the world is rewound. Its start state, saved right after the robot
opened and before the crowd's first tick (trial/state's machinery: pybullet's ``.bullet``, every part's control
table and firmware, the host's side), is put back, the clock set to 0, and everything seeded drawn again from the
episode's seed: the ring's and the cameras' generators, and the crowd, which the crowd process builds afresh in
its next session (the trial's crowd pool, trial/task.py: bye, idle, the new seed on its stdin) while the world
removes the last episode's people with their bodies. A crowd is never snapshotted (a served script is a paused
generator): a fresh crowd with the episode's seed is exactly the crowd a new env would start. A world with faults
that swap or add parts (the robot is made of other parts than at the start) or a crowd served elsewhere
(``crowd_endpoint``) is reopened in this process instead; other faults (unplug, plug, reboot, overload, noise) start
over with the rewound world: the parts' power and silence put back, the plan's actions pending again, the noise's
generator drawn from the episode's seed.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from .spec import EnvSpec


class EpisodeWorld:
    """One robot in one world for many episodes."""

    def __init__(self, spec: EnvSpec):
        self.spec = spec
        self.robot: Any = None
        self.crowd: Any = None
        self.task: Any = None
        self.probe: Any = None
        self._start: dict[str, Any] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="hil-gym-")
        self.touched: set[str] = set()  # what touched the robot since the last take_touched(): wall:NAME, person:ID
        self.rewinds = 0
        self._at_start_of: int | None = None  # the seed of the start the world is at, untouched since
        self.reopens = 0
        self.faults: Any = None  # the trial's fault plan (firmware_sim/fault_plan.py), or None

    @property
    def rewindable(self) -> bool:
        """Everything seeded can be put back: faults only of a plan that can start over (none swaps or adds a
        part), and people only from a crowd process of our own (it serves the next episode's seed in a fresh
        session)."""
        trial = self.spec.trial
        faults_ok = not trial.faults or (self.faults is not None and self.faults.restartable)
        return faults_ok and (not trial.has_people or self.crowd is not None)

    # --- episodes ----------------------------------------------------------------------------------------------
    def start(self, seed: int) -> None:
        """The world at its start with ``seed``: opened the first time, rewound or reopened after."""
        if self.robot is not None and self._at_start_of == seed:
            return  # nothing has run since this very start (a learner's or a checker's reset after reset)
        if self.robot is not None and self._start is not None and self._crowd_well():
            try:
                self._rewind(seed)
            except BaseException:  # half put back: the next start opens the world afresh
                self.close(keep_dir=True)
                raise
            self.rewinds += 1
        else:
            self.reopens += int(self.robot is not None)
            self._open(seed)
        self.touched.clear()
        self.robot.clock.sleep_until(0.0)
        self.robot.cycle()  # the first readings, as robot.loop's first tick has them
        self._at_start_of = seed

    def _crowd_well(self) -> bool:
        """False once the crowd link failed (the crowd died): then the world is reopened with a new process."""
        crowd = self.probe.embodied.crowd
        return crowd is None or crowd.failure is None

    def advance(self, t_s: float) -> None:
        """The world to ``t_s`` (the commands set since the last cycle acting meanwhile), then one bus cycle."""
        self._at_start_of = None
        self.robot.clock.sleep_until(t_s)
        self.robot.cycle()

    def _open(self, seed: int) -> None:
        from hil.runtime.robot import Robot
        from hil.trial.run import arm_faults
        from hil.trial.task import make_task, start_crowd
        from hil.trial.world import WorldProbe, robot_profile

        self.close(keep_dir=True)
        trial = self.spec.trial.but(seed=seed)
        self.task = task = make_task(trial)
        endpoint = trial.crowd_endpoint
        if endpoint is None and task.has_crowd:
            self.crowd = start_crowd(trial, task, realtime=False)
            endpoint = self.crowd.endpoint
        try:
            self.robot = robot = Robot.open(robot_profile(trial, task, endpoint, False))
            self.probe = WorldProbe.of(robot)
            if self.probe is None:
                raise trial_error(self.spec, "an environment needs the virtual robot in this process (robot:)")
            if robot.clock.kind != "sim":
                raise trial_error(self.spec, "an environment runs on the sim clock (clock: sim)")
            self.faults = arm_faults(trial, robot)
            if self.crowd is not None:
                self.crowd.watch(self.probe)
            self.probe.embodied.world.add_post_step(self._watch_contacts)
            if self.rewindable:
                self._save_start()
        except BaseException:
            self.close(keep_dir=True)
            raise

    # --- the start state, and going back to it ----------------------------------------------------------------
    def _save_start(self) -> None:
        from hil.firmware_sim.embodied.state import save_world
        from hil.trial.state.host import save_host

        embodied = self.probe.embodied
        bullet = Path(self._dir.name) / "start.bullet"
        with embodied.device.lock:
            world = save_world(embodied, str(bullet))
        presence = self.robot.presence
        self._start = {"world": world, "bullet": str(bullet), "host": save_host(self.robot),
                       "silent": dict(embodied.device.silent_until),  # a part unplugged or rebooting by a fault
                       "presence": presence.timers() if presence is not None else None}

    def _rewind(self, seed: int) -> None:
        import pybullet as p

        from hil.firmware_sim.embodied.camera import reseed as reseed_cameras
        from hil.firmware_sim.embodied.sensing import RangeRingFirmware, part_seed
        from hil.firmware_sim.embodied.servo import PositionDrives
        from hil.firmware_sim.embodied.state import restore_parts
        from hil.trial.state.host import restore_host
        from hil.trial.state.resume import _set_clock

        start, robot, embodied = self._start, self.robot, self.probe.embodied
        if embodied.crowd is not None:
            self._new_crowd_session(seed)
        with embodied.device.lock:
            _drop_contacts(embodied)
            p.restoreState(fileName=start["bullet"], physicsClientId=embodied.world.client)
            embodied.world.steps = int(start["world"]["steps"])
            embodied.robot.forget_contacts()  # the contact cache is keyed by step: the steps start over
            restore_parts(embodied, start["world"]["parts"])
            embodied.device.silent_until.clear()
            embodied.device.silent_until.update(start["silent"])
            PositionDrives.of(embodied.world, embodied.robot).due()  # its cached deadline and batch are of the past
            for part in embodied.parts:  # the episode's own noise (trial seeds: firmware_sim/embodied/embody.py)
                if isinstance(part, RangeRingFirmware):
                    part.model.reseed(part_seed(seed, part.serial_number))
            reseed_cameras(embodied, seed)
        _set_clock(robot, embodied, 0.0)
        if self.faults is not None:
            with embodied.device.lock:
                self.faults.restart(seed)  # every action pending again, from the start's world time
        restore_host(robot, start["host"])
        if start["presence"] is not None:
            robot.presence.restore_timers(start["presence"])
        robot.deadline_s = None

    def _new_crowd_session(self, seed: int) -> None:
        """The crowd process's next session, a fresh crowd with the episode's seed (the trial's crowd pool), and
        the world's people gone with their bodies: the start state was saved before the crowd's first tick."""
        from hil.trial.task import release, start_crowd

        bridge = self.probe.embodied.crowd
        bridge.say_bye()
        process, self.crowd = self.crowd, None
        release(process, ended_well=True)
        self.crowd = start_crowd(self.spec.trial.but(seed=seed), self.task, realtime=False)
        with self.probe.embodied.device.lock:
            bridge.restart(self.crowd.endpoint)
        self.crowd.watch(self.probe)

    # --- ground truth ------------------------------------------------------------------------------------------
    def _watch_contacts(self, world: Any) -> None:
        """After every physics step: who touches the robot (walls and people by name; the floor is no contact)."""
        body = self.probe.embodied.robot
        points = body.contact_points()
        if not points:
            return
        people = {}
        crowd = self.probe.embodied.crowd
        if crowd is not None:
            people = {b: pid for pid, b in crowd.pedestrians.bodies.items()}
        for point in points:
            other = point[2]
            if other in (world.floor_id, body.body_id):
                continue
            if other in world.walls:
                self.touched.add(f"wall:{world.walls[other].name or other}")
            elif other in people:
                self.touched.add(f"person:{people[other]}")
            else:
                self.touched.add(f"body:{other}")

    def pose(self) -> tuple[float, float, float]:
        return self.probe.robot_pose()

    def people(self) -> list[dict]:
        crowd = self.probe.embodied.crowd
        if crowd is None:
            return []
        with self.probe.embodied.device.lock:
            return crowd.states()

    def walls(self) -> list[Any]:
        return list(self.probe.embodied.world.walls.values())

    # --- closing -----------------------------------------------------------------------------------------------
    def close(self, keep_dir: bool = False) -> None:
        """Close the robot, and let the crowd process go idle for the next episode (or stop it)."""
        from hil.trial.task import release

        robot, crowd = self.robot, self.crowd
        self.robot = self.probe = self.crowd = self.faults = None
        self._start = None
        try:
            if robot is not None:
                robot.close()
        finally:
            if crowd is not None:
                release(crowd, ended_well=robot is not None)
            if not keep_dir:
                self._dir.cleanup()


def _drop_contacts(embodied: Any) -> None:
    """Forget the robot's contact manifolds: the start state was saved before any contact was found, and
    restoreState keeps manifolds it has no record of, whose warm start would make an episode depend on how the
    one before it ended. The robot is lifted far away and one collision pass drops every pair it was in."""
    import pybullet as p

    client, body = embodied.world.client, embodied.robot.body_id
    p.resetBasePositionAndOrientation(body, (1e4, 1e4, 1e4), (0.0, 0.0, 0.0, 1.0), physicsClientId=client)
    p.performCollisionDetection(physicsClientId=client)


def trial_error(spec: EnvSpec, message: str) -> Exception:
    from hil.devices.yaml_source import ConfigError

    return ConfigError(spec.source, None, message)


def nearest_gap(pose: tuple[float, float, float], people: list[dict], robot_radius: float) -> tuple[float, int]:
    """The smallest distance between the robot's disc and a person's (m; inf without people), and whose."""
    x, y, _ = pose
    return min(((math.hypot(q["x"] - x, q["y"] - y) - q.get("radius", 0.25) - robot_radius, q["id"])
                for q in people), default=(math.inf, -1))


__all__ = ["EpisodeWorld", "nearest_gap"]
