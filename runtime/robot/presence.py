"""Parts that come and go while the robot runs: lost after K missed cycles, found again, re-armed.

A loose connector, a brown-out or a servo that rebooted must not end the run. The bus cycle (cycle.py) asks
this module to do its read (:meth:`BusWatch.read`): a part whose slot is missing counts one miss per cycle (after
the host's own retries, so one corrupted reply is not a miss), and the others' values are read again without it
in the same cycle. After ``lost_after_misses`` consecutive misses (the profile's, default 3) the part is *lost*:

- it leaves the cycle's read; its joints say ``available == False`` and targets set on them are held (not sent)
  with one note per joint; its sensors read None;
- a lost wheel motor stops the base: every wheel's velocity goes to 0 (the other wheel would turn the robot on
  the spot) and ``robot.base.halted`` says why until the wheel is back;
- ``robot.parts_lost`` lists it, a :class:`PartEvent` goes to ``robot.part_events`` and ``robot.on_change``.

After each cycle (:meth:`Presence.after_cycle`, called by ``Robot.cycle``) at most one ping goes out, and only in
the cycle's spare time (what is left of the tick, when the loop knows it) or, when there never is any, at most once
per :data:`PING_FALLBACK_S` and within :data:`PING_BUDGET`. A ping is charged what it costs the robot's clock
(:meth:`Presence.ping_cost_s`): an in-process bus costs nothing, nor does any bus under the simulator's lockstep
clock (simulated time waits for the robot), so there a lost part is pinged every cycle; on the real clock a
process peer's pty costs its timeout and latency. The lost IDs in turn, and every ``rescan_s``
a broadcast ping for parts plugged in since (runtime.robot.adoption). A lost part that answers with the same
descriptor (CPC hash, or model number for a plain servo) is re-armed as the runtime had set it -- torque off,
the limits, gains, watchdog and profile registers read from it at open, its operating mode, the held target,
torque on -- before it is available again, since a rebooted servo comes back with torque off and RAM defaults.
A different part at that ID is adopted like a new one.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hil.devices.control_table import TABLES_BY_MODEL
from hil.devices.control_table.cpc import CPC_BASE, CPC_HEADER_LEN, CpcHeaderError, parse_cpc_header
from hil.devices.protocol import ProtocolError

from ..bus import BusError, BusHost, BusTimeout, CorruptReply
from .joints import VELOCITY, Joint
from .part_events import BACK, EVENT_KINDS, LOST, PartEvent
from .startup import MODE_FOR

if TYPE_CHECKING:
    from .assembly import Assembly
    from .cycle import BusCycle
    from .view import RobotView

PING_FALLBACK_S = 1.0  # with no spare time in any tick, still one ping per this much clock time, at least
PING_BUDGET = 0.02  # ... and per this share of clock time at most: on the real clock a ping that waits 0.225 s (a
# process peer on a pty) goes out every 11 s, one on a wire (25 ms) every 1.25 s; the loop keeps >= 98 % of its rate
# what the runtime re-writes into a servo that comes back (read from it at open): EEPROM settings first (torque is
# off), then RAM; the operating mode comes from the joint's mode, the goal from its held target
REARM_REGISTERS = ("drive_mode", "return_delay_time", "current_limit", "velocity_limit", "max_position_limit",
                   "min_position_limit", "velocity_i_gain", "velocity_p_gain", "position_d_gain", "position_i_gain",
                   "position_p_gain", "feedforward_2nd_gain", "feedforward_1st_gain", "bus_watchdog",
                   "profile_acceleration", "profile_velocity")


class BusWatch:
    """The presence hook of one bus's cycle (``cycle.watch``): reads with misses counted, held targets noted."""

    def __init__(self, presence: Presence, bus: str, host: BusHost):
        self.presence, self.bus, self.host = presence, bus, host
        self.misses: dict[int, int] = {}  # wire ID -> consecutive cycles without an answer

    def read(self, cycle: BusCycle, items: tuple[tuple[int, int, int], ...]) -> dict[int, bytes]:
        """The cycle's Fast Bulk Read; IDs that stay silent count a miss and the rest are read again without them."""
        missed: set[int] = set()
        blocks: dict[int, bytes] = {}
        while items:
            try:
                blocks = self.host.bulk_read(items, fast=True)
                break
            except CorruptReply:
                # every attempt garbled (a noisy line): nobody is missing, this cycle just has no new values
                self.presence.corrupt_cycles += 1
                return {}
            except BusTimeout as exc:
                silent = set(exc.missing_ids) or {i for i, _, _ in items}
                missed |= silent
                items = tuple(item for item in items if item[0] not in silent)
        for wire in blocks:
            self.misses.pop(wire, None)
        for wire in sorted(missed):
            self.misses[wire] = self.misses.get(wire, 0) + 1
            if self.misses[wire] >= self.presence.misses_to_lose:
                self.misses.pop(wire)
                self.presence.lose(self.bus, wire, cycle)
        return blocks

    def held(self, cycle: BusCycle, writers: Sequence[Any]) -> None:
        self.presence.note_held(writers)


class Presence:
    """Which parts answer, for one opened robot (``robot.presence``); see the module docstring."""

    def __init__(self, robot: RobotView, *, misses_to_lose: int = 3, rescan_s: float = 2.0):
        if misses_to_lose < 1:
            raise ValueError(f"misses_to_lose must be >= 1, not {misses_to_lose}")
        self.robot = robot
        self.misses_to_lose = misses_to_lose
        self.rescan_s = rescan_s
        self.lost: dict[int, PartEvent] = {}  # part key -> its "lost" event
        self.events: list[PartEvent] = []
        self.counts: dict[str, int] = dict.fromkeys(EVENT_KINDS, 0)
        self.corrupt_cycles = 0  # cycles whose read stayed garbled after the retries (kept the previous values)
        self.on_change: list[Callable[[PartEvent], None]] = []
        self.settings: dict[int, list[tuple[int, bytes]]] = {}  # part key -> (address, bytes) to re-arm with
        self.watches: dict[str, BusWatch] = {}
        self.adopter: Callable[..., bool] | None = None  # runtime.robot.adoption.adopt, given by Robot.open
        self.refused: dict[int, str] = {}  # wire ID -> why a part found there is not adopted (not retried)
        self._held_noted: set[str] = set()
        self._next = 0  # round robin over the lost parts
        now = robot.clock.now()
        self._last_ping_s = now
        self._next_rescan_s = self._grid_after(now)

    def timers(self) -> tuple[float, float, int]:
        """When the watch last pinged, when it rescans next, and whose turn it is among the lost parts: what a
        saved start state keeps so that a rewound run pings and rescans as the first run did."""
        return self._last_ping_s, self._next_rescan_s, self._next

    def restore_timers(self, timers: tuple[float, float, int]) -> None:
        """Put back what :meth:`timers` gave."""
        self._last_ping_s, self._next_rescan_s, self._next = float(timers[0]), float(timers[1]), int(timers[2])

    # --- wiring ------------------------------------------------------------------------------------------------
    def attach(self, assembly: Assembly) -> None:
        """Hook every bus's cycle of ``assembly`` (the robot's, or the one it is about to swap to: the lost IDs
        carry over)."""
        parts = assembly.virtual.parts
        for group in assembly.groups():
            bus, host, cycle = group.name, group.host, group.cycle
            watch = self.watches.setdefault(bus, BusWatch(self, bus, host))
            watch.host = host
            cycle.watch = watch
            cycle.lost = {parts[key].wire_id for key in self.lost
                          if key in parts and (parts[key].bus or "main") == bus}

    def refuse(self, wire_ids: Sequence[int], why: str) -> None:
        """Leave the parts at ``wire_ids`` alone from now on (adoption could not take them, for ``why``)."""
        self.refused.update(dict.fromkeys(wire_ids, why))

    def forget_lost(self, keys: Sequence[int] | set[int]) -> None:
        """The parts at ``keys`` are no longer lost: another part there was adopted in their place."""
        for key in keys:
            self.lost.pop(key, None)

    def snapshot(self, keys: Sequence[int] | None = None) -> None:
        """Read what re-arming a servo writes back (REARM_REGISTERS of its control table), one read per part."""
        virtual = self.robot.virtual
        parts = {j.part_key for j in self.robot.joints.values()} if keys is None else set(keys)
        for key in sorted(parts):
            part = virtual.parts[key]
            table = TABLES_BY_MODEL.get(part.model_number)
            if table is None:
                continue
            registers = [table[name] for name in REARM_REGISTERS if name in table]
            lo = min(r.address for r in registers)
            hi = max(r.address + r.size for r in registers)
            host = self.robot.buses[part.bus or "main"]
            try:
                block = host.read(part.wire_id, lo, hi - lo)
            except (BusError, ProtocolError):
                continue  # a part that cannot be read now is re-armed with its mode, goal and torque only
            self.settings[key] = [(r.address, block[r.address - lo:r.address - lo + r.size]) for r in registers]

    # --- lost ----------------------------------------------------------------------------------------------------
    def lose(self, bus: str, wire: int, cycle: BusCycle) -> None:
        robot = self.robot
        key = self._key(bus, wire)
        if key is None or key in self.lost:
            return
        cycle.lost.add(wire)
        joints, sensors = self._handles(key)
        for joint in joints:
            joint.available = False
        for sensor in sensors:
            sensor.set_available(False)
        detail = f"id {wire} on bus {bus} stopped answering ({self.misses_to_lose} bus cycles without a reply)"
        wheels = [j for j in joints if j.mode == VELOCITY]
        base = robot.assembly.base
        if wheels and base is not None:
            why = (f"wheel {wheels[0].name} (id {wire}) is lost: the base is stopped (every wheel at 0) until it is "
                   "back")
            base.halt(why)
            detail += "; " + why
        event = self.event(LOST, key, bus, detail)
        self.lost[key] = event

    def note_held(self, writers: Sequence[Any]) -> None:
        for writer in writers:
            name = getattr(writer, "name", str(writer.part_id))
            if name not in self._held_noted:
                self._held_noted.add(name)
                self.robot.note(f"joint {name}: its part (id {writer.part_id}) is lost; the target is held, "
                                "not sent, until the part is back")

    @property
    def parts_lost(self) -> list[int]:
        return sorted(self.lost)

    # --- found again ---------------------------------------------------------------------------------------------
    def after_cycle(self, spare_s: float | None) -> None:
        """At most one ping: a lost ID in turn, else (every ``rescan_s``) a broadcast ping for new parts."""
        robot = self.robot
        now = robot.clock.now()
        rescan = now >= self._next_rescan_s
        if not self.lost and not rescan:
            return
        if not self._may_ping(spare_s, now):
            return
        self._last_ping_s = now
        if self.lost and not rescan:
            keys = sorted(self.lost)
            key = keys[self._next % len(keys)]
            self._next += 1
            part = robot.virtual.parts[key]
            host = robot.buses[part.bus or "main"]
            answer = _quiet(host, lambda: host.ping(part.wire_id))
            if answer is not None:
                self._found(key, answer[0])
            return
        self._next_rescan_s = self._grid_after(now)
        self._rescan()

    def _grid_after(self, now: float) -> float:
        """The next multiple of ``rescan_s`` on the clock after ``now``: rescans at fixed clock times, so a run
        resumed from a saved state (trial/state) pings when the original did."""
        if self.rescan_s <= 0:
            return math.inf
        return (math.floor(now / self.rescan_s + 1e-9) + 1) * self.rescan_s

    def ping_cost_s(self) -> float:
        """What one ping of a silent part costs the robot's clock: its reply timeout (plus a process peer's
        latency) in wall time, charged as the clock charges a wait (``Clock.wait_cost``: all of it on the real
        clock, nothing under the simulator's lockstep clock, which stands still while the robot waits); an
        in-process ``sim://`` bus answers at once."""
        hosts = self.robot.buses.values()
        wall = max((0.0 if h.transport.url.startswith("sim://") else h.timeout_s + h.transport.peer_latency_s
                    for h in hosts), default=0.0)
        return self.robot.clock.wait_cost(wall) if wall else 0.0

    def _may_ping(self, spare_s: float | None, now: float) -> bool:
        cost = self.ping_cost_s()
        if cost == 0.0 or (spare_s is not None and spare_s >= cost):
            return True
        return now - self._last_ping_s >= max(PING_FALLBACK_S, cost / PING_BUDGET)

    def _rescan(self) -> None:
        adopt = self.adopter  # a new part rebuilds the robot: adoption.py's work
        robot = self.robot
        for bus, host in robot.buses.items():
            replies = _quiet(host, lambda: host.ping_replies(quiet_s=0.005, max_wait_s=0.05)) or []
            known = {p.wire_id: k for k, p in robot.virtual.parts.items() if (p.bus or "main") == bus}
            quarantined = set(robot.virtual.quarantined) | set(self.refused)
            fresh = sorted({i for i, _, _ in replies if i not in known and i not in quarantined})
            for wire, model, _ in replies:
                key = known.get(wire)
                if key is not None and key in self.lost:
                    self._found(key, model)
            if fresh and adopt is not None:
                adopt(robot, self, bus, fresh)

    def _found(self, key: int, model_number: int) -> None:
        robot = self.robot
        part = robot.virtual.parts[key]
        host = robot.buses[part.bus or "main"]
        same = model_number == part.model_number and _same_descriptor(host, part)
        if same is None:
            return  # it answered the ping but not the header read: try again on a later cycle
        if not same:
            if self.adopter is not None and part.wire_id not in self.refused:
                self.adopter(robot, self, part.bus or "main", [part.wire_id])  # no longer lost once adopted
            return
        try:
            self._rearm(key)
        except (BusError, ProtocolError) as exc:
            robot.note(f"part id {part.wire_id} answered again but could not be re-armed ({exc}); still lost")
            return
        self._back(key, "answered again with the same descriptor; re-armed (mode, limits, gains, watchdog, "
                        "held target, torque on)")

    def _rearm(self, key: int) -> None:
        joints, _ = self._handles(key)
        for joint in joints:
            host, wire = joint.host, joint.part_id
            torque, operating = joint.register("torque_enable"), joint.register("operating_mode")
            if torque is not None:
                host.write(wire, torque.address, bytes(torque.size))
            for address, data in self.settings.get(key, ()):
                host.write(wire, address, data)
            if operating is not None:
                host.write(wire, operating.address, MODE_FOR[joint.mode].to_bytes(operating.size, "little"))
            host.write(wire, *joint.command_write())  # the held target (or the last one written)
            joint.mark_written()
            if torque is not None:
                host.write(wire, torque.address, (1).to_bytes(torque.size, "little"))

    def _back(self, key: int, detail: str) -> None:
        robot = self.robot
        part = robot.virtual.parts[key]
        bus = part.bus or "main"
        del self.lost[key]
        joints, sensors = self._handles(key)
        for joint in joints:
            joint.available = True
            self._held_noted.discard(joint.name)
        for sensor in sensors:
            sensor.set_available(True)
        for group in robot.assembly.groups():
            if group.name == bus:
                group.cycle.lost.discard(part.wire_id)
        base = robot.assembly.base
        if base is not None and base.halted and not any(
                j.mode == VELOCITY and not j.available for j in robot.joints.values()):
            base.halt(None)
            detail += "; the base may drive again"
        self.event(BACK, key, bus, detail)

    # --- helpers -------------------------------------------------------------------------------------------------
    def _key(self, bus: str, wire: int) -> int | None:
        for key, part in self.robot.virtual.parts.items():
            if part.wire_id == wire and (part.bus or "main") == bus:
                return key
        return None

    def _handles(self, key: int) -> tuple[list[Joint], list[Any]]:
        robot = self.robot
        return ([j for j in robot.joints.values() if j.part_key == key],
                [s for s in robot.sensors.values() if s.part_key == key])

    def event(self, kind: str, key: int, bus: str, detail: str) -> PartEvent:
        """Record a part event of ``kind`` for the part at ``key``, naming its handles."""
        joints, sensors = self._handles(key)
        names = tuple(h.name for h in (*joints, *sensors))
        event = PartEvent(kind, key, bus, self.robot.clock.now(), names, detail)
        self.record(event)
        return event

    def record(self, event: PartEvent) -> None:
        """Keep, count, note and announce one event (runtime.robot.adoption uses it for new parts too)."""
        self.events.append(event)
        self.counts[event.kind] += 1
        shown = f" ({', '.join(event.names)})" if event.names else ""
        self.robot.note(f"part {event.kind}: id {event.part_id}{shown}: {event.detail}")
        for callback in list(self.on_change):
            callback(event)


def _quiet(host: BusHost, call: Callable[[], Any]) -> Any:
    """``call()`` with no retries (a lost part's silence is expected, and must cost one timeout at most); None
    when nothing answered."""
    retries = host.retries
    host.retries = 0
    try:
        return call()
    except (BusError, ProtocolError):
        return None
    finally:
        host.retries = retries


def _same_descriptor(host: BusHost, part: Any) -> bool | None:
    """Whether the part answering at ``part``'s ID is the same part (same descriptor hash); None if unreadable."""
    if not part.self_describing:
        return True  # a plain servo is described by its model number, already compared
    try:
        header = parse_cpc_header(host.read(part.wire_id, CPC_BASE, CPC_HEADER_LEN))
    except (BusError, ProtocolError, CpcHeaderError):
        return None
    return header.descriptor_sha256.hex() == part.sha256


def attach_presence(robot: RobotView) -> Presence:
    """Give an opened robot its presence watch (Robot.open calls it)."""
    prof = robot.profile
    presence = Presence(robot, misses_to_lose=prof.lost_after_misses, rescan_s=prof.rescan_s)
    presence.snapshot()
    presence.attach(robot.assembly)
    return presence
