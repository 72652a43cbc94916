"""The sweep's Dask worker plugins.

:class:`RunnerCleanup` (every cluster): when a worker closes, its trial processes are closed and reaped with it
(trial/sweep/worker.py ``close_runners``). Without it they would still die (their death signal fires when the
worker's thread ends) but as orphans, unreaped by the worker and unaccounted in its CPU time.

:class:`IgnoreInterrupt` (a local cluster only: its workers are ours): SIGINT ignored in the worker, so that a
Ctrl-C in the terminal, which reaches the whole process group, stops the sweep (which closes the cluster in
order) rather than each worker with a traceback. The first workers inherit that from the sweep (trial/sweep/
engine.py); this covers the ones the nanny starts again after a worker died.
"""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

NAME = "hil-sweep-runners"
LOCAL_NAME = "hil-sweep-local"


class RunnerCleanup(WorkerPlugin):
    idempotent = True  # registered by every sweep on a cluster; once per worker is enough

    def teardown(self, worker) -> None:
        from .worker import close_runners

        close_runners()


class IgnoreInterrupt(WorkerPlugin):
    idempotent = True

    def setup(self, worker) -> None:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # a nanny's worker runs its loop there
            signal.signal(signal.SIGINT, signal.SIG_IGN)
