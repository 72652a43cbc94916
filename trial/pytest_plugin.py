"""The pytest plugin of hil (entry point ``pytest11``: active wherever hil is installed): test your controller
against scenarios in your own repository.

    def test_guide_keeps_its_distance(hil_trial):
        r = hil_trial("my_controller.py", map="arcade", scenario="child_interacts", seed=3, duration=120)
        assert r.metrics.goal.reached and r.metrics.intrusions.intimate.entries == 0

    @pytest.mark.hil_seeds(0, 1, 2)              # once per seed (or: pytest --hil-seeds 0-9)
    def test_no_collisions(hil_trial, hil_seed):
        r = hil_trial("my_controller.py", map="arcade", crowd="weekday", seed=hil_seed, duration=60)
        assert r.metrics.collisions.robot_initiated == 0

``hil_trial(controller, **keys)`` runs :class:`trial.Trial` (keys as in trial/spec.py, or ``file=`` a trial file)
into a folder of its own (under the test's ``tmp_path``, or ``--hil-trials-dir DIR``) and returns the
:class:`trial.TrialResult`. A controller that raises fails the test with its traceback (``check=False`` returns
the failed result instead). Every trial a test ran is listed in the report of a failing test, one line each with
its folder, so the log to open (``hil report DIR``, the viewer) is one copy away. A trial that declares its
``success:`` criteria (a key, or a trial file's) fails the test when it does not meet them, saying which and why
(metrics.failure's first cause); without ``success:`` the test's own asserts judge. A relative controller path is
taken from the current directory, else from the test file's folder.

Only pytest is imported at load time: the plugin costs nothing to a session that does not use it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

_RUNS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil", "hil trials")
    group.addoption("--hil-seeds", metavar="SEEDS",
                    help="seeds for tests that take hil_seed: '0-9', '1,4,7' or '3' (overrides @pytest.mark.hil_seeds)")
    group.addoption("--hil-trials-dir", metavar="DIR",
                    help="keep the trial folders under DIR/<test> (default: the test's tmp_path)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hil_seeds(*seeds): run the test once per seed; the hil_seed fixture "
                                       "gives the seed (pytest --hil-seeds overrides)")


def parse_seeds(text: str) -> list[int]:
    """'0-9' -> 0..9, '1,4,7' -> [1, 4, 7], '3' -> [3]."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            span = range(int(low), int(high) + 1) if dash else [int(low)]
        except ValueError:
            raise pytest.UsageError(f"--hil-seeds {text!r}: expected seeds like 0-9 or 1,4,7") from None
        seeds.extend(span)
    if not seeds or any(s < 0 for s in seeds):
        raise pytest.UsageError(f"--hil-seeds {text!r}: expected seeds >= 0 like 0-9 or 1,4,7")
    return seeds


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hil_seed" not in metafunc.fixturenames:
        return
    option = metafunc.config.getoption("--hil-seeds")
    marker = metafunc.definition.get_closest_marker("hil_seeds")
    if option:
        seeds = parse_seeds(option)
    elif marker is not None:
        seeds = [int(s) for s in marker.args] or [0]
    else:
        seeds = [0]
    metafunc.parametrize("hil_seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture
def hil_trial(request: pytest.FixtureRequest, tmp_path: Path):
    """Run a trial: ``hil_trial(controller, map=..., scenario=..., seed=..., duration=..., check=True)``."""
    from hil.trial import Trial

    runs: list = request.node.stash.setdefault(_RUNS, [])
    chosen = request.config.getoption("--hil-trials-dir")
    base = Path(chosen) / _safe(request.node.nodeid) if chosen else tmp_path
    test_dir = Path(str(request.path)).parent

    def run(controller: Any = None, *, file: str | Path | None = None, out: str | Path | None = None,
            check: bool = True, **keys: Any):
        if file is not None:
            file = _near(Path(file), test_dir)
            trial = Trial.from_file(file, **keys) if controller is None else \
                Trial.from_file(file, controller=controller, **keys)
        else:
            if isinstance(controller, (str, Path)) and str(controller).endswith(".py"):
                controller = _near(Path(controller), test_dir)
            trial = Trial(controller, **keys)
        folder = Path(out) if out is not None else base / f"trial{len(runs) + 1}-{trial.spec.label}-{trial.spec.seed}"
        result = trial.run(folder)
        runs.append(result)
        if check:
            result.raise_for_status()
            if trial.spec.success and not result.passed:
                pytest.fail(unmet(result), pytrace=False)
        return result

    return run


def unmet(result: Any) -> str:
    """Why a trial that declared its ``success:`` criteria failed them: the criteria not met, the first cause
    (metrics.failure) with its evidence in a few words, and the folder to open."""
    from hil.trial.report.build import describe_cause

    verdict = result.verdict or {}
    text = f"trial {result.label} did not meet its success criteria: {' and '.join(verdict.get('failed') or ())}"
    failure = (result.metrics or {}).get("failure") or {}
    causes = failure.get("causes") or ()
    if causes:
        first = causes[0]
        text += f"\n  why: {first['label']} at {first['t']:.2f} s: {describe_cause(first)}"
    return text + (f"\n  trial folder {result.folder}" if result.folder else "")


def _near(path: Path, test_dir: Path) -> Path:
    if path.is_absolute() or path.exists():
        return path
    beside = test_dir / path
    return beside if beside.exists() else path


def _safe(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:120]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    runs = item.stash.get(_RUNS, None)
    if report.when == "call" and runs:
        report.sections.append(("hil trials", "\n".join(r.summary_line() for r in runs)))
        if report.failed:
            report.user_properties.append(("hil_trial_folders", ", ".join(str(r.folder) for r in runs)))

