"""``hil/retry``: "retry from here" as a Foxglove service, on the states a trial saves.

Called from Foxglove (its Service Call panel) on a live trial or a replay, it writes the trial file that starts
again from the trial's saved state at the current time -- the live trial's time, the replay's playback position --
beside the trial (``retry-from-T s.yaml``, ``-2``, ``-3``... when that name is taken: each call its own file; the
original's keys with ``from:`` added, as the viewer's button does: trial/state/retry.py) and answers ``{"t",
"trial_file", "command"}``, the command being the ``hil trial ... --from DIR@T`` line. A JSON request may name
another ``controller`` to retry with, and with ``"run": true`` it also runs the retry (:class:`RetryRunner`):
``hil trial FILE --foxglove HOST:0 --foxglove-paused`` as a child process, served to Foxglove on a port of its
own and paused at its first cycle, the answer saying where (``"running": {"foxglove", "out", "log", "pid"}``):
open that connection, press play.

What runs is checked first, since a client's request starts a process: a retry runs the trial's own controller
unless the server was started with ``--foxglove-allow-controller`` (and is on loopback); a controller named is a
regular, readable ``.py`` file of at most :data:`MAX_CONTROLLER_BYTES`. The time is checked against the states
there are before anything is written (a running trial has states only up to its last save), and the answer
comes once the child has restored its state and run its first cycle, or says why it ended. Every refusal is one
line, which Foxglove shows; nothing is written or started then.
"""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.bridge.process import spawn
from hil.runtime.clock.base import WALL, WALL_SLEEP  # the wall clock: a trial on the sim clock patches time

RETRY_SERVICE = "hil/retry"
START_S = 60.0  # wall seconds a retried trial may take to serve and run its first cycle (imports, its world)
STOP_S = 30.0  # wall seconds a retried trial has to end its log after Ctrl-C (SIGINT) when its server closes
SETTLE_S = 0.3  # wall seconds a server closing gives the answers of retries that just started to be sent
MAX_RUNNING = 4  # retried trials running (or starting) at once from one server
MAX_CONTROLLER_BYTES = 1 << 20
SERVING = re.compile(r"foxglove: serving (ws://\S+)")
STARTED = re.compile(r"^trial \S.*: Robot\(")  # the trial's first progress line: its Ctrl-C is held from here on
READY = re.compile(r"^(\[[#.]*\] )?t=\s*\d")  # a progress line after a cycle: the state restored, the trial held


def retry_from_here(folder: Path | None, t: float, payload: bytes, runner: RetryRunner | None = None) -> bytes:
    """The service's answer (JSON bytes), or ValueError saying why not."""
    from ..state import files
    from ..state.retry import retry_command, retry_trial_file

    controller, run = _request(payload)
    if run and runner is None:
        raise ValueError("this server cannot run a retried trial (a sweep's trial process ends with its trial): "
                         "call it without 'run' and run the command it answers with")
    if run and controller is not None:
        controller = runner.checked_controller(controller)
    if folder is None or not (Path(folder) / files.STATES).is_dir():
        raise ValueError(f"no saved states to retry from in {folder or 'this trial (it records nothing)'} (a trial "
                         "saves them unless run with --state-every 0; a mixed trial saves none)")
    t = round(max(0.0, t), 1)
    note = _check_time(Path(folder), t, run)
    path = None
    try:
        path = _claim(Path(folder), f"retry-from-{t:g}s", ".yaml")
        retry_trial_file(Path(folder), t, path, controller)
    except (OSError, ValueError) as exc:
        if path is not None:
            path.unlink(missing_ok=True)
        raise ValueError(f"cannot write the retry trial file in {folder}: {exc}") from None
    answer: dict[str, Any] = {"t": t, "trial_file": str(path), "command": retry_command(Path(folder), t, controller)}
    if note:
        answer["note"] = note
    if run:
        answer["running"] = runner.run(path, Path(folder).parent / f"{Path(folder).name}-from-{t:g}s")
    return json.dumps(answer).encode()


def _check_time(folder: Path, t: float, run: bool) -> str | None:
    """Whether a retry at ``t`` can start from the states there are: ValueError saying why not; a note when it
    can start only later (a running trial's states reach its last save: its command works once it has ended)."""
    from ..state import files
    from ..state.resume import plan

    try:
        plan(f"{folder}@{t:g}")
    except ValueError as exc:  # ResumeError included: the range there is, in words
        if _index_of(folder).get("log_end_s", 0.0) is not None:  # a finished trial: this is final
            raise ValueError(str(exc)) from None
        if run:
            raise ValueError(f"{exc} (the trial is still running: a retry runs from its last saved state or "
                             "before, or once the trial has ended)") from None
        return f"{exc}: the command works once the trial has ended"
    except (OSError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"cannot read the saved states in {folder / files.STATES}: {type(exc).__name__}: "
                         f"{exc}") from None
    return None


def _index_of(folder: Path) -> dict[str, Any]:
    from ..state import files

    try:
        index = files.read_index(folder / files.STATES)
    except (OSError, ValueError):
        return {}
    return index if isinstance(index, dict) else {}


def _claim(folder: Path, stem: str, suffix: str) -> Path:
    """A new file ``stem.suffix`` in ``folder`` (``stem-2``, ``stem-3``... when taken), created here and now, so
    two calls at once never write the same file."""
    for k in range(1, 10_000):
        path = folder / (f"{stem}{suffix}" if k == 1 else f"{stem}-{k}{suffix}")
        try:
            with open(path, "x"):
                return path
        except FileExistsError:
            continue
    raise ValueError(f"{folder} has {stem}{suffix} to {stem}-9999{suffix} already")


def _request(payload: bytes) -> tuple[str | None, bool]:
    """(controller or None, run?) from the request's JSON; ValueError saying which field is wrong."""
    if not payload:
        return None, False
    try:
        doc = json.loads(bytes(payload).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"the request must be JSON ({{}}, {{\"controller\": \"path.py\"}}, {{\"run\": true}}): "
                         f"{exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("controller", ""), str):
        raise ValueError("the request must be a JSON object whose 'controller' is a string")
    if not isinstance(doc.get("run", False), bool):
        raise ValueError(f"the request's 'run' must be true or false, not {doc['run']!r}")
    return doc.get("controller") or None, doc.get("run", False)


def _free_folder(out: Path) -> Path:
    """``out``, or ``out-2``, ``out-3``... when a retry from that time ran already (its log is kept)."""
    k = 1
    candidate = out
    while candidate.exists() or candidate.with_name(candidate.name + ".log").exists():
        k += 1
        candidate = out.with_name(f"{out.name}-{k}")
    return candidate


class RetryRunner:
    """The retried trials ``{"run": true}`` starts, each ``hil trial FILE --out DIR --foxglove HOST:0
    --foxglove-paused`` in a child process that dies with this one, its output in ``DIR.log``.

    The SDK's threads, which call the service, come and go; a child lives on as long as this process does
    (bridge/process.py forks every child from one long-lived thread). :meth:`run` answers once the child serves
    and has run its first cycle (its state restored; bounded by :data:`START_S`), or with the child's last words
    if it ended first. At most :data:`MAX_RUNNING` run or start at once. :meth:`close` asks each retry still
    running to stop as Ctrl-C does, once its trial has begun (from then on its Ctrl-C is held until it can stop
    with its log complete: trial/interrupts.py), and kills what is left after :data:`STOP_S`.

    ``allow_controller``: a client may name the controller a retry runs (on a loopback server only);
    ``origins``: the web origins the retries' own servers admit besides the default ones (gate.py)."""

    def __init__(self, host: str, *, allow_controller: bool = False, origins: tuple[str, ...] = ()):
        self.host = host
        self.allow_controller = allow_controller
        self.origins = tuple(origins)
        from hil.crowd.cli import is_loopback

        bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
        self.loopback = is_loopback(f"tcp://{bracketed}:0")  # off loopback, a client may not name the code run
        # each with what run() answered and an event set at its trial's first progress line
        self.children: list[tuple[subprocess.Popen, dict[str, Any], threading.Event]] = []
        self._lock = threading.Lock()  # one folder chosen (and its log begun) at a time
        self._starting = 0  # run() calls not yet answered
        self._settled = threading.Condition()

    def checked_controller(self, name: str) -> str:
        """The absolute path of a controller a client named, if this server lets it run and it is a file that can
        be a controller; ValueError saying why not (before anything is written or started)."""
        if not self.allow_controller:
            raise ValueError(f"this server runs only the trial's own controller, not {name[:200]!r} (start it with "
                             "--foxglove-allow-controller to let a client name another; leave 'controller' out to "
                             "retry the trial's own)")
        if not self.loopback:
            raise ValueError(f"a client may run a controller it names only on a loopback server (this one listens on "
                             f"{self.host}): leave 'controller' out to retry the trial's own, or run the command on "
                             "that machine")
        return checked_controller_file(name)

    def run(self, trial_file: Path, out: Path) -> dict[str, Any]:
        """Start one retried trial in ``out`` (or ``out-2``...: chosen under a lock, so two calls at once never
        share a folder); where it serves, its folder, its output file and its process id."""
        with self._settled:
            if len(self.running()) + self._starting >= MAX_RUNNING:
                raise ValueError(f"cannot start the retried trial: {MAX_RUNNING} retries run already (end one first)")
            self._starting += 1
        try:
            return self._start(trial_file, out)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot start the retried trial: {exc}") from None
        finally:
            with self._settled:
                self._starting -= 1
                self._settled.notify_all()

    def running(self) -> list[dict[str, Any]]:
        return [started for proc, started, _ in self.children if proc.poll() is None]

    def settle(self, timeout_s: float = START_S + 5.0) -> bool:
        """Wait (bounded) until every retry being started has been answered; True if one was (its answer is
        given a moment to reach the client)."""
        with self._settled:
            if not self._starting:
                return False
            self._settled.wait_for(lambda: not self._starting, timeout_s)
        WALL_SLEEP(SETTLE_S)
        return True

    def wait(self) -> None:
        """Until every retried trial has ended (the user plays them to their end, or presses Ctrl-C)."""
        for proc, _, _ in list(self.children):
            proc.wait()

    def close(self) -> None:
        for proc, _, begun in self.children:
            if proc.poll() is None:  # a Ctrl-C before its trial has begun would end it with no log
                begun.wait(START_S)
                proc.send_signal(signal.SIGINT)
        for proc, _, _ in self.children:
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _start(self, trial_file: Path, out: Path) -> dict[str, Any]:
        with self._lock:
            out = _free_folder(out)
            log = out.with_name(out.name + ".log")
            command = [sys.executable, "-m", "hil", "trial", str(trial_file), "--out", str(out),
                       "--foxglove", f"{self.host}:0", "--foxglove-paused"]
            for origin in self.origins:
                command += ["--foxglove-origin", origin]
            if self.allow_controller:
                command.append("--foxglove-allow-controller")
            log.write_text("$ " + " ".join(command) + "\n")
        with open(log, "ab") as sink:  # appending, as the thread that copies its stdout does: neither overwrites
            proc = spawn(command, stdout=subprocess.PIPE, stderr=sink, stdin=subprocess.DEVNULL)
        begun = threading.Event()
        started = {"foxglove": None, "out": str(out), "log": str(log), "pid": proc.pid}
        self.children.append((proc, started, begun))  # stopped with the others from now on, whatever happens
        started["foxglove"] = _ready_url(proc, log, begun)
        return started


def checked_controller_file(name: str) -> str:
    """``name`` (relative: to this process's folder) as an absolute path, if it is a regular, readable ``.py``
    file of at most :data:`MAX_CONTROLLER_BYTES`; ValueError saying what it is otherwise."""
    where = f"controller {name[:200]!r}"
    path = Path(name).expanduser()
    path = path if path.is_absolute() else Path.cwd() / path
    if path.suffix != ".py":
        raise ValueError(f"{where}: a retry runs a Python file (x.py), and {path.name[:100]!r} is not one")
    try:
        info = path.stat()  # through symlinks: what would be read
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{where}: not a regular file")
    if info.st_size > MAX_CONTROLLER_BYTES:
        raise ValueError(f"{where}: {info.st_size} bytes; a controller is at most {MAX_CONTROLLER_BYTES} bytes")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{where}: not readable")
    return str(path.resolve())


def _ready_url(proc: subprocess.Popen, log: Path, begun: threading.Event) -> str:
    """Read the child's output into its log until it says where it serves and has run its first cycle (its state
    restored: a progress line); then a thread keeps copying, and sets ``begun`` at the trial's first progress
    line (or the child's end). ValueError with the child's last words if it ends first."""
    lines: queue.SimpleQueue = queue.SimpleQueue()

    def pump():
        with open(log, "ab") as sink:
            for line in proc.stdout:
                sink.write(line)
                sink.flush()
                text = line.decode("utf-8", "replace")
                if STARTED.match(text):
                    begun.set()
                lines.put(text)
        begun.set()
        lines.put(None)

    threading.Thread(target=pump, name="hil-retry-output", daemon=True).start()
    url = None
    deadline = WALL() + START_S
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - WALL()))
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise ValueError(f"it was not ready within {START_S:g} s (see {log})") from None
        if line is None:
            proc.wait()
            tail = [line for line in log.read_text(errors="replace").strip().splitlines()[-3:] if line]
            raise ValueError(f"it ended (exit status {proc.returncode}) before its first cycle: {' / '.join(tail)}")
        if url is None and (found := SERVING.search(line)) is not None:
            url = found.group(1)
        elif url is not None and READY.match(line):
            return url


def retry_service(folder_of: Callable[[], Path | None], time_of: Callable[[], float], refused: Callable | None = None,
                  runner: RetryRunner | None = None):
    """The foxglove-sdk Service; ``refused(why, request)`` is told of each refusal (the live server logs it)."""
    import foxglove

    def handler(request: Any) -> bytes:
        try:
            return retry_from_here(folder_of(), time_of(), request.payload, runner)
        except ValueError as exc:
            if refused is not None:
                refused(str(exc), request)
            raise

    schema = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="hil.RetryRequest", encoding="jsonschema",
        data=json.dumps({"type": "object", "properties": {"controller": {"type": "string"},
                                                           "run": {"type": "boolean"}}}).encode()))
    return foxglove.Service(RETRY_SERVICE, schema=foxglove.ServiceSchema("hil.Retry", request=schema),
                            handler=handler)
