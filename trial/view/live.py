"""Attaching the viewer to a running trial: its messages as they are written, and its clock under the page's control.

:class:`LiveTrial` is what ``Trial.run`` is given: ``listeners`` (the recorder hands it every message it writes:
the viewer shows exactly what the log gets) and ``hooks`` (after every bus cycle: where it finds the trial's
clock and measures the real-time factor).

Pause / step / resume act on the lockstep master (:class:`bridge.lockstep.LockstepCore`): paused, it does not
advance time and wakes nobody, so the controller's next sleep simply waits; a step lets one advance through
(to the next wake, one controller tick). Nothing but wall time passes while paused, so a paused trial writes
the same log as an unpaused one (tested). A trial on the real clock, or on a clock served by another process,
cannot be paused from here: the page says so.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any

from hil.runtime.clock.base import WALL

from .timeline import Timeline

RTF_WINDOW_S = 2.0  # wall seconds the real-time factor is measured over
STEP_ADVANCES = 1_000_000  # a step's advances: enough for any wakes before the robot's next cycle ends


class SimControl:
    """Pause, step and resume a trial on the in-process lockstep clock (bound at the trial's first bus cycle)."""

    def __init__(self, start_paused: bool = False):
        self.core: Any = None
        self.cond: Any = None
        self.available: bool | None = None  # None until the trial's clock is known
        self.why_not = ""
        self._start_paused = start_paused
        self._stepping = False  # a step runs until the robot's next bus cycle ends
        self._step_from: tuple[int, float] = (0, 0.0)  # the clock (epoch, time) when the step was pressed

    def bind(self, robot: Any) -> None:
        clock = robot.clock
        while getattr(clock, "inner", None) is not None:  # a trial's DeadlineClock over the robot's own
            clock = clock.inner
        participant = getattr(clock, "participant", None)
        core, cond = getattr(participant, "core", None), getattr(participant, "cond", None)
        if core is None or cond is None or not hasattr(core, "pause"):
            self.available = False
            kind = getattr(clock, "kind", None)
            self.why_not = ("pause needs the simulator's clock (this trial runs on the real clock)" if kind == "real"
                            else "pause needs the simulator's clock in this process")
            return
        self.core, self.cond, self.available = core, cond, True
        if self._start_paused:
            self.pause()

    @property
    def paused(self) -> bool:
        return bool(self.core is not None and self.core.paused)

    def pause(self) -> None:
        if self.core is None:
            self._start_paused = True
            return
        with self.cond:
            self.core.pause()
            self.cond.notify_all()

    def resume(self) -> None:
        self._start_paused = False
        if self.core is None:
            return
        with self.cond:
            self._stepping = False
            self.core.resume()
            self.cond.notify_all()

    def step(self) -> None:
        """Run the trial to the end of its next bus cycle, then hold it again (:meth:`cycle_done`). The clock's
        next wake may be another participant's (the crowd's tick, a camera), after which nothing new is drawn: so
        a step lets advances through until the robot has cycled, not one advance.

        The step may land while the robot is in a cycle that began before it (woken, its hooks not run yet):
        that cycle's end is not the step's. A step ends at the first cycle done after time has moved past where
        it was pressed (the robot is awake mid-cycle, so time cannot move until it sleeps again)."""
        if self.core is None:
            return
        with self.cond:
            if not self.core.paused:
                self.core.pause()
            self._stepping = True
            self._step_from = (self.core.epoch, self.core.time_s)
            self.core.step(STEP_ADVANCES)
            self.cond.notify_all()

    def cycle_done(self) -> None:
        """After each bus cycle: a step ends here, once time has moved since it was pressed."""
        if not self._stepping or self.core is None:  # the usual case, without the lock (checked again under it)
            return
        with self.cond:
            if not self._stepping or (self.core.epoch, self.core.time_s) == self._step_from:
                return
            self._stepping = False
            if self.core.paused:
                self.core.pause()  # no advances left over
            self.cond.notify_all()


class LiveTrial:
    """One running trial as the viewer sees it: its timeline, its clock control, its real-time factor."""

    def __init__(self, label: str = "", start_paused: bool = False):
        self.label = label
        self.timeline = Timeline()
        self.control = SimControl(start_paused=start_paused)
        self.result: Any = None
        self.error: str | None = None
        self.done = threading.Event()
        self._samples: deque[tuple[float, float]] = deque()  # (wall, sim) after each cycle
        self._t0: float | None = None

    @property
    def listeners(self) -> tuple:
        return (self.timeline.add,)

    @property
    def taps(self) -> tuple:
        """The recorder taps that hand the cameras' pictures to the timeline (the listeners see only JSON)."""
        return (self.timeline.tap,)

    @property
    def hooks(self) -> tuple:
        return (self.after_cycle,)

    def after_cycle(self, robot: Any) -> None:
        if self.control.available is None:
            self.control.bind(robot)
            self._t0 = robot.clock.now()
        self.control.cycle_done()
        wall, sim = WALL(), robot.clock.now() - (self._t0 or 0.0)
        samples = self._samples
        samples.append((wall, sim))
        while len(samples) > 2 and wall - samples[0][0] > RTF_WINDOW_S:
            samples.popleft()

    @property
    def rtf(self) -> float | None:
        """Simulated seconds per wall second over the last couple of seconds (None before there is any)."""
        samples = list(self._samples)
        if len(samples) < 2 or self.control.paused:
            return 0.0 if self.control.paused else None
        (w0, s0), (w1, s1) = samples[0], samples[-1]
        return (s1 - s0) / (w1 - w0) if w1 > w0 else None

    @property
    def metrics(self) -> dict[str, Any] | None:
        """The finished trial's metrics as plain data (None before the end, or when it has none)."""
        result = self.result
        return result.metrics.to_dict() if result is not None and result.metrics is not None else None

    def finish(self, result: Any = None, error: str | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()
