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


def test_a_step_pressed_while_the_robot_is_mid_cycle_still_advances_time():
    """The page's Step can land between the robot's wake-up and the end of that cycle (the cycle that began
    before the step). That cycle's end must not count as the step's: time must still advance to the next tick."""
    from types import SimpleNamespace

    from hil.runtime.clock.sim import LockstepClock
    from hil.trial.view.live import SimControl

    core = LockstepCore(lambda t: None, stall_timeout_s=3600.0)
    cond = threading.Condition()
    robot = SimpleNamespace(clock=LockstepClock(LocalParticipant(core, cond, "robot"), "robot"))
    control = SimControl()
    control.bind(robot)
    in_cycle, step_pressed, stepped = threading.Event(), threading.Event(), threading.Event()
    woke: list[float] = []

    def run_robot() -> None:  # two ticks of 0.1 s, each followed by its bus cycle's hooks
        woke.append(robot.clock.sleep_until(0.1))
        control.pause()  # paused while this cycle runs
        in_cycle.set()
        step_pressed.wait(10)  # the step lands before this cycle's end
        control.cycle_done()
        woke.append(robot.clock.sleep_until(0.2))  # the step must let this sleep end
        control.cycle_done()
        stepped.set()

    worker = threading.Thread(target=run_robot, daemon=True)
    worker.start()
    assert in_cycle.wait(10)
    control.step()
    step_pressed.set()
    stepped.wait(10)  # a hang fails below, with the sim time it stopped at
    held = core.now()
    with cond:
        core.resume()
        cond.notify_all()
    worker.join(timeout=10)
    assert held == 0.2 and woke == [0.1, 0.2], f"the step ended with the cycle it landed in (sim time {held})"
    assert control.paused is False
