"""Child processes that die with their parent: a crowd or a device hil starts must not outlive a killed hil.

A SIGKILLed parent runs no cleanup, so the child has to be told by the kernel: on Linux ``prctl(PR_SET_PDEATHSIG,
SIGTERM)`` in the child, set between fork and exec, makes the kernel send SIGTERM when the parent thread that
forked it ends. Where prctl does not exist (macOS) the child's own loop must notice, so the child also gets
``HIL_PARENT_PID`` in its environment and long-running servers (crowd/serve.py ``ParentWatch``) stop when their
parent process id changes. Only the standard library (ctypes), no dependency for a dozen lines.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from typing import Any

PARENT_ENV = "HIL_PARENT_PID"  # crowd/serve.py reads the same name
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _libc_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()  # looked up before any fork: nothing but the call itself runs in the child


def _die_with_parent(parent_pid: int) -> None:
    """preexec_fn: ask for SIGTERM when the parent dies; if it died already (before prctl took effect), go."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def spawn(command: list[str], **popen_kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(command, **popen_kwargs)`` for a child that ends when this process ends, however it
    ends (SIGKILL included). The child also gets ``HIL_PARENT_PID`` so its own loop can check."""
    parent = os.getpid()
    env = dict(popen_kwargs.pop("env", None) or os.environ)
    env[PARENT_ENV] = str(parent)
    return subprocess.Popen(command, env=env, preexec_fn=lambda: _die_with_parent(parent), **popen_kwargs)
