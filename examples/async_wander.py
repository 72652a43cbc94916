"""Wander with asyncio: a controller written as a robot program off the simulator would be, with no hil calls
for time. An asyncio loop paces the bus cycles (``asyncio.sleep``); a planner thread takes the ring's ranges from
a ``queue.Queue`` (``get(timeout=0.1)``) and answers a turn rate, which the loop waits for with
``threading.Event.wait(0.05)``; the head nods on ``datetime.now()``. Under ``clock: sim`` every one of those waits
and reads follows the simulator's clock (docs/CLOCKS.md), so the trial runs faster than real time and gives the
same log every time; on the real robot the same file runs on wall time.

    hil trial examples/async_wander.py --map lab --duration 20
    hil run examples/async_wander.py --profile config/profiles/virtual.yaml --bus "sim://commbot?clock=sim&map=lab"
"""
from __future__ import annotations

import asyncio
import datetime
import math
import queue
import threading

HZ = 10.0
CRUISE_M_S = 0.3
TURN_RAD_S = 0.8
STOP_M = 0.7  # something this close ahead: turn on the spot
AHEAD = math.radians(35)
NOD_RAD = 0.3
HEAD = "head.neck_yaw"


def turn_for(front: float | None, left: float | None, right: float | None) -> tuple[float, float]:
    """(v, w) for the nearest ranges ahead, left and right (None: nothing seen): away from the nearer side."""
    if front is None or front > 2 * STOP_M:
        return CRUISE_M_S, 0.0
    nearer_left = (math.inf if left is None else left) < (math.inf if right is None else right)
    away = -TURN_RAD_S if nearer_left else TURN_RAD_S
    return (0.0 if front < STOP_M else CRUISE_M_S / 2), away


def planner(asks: queue.Queue, answers: queue.Queue, answered: threading.Event, stop: threading.Event) -> None:
    """The planner thread: one answer per question; says when it had nothing to do for 0.1 s (idle counts)."""
    idle = 0
    while not stop.is_set():
        try:
            ranges = asks.get(timeout=0.1)
        except queue.Empty:
            idle += 1
            continue
        answers.put((*turn_for(*ranges), idle))
        answered.set()


async def wander(robot) -> None:
    ring, base, head = robot.sensors["ring"], robot.base, robot.joints[HEAD]
    asks, answers, answered, stop = queue.Queue(), queue.Queue(), threading.Event(), threading.Event()
    thread = threading.Thread(target=planner, args=(asks, answers, answered, stop), name="planner", daemon=True)
    thread.start()
    started, late = datetime.datetime.now(), 0
    try:
        while True:
            robot.cycle()
            asks.put((ring.nearest(-AHEAD, AHEAD), ring.nearest(AHEAD, 3 * AHEAD), ring.nearest(-3 * AHEAD, -AHEAD)))
            if answered.wait(0.05):
                answered.clear()
                v, w, idle = answers.get_nowait()
                base.drive(v, w)
            else:
                late += 1  # the planner did not answer within 0.05 s: keep going as before
            elapsed = (datetime.datetime.now() - started).total_seconds()
            head.target = NOD_RAD * math.sin(elapsed)
            await asyncio.sleep(1.0 / HZ)
    finally:
        stop.set()
        thread.join(timeout=1.0)


def main(robot) -> None:
    asyncio.run(wander(robot))


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/virtual.yaml") as opened:
        main(opened)
