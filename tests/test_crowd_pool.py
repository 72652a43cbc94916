"""One crowd process across the trials of a process (trial/task.py start_crowd / release, ``hil crowd --again``).

The second trial is served by the first trial's crowd process (the same pid) and logs the same bytes as a trial
whose crowd was new; a trial that failed does not leave its crowd for the next; an idle crowd refuses bad
session options over its stdin, saying why, and goes on serving the next good ones. Real child processes, real
ZeroMQ sockets on loopback, real trials.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import zmq

from hil.trial import Trial
from hil.trial import task as task_mod
from hil.trial.task import TrialError

EAST = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            robot.base.drive(0.3, 0.0)
''')
RAISES = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            if tick.time > 0.5:
                raise RuntimeError("on purpose")
''')


def _trial(tmp_path, name="east.py", source=EAST, duration=3.0):
    (tmp_path / name).write_text(source)
    return Trial(tmp_path / name, map="arcade", crowd="weekday", start=(-18, 0, 0), seed=3, duration=duration)


def _pids(monkeypatch):
    """The pid of the crowd process each trial got, in order."""
    got = []
    real = task_mod.start_crowd

    def spy(*args, **kwargs):
        crowd = real(*args, **kwargs)
        got.append(crowd.proc.pid)
        return crowd

    monkeypatch.setattr("hil.trial.run.start_crowd", spy)
    return got


def test_the_next_trial_gets_the_idle_crowd_and_the_same_bytes_as_a_new_one(tmp_path, monkeypatch):
    pids = _pids(monkeypatch)
    trial = _trial(tmp_path)
    monkeypatch.setenv(task_mod.POOL_ENV, "0")
    fresh = trial.run(tmp_path / "fresh")  # a new crowd process, stopped at the end
    monkeypatch.setenv(task_mod.POOL_ENV, "1")
    first, second = trial.run(tmp_path / "a"), trial.run(tmp_path / "b")
    assert fresh.ok and first.ok and second.ok, (fresh.error, first.error, second.error)
    assert pids[1] == pids[2] and pids[0] != pids[1], f"the second trial reused the first one's crowd: {pids}"
    for name in ("a", "b"):
        assert (tmp_path / name / "trial.mcap").read_bytes() == (tmp_path / "fresh" / "trial.mcap").read_bytes()
    other = trial.spec.but(seed=4)  # another seed on the same process: another crowd, not the last one's
    assert Trial(spec=other).run(tmp_path / "c").ok and pids[3] == pids[1]
    assert (tmp_path / "c" / "trial.mcap").read_bytes() != (tmp_path / "a" / "trial.mcap").read_bytes()


def test_a_failed_trial_does_not_leave_its_crowd_for_the_next(tmp_path, monkeypatch):
    pids = _pids(monkeypatch)
    failed = _trial(tmp_path, "raises.py", RAISES).run(tmp_path / "f")
    assert not failed.ok and "on purpose" in failed.error
    assert _trial(tmp_path).run(tmp_path / "ok").ok
    assert pids[0] != pids[1], "a crowd whose trial failed is stopped, not kept"
    with task_mod._IDLE_LOCK:
        assert all(c.proc.pid != pids[0] for c in task_mod._IDLE)


def test_an_idle_crowd_refuses_bad_options_and_serves_the_next_good_ones(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve", "tcp://127.0.0.1:*",
                             "--again"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    ctx = zmq.Context.instance()
    try:
        def bye(line):
            word, endpoint = line.split()
            assert word == "crowd", line
            sock = ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            from hil.bridge.envelope import pack
            sock.send(pack("bye", {}, seq=1))
            assert sock.poll(60_000), "the crowd answers bye"
            sock.recv()
            sock.close()

        def say(argv_line):
            proc.stdin.write(argv_line + "\n")
            proc.stdin.flush()
            return proc.stdout.readline().strip()

        bye(proc.stdout.readline())
        assert proc.stdout.readline().strip() == "crowd-idle"
        assert say("{not json").startswith("crowd-error ")
        assert "one JSON list of strings" in say('{"map": "lab"}')
        assert "--again serves lockstep sessions only" in say(json.dumps(["--map", "arcade", "--serve",
                                                                          "tcp://127.0.0.1:*", "--realtime"]))
        assert "unrecognized arguments: --nope" in say(json.dumps(["--nope"]))
        bad_map = say(json.dumps(["--map", str(tmp_path / "nowhere.yaml"), "--serve", "tcp://127.0.0.1:*"]))
        assert bad_map.startswith("crowd-error ") and "nowhere" in bad_map
        good = say(json.dumps(["--map", "arcade", "--serve", "tcp://127.0.0.1:*", "--seed", "2"]))
        bye(good)
        assert proc.stdout.readline().strip() == "crowd-idle"
        proc.stdin.close()  # no more sessions: the process ends
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_session_the_idle_crowd_refuses_is_a_trial_error_and_the_process_stays(tmp_path):
    crowd = task_mod.CrowdProcess(command=[sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve",
                                           "tcp://127.0.0.1:*"])
    try:
        assert crowd.reusable and crowd.endpoint.startswith("tcp://127.0.0.1:")
        from hil.bridge.envelope import pack
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(crowd.endpoint)
        sock.send(pack("bye", {}, seq=1))
        assert sock.poll(60_000)
        sock.recv()
        sock.close()
        assert crowd.idle()
        try:
            crowd.again([sys.executable, "-m", "hil", "crowd", "--map", str(tmp_path / "nowhere.yaml"), "--serve",
                         "tcp://127.0.0.1:*"])
        except TrialError as exc:
            assert "the crowd did not start" in str(exc) and "nowhere" in str(exc)
        else:
            raise AssertionError("a bad map was served")
        assert crowd.proc.poll() is None, "the idle crowd waits for the next session"
        assert crowd.again([sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve", "tcp://127.0.0.1:*"])
        assert crowd.endpoint.startswith("tcp://127.0.0.1:")
    finally:
        crowd.stop()
