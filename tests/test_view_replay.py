"""hil view, replay: a real Chromium opens the replay of a recorded demo, scrubs it, plays it.

Scrubbing to a time must show the scene at that time: the sim time, the robot's pose and the people the log has
there (read from the log independently with read_log), and the script line that ran last by then; Play must
advance the time; the metrics of the folder are shown. ``hil view DIR`` is also started as a command: it must
print the URL and serve the page.
"""
from __future__ import annotations

import json
import re
import subprocess
import time

from browser import browser_page, need_viser, number, only_local, scrub, wait_for
from conftest import hil_command

SCRUB_TO_S = 6.0


def _expected(log, t: float) -> dict:
    def latest(topic):
        return [m for m in log.messages[topic] if m.t <= t + 1e-9][-1].data

    lines = [m.data["line"] for m in log.messages["/crowd/script"] if m.t <= t + 1e-9]
    return {"robot": latest("/robot/state"), "people": latest("/pedestrians")["people"], "line": lines[-1]}


def _slider_input(page):
    return page.locator("input.mantine-NumberInput-input").first


def test_replay_scrub_and_play(short_demo_log):
    need_viser()
    from hil.trial.record.log import read_log
    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    log = read_log(short_demo_log)
    metrics = json.loads((short_demo_log.parent / "metrics.json").read_text())
    viewer = Viewer(port=0)
    viewer.show_replay(Timeline.from_log(short_demo_log), metrics)
    try:
        with browser_page() as (page, requests):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-sim-time")
            wait_for(lambda: "replay paused" in page.inner_text("#hil-state"), what="the replay to be shown")
            assert number(page, "#hil-sim-time") == 0.0
            assert "collisions" in page.inner_text("#hil-metrics")

            scrub(page, SCRUB_TO_S, _slider_input(page))
            want = _expected(log, SCRUB_TO_S)
            status = page.inner_text("#hil-status")
            x, y = (float(v) for v in re.search(r"robot \(([-+0-9.]+), ([-+0-9.]+)\)", status).groups())
            assert abs(x - want["robot"]["x"]) < 0.006 and abs(y - want["robot"]["y"]) < 0.006
            rows = page.locator(".hil-person")
            assert rows.count() == len(want["people"])
            assert {int(rows.nth(k).get_attribute("data-id")) for k in range(rows.count())} == \
                {p["id"] for p in want["people"]}
            assert int(page.locator(".hil-line.current").get_attribute("data-line")) == want["line"]
            assert viewer.drawer.people.keys() == {p["id"] for p in want["people"]}  # the 3D scene too

            page.get_by_role("button", name="Play").click()
            wait_for(lambda: number(page, "#hil-sim-time") > SCRUB_TO_S, what="Play to advance the time")
            assert not only_local(requests, viewer.url), "the page fetched from elsewhere"
    finally:
        viewer.close()


def test_a_scrub_the_drawing_tick_sees_before_its_callback_is_kept(short_demo_log):
    """viser sets a client's slider value on its event loop and calls the viewer back from a thread pool later;
    the viewer's drawing tick in between once put the replay's time back over it, and the scrub was lost."""
    need_viser()
    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    viewer = Viewer(port=0)
    viewer.show_replay(Timeline.from_log(short_demo_log))
    try:
        viewer.slider._impl.value = 3.3  # what viser's _handle_gui_updates does with the client's message
        viewer._tick(0.0)  # the tick runs before the thread pool gets to the callback
        viewer._scrub(None)
        assert viewer.replay_t == 3.3 and viewer.slider.value == 3.3 and not viewer.playing
        viewer._play(True)
        viewer._tick(0.5)  # playing moves the slider; the setter's own callback is not a scrub that stops it
        assert viewer.playing and viewer.replay_t >= 3.8 and viewer.slider.value == round(viewer.replay_t, 1)
    finally:
        viewer.close()


def test_hil_view_command_serves_a_trial_folder(short_demo_log):
    need_viser()
    proc = subprocess.Popen([*hil_command(), "view", str(short_demo_log.parent), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "hil view ended before printing its URL"
            found = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
            url = found.group(1) if found else None
        assert url, "no URL printed"
        with browser_page() as (page, _):
            page.goto(url)
            page.wait_for_selector("#hil-sim-time")
            wait_for(lambda: "replay" in page.inner_text("#hil-state"), what="the replay")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
