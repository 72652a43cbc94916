"""The viewer's pause on the lockstep master, and the time patch leaving other threads on the wall clock.

Paused, the master neither advances nor wakes anyone (a participant's sleep just waits, nobody stalls); a step
lets exactly one advance through; resume goes on. Threads running before ``patched(clock)`` began (a viewer's)
read the wall clock; the patching thread reads the controller's clock.
"""
from __future__ import annotations

import threading
import time

from hil.bridge.lockstep import LocalParticipant, LockstepCore

WALL_MONOTONIC = time.monotonic


def _run_ticks(participant: LocalParticipant, ticks: int, period: float, woke: list[float]) -> None:
    t = 0.0
    for _ in range(ticks):
        t += period
        woke.append(participant.sleep_until(t))


def test_pause_holds_time_step_advances_once_resume_goes_on():
    advanced: list[float] = []
    core = LockstepCore(advanced.append, stall_timeout_s=0.5)  # shorter than the pause: nobody may stall
    cond = threading.Condition()
    participant = LocalParticipant(core, cond, "controller")
    with cond:
        core.pause()
    woke: list[float] = []
    worker = threading.Thread(target=_run_ticks, args=(participant, 5, 0.1, woke))
    worker.start()
    time.sleep(1.0)  # twice the stall timeout
    assert woke == [] and core.now() == 0.0 and core.failure is None
    with cond:
        core.step()
        cond.notify_all()
    deadline = WALL_MONOTONIC() + 10
    while len(woke) < 1 and WALL_MONOTONIC() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert woke == [0.1], "a step is one advance, to the next wake"
    with cond:
        core.resume()
        cond.notify_all()
    worker.join(timeout=10)
    assert [round(t, 9) for t in woke] == [0.1, 0.2, 0.3, 0.4, 0.5] and core.failure is None
    assert [round(t, 9) for t in advanced] == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_threads_running_before_the_patch_keep_the_wall_clock():
    from hil.runtime.clock.patch import patched

    class FrozenClock:
        def now(self) -> float:
            return 42.0

        def sleep(self, seconds: float) -> None:
            raise AssertionError("a thread of the process slept on the controller's clock")

    seen: dict[str, float] = {}
    go, done = threading.Event(), threading.Event()

    def service() -> None:  # a viewer's thread: started before the patch
        go.wait(10)
        seen["service"] = time.monotonic()
        time.sleep(0.01)
        done.set()

    thread = threading.Thread(target=service)
    thread.start()
    with patched(FrozenClock()):
        seen["controller"] = time.monotonic()
        go.set()
        assert done.wait(10)
    thread.join(timeout=10)
    assert seen["controller"] == 42.0 and seen["service"] != 42.0
