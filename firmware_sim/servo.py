"""Firmware of an X-series-compatible servo, with a first-order response standing in for physics.

Where no pybullet world drives the joints, the present position follows the goal exponentially
with time constant ``tau_s`` (position modes), integrates the goal velocity (velocity mode), or holds (torque
off). The state is evaluated analytically at each access, so it is exact at any polling rate.
"""
from __future__ import annotations

import math
from functools import partial

from hil.devices.control_table import (CURRENT_MODE, EXTENDED_POSITION_MODE, POSITION_MODE, VELOCITY_MODE,
                                   ControlTable, Register, RegisterMemory)
from hil.devices.protocol import DataLimitError, ResultFail

from .part import PartFirmware

TICKS_PER_REV = 4096
VELOCITY_UNIT_RPM = 0.229
MOVING_STATUS_IN_POSITION = 0x01


def _ticks_per_s(raw_velocity: int) -> float:
    return raw_velocity * VELOCITY_UNIT_RPM / 60.0 * TICKS_PER_REV


def _limit_rule(limit_name: str, symmetric: bool):
    def rule(memory: RegisterMemory, reg: Register, value: int) -> None:
        limit = memory.get(limit_name)
        if abs(value) > limit if symmetric else value > limit:
            raise DataLimitError(memory.get("id"), DataLimitError.code,
                                 f"{reg.name}={value} exceeds {limit_name}={limit}")
    return rule


def _goal_position_rule(memory: RegisterMemory, reg: Register, value: int) -> None:
    if memory.get("operating_mode") != POSITION_MODE:
        return  # extended modes take the whole static range
    lo, hi = memory.get("min_position_limit"), memory.get("max_position_limit")
    if not lo <= value <= hi:
        raise DataLimitError(memory.get("id"), DataLimitError.code,
                             f"goal_position={value} outside the position limits {lo}..{hi}")


class ServoFirmware(PartFirmware):
    def __init__(self, table: ControlTable, device_id: int, serial_number: int = 0, tau_s: float = 0.05):
        rules = {"goal_position": _goal_position_rule, "goal_velocity": _limit_rule("velocity_limit", True),
                 "goal_pwm": _limit_rule("pwm_limit", True)}
        if "current_limit" in table:
            rules["goal_current"] = _limit_rule("current_limit", True)
        super().__init__(table, device_id, serial_number, rules)
        self.tau_s = tau_s
        self.position = float(self.memory.get("present_position"))
        self.velocity = 0.0  # ticks/s
        # every access integrates and publishes: the registers it touches, compiled once (memory.getter/setter)
        memory = self.memory
        self._getters = {name: memory.getter(name) if name in table else partial(memory.get, name) for name in (
            "torque_enable", "operating_mode", "goal_velocity", "goal_position", "moving_threshold")}
        self._setters = {name: memory.setter(name) if name in table else partial(memory.set, name) for name in (
            "present_position", "present_velocity", "moving", "moving_status", "realtime_tick")}
        self._has_current = "goal_current" in table

    def advance(self, now_s: float) -> None:
        dt = now_s - self.time_s
        if dt > 0:
            self._integrate(dt)
        super().advance(now_s)
        self._publish(now_s)

    def _integrate(self, dt: float) -> None:
        get = self._getters
        if not get["torque_enable"]():
            self.velocity = 0.0
            return
        mode = get["operating_mode"]()
        if mode == VELOCITY_MODE:
            self.velocity = _ticks_per_s(get["goal_velocity"]())
            self.position += self.velocity * dt
        elif mode in (POSITION_MODE, EXTENDED_POSITION_MODE) or mode == 5:
            goal = float(get["goal_position"]())
            decay = math.exp(-dt / self.tau_s)
            self.position = goal + (self.position - goal) * decay
            self.velocity = (goal - self.position) / self.tau_s
        elif mode == CURRENT_MODE:
            self.velocity = 0.0

    def _publish(self, now_s: float) -> None:
        get, put = self._getters, self._setters
        put["present_position"](round(self.position))
        raw_velocity = round(self.velocity * 60.0 / TICKS_PER_REV / VELOCITY_UNIT_RPM)
        put["present_velocity"](raw_velocity)
        moving = abs(raw_velocity) > get["moving_threshold"]()
        put["moving"](int(moving))
        put["moving_status"](0 if moving else MOVING_STATUS_IN_POSITION)
        if self._has_current and get["operating_mode"]() == CURRENT_MODE and get["torque_enable"]():
            memory = self.memory
            memory.set("present_current", memory.get("goal_current"))
        put["realtime_tick"](int(now_s * 1000) % 32768)

    def on_written(self, names: list[str]) -> None:
        if "torque_enable" in names and self.memory.get("torque_enable"):
            self.velocity = 0.0

    def on_reboot(self) -> None:
        self.velocity = 0.0

    def clear_multi_turn(self) -> None:
        if self.memory.get("moving"):
            raise ResultFail(self.id, ResultFail.code, "multi-turn clear refused while moving")
        turns = round(self.position) // TICKS_PER_REV * TICKS_PER_REV
        self.position -= turns
        self.memory.set("present_position", round(self.position))
        # the goal moves with the position, or a servo holding torque would drive back by the cleared turns
        self.memory.set("goal_position", self.memory.get("goal_position") - turns)
