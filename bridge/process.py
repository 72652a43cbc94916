"""Child processes that die with their parent: the one way hil starts a process (the crowd, a served device, a
native program, a sweep's trial process, a retried trial, the viewer's page).

A SIGKILLed parent runs no cleanup, so the child must be told by the kernel: on Linux
``prctl(PR_SET_PDEATHSIG)`` makes it send a signal to the child when its parent *thread* ends. :func:`spawn`
starts every child through :mod:`.trampoline`, a tiny isolated Python program that sets the signal, checks
that its parent is still there (it may have died before the prctl), adds the time shim's environment when asked,
and execs the real program (same pid). Nothing of Python runs between fork and exec in the parent's child, which
is what makes this safe in hil's processes full of threads (``preexec_fn`` is not), and lets subprocess use its
fast vfork path even in a process holding pybullet and numba.

Because the signal follows the forking *thread*, every child is forked by one launcher thread that lives as long
as this process: a child started from a short-lived thread (a Foxglove service call, a Dask task) lives on while
its parent lives. Where prctl does not exist (macOS) the child gets ``HIL_PARENT_PID`` and a long-running child
checks it itself with :class:`ParentWatch` (the crowd does).
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Callable, Sequence

PARENT_ENV = "HIL_PARENT_PID"
TRAMPOLINE = Path(__file__).with_name("trampoline.py")
REFUSED = ("preexec_fn", "executable", "shell")  # each would undo a guarantee or bypass the trampoline


class ParentWatch:
    """The child's own check, for where the kernel cannot signal it (no prctl): notices that the process that
    started this one is gone (``HIL_PARENT_PID`` differs from the parent pid now). A process started by hand has no
    such parent and never sees it gone."""

    def __init__(self) -> None:
        value = os.environ.get(PARENT_ENV, "")
        self.parent = int(value) if value.isdigit() else None

    def gone(self) -> bool:
        return self.parent is not None and os.getppid() != self.parent


def spawn(command: Sequence[str | os.PathLike], *, death_signal: int = signal.SIGTERM,
          preload: str | os.PathLike | None = None, pid_env: str | None = None,
          **popen_kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(command, **popen_kwargs)`` for a child that ends when this process ends, however it ends.

    The child gets ``death_signal`` when this process dies (SIGKILL included); it is forked by this module's one
    long-lived thread, so the caller's thread may end first. ``preload``: a shared library put first in the
    program's LD_PRELOAD (not in anything before it), ``pid_env``: a variable set to the program's own pid (the
    time shim's participant check). The environment is ``env`` (default: this process's) plus ``HIL_PARENT_PID``.
    Every other keyword is Popen's (stdin/stdout/stderr, text, pass_fds, cwd, start_new_session, ...); fds not
    in ``pass_fds`` are closed in the child, as Popen does. A program that cannot be found or run raises
    FileNotFoundError / PermissionError here, as Popen would."""
    refused = [name for name in REFUSED if name in popen_kwargs]
    if refused:
        raise TypeError(f"spawn() does not take {', '.join(refused)}: the child runs its program through "
                        "the trampoline that ties it to this process")
    given = popen_kwargs.pop("env", None)
    env = dict(os.environ if given is None else given)
    env[PARENT_ENV] = str(os.getpid())
    argv = [os.fspath(word) for word in command]
    if not argv:
        raise ValueError("spawn() needs a program to run")
    program = _resolve(argv[0], env, popen_kwargs.get("cwd"))
    start = [sys.executable, "-I", "-S", str(TRAMPOLINE), str(os.getpid()), str(int(death_signal)),
             os.fspath(preload) if preload is not None else "-", pid_env or "-", program, *argv]
    return _LAUNCHER.call(lambda: subprocess.Popen(start, env=env, **popen_kwargs))


def _resolve(program: str, env: dict[str, str], cwd: str | os.PathLike | None) -> str:
    """The absolute path of ``program`` as exec would find it (PATH of ``env``; relative to ``cwd`` if it names a
    path), or the error Popen would raise, raised here in the parent rather than as an exit status."""
    if os.sep in program:
        path = os.path.join(os.fspath(cwd), program) if cwd is not None else program
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, f"{os.strerror(errno.ENOENT)} (not on PATH)", program)
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return os.path.abspath(path)


class _Launcher:
    """One thread that forks every child of this process and lives as long as it (PR_SET_PDEATHSIG fires when the
    forking thread ends). Started on first use; a forked copy of this process starts its own."""

    def __init__(self) -> None:
        self._asks: SimpleQueue = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        if threading.current_thread() is self._thread:
            return start()
        future: Future = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hil-spawn", daemon=True)
                self._thread.start()
        self._asks.put((start, future))
        try:
            return future.result()
        except BaseException:  # Ctrl-C while waiting: the child, if it started, must not be left to live on
            future.add_done_callback(_kill_started)
            raise

    def _loop(self) -> None:
        while True:
            start, future = self._asks.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller, raised in its thread
                future.set_exception(exc)

    def forked(self) -> None:
        """In the child of an os.fork: the launcher thread did not come along."""
        self._asks, self._thread, self._lock = SimpleQueue(), None, threading.Lock()


def _kill_started(future: Future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().kill()
        future.result().wait()


_LAUNCHER = _Launcher()
os.register_at_fork(after_in_child=_LAUNCHER.forked)
