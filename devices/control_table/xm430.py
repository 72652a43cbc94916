"""Control tables compatible with ROBOTIS X-series servos (Protocol 2.0 firmware).

Addresses, sizes, access, defaults and ranges follow the XM430-W350 e-Manual. Dynamic limits (goal position
within the position limits, goal velocity within the velocity limit, ...) are rules of the servo firmware, see
firmware_sim; the static ranges here are what every write is checked against first. Indirect addressing
(168.., 578..) is not modelled yet.
"""
from __future__ import annotations

from .registers import Access, Area, ControlTable, Register

R, RW = Access.R, Access.RW
EEPROM, RAM = Area.EEPROM, Area.RAM

XM430_W350_MODEL_NUMBER = 1020
XL430_W250_MODEL_NUMBER = 1060

# Operating modes (address 11)
CURRENT_MODE = 0
VELOCITY_MODE = 1
POSITION_MODE = 3
EXTENDED_POSITION_MODE = 4
CURRENT_BASED_POSITION_MODE = 5
PWM_MODE = 16

# The position loop and the motor (e-Manual "Position PID Gain" and the XM430-W350 specifications): the loop's
# output is a PWM duty, KPP x (position error in pulses) with KPP = Position P Gain(84) / 128, in units of which
# 885 is 100 % (PWM Limit(36)); at standstill the motor gives the stall torque times that duty.
POSITION_P_GAIN_DIVISOR = 128
PWM_FULL_SCALE = 885
# Torque per ampere of the XM430-W350 at 12 V (stall torque 4.1 N m at 2.3 A): Goal Current(102) x this is the
# torque current-based modes command. Keyed by model number; the XL430 has no current control.
TORQUE_CONSTANT_NM_PER_A = {1020: 4.1 / 2.3}

# Baud rate register (address 8) -> bits per second
BAUD_RATES = {0: 9_600, 1: 57_600, 2: 115_200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000,
              7: 4_500_000}


def _x_series(model_number: int, current_limit: int | None, velocity_limit_default: int) -> tuple[Register, ...]:
    regs = [
        Register("model_number", 0, 2, R, EEPROM, default=model_number),
        Register("model_information", 2, 4, R, EEPROM),
        Register("firmware_version", 6, 1, R, EEPROM, default=46),
        Register("id", 7, 1, RW, EEPROM, default=1, minimum=0, maximum=252),
        Register("baud_rate", 8, 1, RW, EEPROM, default=1, minimum=0, maximum=7),
        Register("return_delay_time", 9, 1, RW, EEPROM, default=250, maximum=254, unit="2 us"),
        Register("drive_mode", 10, 1, RW, EEPROM, default=0, maximum=13),
        Register("operating_mode", 11, 1, RW, EEPROM, default=POSITION_MODE, maximum=16),
        Register("secondary_id", 12, 1, RW, EEPROM, default=255),
        Register("protocol_type", 13, 1, RW, EEPROM, default=2, minimum=1, maximum=2),
        Register("homing_offset", 20, 4, RW, EEPROM, signed=True, minimum=-1_044_479, maximum=1_044_479,
                 unit="0.088 deg"),
        Register("moving_threshold", 24, 4, RW, EEPROM, default=10, maximum=1023, unit="0.229 rev/min"),
        Register("temperature_limit", 31, 1, RW, EEPROM, default=80, maximum=100, unit="1 degC"),
        Register("max_voltage_limit", 32, 2, RW, EEPROM, default=160, minimum=60, maximum=160, unit="0.1 V"),
        Register("min_voltage_limit", 34, 2, RW, EEPROM, default=95, minimum=60, maximum=160, unit="0.1 V"),
        Register("pwm_limit", 36, 2, RW, EEPROM, default=885, maximum=885, unit="0.113 %"),
    ]
    if current_limit is not None:
        regs.append(Register("current_limit", 38, 2, RW, EEPROM, default=current_limit, maximum=current_limit,
                             unit="2.69 mA"))
    regs += [
        Register("velocity_limit", 44, 4, RW, EEPROM, default=velocity_limit_default, maximum=1023,
                 unit="0.229 rev/min"),
        Register("max_position_limit", 48, 4, RW, EEPROM, default=4095, maximum=4095, unit="0.088 deg"),
        Register("min_position_limit", 52, 4, RW, EEPROM, default=0, maximum=4095, unit="0.088 deg"),
        Register("startup_configuration", 60, 1, RW, EEPROM, default=0, maximum=3),
        Register("shutdown", 63, 1, RW, EEPROM, default=52),
        Register("torque_enable", 64, 1, RW, RAM, maximum=1),
        Register("led", 65, 1, RW, RAM, maximum=1),
        Register("status_return_level", 68, 1, RW, RAM, default=2, maximum=2),
        Register("registered_instruction", 69, 1, R, RAM),
        Register("hardware_error_status", 70, 1, R, RAM),
        Register("velocity_i_gain", 76, 2, RW, RAM, default=1920, maximum=16383),
        Register("velocity_p_gain", 78, 2, RW, RAM, default=100, maximum=16383),
        Register("position_d_gain", 80, 2, RW, RAM, maximum=16383),
        Register("position_i_gain", 82, 2, RW, RAM, maximum=16383),
        Register("position_p_gain", 84, 2, RW, RAM, default=800, maximum=16383),
        Register("feedforward_2nd_gain", 88, 2, RW, RAM, maximum=16383),
        Register("feedforward_1st_gain", 90, 2, RW, RAM, maximum=16383),
        Register("bus_watchdog", 98, 1, RW, RAM, maximum=127, unit="20 ms"),
        Register("goal_pwm", 100, 2, RW, RAM, signed=True, minimum=-885, maximum=885, unit="0.113 %"),
    ]
    if current_limit is not None:
        regs.append(Register("goal_current", 102, 2, RW, RAM, signed=True, minimum=-current_limit,
                             maximum=current_limit, unit="2.69 mA"))
    regs += [
        Register("goal_velocity", 104, 4, RW, RAM, signed=True, minimum=-1023, maximum=1023, unit="0.229 rev/min"),
        Register("profile_acceleration", 108, 4, RW, RAM, maximum=32767, unit="214.577 rev/min^2"),
        Register("profile_velocity", 112, 4, RW, RAM, maximum=32767, unit="0.229 rev/min"),
        Register("goal_position", 116, 4, RW, RAM, signed=True, minimum=-1_048_575, maximum=1_048_575,
                 unit="0.088 deg"),
        Register("realtime_tick", 120, 2, R, RAM, unit="1 ms"),
        Register("moving", 122, 1, R, RAM),
        Register("moving_status", 123, 1, R, RAM),
        Register("present_pwm", 124, 2, R, RAM, signed=True, unit="0.113 %"),
        Register("present_current", 126, 2, R, RAM, signed=True, unit="2.69 mA"),
        Register("present_velocity", 128, 4, R, RAM, signed=True, unit="0.229 rev/min"),
        Register("present_position", 132, 4, R, RAM, signed=True, default=2048, unit="0.088 deg"),
        Register("velocity_trajectory", 136, 4, R, RAM, signed=True, unit="0.229 rev/min"),
        Register("position_trajectory", 140, 4, R, RAM, signed=True, unit="0.088 deg"),
        Register("present_input_voltage", 144, 2, R, RAM, default=120, unit="0.1 V"),
        Register("present_temperature", 146, 1, R, RAM, default=30, unit="1 degC"),
        Register("backup_ready", 147, 1, R, RAM),
    ]
    return tuple(regs)


XM430_W350 = ControlTable("XM430-W350", XM430_W350_MODEL_NUMBER, _x_series(XM430_W350_MODEL_NUMBER, 1193, 200),
                          size=661)
# The XL430 has no current sensing: no current limit, no goal current (its present current reads as load).
XL430_W250 = ControlTable("XL430-W250", XL430_W250_MODEL_NUMBER, _x_series(XL430_W250_MODEL_NUMBER, None, 265),
                          size=661)

TABLES_BY_MODEL = {t.model_number: t for t in (XM430_W350, XL430_W250)}


def position_stiffness(p_gain: int, stall_torque_nm: float, rad_per_pulse: float) -> float:
    """The holding stiffness (N m/rad) of an X-series position loop at Position P Gain ``p_gain``: how much
    torque it gives per radian of error at standstill (KPP x pulses per rad / 885 of the stall torque). At the
    default gain 800 an XM430-W350 (4.1 N m, 4096 pulses per turn) holds with 18.9 N m/rad: a load of 1 N m
    leaves it 3 degrees short."""
    return p_gain / POSITION_P_GAIN_DIVISOR / PWM_FULL_SCALE * stall_torque_nm / rad_per_pulse
