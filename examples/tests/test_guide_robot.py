"""Scenario tests of a controller, as a user writes them in their own repository (the hil_trial fixture comes
with hil: `pip install hil`, then `pytest`). Here the controller is the shipped guide robot.

    pytest examples/tests                       # every test, seed 0
    pytest examples/tests --hil-seeds 0-3       # the seeded tests once per seed
"""
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "guide_robot.py"


def test_the_guide_reaches_the_east_hall_and_keeps_its_distance(hil_trial):
    """The child scene of the crowd-simulation reference on the route: a child comes to the robot; the robot must still
    arrive, and never touch anyone."""
    r = hil_trial(GUIDE, map="arcade", crowd="weekday", scenario="guide_meets_child", start=(-18, 0, 0),
                  goal=(18, 0), seed=0, duration=180)
    assert r.metrics.goal.reached, r.summary_line()
    assert r.metrics.collisions.robot_initiated == 0
    assert r.metrics.min_clearance_m > -0.2, "never deep inside someone's body"


@pytest.mark.hil_seeds(0, 1)
def test_the_guide_is_not_stuck_at_the_start(hil_trial, hil_seed):
    """Whatever the crowd does (seeded), the guide leaves the west hall within 20 s (measured: 8.5 and 8.9 m by
    then, seeds 0 and 1)."""
    r = hil_trial(GUIDE, map="arcade", crowd="weekday", start=(-18, 0, 0), goal=(18, 0), seed=hil_seed,
                  duration=20)
    assert r.metrics.path_length_m > 5.0, r.summary_line()
