"""``--from DIR@SECONDS``: a trial started from the state a recorded trial saved (issue 27).

:func:`plan` finds the state at or before the time (refusing a time outside the log with the range there is, and
a trial without states); :func:`restore` puts it into the freshly opened robot (refusing another robot, map, crowd,
hil version or merge setting, naming what differs), replays the crowd its ticks, then re-simulates the bus cycles
between the state and the time from the journal of commands, so any time of the log can be given. The controller
then starts fresh on the restored robot, its clock reading the restored time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import files


class ResumeError(ValueError):
    """The state asked for cannot be used here; the message says why (what differs, the range there is). A
    ValueError: bad input, reported by the command as one line."""


@dataclass(frozen=True)
class Plan:
    folder: Path
    t: float  # the time asked for
    state_path: Path
    state: dict[str, Any]

    @property
    def state_t(self) -> float:
        return float(self.state["t"])

    def describe(self) -> dict[str, Any]:
        return {"dir": str(self.folder), "t": self.t, "state_t": self.state_t, "state": self.state_path.name}


def parse(text: str) -> tuple[Path, float]:
    folder, _, seconds = str(text).rpartition("@")
    return Path(folder), float(seconds)


def plan(text: str) -> Plan:
    folder, t = parse(text)
    states = folder / files.STATES
    if not (states / files.INDEX).exists():
        raise ResumeError(f"--from {text}: {folder} has no saved states ({states}/{files.INDEX} is missing; "
                          "trials save them when recorded with --state-every > 0)")
    index = files.read_index(states)
    kept = sorted(index["states"], key=lambda e: e["t"])
    if not kept:
        raise ResumeError(f"--from {text}: {folder} saved no state")
    start = kept[0]["t"]
    end = index.get("log_end_s")
    if end is None:
        end = kept[-1]["t"]
    if not start - 1e-9 <= t <= end + 1e-9:
        raise ResumeError(f"--from {text}: {t:g} s is outside the log of {folder}, which covers {start:g} .. "
                          f"{end:g} s")
    entry = [e for e in kept if e["t"] <= t + 1e-9][-1]
    path = states / f"{entry['file']}.msgpack"
    return Plan(folder, t, path, files.read_state(path))


def check(plan_: Plan, fingerprint: dict[str, Any]) -> None:
    differ = files.differences(plan_.state["fingerprint"], fingerprint)
    if differ:
        raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the state is of another world: "
                          + "; ".join(differ))


def restore(plan_: Plan, robot: Any, embodied: Any) -> list:
    """Put the state into ``robot`` (just opened, its world not yet stepped) and re-simulate up to the time;
    returns the crowd ticks of the journal up to the state (the resumed trial's own journal starts with them)."""
    from hil.bridge.crowd_state import replay
    from hil.firmware_sim.embodied.state import StateError, restore_parts, restore_world

    from .host import restore_host

    state, states = plan_.state, plan_.folder / files.STATES
    bullet = states / f"{plan_.state_path.stem}.bullet"
    ticks = files.read_stream(states / files.CROWD_TICKS, state["crowd_ticks"])
    try:
        with embodied.device.lock:
            restore_world(embodied, state["world"], str(bullet))
    except StateError as exc:
        raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: {exc}") from None
    crowd = embodied.crowd
    if state.get("crowd") is not None:
        if crowd is None:
            raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the state has a crowd and this trial has none")
        if len(ticks) != state["crowd_ticks"]:
            raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the crowd's journal has {len(ticks)} ticks, the "
                              f"state needs {state['crowd_ticks']}")
        done = replay(crowd.client, ticks)
        if done["digest"] != state["crowd"]["digest"]:
            raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the crowd did not come back to its saved state "
                              f"(at t={done['t']:g} s its digest differs)")
    _set_clock(robot, embodied, plan_.state_t)
    restore_parts(embodied, state["world"]["parts"])  # what opening the robot read and wrote, undone
    restore_host(robot, state["host"])
    resimulate(robot, states, plan_.state_t, plan_.t)
    return ticks


def _set_clock(robot: Any, embodied: Any, t: float) -> None:
    """The lockstep clock reads the restored time (it read 0: nobody has slept yet)."""
    core, _ = embodied.lockstep()
    core.time_s = t
    clock = robot.clock
    while hasattr(clock, "inner"):
        clock = clock.inner
    if hasattr(clock, "resume_at"):
        clock.resume_at(t)


def resimulate(robot: Any, states: Path, from_s: float, to_s: float) -> int:
    """The bus cycles of the original from ``from_s`` (the state's time, its cycle included) up to before
    ``to_s``, each at its time with the commands the original had set; then the clock to ``to_s``."""
    if to_s <= from_s + 1e-12:
        return 0
    cycles = [entry for entry in files.read_stream(states / files.COMMANDS)
              if from_s - 1e-9 <= entry[0] < to_s - 1e-9]
    for t, changes in cycles:
        robot.clock.sleep_until(t)
        for name, raw in changes.items():
            robot.joints[name].replay_command(raw)
        robot.cycle()
    robot.clock.sleep_until(to_s)
    return len(cycles)
