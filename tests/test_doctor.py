"""``hil doctor`` as a user runs it: a subprocess, its lines read for what this machine has and what it lacks.

What is present here is present on every machine that runs the suite (pybullet, the built-in config, the test
extra's packages); what is absent is made absent for real: a PATH without Chromium or a C compiler, a Python
without hil's dependencies (a fresh venv that reaches only the checkout's sources).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import hil_command

ROOT = Path(__file__).resolve().parents[1]


def doctor(env: dict[str, str] | None = None, command: list[str] | None = None) -> tuple[int, dict[str, str]]:
    """(exit status, {thing checked: its line}) of ``hil doctor``."""
    done = subprocess.run([*(command or hil_command()), "doctor"], capture_output=True, text=True, timeout=120,
                          env=env, stdin=subprocess.DEVNULL)
    lines = {}
    for line in done.stdout.splitlines():
        status, _, rest = line.partition(" ")
        what, sep, _ = rest.strip().partition(": ")
        if sep and status in ("ok", "missing", "warn", "BROKEN"):
            lines[what] = line
    assert done.stdout.strip(), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, lines


def test_the_core_works_here_and_each_line_says_what_it_found():
    status, lines = doctor()
    assert status == 0, lines
    assert lines["python"].startswith("ok") and sys.executable.rsplit("/", 1)[0] in lines["python"]
    assert lines["pybullet"].startswith("ok") and "DIRECT world starts" in lines["pybullet"]
    assert lines["built-in config"].startswith("ok")
    assert lines["core dependencies"].startswith("ok")
    assert lines["scenario tests (pytest)"].startswith("ok")  # the test extra has it
    for what in ("serial permissions (real robot)", "FTDI latency timers (real robot)", "cameras (EGL, moderngl)",
                 "ROS 2 (rclpy)", "Chromium (the viewer's tests)", "crowd compile cache"):
        assert what in lines, f"no line for {what}: {sorted(lines)}"


def test_a_missing_chromium_and_compiler_are_named_with_what_to_install(tmp_path):
    """Only the venv's bin on PATH: no chromium, no cc. Both are optional: the exit status stays 0."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    status, lines = doctor(env)
    assert status == 0, lines
    assert lines["Chromium (the viewer's tests)"].startswith("missing")
    assert "apt-get install chromium" in lines["Chromium (the viewer's tests)"]
    assert lines["C compiler (native controllers)"].startswith("missing")
    assert "apt-get install gcc" in lines["C compiler (native controllers)"]


def test_a_ros_python_given_that_has_no_rclpy_is_named(tmp_path):
    env = {**os.environ, "HIL_ROS_PYTHON": sys.executable}  # the test venv: no rclpy
    _, lines = doctor(env)
    assert lines["ROS 2 (rclpy)"].startswith("missing")
    assert sys.executable in lines["ROS 2 (rclpy)"] and "HIL_ROS_PYTHON" in lines["ROS 2 (rclpy)"]


def test_a_python_without_hils_dependencies_is_broken_and_says_what_to_install(tmp_path):
    """A fresh venv that sees the checkout's sources but none of hil's dependencies: the doctor still answers
    (only hil.doctor is imported for it), names what is missing, and exits non-zero."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    status, lines = doctor(env, [str(tmp_path / "bare" / "bin" / "python"), "-m", "hil"])
    assert status == 1, lines
    assert lines["core dependencies"].startswith("BROKEN")
    assert "numpy" in lines["core dependencies"] and "pip install hil" in lines["core dependencies"]
    assert lines["pybullet"].startswith("BROKEN")
