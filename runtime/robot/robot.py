"""The controller's view of the robot (DESIGN "The runtime" item 5):

    from hil.runtime import Robot
    with Robot.open("config/profiles/virtual.yaml") as robot:
        for tick in robot.loop(hz=50):          # paced by the configured clock
            d = robot.sensors["ring"].ranges     # SI units, through the part's driver
            robot.joints["head.neck_yaw"].target = 0.3
            robot.base.drive(v=0.3, w=0.0)

``Robot.open`` does everything between a profile and a running loop: the transport and bus host, the scan (with
the descriptor cache), the model, the drivers (only trusted driver code runs), the blueprint names, the clock,
and the joints' bring-up. Each tick of ``loop`` is one bus cycle (runtime.robot.cycle); time comes only from the
clock, so the same controller runs on wall time or in lockstep with the simulator. A profile with ``buses:``
opens one robot from several buses (runtime.robot.multibus): one tree, one model, one set of names, and one
cycle per bus in every tick; when the main bus is an in-process world, the other buses' parts are mirrored in
it and follow their real joints' readings after every cycle. A profile with ``crowd:`` overlays a real-time
crowd's virtual people on the range ring (runtime/robot/overlay.py, a mixed trial); ``start_pose:`` puts odometry in the
map frame.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ..bus import BusHost
from ..bus.stats import BusStats
from ..clock.base import Clock
from ..clock.waits import off_clock
from ..drivers import PartDriver, TrustStore
from ..model import Model
from ..scan import VirtualRobot
from ..transports import Transport
from .adoption import adopt
from .assembly import Assembly, assemble
from .base import BaseGeometryError, DifferentialBase
from .blueprint import Blueprint
from .camera import Camera, attach_camera_sources
from .dynamics import Dynamics
from .joints import Joint
from .multibus import mirror_other_buses, scan_profile
from .names import NameMap
from .part_events import PartEvent
from .presence import Presence, attach_presence
from .params import checked_changes, declared_kinds
from .profile import Profile, load_profile, profile_security
from .semantics import Semantics
from .sensors import SensorHandle
from .startup import bring_up, switch_mode, wind_down

END_TOLERANCE_S = 1e-9  # a tick time within this of the end counts as the end (k / hz rounding)


class Tick(NamedTuple):
    index: int  # 0, 1, 2, ... within this loop
    time: float  # the clock's time of this tick (s)


class Robot:
    """An opened robot. Use :meth:`open`; close it (or use ``with``) to stop the wheels and release the bus."""

    def __init__(self, *, profile: Profile, buses: Mapping[str, BusHost], assembly: Assembly, clock: Clock,
                 notes: list[str], semantics: Semantics | None = None):
        self.profile = profile
        self.buses: dict[str, BusHost] = dict(buses)  # name -> host, main first ("main" for a one-bus profile)
        self.bus = next(iter(self.buses.values()))  # the main bus (the only one of a one-bus profile)
        self._assembly = assembly  # model, drivers, names, joints, sensors, base, bus cycle: swapped whole
        self._semantics = semantics  # the blueprint names file as loaded (names re-bind when parts are adopted)
        self.clock = clock
        self.notes = notes  # what the robot noticed: quarantined parts, missing names, mode changes, part events
        self.ticks = 0  # bus cycles run by loop() / cycle()
        self.overruns = 0  # ticks skipped because the controller fell behind the clock (real time only)
        self.deadline_s: float | None = None  # clock time at which the run ends (its duration; a trial may bring
        # it forward, e.g. a little after the goal is reached); loop() stops there, a sleep past it ends the run
        self.params: Mapping[str, Any] = MappingProxyType({})  # the run's controller parameters (a trial's
        # ``params:``), read-only; {} when the run has none
        self.changeable: dict[str, type] = {}  # the params the controller lets change while it runs (params.py)
        self.mode: str | None = None  # what the controller says it is doing ("route", "engage"...), free text:
        # trials record it with the robot's state and the viewer shows it; None: the controller says nothing
        self.after_cycle: list[Callable[[Robot], None]] = []  # run after each bus cycle, in order (runtime/robot/overlay.py)
        self.before_cycle: list[Callable[[Robot], None]] = []  # run before each bus cycle (a trial's saved states)
        self.resumed_from: dict[str, Any] | None = None  # {dir, t, state_t} when a trial started from a saved state
        self.overlay = None  # the crowd overlay of a mixed trial (runtime.robot.overlay.CrowdOverlay), None without crowd:
        self.mirrored: list[str] = []  # buses whose parts the main bus's world mirrors (runtime.robot.multibus)
        self.presence: Presence | None = None  # parts lost and found while running (runtime/robot/presence.py)
        self._next_due: float | None = None  # clock time of loop()'s next tick: what is left of it is spare time
        self._closed = False

    # --- opening ---------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, profile: str | Path | Mapping[str, Any] | Profile, *, bus: str | None = None,
             clock: Clock | Callable[[Transport], Clock] | None = None) -> Robot:
        """Open the robot a profile describes. ``bus`` overrides the profile's bus URL; ``clock`` replaces the
        profile's clock (tools that bring their own): a Clock, or a function of the opened transport that makes
        one (an in-process world lives in the transport)."""
        prof = profile.with_bus(bus) if isinstance(profile, Profile) else load_profile(profile, bus=bus)
        with ExitStack() as undo:
            hosts, virtual, semantics = scan_profile(prof, undo)  # every bus opened, scanned, merged
            host = next(iter(hosts.values()))  # the main bus: the clock's, and robot.bus
            assembly = assemble(virtual, semantics, TrustStore.load(prof.trust_file), hosts)
            if clock is None:
                clock = _open_clock(prof, host)
            elif not isinstance(clock, Clock):
                clock = clock(host.transport)
            undo.callback(clock.close)
            notes = list(assembly.notes)
            notes += [n for h in hosts.values() for n in getattr(h.transport, "notes", ())]  # e.g. the latency timer
            for group in assembly.groups():
                notes += bring_up(group.host, group.joints, group.cycle)
            if assembly.base is not None:
                assembly.base.update()
            robot = cls(profile=prof, buses=hosts, assembly=assembly, clock=clock, notes=notes, semantics=semantics)
            robot.presence = attach_presence(robot)
            robot.presence.adopter = adopt
            robot.mirrored = mirror_other_buses(robot)
            attach_camera_sources(robot, undo)
            _start_mixed(robot, undo)
            undo.pop_all()
        return robot

    # --- the loop --------------------------------------------------------------------------------------------
    def loop(self, hz: float, duration_s: float | None = None) -> Iterator[Tick]:
        """Ticks at ``hz`` on the clock, each after one bus cycle (targets set since the previous tick written,
        everything read). Stops after ``duration_s`` of clock time, or at :attr:`deadline_s`; never on its own
        otherwise. When the controller falls behind a real clock, missed ticks are skipped (and counted in
        :attr:`overruns`) rather than run back to back."""
        if not (isinstance(hz, (int, float)) and math.isfinite(hz) and hz > 0):
            raise ValueError(f"loop(hz=...) must be a positive number, not {hz!r}")
        if duration_s is not None and not duration_s >= 0:
            raise ValueError(f"loop(duration_s=...) must be >= 0, not {duration_s!r}")
        self._check_open()
        period = 1.0 / hz
        start = self.clock.now()
        own_end = start + duration_s if duration_s is not None else math.inf
        # a loop starting on its own grid (a trial resumed at 6.0 s, trial/state/) ticks at k * period exactly as
        # a loop started at 0 does, float rounding included: 61 * 0.1, not 6.0 + 0.1
        grid = round(start / period)
        offset = grid if grid and abs(grid * period - start) <= 1e-9 else None
        k = 0
        while True:
            due = (offset + k) * period if offset is not None else start + k * period
            end = own_end if self.deadline_s is None else min(own_end, self.deadline_s)  # the deadline may move
            if due >= end - END_TOLERANCE_S:
                if math.isfinite(end):
                    self.clock.sleep_until(end)  # the clock reads the full duration when the loop is done
                return
            now = self.clock.sleep_until(due)
            self._next_due = due + period
            try:
                self.cycle()
            finally:
                self._next_due = None
            yield Tick(k, now)
            next_k = k + 1
            behind = math.floor((self.clock.now() - start) / period + END_TOLERANCE_S)
            if behind > next_k:  # the controller took longer than a period: skip to the next tick still ahead
                self.overruns += behind - next_k
                next_k = behind
            k = next_k

    def cycle(self) -> None:
        """One bus cycle now: write the targets that changed, read every joint and sensor (loop() calls it;
        a controller that paces itself, e.g. with time.sleep under the time patch, calls it directly)."""
        self._check_open()
        with off_clock():  # the bus's and the hooks' waits are the runtime's: wall time, not the controller's clock
            self._cycle()

    def _cycle(self) -> None:
        for hook in self.before_cycle:
            hook(self)
        self._assembly.cycle.run()
        if self.presence is not None:  # one ping at most, in what is left of the tick (presence.py)
            spare = None if self._next_due is None else self._next_due - self.clock.now()
            self.presence.after_cycle(spare)  # may adopt a part: the assembly is then another one
        base = self._assembly.base
        if base is not None:
            base.update()
        for hook in self.after_cycle:
            hook(self)
        self.ticks += 1

    # --- the assembly: what the scanned parts make -----------------------------------------------------------
    @property
    def assembly(self) -> Assembly:
        """Everything built from the scanned parts (runtime/robot/assembly.py), as one frozen record."""
        return self._assembly

    def swap_assembly(self, new: Assembly) -> None:
        """Run on ``new`` from the next bus cycle on (adoption: a part plugged in while running). The swap is
        whole: the handles take the names ``new`` binds them to, and the dynamics follow the new model."""
        self._check_open()
        new.bind_names()
        self._assembly = new
        self.__dict__.pop("dynamics", None)  # a cached_property of the old model

    @property
    def virtual(self) -> VirtualRobot:
        """The scanned parts as one tree (runtime.scan)."""
        return self._assembly.virtual

    @property
    def model(self) -> Model:
        """The immutable model of the scanned tree (runtime.model)."""
        return self._assembly.model

    @property
    def joints(self) -> NameMap[Joint]:
        """Blueprint name (or tree path) -> joint handle."""
        return self._assembly.joints

    @property
    def sensors(self) -> NameMap[SensorHandle]:
        """Blueprint name (or tree path) -> sensor handle (range ring, contact, camera)."""
        return self._assembly.sensors

    @property
    def blueprint(self) -> Blueprint:
        return self._assembly.blueprint

    @property
    def drivers(self) -> Mapping[int, PartDriver]:
        """Robot-wide part ID -> the part's driver (read-only)."""
        return self._assembly.drivers

    @property
    def semantics(self) -> Semantics | None:
        """The blueprint names file as loaded (None: the profile names none)."""
        return self._semantics

    @property
    def base(self) -> DifferentialBase:
        """The differential-drive base made from the wheel parts (raises if the robot has none)."""
        base = self._assembly.base
        if base is None:
            raise BaseGeometryError(f"this robot has no drivable base: {self._assembly.base_error}")
        return base

    # --- the run around the controller (trials, runners, saved states) -------------------------------------
    def note(self, text: str) -> None:
        """Add one line to :attr:`notes` (what the robot noticed)."""
        self.notes.append(text)

    def set_deadline(self, t: float | None) -> None:
        """End the run at clock time ``t`` (None: no end of its own); see :attr:`deadline_s`."""
        self.deadline_s = t

    def end_by(self, t: float) -> None:
        """Bring the end of the run forward to clock time ``t`` (a later deadline already set stays earlier)."""
        self.deadline_s = t if self.deadline_s is None else min(self.deadline_s, t)

    def use_clock(self, clock: Clock) -> None:
        """Read time from ``clock`` from now on (a runner's deadline clock wrapping the robot's own)."""
        self.clock = clock

    def set_run_params(self, params: Mapping[str, Any]) -> None:
        """The run's controller parameters (a trial's ``params:``), read-only from here on."""
        self.params = MappingProxyType(dict(params))

    def restore_counters(self, *, ticks: int, overruns: int, mode: str | None) -> None:
        """Take up the counters of a saved state (trial/state/): ticks and overruns go on counting from there, and
        the mode shown is the saved one until the controller says otherwise."""
        self.ticks, self.overruns, self.mode = ticks, overruns, mode

    def mark_resumed(self, where: dict[str, Any]) -> None:
        """Say where this run was resumed from ({dir, t, state_t}: :attr:`resumed_from`, for the controller)."""
        self.resumed_from = where

    # --- the rest of the API ---------------------------------------------------------------------------------

    @cached_property
    def dynamics(self) -> Dynamics:
        """The model (built from the scanned parts) at the joints as the last bus cycle read them: gravity
        torques, inverse and forward dynamics, mass matrix, CoM, link placements and Jacobians
        (runtime.robot.dynamics)."""
        return Dynamics(self.model, self.joints)

    def set_mode(self, names: str | Iterable[str], mode: str) -> None:
        """Switch joints to ``mode`` now ("position" or "current"; torque goes off for the switch, as the
        operating mode is in EEPROM): in position mode a joint holds where it is, in current mode it starts at
        0 A and takes ``target_current`` / ``target_torque``. Every name is checked before anything is written;
        closing the robot puts current-mode joints back in position mode."""
        self._check_open()
        joints = [self.joints[name] for name in ([names] if isinstance(names, str) else names)]
        switch_mode(joints, mode, {j.name: self.virtual.parts[j.part_key].model_number for j in joints})

    def declare_changeable(self, **defaults: Any) -> None:
        """Say which parameters may be changed while this controller runs (a live Foxglove session's Parameters
        panel), with their defaults: ``robot.declare_changeable(cruise_m_s=0.6)``. Each takes the run's value if
        it gave one, else the default, and keeps that value's type; read them from ``robot.params`` every tick."""
        kinds = declared_kinds(self.params, defaults)
        self.params = MappingProxyType({**defaults, **self.params})
        self.changeable = {**self.changeable, **kinds}

    def change_params(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a change of declared parameters at once (between bus cycles: the caller's job) and return what
        was applied; ParamError (which parameter, what it takes) and nothing changed when any is refused."""
        applied = checked_changes(self.changeable, changes)
        self.params = MappingProxyType({**self.params, **applied})
        return applied

    @property
    def parts_lost(self) -> list[int]:
        """IDs (robot-wide) of the parts that stopped answering and have not come back (runtime/robot/presence.py)."""
        return self.presence.parts_lost if self.presence is not None else []

    @property
    def on_change(self) -> list[Callable[[PartEvent], None]]:
        """Callbacks called with each :class:`PartEvent` (a part lost, back, new, changed), in the bus cycle."""
        assert self.presence is not None
        return self.presence.on_change

    @property
    def part_events(self) -> list[PartEvent]:
        """Every part event so far, in order."""
        return self.presence.events if self.presence is not None else []

    @property
    def stats(self) -> BusStats:
        """The main bus's statistics: transactions, retries, errors, latency percentiles (every bus's:
        :attr:`bus_stats`)."""
        return self.bus.stats

    @property
    def bus_stats(self) -> dict[str, BusStats]:
        """Statistics per bus, by the profile's bus names (``{"main": ...}`` for a one-bus profile)."""
        return {name: host.stats for name, host in self.buses.items()}

    @property
    def time(self) -> float:
        """The clock's time (s): simulated time under the sim clock."""
        return self.clock.now()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wheels to 0, servos left holding; then leave the clock and release the bus. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for camera in self.sensors.values():
            if isinstance(camera, Camera):
                camera.close()
        try:
            if self.overlay is not None:
                self.overlay.close()  # says bye to the crowd first: it stops serving
        except Exception as exc:  # noqa: BLE001 - closing must go on
            self.note(f"close: the crowd overlay did not close cleanly: {exc}")
        try:
            for group in self._assembly.groups():
                wind_down(group.host, group.joints, group.cycle)
        except Exception as exc:  # noqa: BLE001 - closing must go on: the parts' own watchdogs stop the wheels
            self.note(f"close: could not stop the wheels: {exc}")
        finally:
            try:
                self.clock.close()
            finally:
                with ExitStack() as hosts:  # every bus closes even if one fails to
                    for host in self.buses.values():
                        hosts.callback(host.close)

    def __enter__(self) -> Robot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        urls = " + ".join(host.transport.url for host in self.buses.values())
        return (f"Robot({urls}, {len(self.virtual.parts)} parts, {len(self.joints)} joints, "
                f"{len(self.sensors)} sensors, clock {self.clock.kind or type(self.clock).__name__})")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the robot is closed")


def _start_mixed(robot: Robot, undo: ExitStack) -> None:
    """``start_pose:`` (odometry in the map frame) and ``crowd:`` (the overlay of runtime/robot/overlay.py, imported only
    when a profile asks for it, since it brings the shadow world's pybullet)."""
    prof = robot.profile
    if prof.start_pose is not None:
        base, base_error = robot.assembly.base, robot.assembly.base_error
        if base is None:
            raise BaseGeometryError(f"{prof.source}: start_pose: this robot has no drivable base: {base_error}")
        base.reset_odometry(*prof.start_pose)
    if prof.crowd is not None:
        from .overlay import attach_crowd_overlay

        robot.overlay = attach_crowd_overlay(robot, prof.crowd)
        undo.callback(robot.overlay.close)


def _open_clock(profile: Profile, host: BusHost) -> Clock:
    from ..clock import open_clock

    kwargs = {"stall_timeout_s": profile.stall_timeout_s} if profile.stall_timeout_s else {}
    security = profile_security(profile) if profile.clock_endpoint else None
    return open_clock(profile.clock, transport=host.transport, endpoint=profile.clock_endpoint, name=profile.name,
                      security=security, **kwargs)
