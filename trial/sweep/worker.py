"""The task a Dask worker runs for one trial of a sweep: :func:`run_job` (plain data in, plain data out).

Each worker thread keeps a trial process (trial/sweep/runner.py) and hands it one trial at a time. The thread
waits for the answer at most the trial's ``timeout_s`` plus a grace (the trial ends itself at ``timeout_s`` when
its controller still ticks: trial/sweep/runner.py ``WallWatch``); past that the process is killed (its crowd
goes with it), the trial is a ``timeout`` row with the metrics of what its log holds, and the next trial gets a
new process.

Why this is safe in a Dask worker: the trial process is started with ``bridge.process.spawn``, so it dies
with the worker process however that ends (and so does the crowd it started, spawned the same way), whichever
executor thread asked for it: spawn forks from one thread that lives as long as the worker. Each executor thread
keeps its own (``threading.local``), and the worker's plugin closes them all at shutdown. The trial process
gets a session of its own, so the Ctrl-C a terminal sends to the sweep's process group does not reach it: the
sweep is stopped by closing the cluster, not by trials failing half-way with a broken crowd.

``hil sweep --foxglove``: a job carries the address and the chosen worker's address; on that worker (and only
one trial at a time there: a worker with several threads serves the first, the others run unserved) the job is
handed to the trial process with the address, which serves the trial live (trial/sweep/runner.py) and says
where; the worker sends that on as a ``foxglove`` event and keeps the port, so that the next trial there (even
in a new trial process) re-opens the same port (port 0: the one the first trial got).
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .runner import TIMEOUT, record
from .store import NOT_DONE, attempt_folder, commit, discard, read_done

EVENT_TOPIC = "hil-sweep"
STARTUP_TIMEOUT_S = 180.0  # a loaded machine may take long to import pybullet and friends
CLOSE_TIMEOUT_S = 5.0
LOG_DIR = "logs"
_local = threading.local()
_all: set[RunnerProcess] = set()  # every thread's, for close_runners
_all_lock = threading.Lock()
_serving = threading.Lock()  # one trial of this worker at a time serves Foxglove
_ports: dict[tuple[str, int], int] = {}  # (host, port asked) -> the port the first server got


def default_grace_s(timeout_s: float) -> float:
    """How long after ``timeout_s`` a trial that was told to end may still take to close its log and build its
    report before its process is killed."""
    return max(30.0, 0.25 * timeout_s)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one trial (a ``Job.payload``) unless its folder already holds it done; its record."""
    final = Path(job["folder"])
    if not job.get("rerun"):
        done = read_done(final, job["hash"])
        if done is not None:  # a retry whose first attempt had finished, or another client's sweep
            return done
    attempt = attempt_folder(final)
    started = time.monotonic()
    runner = _runner(final.parents[2] / LOG_DIR)
    _event({"event": "start", "id": job["id"], "pid": os.getpid(), "runner": runner.pid,
            "host": socket.gethostname()})
    grace = float(job.get("grace_s") or default_grace_s(float(job["timeout_s"])))
    serving = _foxglove_here(job)
    try:
        result = runner.run(_served(job, serving), attempt, float(job["timeout_s"]) + grace,
                            on_note=lambda note: _foxglove_note(job, note))
    except RunnerLost as lost:
        _local.runner = None
        runner.kill()
        result = _salvaged(attempt, lost, time.monotonic() - started)
    finally:
        if serving:
            _serving.release()
    if result["status"] in NOT_DONE:
        discard(attempt)
        return result
    return commit(attempt, final, job["hash"], result, replace=bool(job.get("rerun")))


def _foxglove_here(job: dict[str, Any]) -> bool:
    """Whether this trial is the one to serve to Foxglove: the job asks for it, this is the chosen worker, and no
    other trial of this worker is serving (the lock is then held until the trial ends)."""
    where = job.get("foxglove")
    if not where:
        return False
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # not in a worker (run_job called directly): serve
        address = where.get("worker")
    return address == where.get("worker") and _serving.acquire(blocking=False)


def _served(job: dict[str, Any], serving: bool) -> dict[str, Any]:
    """The job as the trial process gets it: with the address to serve on (the port the first one got) or
    without any."""
    where = job.get("foxglove")
    job = {k: v for k, v in job.items() if k != "foxglove"}
    if serving and where:
        host, port = str(where["host"]), int(where["port"])
        job["foxglove"] = {"host": host, "port": _ports.get((host, port), port)}
    return job


def _foxglove_note(job: dict[str, Any], note: dict[str, Any]) -> None:
    where = job.get("foxglove") or {}
    if where:
        key = (str(where["host"]), int(where["port"]))
        if note.get("port"):
            _ports.setdefault(key, int(note["port"]))
        elif note.get("error"):
            _ports.pop(key, None)  # the port kept is taken now: the next trial tries the one asked for again
    _event({"event": "foxglove", "id": job["id"], "url": note.get("foxglove"), "error": note.get("error")})


class RunnerLost(Exception):
    """The trial process did not answer in time, or died."""

    def __init__(self, message: str, *, overran: bool):
        super().__init__(message)
        self.overran = overran


class RunnerProcess:
    """``python -m hil.trial.sweep.runner`` for this thread; :meth:`run` hands it one job and waits for its record."""

    def __init__(self, log_dir: Path):
        from hil.bridge.process import spawn

        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"runner-{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}.txt"
        self._log = open(self.log_path, "ab")
        self.proc = spawn([sys.executable, "-m", "hil.trial.sweep.runner"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        self.pid = self.proc.pid
        self._buffer = b""
        with _all_lock:
            _all.add(self)
        try:
            ready = self._read_line(STARTUP_TIMEOUT_S, "starting")
            if "ready" not in ready:
                raise RunnerLost(f"the trial process said {ready!r} instead of ready", overran=False)
        except BaseException:  # the task fails (Dask retries it); nothing of this process is left behind
            self.kill()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job: dict[str, Any], attempt: Path, timeout_s: float, on_note=None) -> dict[str, Any]:
        """Hand the process one job; its record. Lines before the record that are notes (``{"foxglove": ...}``:
        where the trial is served) go to ``on_note``."""
        try:
            self.proc.stdin.write((json.dumps({"job": job, "attempt": str(attempt)}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise RunnerLost(f"the trial process is gone ({exc})", overran=False) from None
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read_line(max(0.0, deadline - time.monotonic()), "running the trial", total_s=timeout_s)
            if "foxglove" not in reply:
                return reply
            if on_note is not None:
                on_note(reply)

    def _read_line(self, timeout_s: float, doing: str, total_s: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        timeout_s = timeout_s if total_s is None else total_s  # what the message says
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RunnerLost(f"no answer within {timeout_s:.0f} s of wall time while {doing}", overran=True)
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.proc.wait()
                    raise RunnerLost(f"the trial process died while {doing} ({_exit_text(self.proc.returncode)}); "
                                     f"its last words: {self._last_words()}", overran=False)
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _last_words(self) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(nothing)"

    def close(self) -> None:
        """End of input: the process finishes its loop and exits (killed if it does not within a few seconds)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(CLOSE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        with _all_lock:
            _all.discard(self)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._log.close()


def close_runners() -> None:
    """Close every trial process of this worker (its plugin's teardown: trial/sweep/plugin.py), so that they
    end with the worker and are reaped by it rather than orphaned until their death signal."""
    with _all_lock:
        runners = list(_all)
    for runner in runners:
        runner.close()


def _runner(log_dir: Path) -> RunnerProcess:
    runner = getattr(_local, "runner", None)
    if runner is None or not runner.alive():
        if runner is not None:
            runner.kill()
        runner = _local.runner = RunnerProcess(log_dir)
    return runner


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        import signal

        return f"signal {signal.Signals(-code).name}"
    return f"exit {code}"


def _salvaged(attempt: Path, lost: RunnerLost, wall_s: float) -> dict[str, Any]:
    """The record of a trial whose process was killed or died: its error, and the metrics of what its log held
    up to the last flushed second (trial/record: a SIGKILLed log reads to its last flush)."""
    metrics = None
    if lost.overran:
        status = TIMEOUT
        error = (f"timed out: {lost}; the trial process was killed (a controller that never ticks the bus again, "
                 f"or stuck outside Python?)")
    else:
        status, error = "failed", str(lost)
    stopped = "killed" if lost.overran else "died"
    if (attempt / "trial.mcap").is_file():
        try:
            from ..report.build import build_report

            metrics = build_report(attempt, status=status, stopped=stopped, error=error)
        except Exception:  # noqa: BLE001 - nothing readable: the row keeps its error
            metrics = None
    return record(status=status, stopped=stopped, error=error,
                  wall_s=wall_s, metrics=metrics)


def _event(message: dict[str, Any]) -> None:
    """Tell the client (progress: running trials) through Dask's structured events; nothing outside a worker."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return
    worker.log_event(EVENT_TOPIC, {**message, "worker": worker.address})
