"""``hil/retry``: "retry from here" as a Foxglove service (issue 28 item 2, on issue 27's saved states).

Called from Foxglove (its Service Call panel) on a live trial or a replay, it writes the trial file that starts
again from the trial's saved state at the current time -- the live trial's time, the replay's playback position --
beside the trial (``retry-from-T s.yaml``, the original's keys with ``from:`` added, as the viewer's button
does: trial/state/retry.py) and answers ``{"t", "trial_file", "command"}``, the command being the
``hil trial ... --from DIR@T`` line. A JSON request may name another ``controller`` to retry with, and with
``"run": true`` it also runs the retry (:class:`RetryRunner`): ``hil trial FILE --foxglove HOST:0
--foxglove-paused`` as a child process, served to Foxglove on a port of its own and paused at its start, the
answer saying where (``"running": {"foxglove", "out", "log", "pid"}``): open that connection, press play. A
trial that saved no states (``--state-every 0``, a mixed trial), or a request that is not JSON, is refused with
the reason, which Foxglove shows; nothing is written then.
"""
from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.bridge.process import spawn

RETRY_SERVICE = "hil/retry"
START_S = 60.0  # wall seconds a retried trial may take to say where it serves (imports and its world)
STOP_S = 30.0  # wall seconds a retried trial has to end its log after Ctrl-C (SIGINT) when its server closes
SERVING = re.compile(r"foxglove: serving (ws://\S+)")
STARTED = re.compile(r"^trial \S.*: Robot\(")  # the trial's first progress line: its Ctrl-C is held from here on


def retry_from_here(folder: Path | None, t: float, payload: bytes, runner: RetryRunner | None = None) -> bytes:
    """The service's answer (JSON bytes), or ValueError saying why not."""
    from ..state import files
    from ..state.retry import retry_command, retry_trial_file

    controller, run = _request(payload)
    if run and runner is None:
        raise ValueError("this server cannot run a retried trial (a sweep's trial process ends with its trial): "
                         "call it without 'run' and run the command it answers with")
    if run and controller is not None and not runner.loopback:
        raise ValueError(f"a client may run a controller it names only on a loopback server (this one listens on "
                         f"{runner.host}): leave 'controller' out to retry the trial's own, or run the command on "
                         "that machine")
    if folder is None or not (Path(folder) / files.STATES).is_dir():
        raise ValueError(f"no saved states to retry from in {folder or 'this trial (it records nothing)'} (a trial "
                         "saves them unless run with --state-every 0; a mixed trial saves none)")
    t = round(max(0.0, t), 1)
    try:
        path = retry_trial_file(Path(folder), t, Path(folder) / f"retry-from-{t:g}s.yaml", controller)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot write the retry trial file in {folder}: {exc}") from None
    answer: dict[str, Any] = {"t": t, "trial_file": str(path), "command": retry_command(Path(folder), t, controller)}
    if run:
        answer["running"] = runner.run(path, Path(folder).parent / f"{Path(folder).name}-from-{t:g}s")
    return json.dumps(answer).encode()


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
    (bridge/process.py forks every child from one long-lived thread). The child says where it serves on its first
    line; :meth:`run` waits for that (bounded by :data:`START_S`) and answers with it, or with the child's last
    words if it ended first. :meth:`close` asks each retry still running to stop as Ctrl-C does, once its trial
    has begun (from then on its Ctrl-C is held until it can stop with its log complete: trial/interrupts.py), and
    kills what is left after :data:`STOP_S`."""

    def __init__(self, host: str):
        self.host = host
        from hil.crowd.cli import is_loopback

        bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
        self.loopback = is_loopback(f"tcp://{bracketed}:0")  # off loopback, a client may not name the code run
        # each with what run() answered and an event set at its trial's first progress line
        self.children: list[tuple[subprocess.Popen, dict[str, Any], threading.Event]] = []
        self._lock = threading.Lock()  # one folder chosen (and its log begun) at a time

    def run(self, trial_file: Path, out: Path) -> dict[str, Any]:
        """Start one retried trial in ``out`` (or ``out-2``...: chosen under a lock, so two calls at once never
        share a folder); where it serves, its folder, its output file and its process id."""
        try:
            return self._start(trial_file, out)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot start the retried trial: {exc}") from None

    def running(self) -> list[dict[str, Any]]:
        return [started for proc, started, _ in self.children if proc.poll() is None]

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
            log.write_text("$ " + " ".join(command) + "\n")
        with open(log, "ab") as sink:  # appending, as the thread that copies its stdout does: neither overwrites
            proc = spawn(command, stdout=subprocess.PIPE, stderr=sink, stdin=subprocess.DEVNULL)
        begun = threading.Event()
        started = {"foxglove": _serving_url(proc, log, begun), "out": str(out), "log": str(log), "pid": proc.pid}
        self.children.append((proc, started, begun))
        return started


def _serving_url(proc: subprocess.Popen, log: Path, begun: threading.Event) -> str:
    """Read the child's output into its log until it says where it serves; then a thread keeps copying, and sets
    ``begun`` at the trial's first progress line (or the child's end)."""
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
    while True:
        try:
            line = lines.get(timeout=START_S)
        except queue.Empty:
            proc.kill()
            raise ValueError(f"it said nowhere it serves within {START_S:g} s (see {log})") from None
        if line is None:
            proc.wait()
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise ValueError(f"it ended (exit status {proc.returncode}) before serving: {' / '.join(tail)}")
        if (found := SERVING.search(line)) is not None:
            return found.group(1)


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
