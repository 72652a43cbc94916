"""Assembly files: the built-in servo chain loads, and every bad input names file:line and what is wrong."""
from __future__ import annotations

import pytest

from hil.devices.yaml_source import ConfigError
from hil.firmware_sim.assembly import load_assembly


def test_servo_chain_has_17_xm430_servos():
    assembly = load_assembly("servo_chain")
    assert [p.id for p in assembly.parts] == list(range(1, 18))
    assert {p.model_number for p in assembly.parts} == {1020}


@pytest.mark.parametrize("body, line, words", [
    ("name: x\nparts:\n  - {id: 1, model: XM430-W350}\n  - {id: 1, model: XM430-W350}\n", 4, "already used"),
    ("name: x\nparts:\n  - {id: 300, model: XM430-W350}\n", 3, "outside 0..252"),
    ("name: x\nparts:\n  - {id: 2, model: XM999}\n", 3, "unknown model 'XM999'"),
    ("name: x\nparts:\n  - {model: XM430-W350}\n", 3, "missing field 'id'"),
    ("name: x\nparts:\n  - {id: two, model: XM430-W350}\n", 3, "id must be int"),
    ("name: x\nparts: [\n", 3, "YAML syntax"),
    ("parts: []\n", 1, "missing field 'name'"),
    ("name: x\nname: y\nparts: []\n", 2, "appears twice"),
])
def test_bad_assembly_names_file_line_and_problem(tmp_path, body, line, words):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_assembly(str(path))
    assert f"bad.yaml:{line}:" in str(info.value)
    assert words in str(info.value)


def test_unknown_assembly_name_lists_known_ones():
    with pytest.raises(ConfigError, match="servo_chain"):
        load_assembly("no_such_robot")
