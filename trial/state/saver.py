"""Saving a running trial's state: :class:`StateSaver`, a ``robot.before_cycle`` hook.

A state is taken *before* a bus cycle, when the world has just been advanced to the cycle's time and the
controller has set the commands that cycle will write: so a resumed robot's first cycle is the original's cycle
at that time, and a controller that keeps no state of its own goes on exactly as the original did.

Every ``every_s`` of trial time (default 5 s) a periodic state, keeping the start and the last ``retain`` (24);
the first collision, the first intimate intrusion and a failure each get a state of their own (kept). Beside the
states two journals grow: every cycle's time with the commands set since the cycle before (states/commands), and
every tick the world sent its crowd (states/crowd_ticks): from any state, any later time of the log can be reached
again by re-simulating (resume.py), and the crowd process comes back by replaying its ticks.
"""
from __future__ import annotations

import errno

import math
from pathlib import Path
from typing import Any

from . import files
from .host import save_host
from .manifest import MANIFEST, ManifestWriter

DEFAULT_EVERY_S = 5.0
DEFAULT_RETAIN = 24
INTIMATE_M = 0.45  # trial/report/metrics.py PROXEMIC_ZONES: an intimate intrusion
ROBOT_RADIUS_M = 0.3



NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)  # a full disk, a file-size limit, a quota
MIN_FREE_BYTES = 1 << 20  # the first state's room (a commbot state is ~150 kB: its .bullet and its msgpack)


def clear(folder: Path) -> None:
    """What an earlier trial saved into this ``states/`` (a trial run again into its folder): the manifest first, so
    no moment leaves one that vouches for files this trial replaces; the journals would otherwise be appended to."""
    for pattern in (MANIFEST, files.INDEX, files.COMMANDS, files.CROWD_TICKS, "state_*.msgpack", "state_*.bullet",
                    "*.tmp"):
        for path in sorted(folder.glob(pattern)):
            if path.is_file() or path.is_symlink():
                path.unlink()


class StateSaver:
    """Saves ``robot``'s world (an in-process virtual robot, ``embodied``) into ``folder/states``."""

    def __init__(self, folder: Path, robot: Any, embodied: Any, fingerprint: dict[str, Any], *,
                 every_s: float = DEFAULT_EVERY_S, retain: int = DEFAULT_RETAIN, task_state=None,
                 resumed: dict[str, Any] | None = None, roundtrip_start: bool = True,
                 trial: dict[str, Any] | None = None):
        from hil.firmware_sim.embodied.state import history_of

        self.dir = Path(folder) / files.STATES
        self.dir.mkdir(parents=True, exist_ok=True)
        clear(self.dir)
        self.manifest = ManifestWriter(self.dir, trial or {})
        self.robot, self.embodied, self.every_s, self.retain = robot, embodied, every_s, retain
        self.task_state = task_state or (lambda: {})
        self.index: dict[str, Any] = {"fingerprint": fingerprint, "states": [], "commands": 0, "crowd_ticks": 0,
                                      "resumed_from": resumed, "log_end_s": None}
        self.commands: list = []  # not yet written
        self.crowd_ticks: list = []
        self._commands_total = 0
        self._ticks_total = 0
        self._last_raw: dict[str, Any] = {}
        self._last_mode = getattr(robot, "mode", None)
        self._next_s = 0.0
        self._pending: list[str] = []  # events seen, saved at the next cycle
        self._seen: set[str] = set()
        self._robot_xy: tuple[float, float] | None = None
        self.saved_s = 0.0  # wall time spent saving (the bench)
        # a trial resumed at a time its original saved no state at (re-simulated there) keeps its world as the
        # original had it: its start state is saved without the round trip (resuming from that one state agrees
        # with this run to ~1e-14, not bit for bit; firmware_sim/embodied/state.py)
        self.roundtrip_start = roundtrip_start
        history_of(embodied)
        crowd = embodied.crowd
        if crowd is not None:
            self._journal_ticks(crowd)

    # --- journals ------------------------------------------------------------------------------------------------
    def preload(self, commands: list, crowd_ticks: list) -> None:
        """A resumed trial's journals start with the original's up to the restored time (so its own states can be
        resumed from in turn)."""
        self.commands, self.crowd_ticks = list(commands), list(crowd_ticks)
        self._commands_total, self._ticks_total = len(commands), len(crowd_ticks)
        for _, changes, *_ in commands:
            self._last_raw.update(changes)

    def _journal_ticks(self, crowd: Any) -> None:
        client = crowd.client
        tick = client.tick

        def journaled(t_s: float, robot_state: dict | None, people: list) -> Any:
            self.crowd_ticks.append([t_s, robot_state, [list(row) for row in people]])
            self._ticks_total += 1
            return tick(t_s, robot_state, people)

        client.tick = journaled

    # --- the hooks ------------------------------------------------------------------------------------------------
    stopped: str | None = None  # why saving stopped early (a full disk), None while it goes on
    why_stopped = ""
    _last_bytes = 0  # the last state's files

    def attach(self) -> StateSaver:
        self.robot.before_cycle.append(self.before_cycle)
        return self

    def before_cycle(self, robot: Any) -> None:
        self._guarded(self._before_cycle, robot)

    def save_or_stop(self, t: float, why: str) -> None:
        """A state now, unless saving has stopped; a full disk stops it (as in a cycle) rather than raising."""
        if self.stopped is None:
            self._guarded(self.save, t, why)

    def _guarded(self, write, *args: Any) -> None:
        """``write(*args)``; a full disk or a file-size limit stops the saving (other errors are raised)."""
        try:
            write(*args)
        except OSError as exc:
            if exc.errno not in NO_ROOM:
                raise
            self._no_room(exc)

    def _no_room(self, exc: OSError) -> None:
        """A full disk (or a file-size limit) stops the saving, not the trial: states are a help to retry, the
        log and the controller's run matter more (a log that fills the disk says so for itself). Nothing more is
        written into states/: its manifest stays that of the last whole state."""
        if self.before_cycle in self.robot.before_cycle:
            self.robot.before_cycle.remove(self.before_cycle)
        self.why_stopped = f"no room for saved states in {self.dir}: {exc.strerror or exc}"
        self.stopped = f"{self.why_stopped}; no more states saved"
        self.robot.note(self.stopped)

    def lost(self) -> str | None:
        """What a trial's summary says when the disk stopped the saving (None: nothing was lost)."""
        if self.stopped is None:
            return None
        kept = self.index["states"]
        if not kept:
            return f"states NOT saved ({self.why_stopped}): --from cannot start from this trial"
        return f"states saved only up to t={kept[-1]['t']:g} s ({self.why_stopped}): --from can start up to there"

    def _before_cycle(self, robot: Any) -> None:
        t = robot.clock.now()
        if not self.index["states"]:
            self.save(t, "start")
            self._next_s = (math.floor(t / self.every_s + 1e-9) + 1) * self.every_s if self.every_s else math.inf
        elif t >= self._next_s - 1e-9:
            self.save(t, "periodic")
            self._next_s = (math.floor(t / self.every_s + 1e-9) + 1) * self.every_s
        for why in self._pending:
            self.save(t, why)
        self._pending.clear()
        changes = {name: joint.command_raw for name, joint in robot.joints.items()
                   if joint.command_raw != self._last_raw.get(name, None)}
        self._last_raw.update(changes)
        entry = [t, changes]
        mode = getattr(robot, "mode", None)
        if mode != self._last_mode:  # what the robot is shown doing, logged with its state: re-simulated too
            entry.append(mode)
            self._last_mode = mode
        self.commands.append(entry)
        self._commands_total += 1

    def listener(self, topic: str, t: float, payload: dict) -> None:
        """A log listener: the first collision and the first intimate intrusion are saved at the next cycle."""
        if topic == "/robot/state":
            self._robot_xy = (payload["x"], payload["y"])
        elif topic == "/world/contacts" and payload.get("people"):
            self._event("collision")
        elif topic == "/pedestrians" and self._robot_xy is not None and "intrusion" not in self._seen:
            x, y = self._robot_xy
            for person in payload.get("people", ()):
                gap = math.hypot(person["x"] - x, person["y"] - y) - person.get("radius", 0.25) - ROBOT_RADIUS_M
                if gap < INTIMATE_M:
                    self._event("intrusion")
                    break

    def _event(self, why: str) -> None:
        if why not in self._seen:
            self._seen.add(why)
            self._pending.append(why)

    def failed(self) -> None:
        """The controller (or the world) failed: the state as it is now."""
        if "failure" not in self._seen:
            self._seen.add("failure")
            try:
                self.save_or_stop(self.robot.clock.now(), "failure")
            except Exception:  # noqa: BLE001 - a world that failed may not be savable; the log matters more
                pass

    # --- saving ---------------------------------------------------------------------------------------------------
    def save(self, t: float, why: str) -> dict[str, Any]:
        from hil.runtime.clock.base import WALL

        from hil.firmware_sim.embodied.state import save_world

        wall0 = WALL()
        self._check_room()
        name = files.state_name(t, why)
        embodied = self.embodied
        with embodied.device.lock:
            world = save_world(embodied, str(self.dir / f"{name}.bullet"),
                               roundtrip=self.roundtrip_start or why != "start")
        crowd = None
        if embodied.crowd is not None and embodied.crowd.failure is None:
            from hil.bridge.crowd_state import crowd_state

            crowd = crowd_state(embodied.crowd.client)
        self._flush()
        state = {"t": t, "why": why, "world": world, "host": save_host(self.robot), "crowd": crowd,
                 "task": self.task_state(), "commands": self._commands_total, "crowd_ticks": self._ticks_total,
                 "fingerprint": self.index["fingerprint"]}
        packed = files.write_state(self.dir, name, state)
        bullet = (self.dir / f"{name}.bullet").read_bytes()
        self.manifest.wrote(f"{name}.msgpack", packed)
        self.manifest.wrote(f"{name}.bullet", bullet)
        self._last_bytes = len(packed) + len(bullet)
        self.index["states"].append({"t": t, "file": name, "why": why})
        retired = self._retire()
        self._write_index()
        for path in retired:  # only once the manifest no longer names them
            path.unlink(missing_ok=True)
        self.saved_s += WALL() - wall0
        return state

    def _check_room(self) -> None:
        """pybullet's saveBullet writes what it can of a file on a full disk and says nothing (the round trip then
        fails with a line on stdout): so a state is written only where three of the last one fit."""
        import resource
        import shutil

        need = max(MIN_FREE_BYTES, 3 * self._last_bytes)
        free = shutil.disk_usage(self.dir).free
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if free < need or (limit != resource.RLIM_INFINITY and limit < need):
            room = f"{free:,} bytes free" if free < need else f"a file-size limit of {limit:,} bytes"
            raise OSError(errno.ENOSPC, f"{room}, a state needs about {need:,}")

    def _retire(self) -> list[Path]:
        """Periodic states beyond the last ``retain``, out of the index and the manifest; their files to delete."""
        periodic = [e for e in self.index["states"] if e["why"] == "periodic"]
        retired = []
        for entry in periodic[:-self.retain] if self.retain else []:
            self.index["states"].remove(entry)
            for suffix in (".msgpack", ".bullet"):
                self.manifest.dropped(f"{entry['file']}{suffix}")
                retired.append(self.dir / f"{entry['file']}{suffix}")
        return retired

    def _flush(self) -> None:
        for name, items in ((files.COMMANDS, self.commands), (files.CROWD_TICKS, self.crowd_ticks)):
            self.manifest.appended(name, files.append_stream(self.dir / name, items))
        self.commands, self.crowd_ticks = [], []
        self.index["commands"], self.index["crowd_ticks"] = self._commands_total, self._ticks_total

    def _write_index(self) -> None:
        """index.json (for people, the viewer and report.html's retry lines), then the manifest (what a resume
        trusts), the last write of a save."""
        files.write_index(self.dir, self.index)
        self.manifest.write(self.index)

    def close(self, log_end_s: float | None) -> None:
        """The journals' rest and the log's end (a later ``--from`` may ask for any time up to it)."""
        if self.before_cycle in self.robot.before_cycle:
            self.robot.before_cycle.remove(self.before_cycle)
        if self.stopped is None:  # after the disk refused a write, nothing more: the manifest stays as it was
            self._guarded(self._close, log_end_s)

    def _close(self, log_end_s: float | None) -> None:
        self._flush()
        self.index["log_end_s"] = log_end_s
        self._write_index()
