"""Find a Python where rclpy imports, and start the bridge process (ros_side/bridge_node.py) in it.

The bridge runs in ROS's Python, not in the trial's (docs/ROS.md, "The ROS 2 bridge", says why). Which one, first
found:

1. ``--ros-python PATH`` or the environment's ``HIL_ROS_PYTHON``: used as given (checked);
2. this Python, when rclpy is importable here (a venv where ``pip install 'hil[ros]'`` put hil and the wheels);
3. ``.venv-ros/bin/python`` at the top of a source checkout (``make test`` builds it from the ``ros`` extra);
4. ``python3`` on PATH, when rclpy imports there (a sourced ROS 2 install: /opt/ros/jazzy/setup.bash).

A candidate counts when ``import rclpy, zmq, msgpack`` succeeds in it (one short subprocess each). None:
:class:`RosUnavailable`, whose one line says what to install or source. ``hil trial --ros`` with a Python given
skips that check: the bridge starting in it is the check (a bridge that cannot import rclpy exits with
:data:`NO_RCLPY` and one line, which becomes the RosUnavailable), so ROS's Python starts once, not twice.

The bridge is a child that dies with the trial (hil.bridge.process.spawn); discovery stays on this machine unless
the environment says otherwise (``ROS_AUTOMATIC_DISCOVERY_RANGE`` defaults to LOCALHOST here), and
``ROS_DOMAIN_ID`` is the environment's. Fast DDS reads :data:`DISCOVERY_PROFILE` (a participant announces itself
every 0.2 s, so nodes started after the trial find the bridge at once) unless the environment names a profile.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from hil.runtime.clock.base import WALL
from hil.bridge.process import spawn

BRIDGE_NODE = Path(__file__).resolve().parent / "ros_side" / "bridge_node.py"
DISCOVERY_PROFILE = BRIDGE_NODE.with_name("fastdds_discovery.xml")
PROFILE_ENV = "FASTRTPS_DEFAULT_PROFILES_FILE"  # Fast DDS 2 (ROS 2 Jazzy) reads its default profile from here
NO_RCLPY = 3  # the bridge's exit status when rclpy (or pyzmq, msgpack) does not import (ros_side/bridge_node.py)
PYTHON_ENV = "HIL_ROS_PYTHON"
CHECK = "import rclpy, zmq, msgpack; print(rclpy.__file__)"
READY = "hil ros: bridge ready"
WAITING = "hil ros: waiting for node"  # its line while --ros-wait-for holds the trial at its start
READY_TIMEOUT_S = 60.0
WHAT_TO_DO = ("source a ROS 2 install (source /opt/ros/jazzy/setup.bash, with python3-zmq and python3-msgpack) or "
              "make a venv for it (python3 -m venv .venv-ros && .venv-ros/bin/pip install 'hil[ros]'), then give "
              f"its python with --ros-python PATH or {PYTHON_ENV}")
BOOTSTRAP_GUARD = "_ROS_WHEELS_BOOTSTRAP_COMPLETE"  # the ROS wheels' re-exec guard (their .pth file sets it)


class RosUnavailable(RuntimeError):
    """No Python with rclpy: the message is the one line to show."""


def checkout_venv() -> Path:
    """``.venv-ros/bin/python`` at the top of the source checkout this hil runs from."""
    return Path(__file__).resolve().parents[2] / ".venv-ros" / "bin" / "python"


def ros_env() -> dict[str, str]:
    """The environment of a ROS process hil starts: discovery on localhost unless the user widened it, hil's
    Fast DDS profile unless the user has one; the wheels' re-exec guard removed, so a venv of ROS wheels sets its
    own library path."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if not (env.get(PROFILE_ENV) or env.get("FASTDDS_DEFAULT_PROFILES_FILE")):
        env[PROFILE_ENV] = str(DISCOVERY_PROFILE)
    env.pop(BOOTSTRAP_GUARD, None)
    return env


def works(python: str | Path) -> str | None:
    """None when rclpy, pyzmq and msgpack import in ``python``; else why not (one line)."""
    try:
        done = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=60,
                              env=ros_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python}: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit status %d" % done.returncode])[-1]
        return f"{python}: {last}"
    return None


def find_ros_python(given: str | None = None, *, check_given: bool = True) -> str:
    """The Python the bridge runs in (see the module's docstring), or RosUnavailable. ``check_given=False``: a
    Python given (the argument or HIL_ROS_PYTHON) is returned unchecked, for a caller that starts the bridge in it
    at once (BridgeProcess.wait_ready then says what is missing)."""
    given = given or os.environ.get(PYTHON_ENV)
    if given:
        why = works(given) if check_given else None
        if why is not None:
            raise RosUnavailable(f"hil ros: {why}; {WHAT_TO_DO}")
        return given
    candidates: list[str] = []
    if importlib.util.find_spec("rclpy") is not None:
        candidates.append(sys.executable)
    if checkout_venv().exists():
        candidates.append(str(checkout_venv()))
    system = shutil.which("python3")
    if system:
        candidates.append(system)
    for python in candidates:
        if works(python) is None:
            return python
    raise RosUnavailable(f"hil ros: no Python here imports rclpy: {WHAT_TO_DO}")


class BridgeProcess:
    """The bridge node started in ``python`` against a link's two endpoints; its output goes to ``err`` line by
    line, prefixed (what it says before it is up, once it is up: a bridge that cannot start is one line, from
    :meth:`wait_ready`). :meth:`wait_ready` blocks until it said it is up (or died); :meth:`stop` ends it."""

    def __init__(self, python: str, state: str, commands: str, *, err: Any = None, extra: list[str] | None = None):
        self.err = err if err is not None else sys.stderr
        self.python = python
        command = [python, str(BRIDGE_NODE), "--state", state, "--commands", commands, *(extra or [])]
        try:
            self.proc = spawn(command, env=ros_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1)
        except OSError as exc:
            raise RosUnavailable(f"hil ros: {python}: {exc}; {WHAT_TO_DO}") from None
        self.ready = threading.Event()
        self.waiting = threading.Event()  # it is up and waits for nodes (--ros-wait-for): no start-up timeout
        self.early: list[str] | None = []  # its lines until it is up (None from then on)
        self._pump = threading.Thread(target=self._forward, name="hil-ros-bridge-output", daemon=True)
        self._pump.start()

    def _forward(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(WAITING):  # up, holding the trial until the nodes it waits for are there
                self.waiting.set()
                self._show(line)
            elif line.startswith(READY):
                early, self.early = self.early or [], None
                for said in early:
                    self._show(said)
                self.ready.set()
            elif self.early is not None:
                self.early.append(line)
            else:
                self._show(line)
        self.ready.set()  # it ended: nobody waits for it any more

    def _show(self, line: str) -> None:
        print(f"[ros bridge] {line.rstrip()}", file=self.err, flush=True)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the bridge is up; RosUnavailable if it ended, or said nothing for ``timeout_s`` (a bridge
        waiting for nodes, --ros-wait-for, waits as long as it takes: it says so every few seconds, Ctrl-C ends
        it)."""
        start = WALL()
        while not self.ready.wait(0.1):
            if WALL() - start > timeout_s and not self.waiting.is_set():
                self.stop()
                raise RosUnavailable(f"hil ros: the bridge did not start within {timeout_s:g} s")
        if self.early is not None or self.proc.poll() is not None:  # it ended, before or as it came up
            self._pump.join(timeout=1.0)
            status = self.proc.wait()
            said = [line.strip() for line in self.early or [] if line.strip()]
            if status == NO_RCLPY and said:  # its own last line says what is missing and what to do
                raise RosUnavailable(said[-1])
            for line in said:
                self._show(line)
            raise RosUnavailable(f"hil ros: the bridge ended at start (exit status {status}); its output is above")

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(timeout=1.0)
        return self.proc.returncode
