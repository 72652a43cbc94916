"""``--from DIR@SECONDS``: a trial started from the state a recorded trial saved.

:func:`plan` checks the folder's manifest (manifest.py), finds the state at or before the time (refusing a time
outside the log with the range there is, and a trial without states) and reads it, its ``.bullet`` and the two
journals, each checked against the manifest before anything parses it (a file that does not match is refused,
named); :func:`restore` puts it into the freshly opened robot (refusing another robot, map, crowd, seed, hil version
or merge setting, naming what differs), replays the crowd its ticks, then re-simulates the bus cycles between the
state and the time from the journal of commands, so any time of the log can be given. The controller then starts
fresh on the restored robot, its clock reading the restored time.
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import files
from .manifest import Manifest


class ResumeError(files.StatesError):
    """The state asked for cannot be used here; the message says why (what differs, the range there is, the file
    that does not match the manifest). A ValueError: bad input, reported by the command as one line."""


@dataclass(frozen=True)
class Plan:
    """A state found and read whole: every byte of it checked against the folder's manifest (manifest.py) before
    any of it was parsed, so nothing here is read from ``states/`` again (a resume may write its own states into
    the very folder it started from)."""

    folder: Path
    t: float  # the time asked for
    state_path: Path
    state: dict[str, Any]
    bullet: bytes  # pybullet's part, handed to it only through a private copy (restore)
    commands: list  # the journal of commands, whole
    ticks: list  # the journal of crowd ticks, whole
    trial: dict[str, Any]  # the manifest's trial fingerprint (seed, spec, controller)

    @property
    def state_t(self) -> float:
        return float(self.state["t"])

    def describe(self) -> dict[str, Any]:
        return {"dir": str(self.folder), "t": self.t, "state_t": self.state_t, "state": self.state_path.name}


def parse(text: str) -> tuple[Path, float]:
    """``DIR@SECONDS`` as (folder, seconds); ResumeError saying what is expected."""
    folder, at, seconds = str(text).rpartition("@")
    try:
        t = float(seconds)
    except ValueError:
        t = math.nan
    if not at or not folder or not math.isfinite(t):
        what = f"{seconds!r} is not a time in seconds; " if at and folder else ""
        raise ResumeError(f"--from {text}: {what}expected DIR@SECONDS, a trial folder and a time of its log "
                          f"(e.g. {folder or 'trials/demo'}@7.5)")
    return Path(folder), t


def plan(text: str) -> Plan:
    """The state at or before the time, read and checked against the folder's manifest (ResumeError naming the
    file that does not match, the range there is, or what is missing)."""
    folder, t = parse(text)
    try:
        return _plan(text, folder, t, Manifest.load(folder / files.STATES))
    except ResumeError:
        raise
    except files.StatesError as exc:
        raise ResumeError(f"--from {text}: {exc}") from None


def _plan(text: str, folder: Path, t: float, manifest: Manifest) -> Plan:
    kept = sorted(manifest.states, key=lambda e: e["t"])
    if not kept:
        raise ResumeError(f"--from {text}: {folder} saved no state")
    start = kept[0]["t"]
    end = manifest.doc.get("log_end_s")
    if end is None:
        end = kept[-1]["t"]
    if not start - 1e-9 <= t <= end + 1e-9:
        raise ResumeError(f"--from {text}: {t:g} s is outside the log of {folder}, which covers {start:g} .. "
                          f"{end:g} s")
    entry = [e for e in kept if e["t"] <= t + 1e-9][-1]
    path = manifest.folder / f"{entry['file']}.msgpack"
    state = files.unpack_state(manifest.read(path.name), path)
    bullet = manifest.read(f"{entry['file']}.bullet")  # checked before pybullet ever sees it
    _check_state(state, entry, path)
    commands = files.unpack_stream(manifest.journal(files.COMMANDS), manifest.folder / files.COMMANDS)
    ticks = files.unpack_stream(manifest.journal(files.CROWD_TICKS), manifest.folder / files.CROWD_TICKS)
    for name, journal, needed in ((files.COMMANDS, commands, state["commands"]),
                                  (files.CROWD_TICKS, ticks, state["crowd_ticks"])):
        if len(journal) < needed:
            raise files.StatesError(f"{manifest.folder / name} holds {len(journal)} entries, the state at "
                                    f"{entry['t']:g} s needs {needed}")
    return Plan(folder, t, path, state, bullet, commands, ticks, manifest.doc["trial"])


def _check_state(state: dict[str, Any], entry: dict[str, Any], path: Path) -> None:
    """What the resume reads of a state, there and of its kind (the manifest vouches for the bytes; this, that
    they were a state of this time)."""
    for key, kind in (("t", (int, float)), ("world", dict), ("host", dict), ("task", dict), ("fingerprint", dict),
                      ("commands", int), ("crowd_ticks", int)):
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise files.StatesError(f"{path}: field {key}: missing or of the wrong kind ({state.get(key)!r:.40})")
    if abs(state["t"] - entry["t"]) > 1e-9:
        raise files.StatesError(f"{path} is the state of t={state['t']:g} s, the manifest lists it at "
                                f"{entry['t']:g} s")


def check(plan_: Plan, fingerprint: dict[str, Any], seed: Any = None) -> None:
    differ = files.differences(plan_.state["fingerprint"], fingerprint)
    if seed is not None and plan_.trial.get("seed") is not None and plan_.trial["seed"] != seed:
        differ.append(f"seed ({plan_.trial['seed']!r} in the state, {seed!r} here)")
    if differ:
        raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the state is of another world: "
                          + "; ".join(differ))


def restore(plan_: Plan, robot: Any, embodied: Any) -> list:
    """Put the state into ``robot`` (just opened, its world not yet stepped) and re-simulate up to the time;
    returns the crowd ticks of the journal up to the state (the resumed trial's own journal starts with them)."""
    from hil.firmware_sim.embodied.state import StateError, restore_parts, restore_world

    from .host import restore_host

    state = plan_.state
    ticks = plan_.ticks[:state["crowd_ticks"]]
    try:
        with embodied.device.lock, tempfile.TemporaryDirectory(prefix="hil-state-") as private:
            bullet = Path(private) / "state.bullet"  # the checked bytes, where nobody else writes
            bullet.write_bytes(plan_.bullet)
            restore_world(embodied, state["world"], str(bullet))
    except StateError as exc:
        raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: {exc}") from None
    crowd = embodied.crowd
    if state.get("crowd") is not None:
        if crowd is None:
            raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the state has a crowd and this trial has none")
        _restore_crowd(plan_, crowd.client, ticks)
    _set_clock(robot, embodied, plan_.state_t)
    restore_parts(embodied, state["world"]["parts"])  # what opening the robot read and wrote, undone
    restore_host(robot, state["host"])
    resimulate(robot, plan_.commands, plan_.state_t, plan_.t)
    return ticks


def _restore_crowd(plan_: Plan, client: Any, ticks: list) -> None:
    """The crowd process brought to the state's tick by replaying the journal's ticks (none for a state taken
    before the crowd's first tick: then the fresh crowd is the state's), its digest compared with the saved one."""
    from hil.bridge.crowd_state import crowd_state, replay

    done = replay(client, ticks) if ticks else crowd_state(client)
    if done["digest"] != plan_.state["crowd"].get("digest"):
        raise ResumeError(f"--from {plan_.folder}@{plan_.t:g}: the crowd did not come back to its saved state "
                          f"(at t={done['t']:g} s its digest differs)")


def _set_clock(robot: Any, embodied: Any, t: float) -> None:
    """The lockstep clock reads the restored time (it read 0: nobody has slept yet)."""
    core, _ = embodied.lockstep()
    core.time_s = t
    clock = robot.clock
    while hasattr(clock, "inner"):
        clock = clock.inner
    if hasattr(clock, "resume_at"):
        clock.resume_at(t)


def resimulate(robot: Any, commands: list, from_s: float, to_s: float) -> int:
    """The bus cycles of the original from ``from_s`` (the state's time, its cycle included) up to before
    ``to_s``, each at its time with the commands the original had set and the mode it showed (``commands``: the
    journal); then the clock to ``to_s``."""
    if to_s <= from_s + 1e-12:
        return 0
    cycles = [entry for entry in commands if from_s - 1e-9 <= entry[0] < to_s - 1e-9]
    for t, changes, *mode in cycles:
        robot.clock.sleep_until(t)
        for name, raw in changes.items():
            robot.joints[name].replay_command(raw)
        if mode:
            robot.mode = mode[0]
        robot.cycle()
    robot.clock.sleep_until(to_s)
    return len(cycles)
