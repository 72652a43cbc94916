"""Children die with their parent (issue 18 item 10): a SIGKILLed `hil demo` leaves no `hil crowd` behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from hil.bridge.process import spawn
from waiting import wait_for

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


def test_a_spawned_child_gets_sigterm_when_its_parent_is_killed():
    """Any child spawned through runtime.process, not just the crowd: a parent process (itself a child of the
    test) spawns a sleeper and is SIGKILLed; the sleeper goes too."""
    parent = subprocess.Popen([sys.executable, "-c", "import sys, time; from hil.bridge.process import spawn; "
                               "p = spawn(['sleep', '600']); print(p.pid, flush=True); time.sleep(600)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    sleeper = int(parent.stdout.readline())
    try:
        assert _alive(sleeper)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_for(lambda: not _alive(sleeper), f"the spawned child (pid {sleeper}) to end with its parent")
    finally:
        if _alive(sleeper):
            os.kill(sleeper, signal.SIGKILL)


def test_spawn_passes_the_parent_pid_for_the_childs_own_check():
    child = spawn([sys.executable, "-c", "import os; print(os.environ['HIL_PARENT_PID'], os.getppid())"],
                  stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=DEADLINE_S)
    assert out.split() == [str(os.getpid())] * 2
