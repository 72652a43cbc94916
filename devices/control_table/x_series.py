"""Control tables of ROBOTIS X-series servos (Protocol 2.0 firmware), one per model the virtual bus can be.

Addresses, sizes, access, defaults and ranges follow each model's e-Manual; tests/test_servo_models.py checks
every address and size against the control tables DynamixelSDK ships (``dynamixel_easy_sdk``). Dynamic limits
(goal position within the position limits, goal velocity within the velocity limit, ...) are rules of the servo
firmware, see firmware_sim; the static ranges here are what every write is checked against first.

Indirect addressing: Indirect Address N (2 bytes, 168.. and, on models with a second block, 578..) holds the
address Indirect Data N (1 byte, 224.. and 634..) stands for (devices/control_table/memory.py). The factory value
points each pointer at its own data byte (no mapping); a pointer accepts 64..the last indirect data address, the
RAM area, and the virtual servo refuses any address in the indirect blocks or between registers with Data Range.
The pointers are RAM, but the servo refuses them (Access error) while torque is on, as the real one does.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

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
# Torque per ampere at 12 V (5 V for the XC330), stall torque over stall current from each e-Manual: Goal
# Current(102) x this is the torque the current-based modes command. Keyed by model number; the XL430 has no
# current control.
TORQUE_CONSTANT_NM_PER_A = {1020: 4.1 / 2.3, 1030: 3.0 / 2.3, 1000: 3.4 / 1.3, 1120: 10.6 / 4.4, 1240: 0.93 / 1.8}

# Baud rate register (address 8) -> bits per second
BAUD_RATES = {0: 9_600, 1: 57_600, 2: 115_200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000,
              7: 4_500_000}


@dataclass(frozen=True)
class XModel:
    """What sets one X-series model's table apart: its number, current sensing, ranges and factory values.

    ``indirect``: (first pointer address, first data address, count) per block. ``changes`` replaces fields of
    the common registers by name (defaults, ranges, units); ``extra`` adds model-only registers; ``drop`` removes
    common registers the model lacks."""

    name: str
    number: int
    current_limit: int | None  # None: no current sensing (no Current Limit, no Goal Current)
    velocity_limit: int
    indirect: tuple[tuple[int, int, int], ...] = ((168, 224, 28), (578, 634, 28))
    changes: dict[str, dict] = field(default_factory=dict)
    extra: tuple[Register, ...] = ()
    drop: tuple[str, ...] = ()


def _common(model: XModel) -> list[Register]:
    regs = [
        Register("model_number", 0, 2, R, EEPROM, default=model.number),
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
        Register("velocity_limit", 44, 4, RW, EEPROM, default=model.velocity_limit, maximum=1023,
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
        Register("goal_velocity", 104, 4, RW, RAM, signed=True, minimum=-1023, maximum=1023, unit="0.229 rev/min"),
        Register("profile_acceleration", 108, 4, RW, RAM, maximum=32767, unit="214.577 rev/min^2"),
        Register("profile_velocity", 112, 4, RW, RAM, maximum=32767, unit="0.229 rev/min"),
        Register("goal_position", 116, 4, RW, RAM, signed=True, minimum=-1_048_575, maximum=1_048_575,
                 unit="0.088 deg"),
        Register("realtime_tick", 120, 2, R, RAM, unit="1 ms"),
        Register("moving", 122, 1, R, RAM),
        Register("moving_status", 123, 1, R, RAM),
        Register("present_pwm", 124, 2, R, RAM, signed=True, unit="0.113 %"),
        Register("present_velocity", 128, 4, R, RAM, signed=True, unit="0.229 rev/min"),
        Register("present_position", 132, 4, R, RAM, signed=True, default=2048, unit="0.088 deg"),
        Register("velocity_trajectory", 136, 4, R, RAM, signed=True, unit="0.229 rev/min"),
        Register("position_trajectory", 140, 4, R, RAM, signed=True, unit="0.088 deg"),
        Register("present_input_voltage", 144, 2, R, RAM, default=120, unit="0.1 V"),
        Register("present_temperature", 146, 1, R, RAM, default=30, unit="1 degC"),
        Register("backup_ready", 147, 1, R, RAM),
    ]
    if model.current_limit is None:  # no current sensing: 126 reports the load (0.1 % of the maximum torque)
        regs.append(Register("present_load", 126, 2, R, RAM, signed=True, minimum=-1000, maximum=1000, unit="0.1 %"))
    else:
        limit = model.current_limit
        regs += [Register("current_limit", 38, 2, RW, EEPROM, default=limit, maximum=limit, unit="2.69 mA"),
                 Register("goal_current", 102, 2, RW, RAM, signed=True, minimum=-limit, maximum=limit,
                          unit="2.69 mA"),
                 Register("present_current", 126, 2, R, RAM, signed=True, unit="2.69 mA")]
    return regs


def indirect_registers(blocks: tuple[tuple[int, int, int], ...]) -> tuple[Register, ...]:
    """Indirect Address/Data 1..N over ``blocks`` (first pointer, first data byte, count), numbered on across
    blocks as ROBOTIS numbers them; every pointer accepts 64..the last data address (its e-Manual range)."""
    last = max(data + count - 1 for _, data, count in blocks)
    regs, n = [], 0
    for pointers, data, count in blocks:
        for k in range(count):
            n += 1
            regs += [Register(f"indirect_address_{n}", pointers + 2 * k, 2, RW, RAM, default=data + k, minimum=64,
                              maximum=last, torque_lock=True),
                     Register(f"indirect_data_{n}", data + k, 1, RW, RAM)]
    return tuple(regs)


def x_series_table(model: XModel) -> ControlTable:
    regs = [replace(r, **model.changes.get(r.name, {})) for r in _common(model) if r.name not in model.drop]
    unknown = set(model.changes) - {r.name for r in regs}
    if unknown:
        raise ValueError(f"{model.name}: changes name no register: {', '.join(sorted(unknown))}")
    regs = sorted(regs + list(model.extra) + list(indirect_registers(model.indirect)), key=lambda r: r.address)
    return ControlTable(model.name, model.number, tuple(regs))


_MA = {"unit": "1 mA"}
MODELS = (
    XModel("XM430-W350", 1020, current_limit=1193, velocity_limit=200),
    XModel("XM430-W210", 1030, current_limit=1193, velocity_limit=330),
    XModel("XH430-W350", 1000, current_limit=648, velocity_limit=130,
           changes={"max_voltage_limit": {"minimum": 95}, "min_voltage_limit": {"minimum": 95},
                    "position_p_gain": {"default": 900}}),
    XModel("XL430-W250", 1060, current_limit=None, velocity_limit=265,
           changes={"temperature_limit": {"default": 72},
                    "max_voltage_limit": {"default": 140, "maximum": 140},
                    "min_voltage_limit": {"default": 60, "maximum": 140},
                    "velocity_i_gain": {"default": 1000}, "position_d_gain": {"default": 4000},
                    "position_p_gain": {"default": 640}}),
    XModel("XM540-W270", 1120, current_limit=2047, velocity_limit=128,
           changes={"max_voltage_limit": {"minimum": 95}, "min_voltage_limit": {"minimum": 95}},
           extra=tuple(Register(f"external_port_mode_{k}", 55 + k, 1, RW, EEPROM, default=3, maximum=3)
                       for k in (1, 2, 3))
           + tuple(Register(f"external_port_data_{k}", 150 + 2 * k, 2, RW, RAM, maximum=4095) for k in (1, 2, 3))),
    # XC330 firmware before v52: one indirect block of 28 (v52 moved to 20 at 168/208; DynamixelSDK ships both,
    # and picks by the Firmware Version(6) this part reports, 46)
    XModel("XC330-M288", 1240, current_limit=2352, velocity_limit=350, indirect=((168, 224, 28),),
           changes={"baud_rate": {"maximum": 6}, "drive_mode": {"maximum": 5},
                    "protocol_type": {"minimum": 2, "maximum": 22},
                    "temperature_limit": {"default": 70},
                    "max_voltage_limit": {"default": 70, "minimum": 31, "maximum": 70},
                    "min_voltage_limit": {"default": 35, "minimum": 31, "maximum": 70},
                    "velocity_limit": {"maximum": 2047}, "goal_velocity": {"minimum": -2047, "maximum": 2047},
                    "current_limit": _MA, "goal_current": _MA, "present_current": _MA,
                    "velocity_i_gain": {"default": 1600}, "velocity_p_gain": {"default": 50},
                    "position_d_gain": {"default": 500}, "position_p_gain": {"default": 1100}},
           extra=(Register("pwm_slope", 62, 1, RW, EEPROM, default=140, minimum=1, maximum=255, unit="1.977 mV/ms"),)),
)
TABLES_BY_MODEL = {m.number: x_series_table(m) for m in MODELS}
TABLES_BY_NAME = {t.model_name: t for t in TABLES_BY_MODEL.values()}
XM430_W350 = TABLES_BY_MODEL[XM430_W350_MODEL_NUMBER]
XL430_W250 = TABLES_BY_MODEL[XL430_W250_MODEL_NUMBER]


def position_stiffness(p_gain: int, stall_torque_nm: float, rad_per_pulse: float) -> float:
    """The holding stiffness (N m/rad) of an X-series position loop at Position P Gain ``p_gain``: how much
    torque it gives per radian of error at standstill (KPP x pulses per rad / 885 of the stall torque). At the
    default gain 800 an XM430-W350 (4.1 N m, 4096 pulses per turn) holds with 18.9 N m/rad: a load of 1 N m
    leaves it 3 degrees short."""
    return p_gain / POSITION_P_GAIN_DIVISOR / PWM_FULL_SCALE * stall_torque_nm / rad_per_pulse
