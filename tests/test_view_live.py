"""hil view, live: a real Chromium opens the page of a running demo trial, reads it, pauses it, steps it.

The trial starts paused (the sim clock held by the lockstep master), so the page is up before anything moves;
then Resume, and the page must show the clock advancing, the people, the script's running line highlighted;
Pause must stop the sim time (read twice, a second apart), Step move it by one tick and hold again; at the end
the metrics appear. A screenshot of the live view must show the robot's and the people's colours (and is kept
for a person to look at: HIL_VIEW_SHOT=path). Every request the browser made went to the viewer itself.
"""
from __future__ import annotations

import os
import time

from browser import SimTimeGate, browser_page, colour_pixels, need_viser, number, only_local, wait_for

DURATION_S = 20.0
GATE_S = 6.0  # sim seconds the trial runs before the page pauses it


def _sim_time(page) -> float:
    return number(page, "#hil-sim-time")


def test_live_view_of_a_running_demo(tmp_path):
    need_viser()
    from hil.trial.presets import demo_spec
    from hil.trial.view.app import Viewer, run_trial_in_thread
    from hil.trial.view.live import LiveTrial

    # the trial waits at GATE_S of sim time until the page has paused it (see SimTimeGate)
    gate = SimTimeGate(GATE_S)

    class GatedLiveTrial(LiveTrial):
        @property
        def hooks(self) -> tuple:
            return (*super().hooks, gate.hook)

    spec = demo_spec(duration=DURATION_S)
    viewer = Viewer(port=0, run_spec=spec, out_root=tmp_path)
    live = GatedLiveTrial("demo", start_paused=True)
    viewer.attach(live)
    run_trial_in_thread(spec, tmp_path / "live", live)
    try:
        with browser_page() as (page, requests):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-sim-time")
            wait_for(lambda: live.control.available, what="the trial's first bus cycle")
            wait_for(lambda: "paused" in page.inner_text("#hil-state"), what="the page to say paused")
            held = _sim_time(page)
            time.sleep(1.0)
            assert _sim_time(page) == held, "the trial started paused but its sim time moved"

            page.get_by_role("button", name="Resume").click()
            wait_for(gate.reached.is_set, what=f"the trial to run to {GATE_S:g} s of sim time")
            page.get_by_role("button", name="Pause").click()
            wait_for(lambda: "paused" in page.inner_text("#hil-state"), what="paused")
            gate.release.set()  # the trial's cycle ends; its next sleep holds
            wait_for(lambda: _sim_time(page) > held + 1.0, what="the sim clock to advance after Resume")
            wait_for(lambda: page.locator(".hil-person").count() >= 1, what="people listed")
            wait_for(lambda: page.locator(".hil-line.current").count() == 1, what="a script line highlighted")
            current = page.locator(".hil-line.current").inner_text()
            assert ": " in current and "\u25b6" in current  # "▶ N: the line"
            time.sleep(0.5)  # the page shows the last cycle before the hold
            first = _sim_time(page)
            time.sleep(1.5)
            assert _sim_time(page) == first, "sim time moved while paused"

            page.get_by_role("button", name="Step").click()
            wait_for(lambda: _sim_time(page) > first, what="Step to advance the sim time")
            time.sleep(0.5)
            stepped = _sim_time(page)
            assert stepped - first < 1.0  # one controller tick (the guide runs at 10 Hz), not a run
            assert first < GATE_S + 1.0, "the pause did not hold the trial where the page paused it"
            time.sleep(1.0)
            assert _sim_time(page) == stepped, "the trial ran on after a Step"

            page.get_by_role("button", name="Follow robot").click()
            time.sleep(3.0)
            page.screenshot(path=os.environ.get("HIL_VIEW_SHOT") or str(tmp_path / "live.png"))
            shot = page.locator("canvas").first.screenshot()  # the 3D scene alone: not the camera panel's picture
            robot = colour_pixels(shot, (230, 128, 26)) + colour_pixels(shot, (51, 128, 230))  # orange, blue parts
            people = sum(colour_pixels(shot, tuple(int(255 * c) for c in rgb))
                         for rgb in ((0.55, 0.60, 0.68), (0.85, 0.15, 0.20), (0.93, 0.55, 0.10), (0.25, 0.70, 0.70)))
            assert robot > 50, f"no robot in the live view ({robot} robot-coloured pixels)"
            assert people > 50, f"no people in the live view ({people} person-coloured pixels)"

            page.get_by_role("button", name="Resume").click()
            assert live.done.wait(300), "the trial did not end"
            wait_for(lambda: "collisions" in page.inner_text("#hil-metrics"), what="the metrics at the end")
            assert "done" in page.inner_text("#hil-state")
            assert live.result is not None and live.result.status == "ok", live.error
            assert not only_local(requests, viewer.url), "the page fetched from elsewhere"
    finally:
        gate.release.set()
        live.control.resume()
        live.done.wait(300)
        viewer.close()
