"""Trials: a controller run in a world with a task, recorded and measured (the layer above runtime,
firmware_sim and crowd).

    from hil.trial import Trial
    result = Trial("my_controller.py", map="arcade", scenario="child_interacts", seed=3, duration=120).run("out")
    assert result.metrics.goal.reached

    spec.py       what a trial is (TrialSpec; trial files in YAML, checked with file:line)
    world.py      the physics side: which robot on which bus and clock; the world's ground truth (WorldProbe)
    task.py       the task: map, crowd process, scenario, start, goal
    run.py        Trial.run: compose, run the controller (runtime/robot/runner.py), record, report
    result.py     TrialResult, Metrics (attribute access to metrics.json)
    record/       the log: recorder (MCAP writer), tick_log (what is written every bus cycle), log (reader),
                  topics (schemas)
    report/       metrics, the top-down picture, build (metrics.json + topdown.png from the log)
    presets.py    hil demo: the guide robot meets the child of the crowd-simulation reference's script
    cli.py        hil trial, hil demo, hil run, hil report
    pytest_plugin.py   the hil_trial fixture for users' own tests

Names are imported lazily so that ``import trial`` (and the pytest plugin) stays cheap.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Metrics", "Trial", "TrialError", "TrialFailed", "TrialResult", "TrialSpec", "load_trial_file",
           "make_spec"]

_WHERE = {"Trial": "run", "TrialError": "task", "TrialResult": "result", "Metrics": "result",
          "TrialFailed": "result", "TrialSpec": "spec", "load_trial_file": "spec", "make_spec": "spec"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'trial' has no attribute {name!r}")
