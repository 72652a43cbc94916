"""Run a trial from the page (the crowd-simulation reference: pick a test script, run it, see its result), and
``--view`` on a command: the page's Run button starts the trial API in a worker thread with the page's map, scenario and
seed, shows it live and its metrics at the end; ``hil demo --view`` prints the URL, serves the page and ends."""
from __future__ import annotations

import re
import subprocess

from browser import browser_page, need_viser, number, type_until, wait_for
from conftest import hil_command


def test_run_a_trial_from_the_page(tmp_path):
    need_viser()
    from hil.trial.presets import demo_spec
    from hil.trial.view.app import Viewer

    viewer = Viewer(port=0, run_spec=demo_spec(duration=3.0), out_root=tmp_path)
    try:
        with browser_page() as (page, _):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-sim-time")
            seed = page.locator("input.mantine-NumberInput-input").last  # the Run folder's seed
            type_until(seed, "2", lambda: int(viewer.run_seed.value) == 2, "the seed to reach the server")
            page.get_by_role("button", name="Run trial").click()
            wait_for(lambda: viewer.live is not None, what="the trial to start")
            assert viewer.live.done.wait(300), "the trial run from the page did not end"
            wait_for(lambda: "collisions" in page.inner_text("#hil-metrics"), what="its metrics on the page")
            assert number(page, "#hil-sim-time") >= 2.9
            result = viewer.live.result
            assert result is not None and result.status == "ok", viewer.live.error
            assert (result.folder / "trial.mcap").exists() and result.folder.name.endswith("-2")
            assert result.metrics.meta.seed == 2
    finally:
        viewer.close()


def test_demo_view_prints_its_url_and_ends(tmp_path):
    need_viser()
    proc = subprocess.run([*hil_command(), "demo", "--view", "--view-port", "0", "--view-linger", "0", "--duration",
                           "2", "--out", str(tmp_path / "d"), "--quiet", "--no-fail"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"viewer: open http://127\.0\.0\.1:\d+/ in a browser", proc.stdout), proc.stdout
    assert "demo: failed (duration) after 2.0 s, not met: goal.reached" in proc.stdout
    assert (tmp_path / "d" / "trial.mcap").exists()
