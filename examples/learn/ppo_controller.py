"""A PPO policy trained in a hil environment (train_ppo.py), run as a controller: in ``hil trial``, ``hil sweep``
or on the real robot's profile. It observes as the environment did (hil.gym.policy_controller).

    hil trial examples/learn/lab_trial.yaml --out trials/ppo
    hil trial examples/learn/ppo_controller.py --map lab --scenario lab_walkers --start -2.5,0,0 --goal 2.5,0 \\
        --param model=ppo_lab.zip --param env=hil/CrowdNavLab-v0

Parameters: ``model`` (the saved .zip), ``env`` (the registered environment it was trained in: its observation,
action and goal).
"""


def main(robot):
    from stable_baselines3 import PPO

    from hil.gym import ENVS, policy_controller

    env = robot.params.get("env", "hil/CrowdNavLab-v0")
    model = PPO.load(robot.params.get("model", "ppo_lab.zip"), device="cpu")
    policy_controller(model, ENVS[env])(robot)
