"""The sweep's Dask worker plugin: when a worker closes, its trial processes are closed and reaped with it
(trial/sweep/worker.py ``close_runners``). Without it they would still die (their death signal fires when the
worker's thread ends) but as orphans, unreaped by the worker and unaccounted in its CPU time."""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

NAME = "hil-sweep-runners"


class RunnerCleanup(WorkerPlugin):
    idempotent = True  # registered by every sweep on a cluster; once per worker is enough

    def teardown(self, worker) -> None:
        from .worker import close_runners

        close_runners()
