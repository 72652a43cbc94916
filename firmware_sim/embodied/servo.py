"""Servo and wheel firmware whose joint is a pybullet joint: modes, torque enable, limits, watchdog.

The control table keeps its XM430 meaning; conversions between raw units and the joint's SI values come from
the part's own descriptor registers (the same ones the host's drivers use). Commands become pybullet motor
commands when they are written; present values are read from the joint whenever the host asks.

- position modes (3, 4, 5): POSITION_CONTROL toward the goal, force up to the joint's effort limit, speed up to
  the profile velocity (or the descriptor's velocity limit);
- velocity mode (1): VELOCITY_CONTROL at the goal velocity, clamped to the velocity-limit register;
- current mode (0): TORQUE_CONTROL, torque = goal current x torque constant, re-applied every step;
- torque off: the joint is released to its friction.
Watchdog: the Bus Watchdog register (98, units of 20 ms, as on X-series) or the device default; when no
instruction has addressed the part for that long, the actuator stops (velocity 0, or holds its position) and
the register reads 255 until a new command arrives, which re-arms it with its previous setting. Wheels also obey the contact interlock (contact.py).
"""
from __future__ import annotations

import pybullet as p

from devices.control_table import CURRENT_MODE, VELOCITY_MODE
from devices.protocol import ResultFail

from ..part import PartFirmware
from ..world import RobotBody, RobotJoint, World

WATCHDOG_UNIT_S = 0.020
WATCHDOG_TRIPPED = 255
TORQUE_CONSTANT_NM_PER_A = 4.1 / 2.3  # XM430-W350: stall torque 4.1 N m at 2.3 A (12 V)
POSITION_GAIN = 0.3  # pybullet POSITION_CONTROL gains: a stiff, slightly damped servo
VELOCITY_GAIN = 1.0
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
        self.specs = {r.name: r for r in self.descriptor.registers}
        self.last_access_s = 0.0
        self.latched = False  # stopped by the interlock or the watchdog until the next command
        self.stops: list[tuple[int, str]] = []  # (world step, why) of every stop, for logs and tests
        if default_watchdog_s and "bus_watchdog" in self.table and not self.memory.get("bus_watchdog"):
            self.memory.set("bus_watchdog", max(1, min(127, round(default_watchdog_s / WATCHDOG_UNIT_S))))
        self._refresh()
        world.add_pre_step(self._pre_step)
        self._command()
        return self

    def _refresh(self) -> None:
        """Cache what every physics step looks at; called whenever the control table may have changed."""
        memory = self.memory
        self._torque = bool(memory.get("torque_enable"))
        self._mode = memory.get("operating_mode")
        setting = memory.get("bus_watchdog") if "bus_watchdog" in self.table else 0
        self._watchdog_s = setting * WATCHDOG_UNIT_S if 0 < setting <= 127 else 0.0

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
        self._publish()

    def on_written(self, names: list[str]) -> None:
        self._refresh()
        if COMMAND_REGISTERS.intersection(names):
            if "bus_watchdog" in self.table and self.memory.get("bus_watchdog") == WATCHDOG_TRIPPED:
                self.memory.set("bus_watchdog", self._tripped_setting)  # armed again, as it was
                self._refresh()
            if not (self.interlock is not None and self.interlock.pressed):
                self.latched = False
            self._command()

    def on_reboot(self) -> None:
        self.latched = False
        self._refresh()
        self._command()

    def clear_multi_turn(self) -> None:
        raise ResultFail(self.id, ResultFail.code, "multi-turn clear is not supported by world-backed joints")

    def _publish(self) -> None:
        q, qd, _, torque = p.getJointState(self.robot.body_id, self.joint.index, physicsClientId=self.robot.client)
        memory = self.memory
        memory.set(self.registers["present_position"], self._raw("present_position", q))
        if "present_velocity" in self.registers:
            memory.set(self.registers["present_velocity"], self._raw("present_velocity", qd))
        if "present_current" in self.registers:
            memory.set(self.registers["present_current"], self._raw("present_current", torque / TORQUE_CONSTANT_NM_PER_A))
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
        elif self._mode == CURRENT_MODE and not self.latched:
            self._apply_torque()

    def stop_now(self, why: str = "interlock") -> None:
        """Stop this actuator before the next physics step (the interlock calls it from a post-step hook)."""
        if self.memory.get("torque_enable") and not self.latched:
            self._stop(why)

    def _stop(self, why: str) -> None:
        self.latched = True
        self.stops.append((self.world.steps, why))
        self._command()

    def _command(self) -> None:
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
                q = p.getJointState(body, joint.index, physicsClientId=client)[0]
                p.setJointMotorControl2(body, joint.index, p.POSITION_CONTROL, targetPosition=q, force=effort,
                                        positionGain=POSITION_GAIN, velocityGain=VELOCITY_GAIN, physicsClientId=client)
            return
        if mode == VELOCITY_MODE:
            p.setJointMotorControl2(body, joint.index, p.VELOCITY_CONTROL, targetVelocity=self._goal_velocity(),
                                    force=effort, physicsClientId=client)
        elif mode == CURRENT_MODE:
            robot.release(joint)
        else:
            kwargs = {"maxVelocity": self._max_velocity()} if self._max_velocity() > 0 else {}
            p.setJointMotorControl2(body, joint.index, p.POSITION_CONTROL, targetPosition=self._si(
                "goal_position", self._get("goal_position")), force=effort, positionGain=POSITION_GAIN,
                velocityGain=VELOCITY_GAIN, physicsClientId=client, **kwargs)

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

    def _apply_torque(self) -> None:
        current = self._si("goal_current", self._get("goal_current")) if "goal_current" in self.registers else 0.0
        torque = max(-self.joint.limits.effort, min(self.joint.limits.effort, current * TORQUE_CONSTANT_NM_PER_A))
        p.setJointMotorControl2(self.robot.body_id, self.joint.index, p.TORQUE_CONTROL, force=torque,
                                physicsClientId=self.robot.client)


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
