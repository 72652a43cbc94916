"""Children die with their parent, however it ends: every child hil starts goes through bridge/process.spawn.

Real processes throughout: a parent process (a child of the test) starts its child the way hil does (the crowd,
``hil sim --pty``, a sweep's trial process, a retried trial from a thread that then ends), says the child's pid
and is SIGKILLed; the child must go. The waits are hang guards, not timing checks.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

from hil.bridge import trampoline
from hil.bridge.process import TRAMPOLINE, spawn

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 60.0  # generous: a loaded machine; the test waits for an event, it does not time one


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, what: str) -> None:
    wait_for(condition, what, DEADLINE_S)


def test_sigkill_of_hil_demo_leaves_no_crowd(tmp_path):
    out = tmp_path / "trial"
    demo = subprocess.Popen([sys.executable, "-c", "import sys; from hil.cli import main; sys.exit(main())",
                             "demo", "--duration", "600", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    crowd: list[int] = []
    try:
        def crowd_started() -> bool:
            crowd[:] = [pid for pid, cmd in _children(demo.pid) if " crowd " in cmd]
            return bool(crowd) or demo.poll() is not None

        _wait_for(crowd_started, "hil demo to start its crowd")
        assert crowd, f"hil demo exited ({demo.returncode}) before starting a crowd"
        # killed mid-trial (its log is open), not while it is still starting or already failing
        _wait_for(lambda: (out / "trial.mcap").exists() or demo.poll() is not None, "the trial to start")
        assert demo.poll() is None, f"hil demo exited ({demo.returncode}) instead of running its trial"
        demo.send_signal(signal.SIGKILL)
        demo.wait()
        _wait_for(lambda: not _alive(crowd[0]), f"the crowd (pid {crowd[0]}) to end with its parent")
    finally:
        if demo.poll() is None:
            demo.kill()
        for pid in crowd:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _parent(code: str, *args: str):
    """A parent process (a child of the test) running ``code``; yields it and a list for its children's pids, each
    killed at the end if it is still there (as the parent is)."""
    parent = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    children: list[int] = []
    try:
        yield parent, children
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_spawned_child_gets_sigterm_when_its_parent_is_killed():
    """Any child spawned through bridge.process, not just the crowd: a parent process (itself a child of the
    test) spawns a sleeper and is SIGKILLed; the sleeper goes too."""
    code = ("import sys, time; from hil.bridge.process import spawn; "
            "p = spawn(['sleep', '600']); print(p.pid, flush=True); time.sleep(600)")
    with _parent(code) as (parent, children):
        sleeper = int(parent.stdout.readline())
        children.append(sleeper)
        assert _alive(sleeper)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_for(lambda: not _alive(sleeper), f"the spawned child (pid {sleeper}) to end with its parent")


def test_spawn_passes_the_parent_pid_for_the_childs_own_check():
    child = spawn([sys.executable, "-c", "import os; print(os.environ['HIL_PARENT_PID'], os.getppid())"],
                  stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=DEADLINE_S)
    assert out.split() == [str(os.getpid())] * 2


# --- each kind of child hil starts, its parent SIGKILLed ---------------------------------------------------------
CROWD = """
from hil.trial.task import CrowdProcess
crowd = CrowdProcess(command=[sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve", "tcp://127.0.0.1:*"])
print(crowd.proc.pid, flush=True)
"""
SIM_PTY = """
from tests.conftest import SimProcess
device = SimProcess("--pty")
assert device.where.startswith("/dev/"), device.where
print(device.proc.pid, flush=True)
"""
SWEEP_RUNNER = """
from hil.trial.sweep.worker import RunnerProcess
box = {}
thread = threading.Thread(target=lambda: box.update(runner=RunnerProcess(Path(sys.argv[1]))))  # an executor thread
thread.start()
thread.join()
print(box["runner"].pid, flush=True)
"""
RETRY = """
from hil.trial.foxglove_live.retry import RetryRunner
folder = Path(sys.argv[1])
(folder / "still.py").write_text("def main(robot):\\n    for tick in robot.loop(hz=10):\\n        pass\\n")
(folder / "still.yaml").write_text("controller: still.py\\nmap: lab\\nduration: 600\\n")
box = {}
runner = RetryRunner("127.0.0.1")
thread = threading.Thread(target=lambda: box.update(started=runner.run(folder / "still.yaml", folder / "retry")))
thread.start()  # as Foxglove's service call does: from a thread of the SDK's that then ends
thread.join()
print(box["started"]["pid"], flush=True)
"""
REALTIME_CROWD = """
sys.path.insert(0, "tests")  # as pytest has it: the suite's helpers import each other by module name
from test_bridge_realtime import CrowdProcess, free_endpoint
crowd = CrowdProcess(free_endpoint())  # what the suite's background mixed-calibration build starts
print(crowd.proc.pid, flush=True)
"""
KINDS = {"crowd": CROWD, "hil sim --pty": SIM_PTY, "sweep runner": SWEEP_RUNNER, "retry": RETRY,
         "the suite's real-time crowd": REALTIME_CROWD}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_child_dies_when_its_parent_is_sigkilled(kind, tmp_path, monkeypatch):
    """The crowd of a trial, a served device, a sweep's trial process, a retried trial (the last two asked for by
    a thread that ends once its child is ready), and the real-time crowd the suite's own helpers start (a killed
    background build once left two serving, orphaned): alive while the parent lives, gone once it is SIGKILLed.
    (A native program's: tests/test_native_clock.py test_the_program_dies_with_hil.)"""
    monkeypatch.setenv("HIL_CROWD_POOL", "0")
    code = "import sys, threading, time\nfrom pathlib import Path\n" + KINDS[kind] + "time.sleep(600)\n"
    with _parent(code, str(tmp_path)) as (parent, children):
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"the parent exited ({parent.wait()}) before saying its child's pid"
        child = int(line)
        children.append(child)
        assert _alive(child) and child in [pid for pid, _ in _children(parent.pid)]  # the program, exec'd in place
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_for(lambda: not _alive(child), f"the {kind} (pid {child}) to end with its parent")


# --- the forking thread ------------------------------------------------------------------------------------------
SHORT_LIVED = """
import os, subprocess, sys, threading
from hil.bridge.process import spawn
box = {}
hold = [sys.executable, "-c", "import signal, sys, time; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM]); "
        "print('ready', flush=True); time.sleep(600)"]


def start():  # as a service call or a Dask task does: start the child, wait for it to say it is ready, end
    child = spawn(hold, stdout=subprocess.PIPE, text=True)
    box.update(child=child, said=child.stdout.readline().strip(), tid=threading.get_native_id())


thread = threading.Thread(target=start)
thread.start()
thread.join()
while os.path.exists(f"/proc/self/task/{box['tid']}"):  # the kernel is done with the thread: its exit has signalled
    pass
print(box["child"].pid, box["said"], flush=True)
threading.Event().wait()
"""


def _pending(pid: int) -> int:
    """The signals pending for process ``pid`` (its ShdPnd mask: what was sent and not yet delivered)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no ShdPnd in /proc/{pid}/status")


def test_a_child_started_from_a_thread_that_ended_lives_with_its_parent_and_dies_with_it():
    """The child blocks SIGTERM, so a death signal stays visible as pending instead of killing it: none after the
    thread that asked for the child has ended (forked there, the kernel would have sent it then), one once the
    parent process is SIGKILLed."""
    term = 1 << (signal.SIGTERM - 1)
    with _parent(SHORT_LIVED) as (parent, children):
        words = parent.stdout.readline().split()
        assert len(words) == 2 and words[1] == "ready", f"the child did not start ({words}, {parent.poll()})"
        child = int(words[0])
        children.append(child)
        assert _alive(child) and not _pending(child) & term, "the thread's end sent the child its death signal"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_for(lambda: _pending(child) & term, f"SIGTERM to be sent to the child (pid {child})")


# --- what the trampoline does for the program --------------------------------------------------------------------
def test_the_program_gets_the_preload_and_its_own_pid_and_closes_what_it_was_not_passed():
    """LD_PRELOAD first (before what the caller had), the named variable holding the program's own pid (the
    process Popen knows: exec kept it), HIL_PARENT_PID ours, a descriptor in ``pass_fds`` open, another one
    (inheritable, yet not passed) closed, SIGPIPE back to its default."""
    passed, other = os.pipe(), os.pipe()
    for fd in (*passed, *other):
        os.set_inheritable(fd, True)
    script = ('echo "$LD_PRELOAD|$HIL_SELF|$$|$HIL_PARENT_PID"; '
              f'for fd in {passed[1]} {other[1]}; do if [ -e /proc/$$/fd/$fd ]; then echo open; else echo closed; fi; done; '
              'grep SigIgn /proc/self/status')
    try:
        child = spawn(["sh", "-c", script], preload="libm.so.6", pid_env="HIL_SELF", pass_fds=(passed[1],),
                      env={**os.environ, "LD_PRELOAD": "libc.so.6"}, stdout=subprocess.PIPE, text=True)
        out, _ = child.communicate(timeout=DEADLINE_S)
    finally:
        for fd in (*passed, *other):
            os.close(fd)
    lines = out.splitlines()
    assert lines[0] == f"libm.so.6:libc.so.6|{child.pid}|{child.pid}|{os.getpid()}", out
    assert lines[1:3] == ["open", "closed"], out
    assert int(lines[3].split()[1], 16) & (1 << (signal.SIGPIPE - 1)) == 0, out


def test_a_program_that_cannot_be_started_is_an_error_here_not_an_exit_status(tmp_path):
    (tmp_path / "plain.txt").write_text("not a program")
    with pytest.raises(FileNotFoundError, match="no-such-program-of-hil"):
        spawn(["no-such-program-of-hil"])
    with pytest.raises(PermissionError):
        spawn([str(tmp_path / "plain.txt")])
    with pytest.raises(TypeError, match="preexec_fn"):
        spawn(["true"], preexec_fn=lambda: None)


def test_a_child_whose_parent_died_before_it_was_tied_to_it_never_starts_the_program():
    """The trampoline told a parent pid that is not its parent (as when the parent died before the prctl took
    effect) exits before running the program."""
    done = subprocess.run([sys.executable, "-I", "-S", str(TRAMPOLINE), "1", str(int(signal.SIGTERM)), "-", "-",
                           "/bin/sh", "sh", "-c", "echo started"], capture_output=True, text=True,
                          timeout=DEADLINE_S)
    assert done.returncode == trampoline.EXIT_PARENT_GONE and done.stdout == "", done
