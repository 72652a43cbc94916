"""Who steps the crowd when someone else owns time (the world over the bridge): a script plays on that time.

Standalone, :meth:`crowd.script.Scenario.run_script` steps the sim itself. Served, the world's ticks decide how
far the crowd steps, so the script becomes a generator (:meth:`Scenario.play`) that takes its turn before each
step: ``run 5s`` lasts 5 s of the world's time, ``wait kid arrived`` waits on the world's time too. When the
script ends (or fails: the error names its line) the crowd goes on as the script left it; the world is told in
the next reply, together with the lines that ran (``script`` events), so the trial log shows what was staged when.
A script that ends at an ``end`` line is ``ended`` rather than ``done``, and every reply after says when
(``script_end_t``, the crowd time of the line): a trial playing it ends there.
"""
from __future__ import annotations

import sys
from typing import Iterator

from .script import Command, ScriptError
from .sim import CrowdSim


class Stepper:
    """``step()`` = let the script (if any) run its lines up to its next step, then one crowd step."""

    def __init__(self, sim: CrowdSim, log=None) -> None:
        self.sim = sim
        self.player: Iterator[Command] | None = None
        self.state = "none"
        self.error: str | None = None
        self.error_line = 0  # the script line that failed (0: not known)
        self.end_t: float | None = None  # the crowd time at which the script's ``end`` line ran
        self._events: list[dict] = []
        self._log = log or (lambda text: print(text, file=sys.stderr, flush=True))

    def start(self, player: Iterator[Command]) -> None:
        """Play ``player`` (from :meth:`Scenario.play`, with ``on_line=self.line_ran``) from the next step on."""
        self.player, self.state, self.error = player, "playing", None

    def line_ran(self, cmd: Command) -> None:
        """``on_line`` for :meth:`Scenario.play`: note a line that has run, for the next reply."""
        self._events.append({"t": self.sim.time_s, "line": cmd.line, "text": cmd.text})
        if cmd.op == "end":
            self.end_t = self.sim.time_s

    def step(self) -> None:
        if self.player is not None:
            self._advance()
        self.sim.step()

    def _advance(self) -> None:
        try:
            next(self.player)
        except StopIteration:
            self.player, self.state = None, "done" if self.end_t is None else "ended"
            how = " at its 'end' line: a trial playing it ends here" if self.end_t is not None else "; the crowd goes on"
            self._log(f"crowd: script ended at t={self.sim.time_s:g} s{how}")
        except ScriptError as exc:
            self.player, self.state, self.error, self.error_line = None, "failed", str(exc), int(exc.line or 0)
            self._log(f"crowd: script stopped: {exc}")

    def drain(self) -> dict:
        """What to add to the next reply: ``script`` (lines run since the last drain), its state, its error (and
        the line that failed), the time of its ``end`` line."""
        out: dict = {}
        if self.state != "none":
            out = {"script": self._events, "script_state": self.state}
            if self.end_t is not None:
                out["script_end_t"] = self.end_t
            if self.error:
                out["script_error"], out["script_error_line"] = self.error, self.error_line
        self._events = []
        return out
