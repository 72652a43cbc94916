"""Every wait and time read of a Python controller follows the simulator's clock under ``clock: sim``
(runtime/clock/waits.py, wait_patches.py), and a trial whose simulated time stands still ends, naming where the
controller waits (runtime/clock/stall.py).

The clock here is the real lockstep core (bridge/lockstep.py) with a recording world; a wait that followed the
wall clock instead would end at another simulated time than the one asserted (or never, for a thread that must
run before time may move)."""
from __future__ import annotations

import asyncio
import datetime
import os
import queue
import select
import selectors
import threading
import time
from pathlib import Path

import pytest

from hil.bridge.lockstep import LocalParticipant, LockstepCore
from hil.runtime.clock.patch import patched
from hil.runtime.clock.sim import LockstepClock
from hil.trial import Trial
from hil.trial.record.log import read_log

ROOT = Path(__file__).resolve().parents[1]


class World:
    """The master's advance callback: remembers every time it was stepped to."""

    def __init__(self):
        self.advances: list[float] = []

    def __call__(self, t: float) -> None:
        self.advances.append(t)


def sim_clock() -> LockstepClock:
    core = LockstepCore(World())
    return LockstepClock(LocalParticipant(core, threading.Condition(), "controller"), "controller")


def test_timeouts_of_threading_queue_and_select_are_simulated_seconds():
    clock = sim_clock()
    read_end, write_end = os.pipe()
    try:
        with patched(clock):
            assert threading.Event().wait(0.05) is False
            assert clock.now() == pytest.approx(0.05)
            with pytest.raises(queue.Empty):
                queue.Queue().get(timeout=0.1)
            assert clock.now() == pytest.approx(0.15)
            held = threading.Lock()
            held.acquire()
            assert held.acquire(timeout=0.2) is False
            assert clock.now() == pytest.approx(0.35)
            assert select.select([read_end], [], [], 0.25) == ([], [], [])
            assert clock.now() == pytest.approx(0.60)
            os.write(write_end, b"x")
            assert select.select([read_end], [], [], 5.0)[0] == [read_end], "data already there: at once"
            with selectors.DefaultSelector() as chosen:
                chosen.register(read_end, selectors.EVENT_READ)
                assert len(chosen.select(3.0)) == 1
            assert clock.now() == pytest.approx(0.60), "no time passed for data that was there"
            assert time.process_time is not time.monotonic and time.process_time() > 0, "CPU time is left alone"
    finally:
        os.close(read_end)
        os.close(write_end)
        clock.close()


def test_threads_of_a_controller_are_one_participant():
    """Time moves only when every thread waits: a helper's work ends the main thread's wait at the simulated
    time it was done, and a join or a lock with a timeout ends at its own simulated deadline."""
    clock = sim_clock()
    with patched(clock):
        done, seen = threading.Event(), {}

        def helper() -> None:
            time.sleep(0.3)
            seen["helper"] = time.monotonic()
            done.set()

        worker = threading.Thread(target=helper)
        worker.start()
        assert done.wait(10.0) is True
        assert clock.now() == pytest.approx(0.3) and seen["helper"] == pytest.approx(0.3)
        worker.join()

        lock, slow = threading.Lock(), threading.Event()

        def holder() -> None:
            with lock:
                slow.set()
                time.sleep(2.0)

        keeper = threading.Thread(target=holder)
        keeper.start()
        slow.wait()
        assert lock.acquire(timeout=0.5) is False
        assert clock.now() == pytest.approx(0.8)
        keeper.join(timeout=0.1)
        assert keeper.is_alive() and clock.now() == pytest.approx(0.9)
        keeper.join()
        assert clock.now() == pytest.approx(2.3)
    clock.close()


def test_a_hand_off_between_threads_takes_no_simulated_time():
    """A main thread asks a planner thread through a queue and waits for the answer with Event.wait(0.05): the
    answer always comes at the simulated time it was asked (time never moves between a wait's end and its thread
    running again), 200 times over."""
    clock = sim_clock()
    with patched(clock):
        asks, answered, stop = queue.Queue(), threading.Event(), threading.Event()

        def planner() -> None:
            while not stop.is_set():
                try:
                    asks.get(timeout=0.1)
                except queue.Empty:
                    continue
                answered.set()

        thread = threading.Thread(target=planner)
        thread.start()
        late = []
        for k in range(200):
            asks.put(k)
            if not answered.wait(0.05):
                late.append(k)
            answered.clear()
            time.sleep(0.01)
        stop.set()
        thread.join()
        assert late == [] and clock.now() == pytest.approx(2.09), "the planner ends at its last get's timeout"
    clock.close()


def test_asyncio_and_datetime_follow_the_clock():
    clock = sim_clock()
    with patched(clock):
        start = datetime.datetime.now()
        utc_start = datetime.datetime.utcnow()

        async def paced() -> float:
            loop = asyncio.get_running_loop()
            began = loop.time()
            for _ in range(10):
                await asyncio.sleep(0.1)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.Event().wait(), 0.5)
            slept = await asyncio.to_thread(lambda: time.sleep(0.25) or time.monotonic())  # the executor's thread
            assert slept == pytest.approx(1.75)
            return loop.time() - began

        assert asyncio.run(paced()) == pytest.approx(1.75)
        assert clock.now() == pytest.approx(1.75)
        assert (datetime.datetime.now() - start).total_seconds() == pytest.approx(1.75, abs=1e-5)
        assert (datetime.datetime.utcnow() - utc_start).total_seconds() == pytest.approx(1.75, abs=1e-5)
    clock.close()
    assert abs((datetime.datetime.now() - start).total_seconds()) < 3600, "the wall clock is back"


def _messages(folder: Path) -> dict[str, list]:
    log = read_log(folder / "trial.mcap")
    return {topic: [(m.t, m.data) for m in messages] for topic, messages in log.messages.items()}


def test_an_asyncio_controller_gives_the_same_log_twice(tmp_path):
    """examples/async_wander.py: asyncio.sleep, Event.wait(0.05), queue.get(timeout=0.1), datetime.now()."""
    runs = [Trial(ROOT / "examples" / "async_wander.py", map="lab", duration=3, camera_rate=0, stall_s=20)
            .run(tmp_path / name) for name in ("a", "b")]
    for result in runs:
        assert result.ok and result.stopped == "duration" and result.sim_s == pytest.approx(3.0), result.error
    first, second = _messages(tmp_path / "a"), _messages(tmp_path / "b")
    assert first == second
    poses = [data["pose"] if "pose" in data else data for _, data in first["/robot/state"]]
    assert poses[0] != poses[-1], "the controller drove the robot"


def _stalled(tmp_path: Path, source: str) -> tuple:
    controller = tmp_path / "stuck.py"
    controller.write_text(source)
    result = Trial(controller, duration=10, camera_rate=0, stall_s=2).run()
    assert result.status == "failed" and result.traceback is None
    return result.error, controller


def test_a_controller_blocked_outside_the_clock_is_reported_with_where_it_waits(tmp_path):
    error, controller = _stalled(tmp_path, (
        "import os, time\n"
        "def main(robot):\n"
        "    readable, _ = os.pipe()\n"
        "    for _ in range(3):\n"
        "        robot.cycle()\n"
        "        time.sleep(0.1)\n"
        "    os.read(readable, 1)\n"))
    assert error.startswith("ControllerStalled: the simulator's time stood still at 0.300 s for 2 s")
    assert "blocked outside the simulator's clock, in read on fd" in error and "(pipe:[" in error
    assert f"{controller}:7 in main: os.read(readable, 1)" in error
    assert "Traceback" not in error


def test_a_controller_waiting_for_ever_on_the_clock_is_reported(tmp_path):
    error, controller = _stalled(tmp_path, (
        "import socket, threading\n"
        "def main(robot):\n"
        "    mine, theirs = socket.socketpair()\n"
        "    threading.Thread(target=mine.recv, args=(1,), name='listener', daemon=True).start()\n"
        "    threading.Event().wait()\n"))
    assert "thread 'MainThread' waits on the simulator's clock in threading.Lock.acquire with no timeout" in error
    assert f"{controller}:5 in main: threading.Event().wait()" in error
    assert "thread 'listener' is blocked outside the simulator's clock, in recvfrom on fd" in error
    assert "(socket:[" in error


def test_a_stall_in_a_trial_run_off_the_main_thread_is_reported(tmp_path):
    """A sweep's worker or a viewer runs its trial in another thread: no signal reaches it, the stall is raised
    there when it next runs Python code (here: in its endless wait on the clock)."""
    results = []
    controller = tmp_path / "stuck.py"
    controller.write_text("import queue\ndef main(robot):\n    queue.Queue().get()\n")
    runner = threading.Thread(target=lambda: results.append(Trial(controller, duration=10, camera_rate=0,
                                                                  stall_s=2).run()))
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive() and results[0].status == "failed" and results[0].traceback is None
    assert "thread 'MainThread'" not in results[0].error, "the trial's own thread is named, not the main one"
    assert f"{controller}:3 in main: queue.Queue().get()" in results[0].error
