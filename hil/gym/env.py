"""``CrowdNavEnv(spec)``: a ``gymnasium.Env`` over a trial's world (world.py), seeing what observe.py builds from the
robot, acting as actions.py says, paid by CrowdNav's conventions (reward.py).

One ``step`` is one control period on the simulator's clock: the action's (v, w) is commanded, the world advances
by ``1 / control_hz`` s and one bus cycle reads the sensors. ``terminated`` when the robot (ground truth) is within
``goal_radius`` of the goal or touches a wall or a person; ``truncated`` at ``duration`` s, or at once for a NaN
action (the robot is stopped first; ``info["event"]`` says ``nan_action``). ``info`` carries hil's running
metrics of the episode (collisions by who, intrusions, path length, why ring readings failed) and the reward's
terms.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

import gymnasium as gym

from .actions import Actions
from .observe import ROBOT_RADIUS_M, Observer
from .reward import Episode
from .spec import EnvSpec, load_env_file, make_env_spec
from .world import EpisodeWorld


class CrowdNavEnv(gym.Env):
    """A Gymnasium environment over a hil trial spec: ``CrowdNavEnv(spec)``, ``CrowdNavEnv("env.yaml")`` or
    ``CrowdNavEnv(map="lab", goal=[5, 0], ...)`` (keys as in hil/gym/spec.py)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, spec: EnvSpec | str | None = None, render_mode: str | None = None, **keys: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r}: this environment renders rgb_array (or None)")
        if isinstance(spec, EnvSpec):
            if keys:
                raise TypeError("give a spec or the environment's keys, not both")
        elif spec is not None:
            spec = load_env_file(spec, **keys)
        else:
            spec = make_env_spec(**keys)
        self.env_spec, self.render_mode = spec, render_mode
        self.period_s = 1.0 / spec.control_hz
        self.world = EpisodeWorld(spec)
        self.world.start(spec.trial.seed)  # the spaces need the robot: its ring, its base
        try:
            self.observer = Observer(spec, self.world.robot)
            self.actions = Actions(spec, self.world.robot.base)
        except BaseException:
            self.world.close()
            raise
        self.observation_space = self.observer.space()
        self.action_space = self.actions.space()
        self.metadata = {**self.metadata, "render_fps": spec.control_hz}
        self._episode: Episode | None = None

    # --- the gymnasium API ---------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2 ** 31 - 1))
        self.world.start(episode_seed)  # a no-op when the world is at this seed's start already
        self._episode = Episode(self.env_spec, self.world.pose(), seed=episode_seed)
        return self._observe(), self._episode.info(self.world, self._ring_causes())

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        episode = self._episode
        if episode is None or episode.over:
            raise RuntimeError("step() before reset() or after the episode ended: call reset()")
        command = self.actions.decode(action)  # ActionError (the space's bounds) before anything moves
        base = self.world.robot.base
        if command == "nan":
            base.stop()
            command = (0.0, 0.0)
            episode.event = "nan_action"
        else:
            base.drive(*command)
        episode.steps += 1
        self.world.advance(episode.steps * self.period_s)
        reward, terminated, truncated = episode.account(self.world, command, self.period_s)
        return self._observe(), reward, terminated, truncated, episode.info(self.world, self._ring_causes())

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        from .render import top_view

        trial = self.env_spec.trial
        return top_view(self.world.walls(), self.world.pose(), self.world.people(), trial.goal, trial.goal_radius,
                        ROBOT_RADIUS_M)

    def close(self) -> None:
        world = getattr(self, "world", None)
        if world is not None:
            world.close()
        super().close()

    # --- pieces --------------------------------------------------------------------------------------------------
    def _observe(self) -> Any:
        return self.observer.observe(self.world.robot, self.world.people)

    def _ring_causes(self) -> Counter:
        name = self.env_spec.observation.ring
        return Counter(c for c in self.world.robot.sensors[name].causes if c) if name is not None else Counter()


__all__ = ["CrowdNavEnv"]
