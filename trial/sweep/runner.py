"""The trial process of a sweep worker: runs one trial after another through the trial API, told what to run in
JSON lines on stdin, answering in JSON lines.

Why a process of its own rather than the Dask worker's thread: a stuck trial (a controller spinning without
ever ticking the bus, or blocked in C) can only be stopped by killing its process, which must not be the
worker; a crash in C (or a controller's ``os._exit``) must take down one trial, not the worker and what it
holds; and a trial changes process-wide state while it runs: ``sys.argv`` and ``sys.path`` for a controller
file, ``sys.modules``, and the time patch (runtime/clock/patch.py), which keeps threads that were running before
it on the wall clock but once put every thread started meanwhile on the trial's clock, a thread the worker
starts then included (before the patch kept earlier threads apart, the worker's own event loop ran on simulated time
during a trial: heartbeats and timers stalled). So each worker thread keeps one of these
(trial/sweep/worker.py): started once (the imports are paid once, as in a plain loop), killed and started again
only when a trial overruns or its process dies.

Protocol: the process prints ``{"ready": PID}`` once it has imported what a trial needs; then, for each line
``{"job": {...}, "attempt": DIR}`` (a job's payload, trial/sweep/spec.py ``Job.payload``), it runs the trial into
``DIR`` and prints one line, the trial's record (trial/sweep/store.py). What the trial prints (the controller's
output, notes, the crowd's log) goes to ``DIR/output.txt``, never into the protocol. A job with a ``foxglove``
key (``hil sweep --foxglove``: this process belongs to the chosen worker) is served live to Foxglove on that
address while it runs (trial/foxglove_live/live.py), and the process first prints ``{"foxglove": URL}`` (or
``{"foxglove": null, "error": ...}`` when the port cannot be opened: the trial runs unserved), which the worker
passes on to the sweep; one server per trial, re-opened on the same port for the next one.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

TIMEOUT, OUTPUT_NAME = "timeout", "output.txt"
TRACEBACK_CHARS = 4000


def run_here(job: dict[str, Any], attempt: Path, announce: Callable[[dict[str, Any]], None] | None = None
             ) -> dict[str, Any]:
    """Run the job's trial into ``attempt`` (in this process) and return its record. ``announce`` is told where
    the trial is served to Foxglove (a job with a ``foxglove`` address)."""
    from hil.runtime.clock.base import WALL

    from ..run import Trial
    from ..spec import make_spec

    start = WALL()
    watch = WallWatch(start + float(job["timeout_s"]))
    attempt.mkdir(parents=True, exist_ok=True)
    with _output_to(attempt / OUTPUT_NAME):
        try:
            kwargs = dict(job["trial"])
            spec = make_spec(kwargs.pop("controller"), source=job.get("source", "<sweep>"), **kwargs)
            server = _serve(job, spec, announce)
            served = {"taps": server.taps, "hooks": (watch, *server.hooks)} if server else {"hooks": (watch,)}
            try:
                result = Trial(spec=spec).run(attempt, err=sys.stderr, **served)
            finally:
                if server is not None:
                    server.close()
        except Exception as exc:  # noqa: BLE001 - a trial that cannot start is a row with its reason
            trace = traceback.format_exc()
            print(trace, file=sys.stderr)
            return record(status="failed", stopped="failed", error=f"{type(exc).__name__}: {exc}", traceback=trace,
                          wall_s=WALL() - start)
    if result.traceback:
        with open(attempt / OUTPUT_NAME, "a", encoding="utf-8") as f:
            f.write(result.traceback)
    status, error = result.status, result.error
    if watch.fired_at is not None and status == "ok":
        status = TIMEOUT
        error = (f"timed out: {job['timeout_s']:g} s of wall time were up at t={watch.fired_at:.1f} s of the trial; "
                 f"it was ended there (the metrics cover that much)")
    return record(status=status, stopped=result.stopped, error=error, traceback=result.traceback,
                  sim_s=result.sim_s, wall_s=WALL() - start, ticks=result.ticks,
                  goal_reached_at_s=result.goal_reached_at_s,
                  metrics=result.metrics.to_dict() if result.metrics is not None else None)


def _serve(job: dict[str, Any], spec: Any, announce: Callable[[dict[str, Any]], None] | None) -> Any:
    """The job's LiveServer when it asks for one (``job["foxglove"]``: host, port), or None. A port that cannot be
    opened (taken by another program) is announced and the trial runs unserved: a sweep's row matters more."""
    where = job.get("foxglove")
    if not where:
        return None
    try:
        server = _open_server(str(where["host"]), int(where["port"]), f"{job['id']}", spec.duration)
    except Exception as exc:  # noqa: BLE001 - the SDK's own error (address in use, bad host): said, not fatal
        message = {"foxglove": None, "id": job["id"],
                   "error": f"cannot serve on {where['host']}:{where['port']}: {type(exc).__name__}: {exc}"}
        print(f"foxglove: {message['error']}", file=sys.stderr)
    else:
        message = {"foxglove": server.url, "id": job["id"], "port": server.port}
        print(f"foxglove: serving {server.url}", file=sys.stderr)
    if announce is not None:
        announce(message)
    return server if message["foxglove"] else None


PORT_WAIT_S = 5.0  # how long a trial waits for its worker's port, which the trial before it may still hold


def _open_server(host: str, port: int, label: str, duration_s: float | None) -> Any:
    """A LiveServer on the worker's port. The trial before on this worker may not have let the port go yet (its
    process still exiting, loaded machine): retried for :data:`PORT_WAIT_S`, then the SDK's error is raised."""
    from ..foxglove_live.live import LiveServer

    deadline = time.monotonic() + PORT_WAIT_S
    while True:
        try:
            # a retry's child would end with this trial's process: the sweep answers with the command instead
            return LiveServer(host, port, label=label, duration_s=duration_s, run_retries=False)
        except Exception:  # noqa: BLE001 - the SDK raises its own error for an address in use
            if port == 0 or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def record(*, status: str, stopped: str, error: str | None = None, traceback: str | None = None,
           sim_s: float | None = None, wall_s: float, ticks: int | None = None,
           goal_reached_at_s: float | None = None, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """A trial's outcome as plain data: what a done marker keeps and what the table is made from."""
    return {"status": status, "stopped": stopped, "error": error,
            "traceback": traceback[-TRACEBACK_CHARS:] if traceback else None, "sim_s": sim_s, "wall_s": wall_s,
            "ticks": ticks, "goal_reached_at_s": goal_reached_at_s, "metrics": metrics, "host": socket.gethostname()}


class WallWatch:
    """After every bus cycle: once the wall deadline has passed, bring the run's end to now, so it ends at the
    controller's next sleep or tick like any trial at its duration (the log closed, the metrics built). A
    controller that never ticks again is the worker's to kill (trial/sweep/worker.py)."""

    def __init__(self, deadline_wall_s: float):
        from hil.runtime.clock.base import WALL

        self.deadline, self.wall, self.fired_at = deadline_wall_s, WALL, None
        self.t0: float | None = None

    def __call__(self, robot: Any) -> None:
        now = robot.clock.now()
        if self.t0 is None:
            self.t0 = now
        if self.fired_at is None and self.wall() >= self.deadline:
            self.fired_at = now - self.t0
            robot.end_by(now)


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 (Python's and C's prints, the crowd's relayed log) into ``path`` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def cpu_s() -> float:
    """CPU seconds of this process and of the children it has waited for (a trial's crowd)."""
    user, system, children_user, children_system, _ = os.times()
    return user + system + children_user + children_system


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
    import hil.trial.report.build  # noqa: F401 - what every trial needs, imported before "ready" (paid once)
    import hil.trial.run  # noqa: F401

    protocol.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        message = json.loads(line)
        cpu0 = cpu_s()
        reply = run_here(message["job"], Path(message["attempt"]),
                         announce=lambda note: protocol.write(json.dumps(note) + "\n"))
        reply["cpu_s"] = cpu_s() - cpu0  # this process and its crowd: for bench/sweep.py, not the table
        protocol.write(json.dumps(reply, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
