"""Running a sweep's trials on dask.distributed: a local cluster of worker processes, or an existing scheduler.

Local: ``LocalCluster(n_workers=N, threads_per_worker=1, processes=True)`` on loopback (the scheduler, and its
HTTP routes on a port picked at random: a dashboard when bokeh is installed); N is the
number of cores this process may use, never more than the trials to run. Remote: ``Client("tcp://HOST:8786")``
and whatever workers that scheduler has (``dask worker`` on other machines, dask-jobqueue on Slurm:
docs/SWEEPS.md); they must import hil and see the sweep's folder at the same path (a shared file system).

Each trial is one task, :func:`trial.sweep.worker.run_job`, submitted with a stable key, ``retries`` (a task that
raises, e.g. a file system hiccup, runs again) and ``pure=False``. A worker that dies mid-trial (killed, out of
memory, its machine lost) is not an exception of the task: the scheduler gives its tasks to other workers, up to
``distributed.scheduler.allowed-failures`` times (set here for a local cluster; a remote scheduler has its own),
after which the future holds ``KilledWorker`` and the trial becomes a failed row. Every trial gives a row.

What crosses Dask's wire is plain data (the trial's keys, its folder, its record) and a reference to
``run_job``; Dask itself pickles task messages, which is why a local cluster listens on loopback only and a
remote one belongs on a trusted network or behind Dask's TLS (docs/SWEEPS.md).

``--foxglove [HOST:]PORT --foxglove-worker N``: the N-th worker (by name: a local cluster's are 0, 1, ...; else
by address) is chosen once the client is connected, and every job carries the address and that worker's
address; the worker serves the trial it is running (trial/sweep/worker.py) and sends a ``foxglove`` event with
the URL, which is printed above the progress line and given to ``observer``.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .progress import Progress
from .runner import record
from .spec import Job
from .worker import EVENT_TOPIC, run_job

RETRIES = 2
ALLOWED_FAILURES = 3  # workers a trial may take down with it before it is a failed row (Dask's default too)
# A local cluster's own upkeep, slowed down: its workers only wait for their trial processes, so the statistical
# profiler of the worker's threads has nothing to show, and the event-loop tick, the system monitor and the
# nanny's memory check, at Dask's defaults, keep ~0.1 core busy on an idle 2-worker cluster (~0.02 like this;
# bench/sweep.py), CPU the trials need on a small machine. A remote cluster keeps its own configuration.
LOCAL_SETTINGS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "500ms",
                  "distributed.admin.system-monitor.interval": "2s",
                  "distributed.worker.memory.monitor-interval": "1s"}
INSTALL_HINT = "hil sweep runs on dask.distributed: pip install 'hil[sweep]' (dask[distributed], matplotlib)"


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: the records that had arrived are in :attr:`records`."""

    def __init__(self, records: dict[int, dict[str, Any]]):
        super().__init__("interrupted")
        self.records = records


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def run_jobs(jobs: list[Job], out: Path, *, timeout_s: float, progress: Progress, workers: int | None = None,
             scheduler: str | None = None, grace_s: float | None = None, rerun: bool = False,
             observer: Callable[[dict[str, Any]], None] | None = None,
             foxglove: tuple[str, int] | None = None, foxglove_worker: int = 0) -> dict[int, dict[str, Any]]:
    """Run ``jobs`` on Dask; their records by job index. ``observer`` sees every event a worker sends (a trial
    started: its id, worker address, worker and trial-process pids; a trial served to Foxglove: its URL).
    ``foxglove`` (host, port): the trials of worker ``foxglove_worker`` are served live there, one at a time."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise RuntimeError(f"{INSTALL_HINT} ({exc})") from None
    if not jobs:
        return {}
    cluster = None
    settings = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                **(LOCAL_SETTINGS if scheduler is None else {})}
    with dask.config.set(settings):
        if scheduler is None:
            n = max(1, min(workers or cores(), len(jobs)))
            if foxglove is not None and not 0 <= foxglove_worker < n:  # said before a cluster is started
                raise ValueError(f"--foxglove-worker {foxglove_worker}: this sweep starts {n} local worker(s) "
                                 f"(0..{n - 1})")
            with _sigint_ignored():  # the workers inherit it: Ctrl-C stops the sweep here, not in each worker
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
        try:
            with Client(cluster if cluster is not None else scheduler) as client:
                if cluster is not None:
                    from .plugin import LOCAL_NAME, IgnoreInterrupt

                    client.register_plugin(IgnoreInterrupt(), name=LOCAL_NAME)
                served = None
                if foxglove is not None:
                    served = {"host": foxglove[0], "port": foxglove[1],
                              "worker": chosen_worker(client, foxglove_worker)}
                return _submit_and_collect(client, jobs, out, timeout_s, progress, grace_s, rerun, observer, served)
        finally:
            if cluster is not None:
                cluster.close()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored meanwhile (when this is the main thread): processes started now inherit that, so a Ctrl-C
    from the terminal reaches only this process, which then closes the cluster in order."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def chosen_worker(client, index: int, timeout_s: float = 60.0) -> str:
    """The address of the ``index``-th worker: by name when the names are numbers (a LocalCluster's 0, 1, ...),
    else in address order. ValueError when the cluster has no such worker (after waiting for it a while)."""
    if index < 0:
        raise ValueError(f"--foxglove-worker must be 0 or more, not {index}")
    try:
        client.wait_for_workers(index + 1, timeout=timeout_s)
    except Exception:  # noqa: BLE001 - too few workers: said below with how many there are
        pass
    workers = client.scheduler_info(n_workers=-1)["workers"]

    def order(item):
        address, info = item
        name = info.get("name")
        return (0, int(name), address) if isinstance(name, int) or str(name).isdigit() else (1, 0, address)

    addresses = [address for address, _ in sorted(workers.items(), key=order)]
    if index >= len(addresses):
        raise ValueError(f"--foxglove-worker {index}: the cluster has {len(addresses)} worker(s) "
                         f"(0..{len(addresses) - 1})")
    return addresses[index]


def _submit_and_collect(client, jobs: list[Job], out: Path, timeout_s: float, progress: Progress,
                        grace_s: float | None, rerun: bool, observer,
                        served: dict[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    from distributed import as_completed

    from .plugin import NAME, RunnerCleanup

    client.register_plugin(RunnerCleanup(), name=NAME)

    said = {"url": None}

    def on_event(event) -> None:
        _, message = event
        if not isinstance(message, dict):
            return
        if message.get("event") == "start":
            progress.started(str(message.get("id")))
        elif message.get("event") == "foxglove":
            url, error = message.get("url"), message.get("error")
            if error:
                progress.note(f"foxglove: {message.get('id')} not served: {error}")
            elif url != said["url"]:  # said once per address (each trial of the worker re-opens the same)
                progress.note(f"foxglove: serving the trials of worker {message.get('worker')} at {url} (now "
                              f"{message.get('id')}; Foxglove: Open connection -> Foxglove WebSocket)")
            said["url"] = url
        else:
            return
        if observer is not None:
            observer(message)

    client.subscribe_topic(EVENT_TOPIC, on_event)
    futures = {}
    for job in jobs:
        payload = {**job.payload(out, timeout_s), "grace_s": grace_s, "rerun": rerun}
        if served is not None:
            payload["foxglove"] = served
        future = client.submit(run_job, payload, key=f"hil-trial-{job.hash[:16]}-{job.index}", pure=False,
                               retries=RETRIES)
        futures[future] = job
    records: dict[int, dict[str, Any]] = {}
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(progress, stop), daemon=True)
    ticker.start()
    try:
        for future in as_completed(futures):
            job = futures[future]
            records[job.index] = _record_of(future)
            progress.finished(job.id, records[job.index]["status"], records[job.index]["error"])
    except KeyboardInterrupt:
        client.cancel(list(futures))
        raise SweepInterrupted(records) from None
    finally:
        stop.set()
        client.unsubscribe_topic(EVENT_TOPIC)
    return records


def _record_of(future) -> dict[str, Any]:
    """The task's record, or a failed record saying why the task gave none (its workers died, it raised)."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as exc:
        return record(status="failed", stopped="lost", wall_s=0.0,
                      error=f"the trial's worker died {ALLOWED_FAILURES + 1} times while running it (killed, out "
                            f"of memory, or a crash in C): {exc}")
    except Exception as exc:  # noqa: BLE001 - a task error after its retries is that trial's row
        return record(status="failed", stopped="lost", wall_s=0.0,
                      error=f"the sweep task failed after {RETRIES} retries: {type(exc).__name__}: {exc}")


def _tick(progress: Progress, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        progress.tick()
