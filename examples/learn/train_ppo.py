"""Train a PPO policy (Stable-Baselines3, on the CPU) in a hil environment, save it, and say how often it reaches
the goal beside a random policy.

    pip install -e '.[learn]'          # gymnasium, stable-baselines3 and torch's CPU build (a venv of its own)
    python examples/learn/train_ppo.py --env hil/CrowdNavLab-v0 --timesteps 40960 --envs 2 --out ppo_lab.zip
    hil trial examples/learn/lab_trial.yaml --out trials/ppo     # the saved policy as a controller
    hil view trials/ppo

``--envs N`` trains on N environments in N processes (SB3's SubprocVecEnv: one world and one crowd each).
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import hil.gym  # noqa: F401  (registers hil/CrowdNav-v0, hil/CrowdNavLab-v0, hil/CrowdNavLabEmpty-v0)


def success_rate(env_id: str, act, episodes: int, seed: int) -> float:
    """The share of ``episodes`` (seeds seed, seed+1, ...) in which ``act(obs)`` reaches the goal."""
    env = gym.make(env_id)
    wins = 0
    try:
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            while True:
                obs, _, terminated, truncated, info = env.step(act(obs))
                if terminated or truncated:
                    wins += bool(info["is_success"])
                    break
    finally:
        env.close()
    return wins / episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="hil/CrowdNavLab-v0")
    parser.add_argument("--timesteps", type=int, default=40960)
    parser.add_argument("--envs", type=int, default=1, help="environments in parallel (processes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="ppo_lab.zip")
    parser.add_argument("--eval", type=int, default=10, help="episodes to compare with a random policy (0: none)")
    parser.add_argument("--progress", type=float, default=0.3,
                        help="the reward per metre the goal came closer while training (the env's default: 0.1; "
                             "a denser signal learns in fewer steps; success is judged apart from the reward)")
    args = parser.parse_args(argv)

    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    vec = make_vec_env(args.env, n_envs=args.envs, seed=args.seed, env_kwargs={"reward": {"progress": args.progress}},
                       vec_env_cls=SubprocVecEnv if args.envs > 1 else DummyVecEnv)
    model = PPO("MultiInputPolicy", vec, n_steps=1024, batch_size=128, learning_rate=3e-4, gamma=0.99,
                seed=args.seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    took = time.perf_counter() - start
    vec.close()
    model.save(args.out)
    print(f"trained {args.timesteps} steps on {args.env} in {took:.0f} s ({args.timesteps / took:.0f} steps/s), "
          f"saved {args.out}")
    if args.eval:
        space = gym.make(args.env).action_space
        space.seed(args.seed)
        trained = success_rate(args.env, lambda obs: model.predict(obs, deterministic=True)[0], args.eval, 1000)
        random = success_rate(args.env, lambda obs: space.sample(), args.eval, 1000)
        print(f"success over {args.eval} episodes (seeds 1000..): PPO {trained:.0%}, random {random:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
