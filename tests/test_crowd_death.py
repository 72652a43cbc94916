"""A crowd that dies (SIGKILL of the crowd child 5 s into ``hil demo``) is noticed at once, and
said of what: the world's wait for a tick checks the process it started (trial/task.py CrowdProcess.death through
bridge/crowd_link.py CrowdClient.liveness) instead of waiting out the 10 s crowd timeout as "did not answer".

A real ``hil demo`` subprocess with its real crowd child; the waits are hang guards (HangGuard), not timing checks:
the message itself tells the two behaviours apart (a timeout says "did not answer", a death "killed by SIGKILL").
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.waiting import HangGuard, wait_for

ROOT = Path(__file__).resolve().parent.parent


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, IndexError, ValueError):
            continue
    return out


def test_a_crowd_killed_5_s_into_the_demo_is_reported_at_once_with_its_signal(tmp_path):
    out = tmp_path / "demo"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    demo = subprocess.Popen([sys.executable, "-m", "hil", "demo", "--duration", "600", "--out", str(out)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        crowd = wait_for(lambda: [pid for pid, cmd in children(demo.pid) if " crowd " in cmd],
                         "the demo's crowd child", seconds=120)[0]
        # the demo running (its first progress line comes after the crowd answered its first ticks: a crowd killed
        # while it still starts is "did not start", another message; a busy machine may take seconds to get here)
        line = demo.stdout.readline()
        while line and " t= " not in line and " t=" not in line:
            line = demo.stdout.readline()
        assert line, "the demo ended before its first progress line"
        time.sleep(5.0)  # the case at hand: 5 s into the demo (not a bound on anything)
        assert demo.poll() is None, "the 600 s demo ended before its crowd was killed"
        os.kill(crowd, signal.SIGKILL)
        try:
            stdout, stderr = demo.communicate(timeout=120)  # a hang guard: the old behaviour ended 10 s later
        except subprocess.TimeoutExpired:
            raise AssertionError("hil demo did not end within 120 s of its crowd's death (a hang)") from None
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    summary = next((line for line in stdout.splitlines() if line.startswith("demo: ")), None)
    assert summary is not None, (stdout, stderr)
    assert re.match(r"demo: failed after [\d.]+ s: CrowdLinkError: the crowd at tcp://127\.0\.0\.1:\d+ died while "
                    rf"the world waited for (tick \d+|crowd_state) \(t=[\d.]+ s\): the crowd process \(pid {crowd}\) killed by "
                    r"SIGKILL", summary), summary
    assert "failed (failed)" not in stdout and "did not answer" not in stdout
    assert demo.returncode != 0
    guard = HangGuard(30)
    while any(pid == crowd for pid, _ in children(demo.pid)) or Path(f"/proc/{crowd}").exists():
        guard.check(f"the crowd process {crowd} to be reaped")  # nothing left running
        time.sleep(0.05)
    assert (out / "trial.mcap").stat().st_size > 0 and (out / "metrics.json").is_file()  # what was recorded stays
    failure = json.loads((out / "metrics.json").read_text())["failure"]
    assert failure["cause"] == "world_error", failure  # the crowd's death, not the controller's doing
    assert failure["causes"][0]["evidence"]["error"].startswith("CrowdLinkError: the crowd at tcp://127.0.0.1:")


def test_a_crowd_that_dies_while_a_state_is_asked_of_it_is_named_at_once(monkeypatch):
    """The saver's ``crowd_state`` request waits as a tick does: a dead crowd process is named by its
    signal, not by a 10 s timeout saying it did not answer (what the suite saw when the kill landed on a save)."""
    import signal as signals

    from hil.bridge.crowd_link import CrowdClient, CrowdLinkError
    from hil.bridge.crowd_state import crowd_state
    from hil.trial.task import CrowdProcess

    monkeypatch.setenv("HIL_CROWD_POOL", "0")
    crowd = CrowdProcess(command=[sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve",
                                  "tcp://127.0.0.1:*"])
    client = CrowdClient(crowd.endpoint, timeout_s=600.0)  # a timeout no hang guard would wait for
    client.liveness = crowd.death
    try:
        assert crowd_state(client)["digest"], "a live crowd answers"
        os.kill(crowd.proc.pid, signals.SIGSTOP)  # it takes the request and never answers ...
        os.kill(crowd.proc.pid, signals.SIGKILL)  # ... because it is dead
        try:
            crowd_state(client)
        except CrowdLinkError as exc:
            assert re.search(r"died while the world waited for crowd_state \(t=0\.000 s\): the crowd process "
                             rf"\(pid {crowd.proc.pid}\) killed by SIGKILL", str(exc)), exc
        else:
            raise AssertionError("a dead crowd answered crowd_state")
    finally:
        client.close()
        crowd.stop()
