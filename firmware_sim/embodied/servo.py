"""Servo and wheel firmware whose joint is a pybullet joint: modes, torque enable, limits, watchdog.

The control table keeps its XM430 meaning; conversions between raw units and the joint's SI values come from
the part's own descriptor registers (the same ones the host's drivers use). Commands become pybullet motor
commands when they are written; present values are read from the joint whenever the host asks.

- position modes (3 position, 4 extended position, 5 current-based position): the X-series position loop and
  its DC motor, re-evaluated every physics step (see :class:`PositionDrive`): the loop's PWM duty is
  Position P Gain(84)/128 x the error in pulses out of 885 (capped by PWM Limit(36)); the motor at that duty is
  a velocity source (duty x no-load speed) behind its back-EMF damping (stall torque / no-load speed), both from
  the descriptor's joint limits (effort = stall torque, velocity = no-load speed). So the servo holds a load
  L with an error of L / stiffness (:func:`devices.control_table.position_stiffness`: 18.9 N m/rad at the
  default gain 800), as a real one does, and a larger gain holds tighter. In mode 5 the torque is also limited
  to Goal Current(102) x the torque constant (the e-Manual: Goal Current is the current limit there). Speed is
  limited to the profile velocity (or the velocity limit). Position I and D gains, Goal PWM and the
  feed-forward gains are not modelled (their defaults are 0 or full scale);
- velocity mode (1): VELOCITY_CONTROL at the goal velocity, clamped to the velocity-limit register;
- current mode (0): TORQUE_CONTROL, torque = Goal Current x torque constant (within the effort limit and the
  Current Limit(38) the control table enforces), re-applied every step; the gear train's friction (the joint's
  ``friction``) still acts, as with torque off;
- torque off: the joint is released to its friction.
Present Current(126) reports the motor's torque / torque constant in every mode.
Watchdog: the Bus Watchdog register (98, units of 20 ms, as on X-series) or the device default; when no
instruction has addressed the part for that long, the actuator stops (velocity 0, or holds its position) and
the register reads 255 until a new command arrives, which re-arms it with its previous setting. Wheels also obey the contact interlock (contact.py).
"""
from __future__ import annotations

import math
import weakref

import pybullet as p

from hil.devices.control_table import (CURRENT_BASED_POSITION_MODE, CURRENT_MODE, EXTENDED_POSITION_MODE,
                                   POSITION_MODE, POSITION_P_GAIN_DIVISOR, PWM_FULL_SCALE, TORQUE_CONSTANT_NM_PER_A,
                                   VELOCITY_MODE)
from hil.devices.protocol import ResultFail

from ..part import PartFirmware
from ..world import RobotBody, RobotJoint, World

WATCHDOG_UNIT_S = 0.020
WATCHDOG_TRIPPED = 255
XM430_TORQUE_CONSTANT = TORQUE_CONSTANT_NM_PER_A[1020]  # N m/A; a CPC servo is an XM430-W350 underneath
POSITION_MODES = (POSITION_MODE, EXTENDED_POSITION_MODE, CURRENT_BASED_POSITION_MODE)
DEFAULT_P_GAIN = 800  # Position P Gain of a table without the register (XM430 default)
POSITION_GAIN = 0.3  # pybullet POSITION_CONTROL gains of a latched hold: a stiff, slightly damped stop
VELOCITY_GAIN = 1.0
TORQUE_FILTER_S = 0.08  # the position drive's torque feedback: slower than the arms' dynamics (PositionDrive)
COMMAND_REGISTERS = frozenset(("torque_enable", "operating_mode", "goal_position", "goal_velocity", "goal_current",
                               "profile_velocity", "velocity_limit"))


class Interlock:
    """Set by a contact sensor that must stop the wheels (the bumper), read by the wheels every step."""

    def __init__(self) -> None:
        self.pressed = False
        self.trips = 0


class JointServo(PartFirmware):
    """Adopted from a ServoFirmware (see adopt.py); :meth:`attach` binds it to its joint in the world."""

    world: World
    robot: RobotBody
    joint: RobotJoint
    interlock: Interlock | None

    def attach(self, world: World, robot: RobotBody, joint: RobotJoint, default_watchdog_s: float = 0.0,
               interlock: Interlock | None = None) -> "JointServo":
        self.world, self.robot, self.joint = world, robot, joint
        self.interlock = interlock if self.descriptor.kind == "wheel" else None
        self.registers = dict(joint_registers(self))
        # N m per A of this model (an XM430-W350's for a model without current sensing, whose table has no
        # current registers to use it with)
        self.torque_constant = TORQUE_CONSTANT_NM_PER_A.get(self.model_number, XM430_TORQUE_CONSTANT)
        self.specs = {r.name: r for r in self.descriptor.registers}
        self.last_access_s = 0.0
        self.latched = False  # stopped by the interlock or the watchdog until the next command
        self.stops: list[tuple[int, str]] = []  # (world step, why) of every stop, for logs and tests
        if default_watchdog_s and "bus_watchdog" in self.table and not self.memory.get("bus_watchdog"):
            self.memory.set("bus_watchdog", max(1, min(127, round(default_watchdog_s / WATCHDOG_UNIT_S))))
        self._drives = PositionDrives.of(world, robot)  # its pre-step hook runs this servo's _pre_step when due
        self._refresh()
        self._drives.servos.append(self)
        self._command()
        return self

    def _refresh(self) -> None:
        """Cache what every physics step looks at; called whenever the control table may have changed."""
        memory = self.memory
        self._torque = bool(memory.get("torque_enable"))
        self._mode = memory.get("operating_mode")
        setting = memory.get("bus_watchdog") if "bus_watchdog" in self.table else 0
        self._watchdog_s = setting * WATCHDOG_UNIT_S if 0 < setting <= 127 else 0.0
        self._current_torque = self._goal_torque()
        if self._mode in POSITION_MODES and "goal_position" in self.registers:
            self._drive = PositionDrive.of(self, getattr(self, "_drive", None))
        self._drives.due()

    # conversions through the descriptor (raw <-> SI)
    def _si(self, role: str, raw: int) -> float:
        spec = self.specs[self.registers[role]]
        return raw * spec.scale + spec.offset

    def _raw(self, role: str, value: float) -> int:
        spec = self.specs[self.registers[role]]
        return round((value - spec.offset) / spec.scale)

    def _get(self, role: str) -> int:
        return self.memory.get(self.registers[role])

    # the bus side
    def advance(self, now_s: float) -> None:
        """Called when an instruction addresses the part: note it for the watchdog, publish the joint state."""
        self.time_s = max(self.time_s, now_s)
        self.last_access_s = self.world.time_s
        self._drives.deadline_moved()
        self._publish()

    def on_written(self, names: list[str]) -> None:
        self._refresh()
        if COMMAND_REGISTERS.intersection(names):
            if "bus_watchdog" in self.table and self.memory.get("bus_watchdog") == WATCHDOG_TRIPPED:
                self.memory.set("bus_watchdog", self._tripped_setting)  # armed again, as it was
                self._refresh()
            if not (self.interlock is not None and self.interlock.pressed):
                self.latched = False
                self._drives.due()
            self._command()

    def on_reboot(self) -> None:
        self._drives.due()
        self.latched = False
        self._refresh()
        self._command()

    def save_state(self) -> dict:
        """The firmware's state beyond its control table, as plain data, for a saved world
        (firmware_sim/embodied/state.py): watchdog, latch and stops, the setting a tripped watchdog re-arms with,
        a latched hold's position, the drive's torque filter and the motor's last applied torque (pybullet keeps
        neither motor targets nor applied torques in its saved state)."""
        _, _, _, applied = p.getJointState(self.robot.body_id, self.joint.index, physicsClientId=self.robot.client)
        drive = getattr(self, "_drive", None)
        return {"last_access_s": self.last_access_s, "latched": self.latched, "stops": [list(s) for s in self.stops],
                "tripped": getattr(self, "_tripped_setting", None), "hold_q": getattr(self, "hold_q", None),
                "drive_torque": drive.torque if drive is not None else None, "applied": applied}

    def restore_state(self, saved: dict) -> float:
        """Put back what :meth:`save_state` gave (after the control table) and re-command the motor from it;
        returns the motor's last applied torque, for the first physics step (:attr:`PositionDrives.applied_once`)."""
        self.last_access_s = saved["last_access_s"]
        self.latched = bool(saved["latched"])
        self.stops = [tuple(s) for s in saved["stops"]]
        if saved["tripped"] is not None:
            self._tripped_setting = saved["tripped"]
        self._refresh()
        drive = getattr(self, "_drive", None)
        if drive is not None and saved["drive_torque"] is not None:
            drive.torque = saved["drive_torque"]
        self._command(hold_q=saved["hold_q"])
        return saved["applied"]

    def detach(self) -> None:
        """Drive nothing any more (a part swapped out): out of the robot's position drives, no world to step."""
        drives = self._drives
        if self in drives.servos:
            drives.servos.remove(self)
        drives.due()
        self.world = None  # a stray reference can no longer step it

    def clear_multi_turn(self) -> None:
        raise ResultFail(self.id, ResultFail.code, "multi-turn clear is not supported by world-backed joints")

    def _publish(self) -> None:
        q, qd, _, torque = p.getJointState(self.robot.body_id, self.joint.index, physicsClientId=self.robot.client)
        memory = self.memory
        memory.set(self.registers["present_position"], self._raw("present_position", q))
        if "present_velocity" in self.registers:
            memory.set(self.registers["present_velocity"], self._raw("present_velocity", qd))
        if "present_current" in self.registers:
            if self._torque and self._mode == CURRENT_MODE and not self.latched:
                torque = self._current_torque  # TORQUE_CONTROL: pybullet reports no motor torque
            memory.set(self.registers["present_current"], self._raw("present_current", torque / self.torque_constant))
        if "moving" in self.table:
            moving = abs(qd) > 0.01
            memory.set("moving", int(moving))
            memory.set("moving_status", 0 if moving else 1)
        if "realtime_tick" in self.table:
            memory.set("realtime_tick", int(self.world.time_s * 1000) % 32768)

    # the world side
    def _pre_step(self, world: World) -> None:
        if not self._torque:
            return
        if self._watchdog_s and not self.latched and world.time_s - self.last_access_s > self._watchdog_s:
            self._tripped_setting = self.memory.get("bus_watchdog")
            self.memory.set("bus_watchdog", WATCHDOG_TRIPPED)
            self._watchdog_s = 0.0
            self._stop("watchdog")
        elif self.interlock is not None and self.interlock.pressed and not self.latched:
            self._stop("interlock")
        elif self.latched:
            return
        elif self._mode == CURRENT_MODE:
            self._apply_torque()
        # position modes: PositionDrives drives every such servo of the robot in one batch each step

    @property
    def driving(self) -> bool:
        """Torque on in a position mode and not stopped: PositionDrives drives it this step."""
        return self._torque and not self.latched and self._mode in POSITION_MODES and "goal_position" in self.registers

    def stop_now(self, why: str = "interlock") -> None:
        """Stop this actuator before the next physics step (the interlock calls it from a post-step hook)."""
        if self.memory.get("torque_enable") and not self.latched:
            self._stop(why)

    def _stop(self, why: str) -> None:
        self._drives.due()
        self.latched = True
        self.stops.append((self.world.steps, why))
        self._command()

    def _command(self, hold_q: float | None = None) -> None:
        """The joint's motor as the control table says (``hold_q``: a latched hold's position, when restoring a
        saved state: pybullet keeps no motor targets, firmware_sim/embodied/state.py)."""
        robot, joint, memory = self.robot, self.joint, self.memory
        body, client = robot.body_id, robot.client
        if not memory.get("torque_enable"):
            robot.release(joint)
            return
        mode = memory.get("operating_mode")
        effort = joint.limits.effort or 1.0
        if self.latched:
            if mode == VELOCITY_MODE or mode == CURRENT_MODE:
                p.setJointMotorControl2(body, joint.index, p.VELOCITY_CONTROL, targetVelocity=0.0, force=effort,
                                        physicsClientId=client)
            else:  # hold where it is
                q = p.getJointState(body, joint.index, physicsClientId=client)[0] if hold_q is None else hold_q
                self.hold_q = q
                p.setJointMotorControl2(body, joint.index, p.POSITION_CONTROL, targetPosition=q, force=effort,
                                        positionGain=POSITION_GAIN, velocityGain=VELOCITY_GAIN, physicsClientId=client)
            return
        if mode == VELOCITY_MODE:
            p.setJointMotorControl2(body, joint.index, p.VELOCITY_CONTROL, targetVelocity=self._goal_velocity(),
                                    force=effort, physicsClientId=client)
        elif mode == CURRENT_MODE:
            robot.release(joint)  # the gear train's friction, under the torque applied every step
        elif mode in POSITION_MODES and "goal_position" in self.registers:
            pass  # PositionDrives drives it before every physics step, from the drive _refresh just made
        else:  # a mode the world does not model (PWM): hold still
            robot.release(joint)

    def _goal_velocity(self) -> float:
        target = self._si("goal_velocity", self._get("goal_velocity"))
        limit = self._max_velocity()
        return max(-limit, min(limit, target)) if limit > 0 else target

    def _max_velocity(self) -> float:
        """The tighter of the velocity-limit register, the profile velocity (position modes) and the joint's."""
        limits = [self.joint.limits.velocity] if self.joint.limits.velocity > 0 else []
        if "velocity_limit" in self.table and "goal_velocity" in self.registers:
            limits.append(abs(self._si("goal_velocity", self.memory.get("velocity_limit"))))
        if "profile_velocity" in self.table and self.memory.get("profile_velocity") and "goal_velocity" in self.registers \
                and self.memory.get("operating_mode") != VELOCITY_MODE:
            limits.append(abs(self._si("goal_velocity", self.memory.get("profile_velocity"))))
        return min(limits) if limits else 0.0

    def _goal_torque(self) -> float:
        """Goal Current x torque constant, within the joint's effort limit (N m)."""
        current = self._si("goal_current", self._get("goal_current")) if "goal_current" in self.registers else 0.0
        effort = self.joint.limits.effort
        return max(-effort, min(effort, current * self.torque_constant))

    def _apply_torque(self) -> None:
        p.setJointMotorControl2(self.robot.body_id, self.joint.index, p.TORQUE_CONTROL, force=self._current_torque,
                                physicsClientId=self.robot.client)


class PositionDrive:
    """The X-series position loop and its motor, evaluated each physics step (what position modes do).

    The loop: duty u = KPP x error / (rad per pulse) / 885, within PWM Limit (KPP = Position P Gain / 128). The
    motor at duty u follows its speed-torque line, w = w0 (u - tau / tau_s) (w0: no-load speed, tau_s: stall
    torque, both the descriptor's joint limits), so at rest it gives tau_s x u: a load L leaves the error
    L / stiffness (:func:`devices.control_table.position_stiffness`), as on a real servo. In pybullet that is
    a velocity motor whose target is the line's speed for the torque the motor has been giving (its applied
    torque low-passed over ``TORQUE_FILTER_S``), force up to the torque cap (the effort limit; in mode 5 also
    Goal Current x torque constant), target within the profile velocity. A velocity motor is implicit (it never
    pushes past its target in a step), so a light link (the eyes: 6e-5 kg m^2, where an explicit damper of
    tau_s / w0 would need steps 60 times shorter) stays stable; the filter keeps the torque feedback slower than
    the heaviest arm's dynamics.
    """

    __slots__ = ("goal", "gain", "duty_cap", "no_load_speed", "damping", "torque_cap", "speed_cap", "alpha", "torque")

    def __init__(self, goal: float, gain: float, duty_cap: float, no_load_speed: float, damping: float,
                 torque_cap: float, speed_cap: float, alpha: float, torque: float = 0.0):
        self.goal, self.gain, self.duty_cap = goal, gain, duty_cap
        self.no_load_speed, self.damping = no_load_speed, damping
        self.torque_cap, self.speed_cap = torque_cap, speed_cap
        self.alpha, self.torque = alpha, torque

    @classmethod
    def of(cls, servo: JointServo, previous: PositionDrive | None) -> PositionDrive:
        """The drive of ``servo``'s control table as it is now (keeping the torque the motor was giving)."""
        memory, table, limits = servo.memory, servo.table, servo.joint.limits
        p_gain = memory.get("position_p_gain") if "position_p_gain" in table else DEFAULT_P_GAIN
        rad_per_pulse = abs(servo.specs[servo.registers["goal_position"]].scale)
        duty_cap = memory.get("pwm_limit") / PWM_FULL_SCALE if "pwm_limit" in table else 1.0
        stall, no_load = limits.effort or 1.0, limits.velocity or 1.0
        torque_cap = stall
        if servo._mode == CURRENT_BASED_POSITION_MODE and "goal_current" in servo.registers:
            torque_cap = min(stall, abs(servo._si("goal_current", servo._get("goal_current"))) * servo.torque_constant)
        speed = servo._max_velocity()
        alpha = min(1.0, servo.world.time_step_s / TORQUE_FILTER_S)
        return cls(servo._si("goal_position", servo._get("goal_position")),
                   p_gain / POSITION_P_GAIN_DIVISOR / PWM_FULL_SCALE / rad_per_pulse, duty_cap, no_load,
                   stall / no_load, torque_cap, speed if speed > 0 else no_load, alpha,
                   previous.torque if previous is not None else 0.0)

    def command(self, q: float, applied: float) -> float:
        """The velocity motor's target for joint position ``q`` and the torque it applied last step."""
        self.torque += self.alpha * (applied - self.torque)
        duty = max(-self.duty_cap, min(self.duty_cap, self.gain * (self.goal - q)))
        target = duty * self.no_load_speed - self.torque / self.damping  # the speed-torque line
        return max(-self.speed_cap, min(self.speed_cap, target))


class PositionDrives:
    """The servos of one robot body, stepped by one pre-step hook: the position-mode ones driven in one batch (one
    getJointStates and one setJointMotorControlArray for all of them: two pybullet calls per servo cost about a
    tenth of a commbot step), and each servo's own :meth:`JointServo._pre_step` (watchdog, interlock, current
    mode) run only when it can do something. That is known ahead: a watchdog fires at its deadline (last access +
    its time), the interlock acts while pressed, current mode re-applies its torque every step; otherwise the
    per-servo hook returns without effect. So the hook keeps the next deadline, recomputed when a servo says its
    state changed (:meth:`due`), and on the steps with nothing due runs the batch alone (19 Python calls per step
    fewer on the commbot). On the other steps it runs exactly what the per-servo hooks did, in their order (the
    first servo's, the batch, the others'), so a trial's bytes do not change."""

    _of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    EARLY_S = 1e-6  # the slow path starts this much before a deadline, so rounding never makes it late

    def __init__(self, robot: RobotBody):
        self.robot = robot
        self.servos: list[JointServo] = []
        self._next_s: float | None = None  # the next watchdog deadline; None: recompute
        self._interlocks: tuple[Interlock, ...] = ()  # the wheels' (a pressed one stops them in their hooks)
        self._batch: _DriveBatch | None = None
        self.applied_once: dict[int, float] | None = None  # joint -> motor torque of the step before a restore
        # (pybullet does not save it; firmware_sim/embodied/state.py hands it to the first step after)

    @classmethod
    def of(cls, world: World, robot: RobotBody) -> PositionDrives:
        """The robot's drives, made (and hooked into the world's pre-step) on first use."""
        drives = cls._of.get(robot)
        if drives is None:
            drives = cls._of[robot] = cls(robot)
            world.add_pre_step(drives.pre_step)
        return drives

    def due(self) -> None:
        """A servo's watchdog, torque, mode, drive or latch changed: find the next deadline and the servos to
        drive again before the next step."""
        self._next_s = None
        self._batch = None

    def deadline_moved(self) -> None:
        """A servo was addressed (its watchdog starts again): only the next deadline changes."""
        self._next_s = None

    def _always(self) -> bool:
        """Whether some servo's hook acts every step (current mode, or the interlock pressed under a wheel)."""
        for servo in self.servos:
            if servo._torque and not servo.latched and (servo._mode == CURRENT_MODE or (
                    servo.interlock is not None and servo.interlock.pressed)):
                return True
        return False

    def _deadline(self) -> float:
        deadlines = [servo.last_access_s + servo._watchdog_s for servo in self.servos
                     if servo._torque and servo._watchdog_s and not servo.latched]
        return min(deadlines, default=math.inf)

    def pre_step(self, world: World) -> None:
        if self._next_s is None:
            self._next_s = -math.inf if self._always() else self._deadline()
            self._interlocks = tuple({id(s.interlock): s.interlock for s in self.servos if s.interlock}.values())
        if world.time_s < self._next_s - self.EARLY_S and not any(i.pressed for i in self._interlocks):
            self.step(world)
            return
        servos = self.servos
        servos[0]._pre_step(world)  # the order the per-servo hooks ran in
        self.step(world)
        for servo in servos[1:]:
            servo._pre_step(world)
        self._next_s = None

    def step(self, world: World) -> None:
        """Every driving servo's position loop (PositionDrive.command, the same arithmetic on numpy arrays: one
        operation per step for all of them instead of a Python call per servo), one batch of motor commands."""
        batch = self._batch
        if batch is None:
            batch = self._batch = _DriveBatch([servo for servo in self.servos if servo.driving])
        if not batch.servos:
            return
        body, client = self.robot.body_id, self.robot.client
        states = p.getJointStates(body, batch.indices, physicsClientId=client)
        applied = [s[3] for s in states]
        if self.applied_once is not None:  # the step after a restore: pybullet did not keep the motors' torque
            applied = [self.applied_once.get(index, torque) for index, torque in zip(batch.indices, applied)]
            self.applied_once = None
        targets = batch.command([s[0] for s in states], applied)
        p.setJointMotorControlArray(body, batch.indices, p.VELOCITY_CONTROL, targetVelocities=targets,
                                    forces=batch.forces, physicsClientId=client)


class _DriveBatch:
    """The PositionDrives of the servos driving now, as rows of floats (rebuilt whenever a servo's state changes,
    see PositionDrives.due). Each operation is the scalar PositionDrive.command's in the same order (IEEE
    arithmetic gives the same bits), in one loop over plain floats: for the commbot's 17 servos that costs 6 us a
    step where numpy's per-call overhead on arrays this small cost 14 us. Each drive's filtered torque is written
    back every step, so a servo's next PositionDrive (made when its table changes) starts from it as before."""

    def __init__(self, servos: list[JointServo]):
        self.servos = servos
        self.drives = [servo._drive for servo in servos]
        self.indices = [servo.joint.index for servo in servos]
        self.forces = [d.torque_cap for d in self.drives]
        self.rows = [(d, d.goal, d.gain, d.duty_cap, d.no_load_speed, d.damping, d.speed_cap, d.alpha)
                     for d in self.drives]

    def command(self, q: list[float], applied: list[float]) -> list[float]:
        out = []
        for (drive, goal, gain, cap, no_load, damping, speed_cap, alpha), position, given in zip(self.rows, q, applied):
            torque = drive.torque
            torque = torque + alpha * (given - torque)
            drive.torque = torque
            error = gain * (goal - position)
            duty = -cap if error < -cap else cap if error > cap else error
            target = duty * no_load - torque / damping
            out.append(-speed_cap if target < -speed_cap else speed_cap if target > speed_cap else target)
        return out


def joint_registers(part: PartFirmware) -> dict[str, str]:
    """role -> register name for the part's one moving joint (from its descriptor)."""
    moving = part.descriptor.moving_joints
    if len(moving) != 1 or not moving[0].registers:
        raise ValueError(f"part id {part.id} ({part.descriptor.name}): a servo part drives exactly one joint with "
                         f"registers; it has {len(moving)}")
    roles = dict(moving[0].registers)
    if "present_position" not in roles:
        raise ValueError(f"part id {part.id}: its joint names no present_position register")
    return roles
