"""A policy as a controller: ``main = policy_controller(policy, spec)`` in a controller file runs in ``hil trial``,
``hil sweep`` and on the real robot's profile, seeing what the environment showed the policy.

The observation is built by the environment's own :class:`~hil.gym.observe.Observer` from the robot's ring,
odometry and wheels, on ``robot.loop(hz=control_hz)``: tick k's bus cycle, its observation, the policy's action
commanded for the next period, exactly the environment's reset/step sequence. The goal comes from the spec (on a
real robot, its profile's ``start_pose`` puts odometry in the map frame). A spec that observes ``people`` (the
simulator's ground truth) is refused: a robot has no such sensor.

``policy`` is any callable from an observation to an action, or to ``(action, state)`` as a Stable-Baselines3
model's ``predict`` returns; a model itself (anything with ``predict``) is called with ``deterministic=True``.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .spec import EnvSpec, load_env_file, make_env_spec


def as_env_spec(spec: EnvSpec | str | Path | dict) -> EnvSpec:
    """An EnvSpec from a spec, an environment file, or a mapping of its keys (a registered env's: hil.gym.ENVS)."""
    if isinstance(spec, EnvSpec):
        return spec
    if isinstance(spec, dict):
        return make_env_spec(**spec)
    return load_env_file(spec)


def act(policy: Any, obs: Any) -> Any:
    """The action of ``policy`` for ``obs`` (a callable, a callable giving (action, state), or a model)."""
    predict = getattr(policy, "predict", None)
    result = predict(obs, deterministic=True) if predict is not None else policy(obs)
    if isinstance(result, tuple) and len(result) == 2 and (result[1] is None or isinstance(result[1], tuple)):
        return result[0]
    return result


def policy_controller(policy: Any, spec: EnvSpec | str | Path | dict) -> Callable[[Any], None]:
    """A controller ``main(robot)`` that drives the robot by ``policy``, observing as ``spec``'s environment does."""
    spec = as_env_spec(spec)
    if spec.observation.people:
        raise spec.error("observation.people", "observation.people is the simulator's ground truth: a policy that "
                                               "observes people cannot run as a controller (observe the ring)")

    def main(robot: Any) -> None:
        from .actions import Actions
        from .observe import Observer

        observer, actions = Observer(spec, robot), Actions(spec, robot.base)
        for _ in robot.loop(hz=spec.control_hz):
            command = actions.decode(act(policy, observer.observe(robot)))
            if command == "nan":
                robot.base.stop()
                robot.mode = "stopped: the policy gave NaN"
                robot.cycle()  # the stop goes out now
                return
            robot.base.drive(*command)

    main.__name__ = main.__qualname__ = f"policy_{getattr(policy, '__name__', type(policy).__name__)}"
    main.env_spec = spec  # type: ignore[attr-defined]
    return main


def policy_trial(policy: Any, spec: EnvSpec | str | Path | dict, **changes: Any) -> Any:
    """The :class:`hil.trial.Trial` of the environment's task (map, crowd, start, goal, seed, duration...) with
    ``policy`` as its controller and ``changes`` to its keys: ``policy_trial(model, "env.yaml").run("out")``."""
    from hil.trial import Trial

    spec = as_env_spec(spec)
    trial = spec.trial.but(**changes) if changes else spec.trial
    return Trial(spec=_with_controller(trial, policy_controller(policy, spec)))


def _with_controller(trial: Any, controller: Callable[[Any], None]) -> Any:
    from dataclasses import replace

    return replace(trial, controller=controller, name=trial.name or controller.__name__)


__all__ = ["act", "as_env_spec", "policy_controller", "policy_trial"]
