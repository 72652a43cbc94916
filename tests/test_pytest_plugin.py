"""The pytest plugin (trial/pytest_plugin.py, entry point pytest11): a user's own tests of their controller, run
by pytester in a separate pytest process exactly as in the user's repository (the plugin is found through the
installed entry point, not imported by these tests)."""
from __future__ import annotations

import re
import textwrap

pytest_plugins = ["pytester"]

CONTROLLER = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            robot.base.drive(v=robot.params.get("speed", 0.4), w=0.0)
''')

USER_TESTS = textwrap.dedent('''\
    import pytest

    def test_reaches_the_goal(hil_trial):
        r = hil_trial("my_controller.py", map="lab", start=(0, 0, 0), goal=(1.0, 0.0), duration=10)
        assert r.metrics.goal.reached and r.metrics.intrusions.intimate.entries == 0

    def test_too_slow_to_arrive(hil_trial):
        r = hil_trial("my_controller.py", map="lab", start=(0, 0, 0), goal=(1.0, 0.0), duration=1,
                      params={"speed": 0.1})
        assert r.metrics.goal.reached, "the robot was too slow"

    @pytest.mark.hil_seeds(1, 2)
    def test_each_seed(hil_trial, hil_seed):
        r = hil_trial("my_controller.py", map="lab", seed=hil_seed, duration=0.5)
        assert r.metrics.meta.seed == hil_seed

    def test_the_controller_crashes(hil_trial):
        hil_trial("crashing.py", map="lab", duration=2)
''')


def _project(pytester):
    pytester.makepyfile(my_controller=CONTROLLER, crashing="def main(robot):\n    raise RuntimeError('boom')\n")
    pytester.makepyfile(test_mine=USER_TESTS)


def test_a_passing_and_a_failing_user_test_and_the_failure_names_the_trial_folder(pytester):
    _project(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rA")
    result.assert_outcomes(passed=3, failed=2)
    text = result.stdout.str()
    outcomes = dict((name, outcome) for outcome, name in re.findall(r"^(PASSED|FAILED) test_mine\.py::(\S+)", text,
                                                                   re.MULTILINE))
    assert outcomes == {"test_reaches_the_goal": "PASSED", "test_each_seed[seed1]": "PASSED",
                        "test_each_seed[seed2]": "PASSED", "test_too_slow_to_arrive": "FAILED",
                        "test_the_controller_crashes": "FAILED"}, outcomes
    # the failing test's report has the trials section: one line per trial, with its folder
    section = text[text.index("test_too_slow_to_arrive"):]
    assert "hil trials" in section and "goal NOT reached" in section
    folder = re.search(r"folder (\S+)", section).group(1)
    assert folder.endswith("trial1-my_controller-0") and "trial.mcap" not in folder
    assert "the robot was too slow" in section
    # a controller that raises fails its test with the controller's error and the trial folder
    crash = text[text.index("test_the_controller_crashes"):]
    assert "RuntimeError: boom" in crash and "trial folder" in crash


def test_seeds_come_from_the_marker_or_the_command_line(pytester):
    _project(pytester)
    marked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "each_seed")
    marked.assert_outcomes(passed=2)
    assert "test_each_seed[seed1] PASSED" in marked.stdout.str() and "[seed2]" in marked.stdout.str()
    chosen = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "each_seed", "--hil-seeds", "5-7")
    chosen.assert_outcomes(passed=3)
    assert "[seed5]" in chosen.stdout.str() and "[seed7]" in chosen.stdout.str()
    bad = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hil-seeds", "x")
    assert bad.ret != 0 and "--hil-seeds 'x'" in bad.stderr.str() + bad.stdout.str()


def test_trial_folders_can_be_kept_where_the_user_says(pytester):
    _project(pytester)
    kept = pytester.path / "kept"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-k", "reaches", "--hil-trials-dir",
                                           str(kept))
    result.assert_outcomes(passed=1)
    logs = list(kept.rglob("trial.mcap"))
    assert len(logs) == 1 and "test_reaches_the_goal" in str(logs[0])


def test_a_trial_that_declares_success_criteria_fails_its_test_saying_which_and_why(pytester):
    """With ``success:`` given the verdict judges: a missed goal fails the test with the criterion and the cause
    (metrics.failure); the same trial without ``success:`` leaves the judging to the test's asserts."""
    _project(pytester)
    pytester.makepyfile(test_declared=textwrap.dedent('''\
        def test_declared(hil_trial):
            hil_trial("my_controller.py", map="lab", start=(0, 0, 0), goal=(1.0, 0.0), duration=1,
                      params={"speed": 0.1}, success=["goal.reached"])

        def test_undeclared(hil_trial):
            r = hil_trial("my_controller.py", map="lab", start=(0, 0, 0), goal=(1.0, 0.0), duration=1,
                          params={"speed": 0.1})
            assert not r.passed
    '''))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rA", "test_declared.py")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    failed = text[text.index("test_declared"):]
    assert "did not meet its success criteria: goal.reached" in failed
    assert "why: timeout at" in failed and "from the goal" in failed, failed
    assert "trial folder" in failed and "Traceback" not in failed
