"""What the page's audit found: a staged script line that fails is logged, counted in the metrics, shown
red on the page and in the report; the user's own objectives (a rates file's ``objectives.user``) are listed with
the built-in ones.

Real parts: a trial on the arcade with its crowd process serving a script whose third line times out (the crowd
says so in its reply; the script stops, the crowd and the trial go on), the recorder, the report, and the replay
page in a real Chromium.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap

from browser import browser_page, need_viser, number, scrub, wait_for

from hil.trial import Trial
from hil.trial.record.log import read_log

FAILING = textwrap.dedent("""\
    spawn a = boy01 at west_gate
    move a to east_gate
    wait a arrived timeout 2s
    spawn b = boy02 at plaza
""")
STILL = 'def main(robot):\n    for tick in robot.loop(hz=10):\n        robot.base.drive(0.0, 0.0)\n'
USER_RATES = textwrap.dedent("""\
    name: mine
    days: [mon, tue, wed, thu, fri, sat, sun]
    person_types:
      adult_man: {radius: {mean: 0.24, sd: 0.02, min: 0.19, max: 0.30}, speed: {mean: 1.38, sd: 0.20, min: 0.70, max: 2.00}}
    time_bands:
      - {name: all_day, from: "00:00", to: "23:59", rates: {adult_man: 10}}
    objectives:
      user: {wave: "my_objectives_never_imported:Wave"}
""")


def test_a_failed_script_line_is_logged_counted_and_red_on_the_page_and_in_the_report(tmp_path):
    need_viser()
    (tmp_path / "failing.scn").write_text(FAILING)
    (tmp_path / "still.py").write_text(STILL)
    result = Trial(tmp_path / "still.py", map="arcade", start=(-18, 0, 0), scenario=str(tmp_path / "failing.scn"),
                   duration=5.0).run(tmp_path / "t")
    assert result.ok, result.error
    log = read_log(tmp_path / "t" / "trial.mcap")
    lines = [m.data for m in log.messages["/crowd/script"]]
    failed = [line for line in lines if line.get("error")]
    assert len(failed) == 1 and failed[0]["line"] == 3, lines
    assert "failing.scn:3: wait: a did not arrive within 2 s" in failed[0]["error"]
    assert [line["line"] for line in lines if not line.get("error")] == [1, 2], "line 4 never ran"

    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    assert metrics["script"]["errors"] == 1 and metrics["script"]["lines"] == 2
    assert metrics["script"]["first_error"].startswith("line 3: ")
    from hil.trial.report.build import RED, format_metrics, in_red

    text = format_metrics(metrics)
    error_line = next(line for line in text.splitlines() if line.startswith("script error"))
    assert "line 3" in error_line and RED not in text
    assert f"{RED}{error_line}" in in_red(text, True), "red on a terminal"
    import subprocess

    report = subprocess.run([sys.executable, "-m", "hil", "report", str(tmp_path / "t")], capture_output=True,
                            text=True, timeout=300)
    assert report.returncode == 0 and "script error" in report.stdout and RED not in report.stdout  # a pipe

    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    viewer = Viewer(port=0)
    viewer.show_replay(Timeline.from_log(tmp_path / "t" / "trial.mcap"), metrics)
    try:
        with browser_page() as (page, _):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-metrics")
            # the replay shown before the scrubber is used (a fill before it is set up is lost on a loaded machine)
            wait_for(lambda: "replay paused" in page.inner_text("#hil-state"), what="the replay to be shown")
            scrub(page, 4.5)
            wait_for(lambda: page.locator("#hil-script-error").count() == 1, what="the failed line on the page")
            assert "line 3 failed" in page.inner_text("#hil-script-error")
            colour = page.eval_on_selector("#hil-script-error", "e => getComputedStyle(e).color")
            assert colour == "rgb(192, 0, 0)", colour
            assert page.locator(".hil-line.failed").get_attribute("data-line") == "3"
            red_metric = page.eval_on_selector(".hil-metric-error", "e => getComputedStyle(e).color")
            assert red_metric == "rgb(192, 0, 0)" and "line 3" in page.inner_text(".hil-metric-error")
    finally:
        viewer.close()


def test_the_users_own_objectives_are_in_the_meta_and_listed_with_the_built_in_ones(tmp_path):
    from hil.crowd.objectives import REGISTRY
    from hil.trial.run import _user_objectives
    from hil.trial.spec import make_spec
    from hil.trial.task import make_task
    from hil.trial.view.app import _objectives_html

    (tmp_path / "mine.yaml").write_text(USER_RATES)
    (tmp_path / "still.py").write_text(STILL)
    task = make_task(make_spec(str(tmp_path / "still.py"), map="arcade", crowd=[str(tmp_path / "mine.yaml")]))
    user = _user_objectives(task)
    assert user == {"wave": "my_objectives_never_imported:Wave"}
    assert "my_objectives_never_imported" not in sys.modules and "wave" not in REGISTRY, "read, not imported"
    page = _objectives_html(user)
    names = [chunk.split("'")[0] for chunk in page.split("data-name='")[1:]]
    assert names[0] == "wave" and set(REGISTRY) <= set(names), names
    assert "my_objectives_never_imported:Wave" in page and "class='hil-objective user'" in page
    assert "wave" not in _objectives_html(None)


def test_a_trial_runs_user_objectives_only_from_the_modules_it_allows(tmp_path, monkeypatch):
    """``allow_objectives:`` (a trial key) reaches the crowd process as ``--allow-objectives``: with it a rates file's
    ``objectives.user`` is imported and the trial runs; without it the crowd refuses to import it, naming the
    module (importing runs its code). Before, a trial could not run user objectives at all."""
    (tmp_path / "my_reactions.py").write_text(textwrap.dedent("""
        from hil.crowd.objectives import Objective

        class Wave(Objective):
            name = "wave"
            summary = "stop and wave at the robot"
            defaults = {"seconds": 2.0}
            param_docs = {"seconds": "how long"}

            def update(self, s):
                s.stop()
                return s.elapsed_s < self.params["seconds"]
    """))
    (tmp_path / "mine.yaml").write_text(USER_RATES.replace("my_objectives_never_imported:Wave", "my_reactions:Wave"))
    (tmp_path / "still.py").write_text(STILL)
    monkeypatch.chdir(tmp_path)  # the crowd process imports the module from its working directory
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    trial = Trial(tmp_path / "still.py", map="arcade", crowd=[str(tmp_path / "mine.yaml")], start=(-18, 0, 0),
                  duration=2.0, allow_objectives=["my_reactions"])
    allowed = trial.run(tmp_path / "ok")
    assert allowed.ok, allowed.error
    from hil.trial.task import TrialError

    with __import__("pytest").raises(TrialError, match="module 'my_reactions' is not allowed to be imported"):
        Trial(spec=trial.spec.but(allow_objectives=())).run(tmp_path / "no")  # nothing starts: it raises
    from hil.devices.yaml_source import ConfigError

    with __import__("pytest").raises(ConfigError, match="allow_objectives: 'not a module' is not a module name"):
        trial.spec.but(allow_objectives=["not a module"])
