"""``--view`` serves the page from its own process (trial/view/remote.py): the trial process only pipes its log's
messages to it. A real Chromium reads the page of a trial running in this process, held paused, resumed, paused,
stepped, and its metrics at the end; the page's process runs at a lower priority; killing it does not touch the
trial (its log is byte for byte an unwatched run's); SIGKILLing ``hil demo --view`` takes the page's process with
it; a malformed stream item is skipped, never applied half."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from browser import SimTimeGate, browser_page, need_viser, number, wait_for
from conftest import hil_command

GATE_S = 6.0  # sim seconds the trial runs before the page pauses it (the demo below lasts 15 s)


def _niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[16])  # field 19: nice


def _run(spec, out, feed, box, more_hooks=()):
    from hil.trial.run import Trial

    result = Trial(spec=spec).run(out, listeners=feed.listeners, hooks=feed.hooks + tuple(more_hooks))
    feed.finish(result, result.error)
    box.append(result)


def test_the_page_in_its_own_process_follows_and_controls_the_trial(tmp_path):
    need_viser()
    from hil.trial.presets import demo_spec
    from hil.trial.view.remote import NICE, ViewerProcess

    spec = demo_spec(duration=15.0)
    viewer = ViewerProcess("127.0.0.1", 0, run_spec=spec, out_root=str(tmp_path), label="demo", start_paused=True)
    box: list = []
    # the trial waits at GATE_S of sim time until the page has paused it (see SimTimeGate)
    gate = SimTimeGate(GATE_S)

    worker = threading.Thread(target=_run, args=(spec, tmp_path / "live", viewer, box, (gate.hook,)), daemon=True)
    try:
        assert viewer.proc.pid != os.getpid()
        assert _niceness(viewer.proc.pid) >= min(NICE, 19), "the page's process does not yield to the trial"
        worker.start()
        with browser_page() as (page, _):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-sim-time")
            wait_for(lambda: "paused" in page.inner_text("#hil-state"), what="the page to say paused")
            held = number(page, "#hil-sim-time")
            time.sleep(1.0)
            assert number(page, "#hil-sim-time") == held, "the trial started paused but its sim time moved"

            page.get_by_role("button", name="Resume").click()
            wait_for(gate.reached.is_set, what=f"the trial to run to {GATE_S:g} s of sim time")
            page.get_by_role("button", name="Pause").click()
            wait_for(lambda: "paused" in page.inner_text("#hil-state"), what="paused")
            gate.release.set()  # the trial's cycle ends; its next sleep holds
            wait_for(lambda: number(page, "#hil-sim-time") > held + 1.0, what="the sim clock to advance")
            wait_for(lambda: page.locator(".hil-person").count() >= 1, what="people listed")
            time.sleep(0.5)
            first = number(page, "#hil-sim-time")
            time.sleep(1.5)
            assert number(page, "#hil-sim-time") == first, "sim time moved while paused"
            page.get_by_role("button", name="Step").click()
            wait_for(lambda: number(page, "#hil-sim-time") > first, what="Step to advance the sim time")
            time.sleep(0.5)
            assert number(page, "#hil-sim-time") - first < 1.0  # one controller tick, not a run
            assert first < GATE_S + 1.0, "the pause did not hold the trial where the page paused it"

            page.get_by_role("button", name="Resume").click()
            worker.join(300)
            assert box and box[0].status == "ok", box
            wait_for(lambda: "collisions" in page.inner_text("#hil-metrics"), what="the metrics at the end")
            # the state line and the metrics are two messages of the page's process: either may be drawn first
            wait_for(lambda: "done" in page.inner_text("#hil-state"), what="the page to say done")
            assert number(page, "#hil-sim-time") >= 14.0
    finally:
        gate.release.set()
        viewer.live.control.resume()
        worker.join(60)
        viewer.close()
    assert viewer.proc.returncode == 0


def test_a_dead_page_leaves_the_trial_and_its_log_alone(tmp_path, capfd):
    need_viser()
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial
    from hil.trial.view.remote import ViewerProcess

    spec = demo_spec(duration=4.0)
    plain = Trial(spec=spec).run(tmp_path / "plain")
    viewer = ViewerProcess("127.0.0.1", 0, label="demo")
    killed = []

    def kill_after_a_second(_robot):
        if not killed and time.monotonic() - started > 1.0:
            viewer.proc.kill()
            viewer.proc.wait()
            killed.append(True)

    started = time.monotonic()
    try:
        result = Trial(spec=spec).run(tmp_path / "viewed", listeners=viewer.listeners,
                                      hooks=(*viewer.hooks, kill_after_a_second))
        viewer.finish(result, result.error)
    finally:
        viewer.close()
    assert result.status == "ok", result.error
    assert (tmp_path / "viewed" / "trial.mcap").read_bytes() == (tmp_path / "plain" / "trial.mcap").read_bytes()
    if killed:  # a fast machine may end the 4 s trial within the first wall second
        assert "the page's process is gone" in capfd.readouterr().err


def test_hil_demo_view_takes_its_page_down_when_killed(tmp_path):
    need_viser()
    proc = subprocess.Popen([*hil_command(), "demo", "--view", "--view-port", "0", "--view-paused", "--duration",
                             "5", "--out", str(tmp_path / "d"), "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while "viewer: open" not in line:
            line = proc.stdout.readline()
            assert line, "hil demo --view ended before it served the page"
        page = _children(proc.pid, "hil.trial.view.remote")
        assert len(page) == 1, page
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not os.path.exists(f"/proc/{page[0]}") or _zombie(page[0]),
             what="the page's process to end with its parent")


def _children(parent: int, needle: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().decode(errors="replace")
        except OSError:
            continue
        if ppid == parent and needle in command:
            found.append(int(pid))
    return found


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_malformed_stream_item_is_skipped_whole():
    from hil.trial.view.remote import RemoteLive

    sent = []
    live = RemoteLive("demo", sent.append)
    for junk in (None, 3, "x", [], {"m": "not a list"}, {"m": [["/robot/state", "t", {}]]}, {"m": [[1, 2, 3]]},
                 {"s": "busy"}, {"done": "yes"}):
        live.apply(junk)
    assert live.timeline.version == 0 and not live.done.is_set() and live.control.available is None
    live.apply({"m": [["/clock", 0.1, {"t": 0.1}]], "s": {"rtf": 2.5, "available": True, "paused": True}})
    assert live.timeline.version == 1 and live.rtf == 2.5 and live.control.paused
    live.control.step()
    live.apply({"done": {"metrics": {"goal": None}, "error": None}})
    assert sent == ["step"] and live.done.is_set() and live.metrics == {"goal": None}


def test_the_page_says_done_for_a_trial_that_ended_while_paused():
    from hil.trial.view.app import live_state
    from hil.trial.view.remote import RemoteLive

    live = RemoteLive("demo", lambda ask: None)
    live.apply({"m": [["/clock", 0.1, {"t": 0.1}]], "s": {"rtf": 0.0, "available": True, "paused": True}})
    assert live_state(live) == "paused"
    live.apply({"done": {"metrics": {"goal": None}, "error": None}})
    assert live.control.paused and live_state(live) == "done"
