"""``hil sweep --foxglove``: the trial running on the chosen worker of a real LocalCluster is served live to a real
Foxglove WebSocket client (tests/foxglove_client.py), one trial at a time on one port.

Real parts: Dask's own worker processes, each trial in a worker's trial process through the trial API, pybullet,
the lockstep sim clock, foxglove-sdk's server in the trial process. The controller thinks 50 ms of wall time per
tick (``select``, which the clock patch leaves on the wall clock), so a trial lasts long enough in wall time for
the client to connect and subscribe while it runs, as a user watching a sweep would.
"""
from __future__ import annotations

import textwrap
import threading
import time

from foxglove_client import FoxgloveClient
from waiting import wait_for

from hil.trial.sweep import load_sweep, run_sweep

SLOW = textwrap.dedent('''\
    """Drive east slowly, thinking 50 ms of wall time per tick."""
    import select

    def main(robot):
        for tick in robot.loop(hz=10):
            select.select([], [], [], 0.05)
            robot.base.drive(0.2, 0.0)
''')
SPEC = textwrap.dedent('''\
    controller: slow.py
    map: lab
    start: [0, 0, 0]
    duration: 6
    seeds: 4
''')


def _clocks(folder):
    from mcap.reader import make_reader

    with open(folder / "trial.mcap", "rb") as f:
        return {(m.log_time, bytes(m.data)) for _, c, m in make_reader(f).iter_messages(topics=["/clock"])}


def test_the_chosen_workers_trials_are_served_one_at_a_time_on_one_port(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "watched.yaml").write_text(SPEC)
    events, box = [], {}
    lock = threading.Lock()

    def observe(event):
        with lock:
            events.append(event)

    def served():
        with lock:
            return [e for e in events if e.get("event") == "foxglove"]

    sweep = threading.Thread(target=lambda: box.update(outcome=run_sweep(
        tmp_path / "watched.yaml", tmp_path / "out", workers=2, foxglove=("127.0.0.1", 0), foxglove_worker=1,
        observer=observe)), daemon=True)
    sweep.start()
    first = wait_for(lambda: [e for e in served() if e.get("url")], what="a trial served to Foxglove", seconds=600)[0]
    url = first["url"]
    seen: dict[str, list[tuple[int, bytes]]] = {}  # trial id (the server's name) -> /clock messages received
    while sweep.is_alive() and not any(len(v) >= 3 and max(t for t, _ in v) > 0 for v in seen.values()):
        try:
            client = FoxgloveClient(url)
        except OSError:  # between two trials: the next one re-opens the port
            time.sleep(0.2)
            continue
        with client:
            info = wait_for(lambda: client.op("serverInfo") or client.closed, what="serverInfo")
            if client.closed:
                continue
            name = info[0]["name"].removeprefix("hil ")
            channels = wait_for(lambda: client.closed or client.channels(wait_for_topics=()).get("/clock"),
                                what="/clock advertised")
            if client.closed:
                continue
            sub = client.subscribe({"/clock": channels})["/clock"]
            wait_for(lambda: client.closed or len(client.received(sub)) >= 3, what="/clock from the running trial")
            seen[name] = client.received(sub)
    sweep.join(timeout=600)
    outcome = box["outcome"]
    assert outcome.complete and all(r["status"] == "ok" for r in outcome.rows), [r["error"] for r in outcome.rows]

    starts = [e for e in events if e.get("event") == "start"]
    assert len({e["worker"] for e in starts}) == 2, "both workers ran trials"
    chosen = first["worker"]
    on_chosen = {e["id"] for e in starts if e["worker"] == chosen}
    assert {e["id"] for e in served()} == on_chosen, "every trial of the chosen worker was served, no other"
    assert {e["worker"] for e in served()} == {chosen} and {e["url"] for e in served()} == {url}, \
        "one worker, one port, re-opened for each of its trials"

    folders = {job.id: tmp_path / "out" / job.folder for job in load_sweep(tmp_path / "watched.yaml").jobs}
    watched = {name: msgs for name, msgs in seen.items() if len(msgs) >= 3}
    assert watched, f"the client received /clock from a running trial: {seen}"
    for name, messages in watched.items():
        assert name in on_chosen
        assert set(messages) <= _clocks(folders[name]), f"{name}: /clock bytes and times are the trial's log's"
        assert max(t for t, _ in messages) > 0, "sim time advanced while the client watched"


def test_hil_sweep_says_what_is_wrong_with_foxglove_options_before_starting_a_cluster(tmp_path):
    import subprocess
    import sys

    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "watched.yaml").write_text(SPEC)

    def sweep(*options):
        return subprocess.run([sys.executable, "-m", "hil", "sweep", str(tmp_path / "watched.yaml"), "--out",
                               str(tmp_path / "out"), *options], capture_output=True, text=True, timeout=300)

    bad_port = sweep("--foxglove", "127.0.0.1:nope", "--workers", "1")
    assert bad_port.returncode == 2 and "--foxglove '127.0.0.1:nope': the port must be a number" in bad_port.stderr
    no_such = sweep("--foxglove", "127.0.0.1:0", "--workers", "2", "--foxglove-worker", "2")
    assert no_such.returncode == 2 and "--foxglove-worker 2: this sweep starts 2 local worker(s) (0..1)" in \
        no_such.stderr, no_such.stderr
    assert not (tmp_path / "out" / "results.csv").exists(), "nothing ran"
