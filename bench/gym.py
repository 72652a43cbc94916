"""hil.gym: environment steps per second and reset time, one env and AsyncVectorEnv, beside SocNavGym's env.

Each hil env steps a scripted policy (turn toward the goal) for ``--steps`` steps, resetting whenever an episode
ends: steps/s counts env.step calls per wall second (each is 0.1 s of simulated time: 24 physics steps at
240 Hz and one bus cycle of the 40-part commbot), reset is the mean (and the least) wall time of a reset after an
episode: the world put back from its start state, with the crowd process's next session for a crowd. The lab
with walkers is measured again with the head camera's depth in the observation (``--depth``, on by default:
one 320x240 frame rendered per step). AsyncVectorEnv(N) counts the steps of all N envs per wall second.

SocNavGym (``pip install socnavgym``, gym 0.26: in a venv of its own, ``--socnavgym PYTHON``) steps its
default environment (a room with 1-5 humans and objects, discs with perfect sensing, no physics) with random
actions in a subprocess, on the same machine in the same run.

    .venv/bin/python -m bench.gym [--steps 300] [--vector 2] [--envs ID,ID] [--no-depth] [--socnavgym PYTHON]
                                  [--smoke]
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import textwrap
import time

import numpy as np

from bench._smoke import parse_with_smoke

ENV_IDS = ("hil/CrowdNavLabEmpty-v0", "hil/CrowdNavLab-v0", "hil/CrowdNav-v0")


def steer(obs: dict) -> np.ndarray:
    gx, gy = obs["goal"]
    return np.array([0.5, float(np.clip(1.5 * math.atan2(gy, gx), -1.0, 1.0))], np.float32)


DEPTH = {"observation": {"depth": "head_camera"}}  # the commbot's head camera, 8x8-pixel blocks


def one_env(env_id: str, steps: int, **keys) -> tuple[float, float, float, int]:
    """(steps/s, mean and least reset s after an episode, episodes) of one env in this process."""
    import gymnasium as gym

    import hil.gym  # noqa: F401

    env = gym.make(env_id, duration=10.0, **keys)
    resets: list[float] = []
    obs, _ = env.reset(seed=0)
    start, done, episodes = time.perf_counter(), 0, 0
    while done < steps:
        obs, _, terminated, truncated, _ = env.step(steer(obs))
        done += 1
        if terminated or truncated:
            episodes += 1
            t0 = time.perf_counter()
            obs, _ = env.reset(seed=episodes)
            resets.append(time.perf_counter() - t0)
    wall = time.perf_counter() - start - sum(resets)
    env.close()
    return steps / wall, (sum(resets) / len(resets) if resets else math.nan), min(resets, default=math.nan), \
        episodes


def vector(env_id: str, n: int, steps: int) -> float:
    """Steps of all ``n`` envs per wall second, AsyncVectorEnv (one process each), autoreset included."""
    import gymnasium as gym
    from gymnasium.vector import AsyncVectorEnv

    import hil.gym  # noqa: F401

    vec = AsyncVectorEnv([lambda: gym.make(env_id, duration=10.0)] * n)
    obs, _ = vec.reset(seed=list(range(n)))
    start = time.perf_counter()
    for _ in range(steps):
        actions = np.stack([steer({"goal": obs["goal"][k]}) for k in range(n)])
        obs, *_ = vec.step(actions)
    took = time.perf_counter() - start
    vec.close()
    return n * steps / took


SOCNAVGYM = textwrap.dedent("""
    import time, gym, socnavgym
    env = gym.make("SocNavGym-v1")
    env.reset(seed=0)
    steps, resets = {steps}, []
    start = time.perf_counter()
    for k in range(steps):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            t0 = time.perf_counter(); env.reset(); resets.append(time.perf_counter() - t0)
    wall = time.perf_counter() - start - sum(resets)
    print(steps / wall, sum(resets) / max(1, len(resets)), len(resets))
""")


def socnavgym(python: str, steps: int) -> tuple[float, float, int] | str:
    out = subprocess.run([python, "-c", SOCNAVGYM.format(steps=steps)], capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or ["failed"])[-1]
    rate, reset, episodes = out.stdout.split()[-3:]
    return float(rate), float(reset), int(episodes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hil.gym steps/s and reset time")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--vector", type=int, default=2, help="AsyncVectorEnv size (0: none)")
    parser.add_argument("--socnavgym", default=os.environ.get("SOCNAVGYM_PYTHON"),
                        help="a Python with socnavgym installed (its own venv)")
    parser.add_argument("--envs", default=",".join(ENV_IDS), help="the hil envs to step, comma-separated")
    parser.add_argument("--depth", action=argparse.BooleanOptionalAction, default=True,
                        help="also the lab with walkers observing the head camera's depth")
    args = parse_with_smoke(parser, argv, steps=20, vector=1, envs=ENV_IDS[0], depth=False)
    print(f"{'env':34s} {'steps/s':>8s} {'reset s':>8s} {'least':>8s} {'episodes':>8s}  (cores: {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f})")
    env_ids = [e for e in args.envs.split(",") if e]
    runs = [(env_id, env_id, {}) for env_id in env_ids]
    if args.depth:
        runs.append(("hil/CrowdNavLab-v0 + depth", "hil/CrowdNavLab-v0", DEPTH))
    for label, env_id, keys in runs:
        rate, reset, least, episodes = one_env(env_id, args.steps, **keys)
        print(f"{label:34s} {rate:8.1f} {reset:8.3f} {least:8.3f} {episodes:8d}")
    if args.vector:
        for env_id in env_ids[:2]:
            rate = vector(env_id, args.vector, args.steps // args.vector)
            print(f"AsyncVectorEnv({args.vector}) {env_id:24s} {rate:8.1f} steps/s, all envs together")
    if args.socnavgym:
        got = socnavgym(args.socnavgym, args.steps * 10)
        if isinstance(got, str):
            print(f"{'SocNavGym-v1':28s} failed: {got}")
        else:
            print(f"{'SocNavGym-v1 (random)':28s} {got[0]:8.1f} {got[1]:8.3f} {got[2]:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
