"""A joint as the controller sees it: position and velocity read on the last bus cycle, a target written on the
next one, all in SI units through the part's own driver.

A servo joint is commanded by position (``target``, rad); a wheel by velocity (``target_velocity``, rad/s),
since the part runs in velocity mode. A servo switched to current mode (``robot.set_mode(name, CURRENT)``) is
commanded by ``target_current`` (A) or ``target_torque`` (N m, through the servo's torque constant). Targets are
checked against the joint's limits when they are set, so a bad value fails in the controller's line that set
it, naming the joint, and never reaches the bus.
"""
from __future__ import annotations

import math

from hil.devices.descriptor import JointLimits, RegisterSpec

from ..drivers import PartDriver
from ..drivers.conversions import ConversionError

POSITION = "position"
VELOCITY = "velocity"
CURRENT = "current"
LIMIT_TOLERANCE = 1e-9  # a target computed to land on a limit may miss it by rounding


class JointLimitError(ValueError):
    """A target outside what the joint (or its register) can take."""


class JointModeError(TypeError):
    """A position target for a velocity-mode joint, or the other way round."""


class Joint:
    """One moving joint of one part. Created by :class:`runtime.robot.Robot`; not meant to be built by hand."""

    def __init__(self, name: str, part_id: int, part_joint: str, path: str, driver: PartDriver,
                 registers: dict[str, RegisterSpec], limits: JointLimits, joint_type: str, mode: str, *,
                 part_key: int | None = None, bus: str = "", host: object = None):
        self.name = name
        self.part_id = part_id  # the part's ID on its bus (what goes on the wire)
        self.part_key = part_id if part_key is None else part_key  # robot-wide ID (VirtualRobot / Model)
        self.bus = bus  # the bus's name in the profile ("main" for a one-bus profile)
        self.host = host  # the BusHost of that bus
        self.part_joint = part_joint
        self.path = path
        self.joint_type = joint_type
        self.mode = mode
        self._driver = driver
        self._registers = registers  # role (present_position, goal_velocity, ...) -> register spec
        self._limits = limits
        self._position = math.nan
        self._velocity = math.nan
        self._target = math.nan  # rad (position mode) or rad/s (velocity mode)
        self._command_raw: int | None = None
        self._written_raw: int | None = None
        self.current_limit_a: float | None = None  # the part's Current Limit, read when switched to current mode
        self.torque_constant: float | None = None  # N m/A of the part's motor, when known (current mode)
        self.available = True  # False while its part is lost (runtime/robot/presence.py): position and velocity
        # are then the last ones read, and targets are held until the part is back and re-armed

    def __repr__(self) -> str:
        where = f"id {self.part_id}" if self.bus in ("", "main") else f"{self.bus}:{self.part_id}"
        return (f"Joint({self.name!r}, {where}, {self.mode} mode, position {self._position:+.4f} rad, "
                f"target {self._target:+.4f})")

    # --- what the last bus cycle read ------------------------------------------------------------------------
    @property
    def position(self) -> float:
        """rad (m for a prismatic joint), as read on the last bus cycle."""
        return self._position

    @property
    def velocity(self) -> float:
        """rad/s, as read on the last bus cycle (nan when the part has no velocity register)."""
        return self._velocity

    @property
    def limits(self) -> JointLimits:
        """lower/upper (rad; both 0 for a continuous joint), effort (N m) and velocity (rad/s) limits."""
        return self._limits

    @property
    def bounded(self) -> bool:
        return self.joint_type != "continuous" and self._limits.upper > self._limits.lower

    # --- commands --------------------------------------------------------------------------------------------
    @property
    def target(self) -> float:
        """Position target (rad). Setting it checks the limits now and writes it on the next bus cycle."""
        self._require(POSITION, "target")
        return self._target

    @target.setter
    def target(self, value: float) -> None:
        self._require(POSITION, "target")
        value = self._finite(value, "target")
        lo, hi = self._limits.lower, self._limits.upper
        if self.bounded and not lo - LIMIT_TOLERANCE <= value <= hi + LIMIT_TOLERANCE:
            raise JointLimitError(f"joint {self.name}: target {value:.6g} rad is outside its limits "
                                  f"{lo:g}..{hi:g} rad")
        self._command(self._role("goal_position"), min(max(value, lo), hi) if self.bounded else value, value)

    @property
    def target_velocity(self) -> float:
        """Velocity target (rad/s) of a velocity-mode joint (a wheel)."""
        self._require(VELOCITY, "target_velocity")
        return self._target

    @target_velocity.setter
    def target_velocity(self, value: float) -> None:
        self._require(VELOCITY, "target_velocity")
        value = self._finite(value, "target_velocity")
        limit = self._limits.velocity
        if limit > 0 and abs(value) > limit + LIMIT_TOLERANCE:
            raise JointLimitError(f"joint {self.name}: target velocity {value:.6g} rad/s is beyond its limit "
                                  f"+-{limit:g} rad/s")
        self._command(self._role("goal_velocity"), value, value)

    @property
    def target_current(self) -> float:
        """Current target (A) of a current-mode joint: the motor's torque is this times its torque constant."""
        self._require(CURRENT, "target_current")
        return self._target

    @target_current.setter
    def target_current(self, value: float) -> None:
        self._require(CURRENT, "target_current")
        value = self._finite(value, "target_current")
        limit = self.current_limit_a
        if limit is not None and abs(value) > limit + LIMIT_TOLERANCE:
            raise JointLimitError(f"joint {self.name}: target current {value:.6g} A is beyond the part's current "
                                  f"limit +-{limit:g} A")
        self._command(self._role("goal_current"), value, value)

    @property
    def target_torque(self) -> float:
        """Torque target (N m) of a current-mode joint: target_current x the part's torque constant."""
        return self.target_current * self._torque_constant()

    @target_torque.setter
    def target_torque(self, value: float) -> None:
        constant = self._torque_constant()
        value = self._finite(value, "target_torque")
        effort = self._limits.effort
        if effort > 0 and abs(value) > effort + LIMIT_TOLERANCE:
            raise JointLimitError(f"joint {self.name}: target torque {value:.6g} N m is beyond its effort limit "
                                  f"+-{effort:g} N m")
        self.target_current = value / constant

    def _torque_constant(self) -> float:
        self._require(CURRENT, "target_torque")
        if not self.torque_constant:
            raise JointModeError(f"joint {self.name}: the torque constant of part id {self.part_id}'s motor is not "
                                 "known; command target_current (A) instead")
        return self.torque_constant

    def check_velocity(self, value: float) -> None:
        """Raise JointLimitError if ``value`` (rad/s) is beyond the joint's velocity limit (for callers that set
        several joints and must not half-apply)."""
        limit = self._limits.velocity
        if limit > 0 and abs(value) > limit + LIMIT_TOLERANCE:
            raise JointLimitError(f"joint {self.name}: {value:.6g} rad/s is beyond its limit +-{limit:g} rad/s")

    def _command(self, spec: RegisterSpec, si_value: float, shown: float) -> None:
        try:
            raw = self._driver.from_si(spec.name, si_value)
        except ConversionError as exc:
            raise JointLimitError(f"joint {self.name}: {exc}") from None
        self._target = shown
        self._command_raw = raw

    # --- the bus cycle's side (runtime.robot.cycle) -----------------------------------------------------------
    def read_spans(self) -> list[tuple[int, int]]:
        return [(spec.address, spec.size) for role in ("present_velocity", "present_position")
                if (spec := self._registers.get(role)) is not None]

    def update(self, block: bytes, base: int) -> None:
        """Take this joint's present values from a block read at address ``base``."""
        self._position = self._decode(self._registers["present_position"], block, base)
        spec = self._registers.get("present_velocity")
        if spec is not None:
            self._velocity = self._decode(spec, block, base)

    def pending_write(self) -> tuple[int, bytes] | None:
        """(address, bytes) of a target not yet written, None when the bus already has it."""
        if self._command_raw is None or self._command_raw == self._written_raw:
            return None
        return self.command_write()

    def command_write(self) -> tuple[int, bytes]:
        """(address, bytes) of the target, written or not (a mode switch writes it at once)."""
        spec = self._command_register
        return spec.address, self._command_raw.to_bytes(spec.size, "little", signed=spec.signed)

    def mark_written(self) -> None:
        self._written_raw = self._command_raw

    @property
    def command_raw(self) -> int | None:
        """The raw register value of the target as last set (None before any), written or not."""
        return self._command_raw

    def replay_command(self, raw: int) -> None:
        """Set the target as a recorded run had it, raw (trial/state/ resimulates cycles from its command
        log), to be written on the next cycle as the original's was."""
        self._command_raw = raw

    def saved_state(self) -> tuple[float, float, float, int | None, int | None]:
        """What a saved state keeps of this joint (trial/state/host.py): position and velocity as last read,
        the target, its raw command and the raw command last written (so the cycle after a restore writes
        exactly what the original's did)."""
        return self._position, self._velocity, self._target, self._command_raw, self._written_raw

    def restore_state(self, position: float, velocity: float, target: float, command_raw: int | None,
                      written_raw: int | None) -> None:
        """Take up a :meth:`saved_state`."""
        self._position, self._velocity, self._target = position, velocity, target
        self._command_raw, self._written_raw = command_raw, written_raw

    def hold_present(self) -> None:
        """Make the target the position just read (velocity 0 for a velocity-mode joint), to be written on the
        next cycle: switching torque on then holds the joint where it is instead of jumping to a stale goal."""
        if self.mode == VELOCITY:
            self.target_velocity = 0.0
            return
        if self.mode == CURRENT:
            self.target_current = 0.0
            return
        spec = self._command_register
        raw = self._driver.from_si(spec.name, self._position)
        self._command_raw = raw
        self._target = self._driver.to_si(spec.name, raw)

    @property
    def _command_register(self) -> RegisterSpec:
        return self._role({POSITION: "goal_position", VELOCITY: "goal_velocity", CURRENT: "goal_current"}[self.mode])

    def register(self, role: str) -> RegisterSpec | None:
        """The register that plays ``role`` (goal_position, torque_enable, ...) for this joint, if any."""
        return self._registers.get(role)

    def _role(self, role: str) -> RegisterSpec:
        spec = self._registers.get(role)
        if spec is None:
            raise JointModeError(f"joint {self.name}: part id {self.part_id} declares no {role} register")
        return spec

    def _decode(self, spec: RegisterSpec, block: bytes, base: int) -> float:
        start = spec.address - base
        raw = int.from_bytes(block[start:start + spec.size], "little", signed=spec.signed)
        return self._driver.to_si(spec.name, raw)

    def _finite(self, value: float, what: str) -> float:
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"joint {self.name}: {what} must be a number, not {value!r}") from None
        if not math.isfinite(value):
            raise JointLimitError(f"joint {self.name}: {what} must be finite, not {value}")
        return value

    def _require(self, mode: str, what: str) -> None:
        if self.mode != mode:
            raise self._wrong_mode(what)

    def _wrong_mode(self, what: str) -> JointModeError:
        if self.mode == VELOCITY:
            return JointModeError(f"joint {self.name} runs in velocity mode (a wheel): use .target_velocity "
                                  "(rad/s) or robot.base.drive(v, w), not .target")
        if self.mode == CURRENT:
            return JointModeError(f"joint {self.name} runs in current mode: use .target_current (A) or "
                                  f".target_torque (N m), not .{what}")
        hint = " (switch it first: robot.set_mode(name, \"current\"))" if what.startswith("target_") else ""
        return JointModeError(f"joint {self.name} runs in position mode: use .target (rad), not .{what}{hint}")
