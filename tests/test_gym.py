"""hil.gym: the Gymnasium environment over a trial, its policies as controllers.

Real parts throughout: the world is pybullet in this process, the crowd a ``hil crowd --serve`` subprocess (kept
between episodes), the clock the lockstep sim clock; the vector env's workers and the "another process" run are
real subprocesses. Short episodes (a few seconds of simulated time) keep it quick.
"""
from __future__ import annotations

import hashlib
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import hil.gym  # registers the envs
from hil.devices.yaml_source import ConfigError
from hil.gym import ENVS, CrowdNavEnv, policy_trial
from hil.gym.actions import ActionError

ROOT = Path(__file__).resolve().parents[1]
START = (-2.5, 0.0)  # the lab envs' start, written here, not read from the code under test
GOAL_RADIUS = 0.5


def steer(obs: dict) -> np.ndarray:
    """A scripted policy: turn toward the goal, slow down when the ring sees something close ahead."""
    gx, gy = obs["goal"]
    front = float(min(obs["ring"][[0, 1, 11]]))
    return np.array([0.5 * min(1.0, front / 2.0), float(np.clip(1.5 * math.atan2(gy, gx), -1.0, 1.0))], np.float32)


def digest(env, seed: int, steps: int) -> str:
    """SHA-256 of an episode's observations, rewards, flags and infos under ``steer``."""
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    h.update(repr(sorted((k, v.tobytes()) for k, v in obs.items())).encode() + repr(info).encode())
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(steer(obs))
        h.update(repr(sorted((k, v.tobytes()) for k, v in obs.items())).encode())
        h.update(repr((reward, terminated, truncated, info)).encode())
        if terminated or truncated:
            break
    return h.hexdigest()


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_check_env_passes_for_each_registered_env(env_id):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, render_mode="rgb_array")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_check_env_passes_for_a_flat_observation_and_discrete_actions():
    from gymnasium.utils.env_checker import check_env

    env = CrowdNavEnv(**ENVS["hil/CrowdNavLabEmpty-v0"], observation={"flat": True},
                      action={"kind": "discrete", "speeds": 2, "turns": 3})
    try:
        assert env.observation_space.shape == (12 + 12 + 2 + 2,)
        assert env.action_space.n == 1 + 2 * 3
        check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=1)
        for _ in range(10):
            obs, *_ = env.step(np.int64(6))  # the last action: the fastest speed, turning left at w_max
        # flat: ring (12), ring_valid (12), goal (2), velocity (2): turning left, the goal ahead comes to lie right
        assert obs[25] < 0 and obs[27] > 0
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["hil/CrowdNavLabEmpty-v0", "hil/CrowdNavLab-v0"])
def test_the_same_seed_gives_the_same_episode_twice_and_in_another_process(env_id):
    env = gym.make(env_id).unwrapped
    try:
        first = digest(env, 7, 15)
        other = digest(env, 8, 10)  # another episode between: a rewind or a reopen must leave nothing behind
        again = digest(env, 7, 15)
    finally:
        env.close()
    assert other != first
    assert again == first
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})
        import gymnasium as gym, hil.gym
        from test_gym import digest
        env = gym.make({env_id!r}).unwrapped
        print(digest(env, 7, 15)); env.close()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == first


def episode(env, seed: int, steps: int) -> list:
    """(observation, reward, terminated, truncated, info) of every step of an episode driving straight ahead: in the
    lab it runs into a walker, so contacts with people are in it."""
    obs, info = env.reset(seed=seed)
    out = [(obs, 0.0, False, False, info)]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(np.array([0.5, 0.0], np.float32))
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id, changes", [
    ("hil/CrowdNavLab-v0", {"observation": {"people": 4, "depth": "head_camera"}}),  # the camera's too
    ("hil/CrowdNav-v0", {"crowd_scale": 20, "crowd_start": "tue 12:30", "observation": {"people": 4}})])
def test_an_episode_after_others_with_other_seeds_is_a_fresh_envs_episode_with_its_seed(env_id, changes):
    keys = {**ENVS[env_id], **changes}  # the people's states compared too (the arcade busy enough to have people
    # in the first 3 s)
    env = CrowdNavEnv(**keys)
    try:
        for seed in (21, 22, 23):
            episode(env, seed, 12)  # shorter: what matters is that they ran
        after = episode(env, 24, 30)
        assert (env.world.rewinds, env.world.reopens) == (4, 0)  # put back from its start state each time
    finally:
        env.close()
    env = CrowdNavEnv(**keys)
    try:
        fresh = episode(env, 24, 30)
        assert env.world.rewinds == 1  # from the env's opening seed to 24
    finally:
        env.close()
    assert len(after) == len(fresh)
    assert any(step[0]["people_valid"].any() for step in fresh)  # people were there
    for (obs_a, *rest_a), (obs_f, *rest_f) in zip(after, fresh):
        for key in obs_f:
            np.testing.assert_array_equal(obs_a[key], obs_f[key])
        assert rest_a == rest_f
    if env_id == "hil/CrowdNavLab-v0":
        assert fresh[-1][4]["collisions"]["people"] == 1  # the walker was hit: contacts with a person came back too


def test_the_depth_observation_is_the_cameras_nearest_depth_per_block_and_comes_closer_with_a_wall():
    env = CrowdNavEnv(**{**ENVS["hil/CrowdNavLabEmpty-v0"], "goal": [2.0, 0.0]},
                      observation={"ring": None, "goal": False, "velocity": False, "depth": "head_camera",
                                   "depth_block": 16})
    try:
        assert env.observation_space["depth"].shape == (240 // 16, 320 // 16)  # the commbot's 320x240 camera
        obs, _ = env.reset(seed=4)
        frame = env.world.robot.sensors["head_camera"].frame()  # the frame the observation was made of
        block = frame.depth[:16, :16]
        assert obs["depth_valid"][0, 0] == np.count_nonzero(~np.isnan(block)) / 256
        if obs["depth_valid"][0, 0] > 0:
            assert obs["depth"][0, 0] == np.nanmin(block)
        wall = np.s_[5:9, 4:8]  # ahead and left of the doorway: the wall across the lab, facing the camera
        first, x0 = obs["depth"][wall].mean(), env.world.pose()[0]
        for _ in range(30):
            obs, *_ = env.step(np.array([0.5, 0.0], np.float32))
        moved = env.world.pose()[0] - x0  # ground truth, east toward the wall
        assert moved > 1.0
        assert abs((first - obs["depth"][wall].mean()) - moved) < 0.1  # depth along the optical axis: as moved
    finally:
        env.close()


def test_a_depth_observation_of_what_is_no_camera_or_does_not_tile_is_refused_naming_it():
    with pytest.raises(ConfigError, match="no camera 'ring'; its cameras: head_camera, right_camera"):
        CrowdNavEnv(**ENVS["hil/CrowdNavLabEmpty-v0"], observation={"depth": "ring"})
    with pytest.raises(ConfigError, match="depth_block: 7 does not divide the 320x240 image of camera 'head_camera'"):
        CrowdNavEnv(**ENVS["hil/CrowdNavLabEmpty-v0"], observation={"depth": "head_camera", "depth_block": 7})


def test_an_async_vector_env_of_two_steps_each_as_a_single_env_would():
    from gymnasium.vector import AsyncVectorEnv

    actions = np.array([[0.5, 0.0], [0.3, 0.8]], np.float32)
    vec = AsyncVectorEnv([lambda: gym.make("hil/CrowdNavLabEmpty-v0", duration=2.0)] * 2)
    try:
        obs, _ = vec.reset(seed=[3, 4])
        for _ in range(5):
            obs, rewards, terminated, truncated, infos = vec.step(actions)
    finally:
        vec.close()
    assert obs["ring"].shape == (2, 12) and rewards.shape == (2,)
    assert not terminated.any() and not truncated.any()
    single = gym.make("hil/CrowdNavLabEmpty-v0", duration=2.0).unwrapped  # the second worker's, alone
    try:
        one, _ = single.reset(seed=4)
        for _ in range(5):
            one, reward, *_ = single.step(actions[1])
    finally:
        single.close()
    for key in one:
        np.testing.assert_array_equal(obs[key][1], one[key])
    assert rewards[1] == reward
    assert not np.array_equal(obs["goal"][0], obs["goal"][1])  # the two went different ways


def test_driving_straight_at_the_goal_reaches_it_and_standing_still_runs_out_of_time():
    goal = (0.0, 0.0)  # 2.5 m ahead of the lab envs' start, (-2.5, 0) heading east
    env = gym.make("hil/CrowdNavLabEmpty-v0", goal=list(goal), duration=10.0).unwrapped
    try:
        env.reset(seed=1)
        for steps in range(1, 200):
            _, reward, terminated, truncated, info = env.step(np.array([0.5, 0.0], np.float32))
            if terminated or truncated:
                break
        x, y, _ = env.world.pose()  # ground truth from pybullet
    finally:
        env.close()
    assert terminated and not truncated and info["is_success"]
    assert math.hypot(x - goal[0], y - goal[1]) <= GOAL_RADIUS
    assert reward >= 1.0  # CrowdNav's success reward, on the last step
    assert 2.0 / 0.5 <= steps / 10 <= 2.0 / 0.5 * 1.3  # about (2.5 m - the goal radius) / speed, then accelerating

    env = gym.make("hil/CrowdNavLabEmpty-v0", duration=3.0).unwrapped
    try:
        env.reset(seed=1)
        for steps in range(1, 200):
            _, reward, terminated, truncated, info = env.step(np.zeros(2, np.float32))
            if terminated or truncated:
                break
        x, y, _ = env.world.pose()
    finally:
        env.close()
    assert truncated and not terminated and not info["is_success"] and info["event"] == "timeout"
    assert steps == 30  # 3 s at 10 Hz
    assert math.hypot(x - START[0], y - START[1]) < 0.01


def test_bad_spec_files_name_the_file_line_and_what(tmp_path):
    bad = {
        "map: narnia\ngoal: [1, 0]\n": (1, "narnia"),
        "map: lab\ngoal: [1, 0]\nobservation:\n  ring: lidar\n": (4, "lidar"),
        "map: lab\ngoal: [1, 0]\nreward:\n  success: 1\n  kindness: 2\n": (5, "kindness"),
        "map: lab\ngoal: [1, 0]\naction: {kind: teleport}\n": (3, "teleport"),
    }
    for k, (text, (line, name)) in enumerate(bad.items()):
        path = tmp_path / f"env{k}.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            CrowdNavEnv(str(path))
        assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
        assert name in str(info.value)


def test_an_action_outside_the_space_is_refused_with_its_bounds_and_nan_stops_the_robot():
    env = gym.make("hil/CrowdNavLabEmpty-v0").unwrapped
    try:
        obs, _ = env.reset(seed=2)
        for _ in range(20):
            obs, *_ = env.step(np.array([0.5, 0.0], np.float32))
        before = env.world.pose()
        with pytest.raises(ActionError, match=r"v in \[0, 0\.5\] m/s, w in \[-1, 1\] rad/s"):
            env.step(np.array([2.0, 0.0], np.float32))
        assert env.world.pose() == before  # refused before anything moved
        obs, reward, terminated, truncated, info = env.step(np.array([np.nan, 0.0], np.float32))
        assert truncated and not terminated and info["event"] == "nan_action"
        wheels = env.world.robot.base.wheels
        assert all(w.joint.target_velocity == 0.0 for w in wheels)
        with pytest.raises(RuntimeError, match="reset"):
            env.step(np.zeros(2, np.float32))
    finally:
        env.close()


def test_render_draws_the_robot_and_the_goal():
    env = gym.make("hil/CrowdNavLabEmpty-v0", render_mode="rgb_array").unwrapped
    try:
        env.reset(seed=0)
        image = env.render()
    finally:
        env.close()
    from hil.trial.report.topdown import GOAL as GOAL_RGB, ROBOT as ROBOT_RGB

    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    robot = np.argwhere(np.all(image == ROBOT_RGB, axis=2))
    goal = np.argwhere(np.all(image == GOAL_RGB, axis=2))
    assert len(robot) and len(goal)
    assert robot[:, 1].mean() < goal[:, 1].mean()  # the robot west of the goal (columns grow eastward)


@pytest.mark.parametrize("env_id", ["hil/CrowdNavLabEmpty-v0", "hil/CrowdNavLab-v0"])
def test_a_policy_controller_sees_and_does_in_a_trial_what_the_policy_saw_and_did_in_the_env(env_id):
    def logged(log: list):
        def policy(obs):
            action = steer(obs)
            log.append((obs, action))
            return action
        return policy

    keys = {**ENVS[env_id], "duration": 3.0, "seed": 5}
    in_env, in_trial = [], []
    env = CrowdNavEnv(**keys)
    try:
        digest(env, 6, 5)  # an episode before: the logged one is a rewound or reopened world
        policy = logged(in_env)
        obs, _ = env.reset(seed=5)
        while True:
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            if terminated or truncated:
                break
    finally:
        env.close()
    result = policy_trial(logged(in_trial), keys).run(None)
    assert result.status == "ok", result.error
    assert len(in_env) >= 25 and len(in_trial) >= len(in_env)
    for (obs_env, act_env), (obs_trial, act_trial) in zip(in_env, in_trial):
        for key in obs_env:
            np.testing.assert_allclose(obs_trial[key], obs_env[key], atol=1e-6)
        np.testing.assert_array_equal(act_trial, act_env)


def test_a_policy_that_observes_people_cannot_be_a_controller():
    with pytest.raises(ConfigError, match="observation.people"):
        hil.gym.policy_controller(steer, {**ENVS["hil/CrowdNavLabEmpty-v0"], "observation": {"people": 3}})


def test_a_world_with_faults_is_rewound_and_its_faults_start_over_with_each_episode():
    """The ring unplugged at 1 s and plugged back at 2 s: every episode is rewound (no process, no world made
    again), sees the same fault at the same time, and the fourth is the fresh env's episode with its seed."""
    keys = {**ENVS["hil/CrowdNavLabEmpty-v0"], "faults": [{"at": 1.0, "unplug": "ring"}, {"at": 2.0, "plug": "ring"}]}
    env = CrowdNavEnv(**keys)
    try:
        runs = [episode(env, seed, 30) for seed in (21, 22, 24)]
        assert (env.world.rewinds, env.world.reopens) == (3, 0)
    finally:
        env.close()
    env = CrowdNavEnv(**keys)
    try:
        fresh = episode(env, 24, 30)
    finally:
        env.close()
    period = 0.1  # the env's control period (control_hz 10, the default)
    for run in runs:
        valid = [float(step[0]["ring_valid"].sum()) for step in run]
        times = [k * period for k in range(len(run))]
        assert all(v > 0 for v, t in zip(valid, times) if 0 < t < 0.9), "the ring reads before its fault"
        assert all(v > 0 for v, t in zip(valid, times) if t >= 2.3), "and again once plugged back"
        assert all(v == 0 for v, t in zip(valid, times) if 1.3 <= t <= 2.0), "unplugged: no reading is valid"
    for (obs_a, *_), (obs_f, *_) in zip(runs[-1], fresh):
        for key in obs_f:
            np.testing.assert_array_equal(obs_a[key], obs_f[key])
    assert len(runs[-1]) == len(fresh)
