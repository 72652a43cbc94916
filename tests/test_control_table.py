"""Control tables: register encoding, the XM430-W350 layout, and the access rules RegisterMemory enforces."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hil.devices.control_table import (XL430_W250, XM430_W350, XM430_W350_MODEL_NUMBER, Access, Area, ControlTable,
                                   Register, RegisterMemory)
from hil.devices.protocol import AccessError, DataLengthError, DataLimitError, DataRangeError, StatusError

XM = XM430_W350


def memory() -> RegisterMemory:
    return RegisterMemory(XM)


def le(value: int, size: int, signed: bool = False) -> bytes:
    return value.to_bytes(size, "little", signed=signed)


# ---------------------------------------------------------------------------------------------- layout
@pytest.mark.parametrize("name,address,size", [
    ("model_number", 0, 2), ("return_delay_time", 9, 1), ("operating_mode", 11, 1), ("torque_enable", 64, 1),
    ("status_return_level", 68, 1), ("hardware_error_status", 70, 1), ("goal_velocity", 104, 4),
    ("goal_position", 116, 4), ("present_current", 126, 2), ("present_velocity", 128, 4),
    ("present_position", 132, 4), ("id", 7, 1), ("baud_rate", 8, 1), ("registered_instruction", 69, 1),
])
def test_xm430_w350_addresses(name, address, size):
    reg = XM[name]
    assert (reg.address, reg.size) == (address, size)
    assert XM.owner_of[address] is reg


def test_xm430_w350_identity_and_defaults():
    m = memory()
    assert XM.model_number == XM430_W350_MODEL_NUMBER == 1020
    assert m.read(0, 2) == le(1020, 2)
    assert m.get("model_number") == 1020
    assert m.get("return_delay_time") == 250
    assert m.get("status_return_level") == 2
    assert m.get("operating_mode") == 3
    assert m.get("torque_enable") == 0
    assert XM.size == 662  # Indirect Data 56 is the last byte, at 661
    assert XL430_W250.model_number == 1060 and "goal_current" not in XL430_W250 and "goal_current" in XM


def test_xm430_w350_areas_and_access():
    assert XM["return_delay_time"].area is Area.EEPROM and XM["operating_mode"].area is Area.EEPROM
    assert XM["torque_enable"].area is Area.RAM and XM["goal_position"].area is Area.RAM
    for name in ("model_number", "hardware_error_status", "present_position", "present_velocity", "present_current",
                 "registered_instruction"):
        assert XM[name].access is Access.R
    assert XM["present_position"].signed and XM["present_velocity"].signed and XM["present_current"].signed
    assert not XM["model_number"].signed


def test_unknown_register_name_gives_a_hint():
    with pytest.raises(KeyError, match="goal"):
        XM["goal_positon"]


def test_layouts_refuse_overlaps_duplicates_and_bad_defaults():
    with pytest.raises(ValueError, match="overlaps"):
        ControlTable("T", 1, (Register("a", 0, 4), Register("b", 2, 2)))
    with pytest.raises(ValueError, match="twice"):
        ControlTable("T", 1, (Register("a", 0, 1), Register("a", 4, 1)))
    with pytest.raises(ValueError):
        Register("c", 0, 1, default=256)
    with pytest.raises(ValueError):
        Register("d", 0, 3)  # writable registers are 1, 2, 4 or 8 bytes


# ---------------------------------------------------------------------------------------------- encoding
@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.booleans(), st.data())
def test_register_encode_decode_round_trip(size, signed, data):
    reg = Register("r", 0, size, signed=signed)
    lo, hi = reg.raw_bounds
    value = data.draw(st.integers(lo, hi))
    raw = reg.encode(value)
    assert len(raw) == size
    assert reg.decode(raw) == value
    assert raw == value.to_bytes(size, "little", signed=signed)


def test_signed_and_unsigned_interpretation_of_the_same_bytes():
    assert XM["present_position"].decode(b"\xff\xff\xff\xff") == -1
    assert XM["present_position"].encode(-2) == b"\xfe\xff\xff\xff"
    assert XM["profile_velocity"].decode(b"\xff\xff\xff\xff") == 0xFFFFFFFF
    assert XM["goal_velocity"].encode(-1023) == le(-1023, 4, signed=True)
    assert XM["present_current"].decode(b"\x00\x80") == -32768
    assert Register("u", 0, 2).raw_bounds == (0, 65535)
    assert Register("s", 0, 2, signed=True).raw_bounds == (-32768, 32767)
    with pytest.raises(OverflowError):
        Register("u", 0, 1).encode(256)
    with pytest.raises(OverflowError):
        Register("u", 0, 1).encode(-1)


# ---------------------------------------------------------------------------------------------- writes
def test_valid_write_changes_the_registers_and_reports_them():
    m = memory()
    changes = m.write(116, le(-1000, 4, True))
    assert [(r.name, v) for r, v in changes] == [("goal_position", -1000)]
    assert m.get("goal_position") == -1000
    assert m.read(116, 4) == le(-1000, 4, True)


@pytest.mark.parametrize("name,value", [
    ("goal_position", 1_048_576), ("goal_position", -1_048_576), ("goal_velocity", 1024), ("goal_velocity", -1024),
    ("torque_enable", 2), ("status_return_level", 3), ("id", 253), ("baud_rate", 8), ("return_delay_time", 255),
    ("operating_mode", 17), ("protocol_type", 0), ("max_voltage_limit", 59), ("goal_current", 1194),
])
def test_out_of_range_writes_raise_data_range(name, value):
    m = memory()
    reg = XM[name]
    before = bytes(m.data)
    with pytest.raises(DataRangeError) as info:
        m.write(reg.address, reg.encode(value))
    assert info.value.code == 4
    assert bytes(m.data) == before


@pytest.mark.parametrize("name,value", [
    ("goal_position", 1_048_575), ("goal_position", -1_048_575), ("goal_velocity", -1023), ("id", 252),
    ("return_delay_time", 254), ("status_return_level", 0),
])
def test_boundary_values_are_accepted(name, value):
    m = memory()
    m.write(XM[name].address, XM[name].encode(value))
    assert m.get(name) == value


@pytest.mark.parametrize("name", ["model_number", "firmware_version", "registered_instruction",
                                  "hardware_error_status", "present_position", "present_current", "realtime_tick"])
def test_read_only_registers_raise_access_error(name):
    m = memory()
    reg = XM[name]
    before = bytes(m.data)
    with pytest.raises(AccessError) as info:
        m.write(reg.address, bytes(reg.size))
    assert info.value.code == 7
    assert bytes(m.data) == before


def test_eeprom_is_locked_while_torque_is_enabled():
    m = memory()
    m.write(64, b"\x01")  # torque on
    for name in ("id", "return_delay_time", "operating_mode", "max_position_limit", "velocity_limit", "homing_offset"):
        reg = XM[name]
        with pytest.raises(AccessError):
            m.write(reg.address, reg.encode(reg.default))
    m.write(116, le(100, 4))  # RAM is still writable
    m.write(64, b"\x00")  # torque off unlocks it
    m.write(XM["operating_mode"].address, b"\x01")
    assert m.get("operating_mode") == 1


@pytest.mark.parametrize("address,data,error", [
    (117, b"\x00\x00\x00", DataLengthError),  # starts inside goal_position
    (116, b"\x00\x00", DataLengthError),  # covers half of goal_position
    (116, b"\x00" * 5, DataLengthError),  # goal_position and half of realtime_tick
    (0, b"\x00", DataLengthError),  # half of model_number (the length is checked before read-only)
    (104, b"\x00" * 10, DataLengthError),  # goal_velocity, profile_acceleration, half of profile_velocity
    (116, b"\x00" * 6, AccessError),  # goal_position and all of realtime_tick, which is read-only
    (64, b"\x00\x00\x00", AccessError),  # torque_enable, led, then address 66 which is no register
])
def test_partial_register_writes_raise_data_length(address, data, error):
    m = memory()
    before = bytes(m.data)
    with pytest.raises(error) as info:
        m.write(address, data)
    assert info.value.code == error.code
    assert bytes(m.data) == before


def test_writes_beyond_the_table_or_empty_or_into_gaps_raise_access_error():
    m = memory()
    before = bytes(m.data)
    for address, data in ((662, b"\x00"), (661, b"\x00\x00"), (5000, b"\x00"), (116, b""), (14, b"\x00"),
                          (148, b"\x00")):
        with pytest.raises(AccessError):
            m.write(address, data)
    assert bytes(m.data) == before


def test_reads_beyond_the_table_raise_access_error():
    m = memory()
    assert len(m.read(0, 662)) == 662
    with pytest.raises(AccessError):
        m.read(661, 2)
    with pytest.raises(AccessError):
        m.read(10, 0)


@pytest.mark.parametrize("bad_name,bad_value,error", [
    ("profile_acceleration", 40_000, DataRangeError),  # last register of the block out of range
    ("goal_velocity", 2_000, DataRangeError),  # first register out of range
    ("profile_velocity", 32_768, DataRangeError),
])
def test_a_multi_register_write_with_one_bad_register_changes_nothing(bad_name, bad_value, error):
    m = memory()
    before = bytes(m.data)
    block = {"goal_velocity": 10, "profile_acceleration": 20, "profile_velocity": 30, "goal_position": 40}
    block[bad_name] = bad_value
    data = b"".join(XM[n].encode(v) for n, v in block.items())  # 104..119, contiguous
    with pytest.raises(error):
        m.write(104, data)
    assert bytes(m.data) == before
    block[bad_name] = 1
    good = b"".join(XM[n].encode(v) for n, v in block.items())
    m.write(104, good)
    assert [m.get(n) for n in block] == list(block.values())


def test_a_multi_register_write_crossing_a_read_only_register_changes_nothing():
    m = memory()
    before = bytes(m.data)
    with pytest.raises(AccessError):
        m.write(116, le(5, 4) + b"\x00\x00")  # goal_position then realtime_tick (read-only)
    assert bytes(m.data) == before


def test_a_rule_refusal_after_validation_changes_nothing():
    def no_big_goals(memory_, reg, value):
        if value > 100:
            raise DataLimitError(memory_.get("id"), DataLimitError.code, "too far")

    m = RegisterMemory(XM, {"goal_position": no_big_goals})
    before = bytes(m.data)
    with pytest.raises(DataLimitError):
        m.write(112, le(5, 4) + le(500, 4))  # profile_velocity ok, goal_position refused by the rule
    assert bytes(m.data) == before
    m.write(112, le(5, 4) + le(50, 4))
    assert (m.get("profile_velocity"), m.get("goal_position")) == (5, 50)


def test_status_errors_carry_the_device_id():
    m = memory()
    m.set("id", 42)
    with pytest.raises(StatusError) as info:
        m.write(132, bytes(4))
    assert info.value.packet_id == 42


def test_reset_restores_defaults_by_area_and_keeps_named_registers():
    m = memory()
    m.write(7, b"\x05")  # id (EEPROM)
    m.write(9, b"\x00")  # return delay (EEPROM)
    m.write(65, b"\x01")  # led (RAM)
    m.reset(area=Area.RAM)
    assert (m.get("id"), m.get("return_delay_time"), m.get("led")) == (5, 0, 0)
    m.write(65, b"\x01")
    m.reset(keep=("id",))
    assert (m.get("id"), m.get("return_delay_time"), m.get("led")) == (5, 250, 0)
    m.reset()
    assert m.get("id") == 1
