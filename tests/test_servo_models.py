"""Every servo model the virtual bus can be, checked against ROBOTIS's own data and driven as a user would.

DynamixelSDK 4.x ships ``dynamixel_easy_sdk`` with its model list (number -> model file) and one control table per
model (address, size, name; the same files ROBOTIS's ros2_control hardware interface reads): each of our tables
must have every item the SDK lists, at the same address with the same size, and the model's number and name.
The SDK ships no access or ranges: those are checked by what the device answers (a wrong-range write gets the
real servo's Data Range error, a read-only item Access), and by the e-Manual values the tables cite.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from dynamixel_easy_sdk.control_table import CONTROL_TABLE_PATH, ControlTable

from hil.devices.catalog import plain_servo
from hil.devices.control_table import TABLES_BY_MODEL
from hil.devices.control_table.x_series import MODELS
from hil.devices.protocol import Packet, Read, StreamDecoder, Write, encode_request
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.assembly import load_assembly
from hil.firmware_sim.servo import ServoFirmware

from conftest import hil_command

RANGE_ERROR, ACCESS_ERROR = 4, 7
REQUIRED = {"XL430-W250", "XC330-M288", "XM430-W210", "XM540-W270", "XH430-W350", "XM430-W350"}
# the names ROBOTIS's interface files use for the first indirect entries it writes and reads through
INDIRECT_ALIASES = {"Indirect Address Write": "indirect_address", "Indirect Data Write": "indirect_data",
                    "Indirect Address Read": "indirect_address", "Indirect Data Read": "indirect_data"}


def sdk_items(model_number: int, firmware_version: int) -> list[tuple[str, int, int]]:
    """(name, address, size) of every item of the SDK's file for this model, the firmware-specific one the
    hardware interface would pick (the highest ``_fwN`` at or below the version the servo reports) if any."""
    base = ControlTable.getModelName(model_number)[:-len(".model")]
    versions = [int(m.group(1)) for p in Path(str(CONTROL_TABLE_PATH)).glob(f"{base}_fw*.model")
                if (m := re.fullmatch(rf"{base}_fw(\d+)\.model", p.name)) and int(m.group(1)) <= firmware_version]
    path = Path(str(CONTROL_TABLE_PATH)) / (f"{base}_fw{max(versions)}.model" if versions else f"{base}.model")
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("[control table]") + 2  # the section's header line, then items
    return [(name, int(address), int(size)) for address, size, name in
            (line.split("\t") for line in lines[start:] if line.strip())]


def our_name(sdk_name: str) -> str:
    return re.sub(r"\(.*?\)", "", sdk_name).strip().lower().replace(" ", "_")


def test_the_required_models_are_there():
    assert REQUIRED <= {t.model_name for t in TABLES_BY_MODEL.values()}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_model_number_and_name_are_robotis_own(model):
    assert ControlTable.getModelName(model.number) == model.name.lower().replace("-", "_") + ".model"
    assert TABLES_BY_MODEL[model.number].model_name == model.name
    assert plain_servo(model.number).name == model.name  # the catalog part hil scan names it by


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_every_item_of_the_sdk_table_is_ours_at_the_same_address_and_size(model):
    table = TABLES_BY_MODEL[model.number]
    firmware = table["firmware_version"].default
    items = sdk_items(model.number, firmware)
    assert len(items) > 40
    for name, address, size in items:
        if name in INDIRECT_ALIASES:
            reg = table.owner_of[address]
            assert reg is not None and reg.address == address and reg.name.startswith(INDIRECT_ALIASES[name] + "_"), \
                (model.name, name, address)
            continue
        reg = table[our_name(name)]
        assert (reg.address, reg.size) == (address, size), (model.name, name)
    # and the other way: what we model beyond the SDK's list is only what the e-Manual adds
    listed = {our_name(n) for n, _, _ in items}
    extra = {r.name for r in table.registers if r.name not in listed and not r.name.startswith("indirect_")}
    assert extra <= {"startup_configuration", "backup_ready"}, (model.name, extra)


def _device(model) -> VirtualBusDevice:
    return VirtualBusDevice([ServoFirmware(TABLES_BY_MODEL[model.number], 1)])


def _answer(device: VirtualBusDevice, request) -> Packet:
    device.receive(encode_request(request))
    [reply] = StreamDecoder().feed(device.take_output())
    return reply


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_a_wrong_range_write_gets_the_real_servos_errors(model):
    table = TABLES_BY_MODEL[model.number]
    device = _device(model)
    velocity_limit = table["velocity_limit"]
    too_fast = velocity_limit.maximum + 1
    assert _answer(device, Write(1, velocity_limit.address, velocity_limit.encode(too_fast))).error == RANGE_ERROR
    if "current_limit" in table:
        limit = table["current_limit"]
        assert limit.default == model.current_limit
        assert _answer(device, Write(1, limit.address, limit.encode(limit.maximum + 1))).error == RANGE_ERROR
    else:  # no current sensing: 126 is Present Load, read-only
        assert table.owner_of[126].name == "present_load"
        assert _answer(device, Write(1, 126, b"\x00\x00")).error == ACCESS_ERROR
    reply = _answer(device, Read(1, 0, 2))
    assert (reply.error, int.from_bytes(reply.data, "little")) == (0, model.number)


def test_a_robot_file_may_use_every_model_and_hil_scan_names_them(tmp_path):
    robot = tmp_path / "mixed.yaml"
    robot.write_text("name: mixed\nparts:\n  - {id: 1, part: carriage}\n" + "".join(
        f"  - {{id: {i}, model: {name}, parent: 1, port: {port}}}\n" for i, (name, port) in enumerate(
            (("XL430-W250", "wheel_left"), ("XC330-M288", "wheel_right"), ("XM430-W210", "ring"),
             ("XM540-W270", "bumper"), ("XH430-W350", "torso")), start=2)))
    parts = {p.id: p.model_number for p in load_assembly(str(robot)).parts}
    assert parts == {1: 5001, 2: 1060, 3: 1240, 4: 1030, 5: 1120, 6: 1000}
    proc = subprocess.run([*hil_command(), "scan", "--bus", f"sim://{robot}"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HIL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    for line in ("wheel_left: [2] XL430-W250", "wheel_right: [3] XC330-M288", "ring: [4] XM430-W210",
                 "bumper: [5] XM540-W270", "torso: [6] XH430-W350"):
        assert line in proc.stdout, proc.stdout


def test_an_unknown_model_is_refused_at_its_line(tmp_path):
    robot = tmp_path / "bad.yaml"
    robot.write_text("name: bad\nparts:\n  - {id: 1, model: XM430-W999}\n")
    with pytest.raises(Exception) as err:
        load_assembly(str(robot))
    assert "bad.yaml:3" in str(err.value) and "XM430-W999" in str(err.value) and "XC330-M288" in str(err.value)


def test_hil_sim_list_models_lists_every_model_by_number_and_name():
    proc = subprocess.run([*hil_command(), "sim", "--list-models"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split() for line in proc.stdout.splitlines()]
    assert listed == [[str(n), TABLES_BY_MODEL[n].model_name] for n in sorted(TABLES_BY_MODEL)]
    assert {name for _, name in listed} >= REQUIRED
