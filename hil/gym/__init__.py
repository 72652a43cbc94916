"""hil.gym: a Gymnasium environment over a hil trial, and policies that run as controllers.

    import gymnasium as gym
    import hil.gym                                   # registers hil/CrowdNav-v0, hil/CrowdNavLab-v0, ...
    env = gym.make("hil/CrowdNavLab-v0")
    obs, info = env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    spec.py        what an environment is: a trial spec plus observation, action, reward (YAML with file:line)
    world.py       the trial's world driven one control period at a time; episodes rewound, never restarted
    observe.py     the observation, from the robot alone (so a controller builds the same one)
    actions.py     the action space, checked (bounds in the message; NaN stops the robot)
    reward.py      CrowdNav's reward and hil's running metrics
    env.py         CrowdNavEnv
    render.py      the RGB top view
    controller.py  policy_controller: a policy as a controller main(robot) for hil trial, sweeps, the real robot

A layer above trial/ (beside the command line); nothing below imports it. Needs the ``gym`` extra (gymnasium).
"""
from __future__ import annotations

from typing import Any

__all__ = ["CrowdNavEnv", "ENVS", "EnvSpec", "load_env_file", "make_env_spec", "policy_controller", "policy_trial",
           "register"]

LAB = {"map": "lab", "start": [-2.5, 0.0, 0.0], "goal": [2.5, 0.0], "duration": 25.0}
ENVS: dict[str, dict[str, Any]] = {
    # the arcade's west passage into the plaza, among the weekday crowd: 8 m to go
    "hil/CrowdNav-v0": {"map": "arcade", "crowd": "weekday", "start": [-12.0, 0.0, 0.0], "goal": [-4.0, 0.0],
                        "duration": 30.0},
    # the lab, three walkers crossing the robot's way (config/scenarios/lab_walkers.scn): 5 m to go
    "hil/CrowdNavLab-v0": {**LAB, "scenario": "lab_walkers"},
    # the lab and nobody else: the quickest to learn on
    "hil/CrowdNavLabEmpty-v0": dict(LAB),
}

_WHERE = {"CrowdNavEnv": "env", "EnvSpec": "spec", "load_env_file": "spec", "make_env_spec": "spec",
          "policy_controller": "controller", "policy_trial": "controller"}


def register() -> None:
    """Register :data:`ENVS` with gymnasium (done on import; again is harmless)."""
    try:
        import gymnasium
    except ImportError as exc:
        raise ImportError(f"hil.gym needs gymnasium ({exc}): pip install 'hil[gym]'") from None

    for env_id, keys in ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point="hil.gym.env:CrowdNavEnv", kwargs=dict(keys))


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'hil.gym' has no attribute {name!r}")


register()
