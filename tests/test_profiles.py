"""Profiles and semantics files: the shipped ones load, and every mistake is reported with file:line before
anything is opened (and, for `hil run`, as a one-line error with exit code 2)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hil.devices.yaml_source import ConfigError
from hil.runtime.bus import BusHost
from hil.cli import main as hil_main
from hil.runtime.robot.blueprint import resolve
from hil.devices.config_path import builtin_root
from hil.runtime.robot.profile import load_profile
from hil.runtime.robot.semantics import load_semantics
from hil.runtime.robot.sensors import sensing_kind
from hil.runtime.scan import DescriptorCache, scan_bus
from hil.runtime.transports import open_transport

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "config" / "profiles"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


# --- the shipped profiles ---------------------------------------------------------------------------------------
def test_shipped_profiles_load():
    virtual = load_profile(PROFILES / "virtual.yaml")
    assert (virtual.bus, virtual.clock, virtual.clock_endpoint) == ("sim://commbot?clock=sim", "sim", None)
    assert virtual.semantics == (builtin_root() / "semantics" / "commbot.yaml") and virtual.bus_url() == "sim://commbot?clock=sim"
    real = load_profile(PROFILES / "real.yaml")
    assert real.clock == "real" and real.bus == "serial:///dev/ttyUSB0?baud=1000000"
    assert real.bus_timeout_s == pytest.approx(0.025) and real.bus_retries == 3
    with pytest.raises(ConfigError, match=r"pty\.yaml:\d+: missing key 'bus'.*hil run --bus URL"):
        load_profile(PROFILES / "pty.yaml")
    pty = load_profile(PROFILES / "pty.yaml", bus="/dev/pts/7")
    assert (pty.bus, pty.clock, pty.clock_endpoint) == ("/dev/pts/7", "sim", "tcp://127.0.0.1:5757")
    assert load_profile("virtual").source == str(PROFILES / "virtual.yaml"), "a bare name is under config/profiles/"


def test_sim_bus_follows_the_profile_clock(tmp_path):
    assert load_profile({"bus": "sim://commbot", "clock": "sim"}).bus_url() == "sim://commbot?clock=sim"
    assert load_profile({"bus": "sim://commbot?seed=3", "clock": "real"}).bus_url() == "sim://commbot?seed=3&clock=real"
    assert load_profile({"bus": "/dev/ttyUSB0", "clock": "sim"}).bus_url() == "/dev/ttyUSB0"
    path = write(tmp_path, "p.yaml", """
        bus: sim://commbot?clock=real
        clock: sim
    """)
    with pytest.raises(ConfigError, match="runs its world on the real clock but the profile says clock: sim"):
        load_profile(path).bus_url()


@pytest.mark.parametrize("body, line, message", [
    ("bus: sim://commbot\nclock: sim\nclok_endpoint: tcp://127.0.0.1:5757\n", 3,
     "unknown key 'clok_endpoint'; did you mean 'clock_endpoint'"),
    ("bus: sim://commbot\nclock: 5\n", 2, "clock must be one of real, sim, not int 5"),
    ("bus: sim://commbot\nclock: simulated\n", 2, "clock must be one of real, sim, not 'simulated'"),
    ("clock: real\n", 1, "missing key 'bus'"),
    ("bus: [sim://commbot]\nclock: real\n", 1, "bus must be a bus URL"),
    ("bus: /dev/ttyUSB0\n", 1, "missing key 'clock'"),
    ("bus: /dev/ttyUSB0\nclock: real\nclock_endpoint: tcp://127.0.0.1:5757\n", 3, "it needs clock: sim"),
    ("bus: /dev/ttyUSB0\nclock: sim\nclock_endpoint: 127.0.0.1:5757\n", 3, "must start with tcp:// or ipc://"),
    ("bus: /dev/ttyUSB0\nclock: real\nbus_timeout_ms: 0\n", 3, "bus_timeout_ms must be > 0"),
    ("bus: /dev/ttyUSB0\nclock: real\nbus_retries: true\n", 3, "bus_retries must be an integer"),
    ("bus: /dev/ttyUSB0\nclock: real\nsemantics: nowhere\n", 3, "no semantics file named .nowhere.; known: commbot"),
    ("bus: /dev/ttyUSB0\nclock: real\nclock: sim\n", 3, "key 'clock' appears twice"),
    ("- bus: /dev/ttyUSB0\n", 1, "a profile is a mapping"),
])
def test_profile_errors_give_file_and_line(tmp_path, body, line, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)


def test_hil_run_reports_a_bad_profile_in_one_line(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", """
        bus: sim://commbot
        clock: wall
    """)
    assert hil_main(["run", str(ROOT / "examples" / "joint_sweep.py"), "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"hil: error: {path}:2: clock must be one of real, sim, not 'wall'"


def test_hil_run_reports_a_controller_that_is_not_python(tmp_path, capsys):
    controller = write(tmp_path, "broken.py", "def main(robot):\n    for\n")
    assert hil_main(["run", str(controller), "--profile", str(PROFILES / "virtual.yaml")]) == 2
    assert f"{controller}:2: not valid Python" in capsys.readouterr().err


# --- semantics files ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def commbot(tmp_path_factory):
    """The commbot's virtual robot (scanned without a world: only names and the tree matter here)."""
    with BusHost(open_transport("sim://commbot?world=0")) as bus:
        return scan_bus(bus, DescriptorCache(tmp_path_factory.mktemp("cache")))


def bind(semantics_path: Path, robot):
    return resolve(load_semantics(semantics_path), robot, lambda part: sensing_kind(part.descriptor) is not None)


def test_commbot_semantics_name_all_17_dof_the_wheels_and_the_sensors(commbot):
    blueprint = bind((builtin_root() / "semantics" / "commbot.yaml"), commbot)
    assert not blueprint.problems and not blueprint.missing_joints
    named = [name for name in blueprint.joints if "/" not in name]
    assert len(named) == 19 == len(blueprint.joints), "every moving joint has a blueprint name"
    ids = {name: b.part_id for name, b in blueprint.joints.items()}
    assert (ids["base.wheel_left"], ids["base.wheel_right"], ids["head.neck_yaw"], ids["head.neck_roll"]) == (2, 3, 30, 34)
    assert (ids["left_arm.shoulder_pitch"], ids["left_arm.elbow"], ids["left_arm.hand"]) == (10, 16, 18)
    assert (ids["right_arm.shoulder_roll"], ids["right_eye.pan"], ids["left_eye.tilt"]) == (22, 45, 42)
    sensors = {name: b.part_id for name, b in blueprint.sensors.items()}
    assert sensors == {"ring": 4, "bumper": 5, "shoulders": 6, "left_arm.forearm": 17, "right_arm.forearm": 27,
                       "head_camera": 43, "right_camera": 48}


def test_unnamed_parts_keep_their_tree_path_and_serials_name_parts(commbot, tmp_path):
    serial = commbot.parts[16].serial_number
    path = write(tmp_path, "s.yaml", f"""
        joints:
          elbow: serial:{serial:016x}
    """)
    blueprint = bind(path, commbot)
    assert blueprint.joints["elbow"].part_id == 16
    assert "torso/neck:horn" in blueprint.joints and "ring" in blueprint.sensors, "defaults: the tree path"
    assert blueprint.aliases("joints")[blueprint.joints["elbow"].default_name] == "elbow"


def test_a_name_for_a_missing_part_is_noted_not_fatal(commbot, tmp_path):
    path = write(tmp_path, "s.yaml", """
        joints:
          head.neck_yaw: torso/neck
          tail.wag: torso/tail
    """)
    blueprint = bind(path, commbot)
    assert "head.neck_yaw" in blueprint.joints and "tail.wag" not in blueprint.joints
    assert blueprint.problems == [f"{path}:3: joint tail.wag: no part at torso/tail in this scan"]
    assert "scan found no part there" in blueprint.missing_joints["tail.wag"]


@pytest.mark.parametrize("body, line, message", [
    ("joints:\n  head.neck_yaw: torso/neck\n  neck.bracket: torso/neck/horn\n", 3,
     "neck.bracket: torso/neck/horn is part id 31 \\(bracket_l, bracket\\), which has no moving joint"),
    ("joints:\n  head.neck_yaw: torso/neck:elbow\n", 2, "which has no moving joint 'elbow'; its moving joints: horn"),
    ("joints:\n  a: torso/neck\n  b: torso/neck:horn\n", 3, "b: the same joint is already named 'a' on line 2"),
    ("joints:\n  a: torso/neck\n  b: torso/neck\n", 3, "b: torso/neck is already named 'a' on line 2"),
    ("joints:\n  2arms: torso/neck\n", 2, "'2arms' is not a name"),
    ("joints:\n  head.yaw: torso//neck\n", 2, "is not a tree path"),
    ("joints:\n  head.yaw: 30\n", 2, "expected a tree path .* not 30"),
    ("joints:\n  head.yaw: serial:xyz\n", 2, "'xyz' is not a hexadecimal serial"),
    ("sensors:\n  ring: ring:horn\n", 2, "a sensor names a part, not a joint"),
    ("sensors:\n  neck: torso/neck\n", 2, "torso/neck is part id 30 \\(cpc_servo, servo_joint\\), which has no sensor"),
    ("joint:\n  head.yaw: torso/neck\n", 1, "unknown key 'joint'; known: robot, description, joints, sensors"),
    ("joints: [torso/neck]\n", 1, "joints must map names to tree paths or serials"),
])
def test_semantics_errors_give_file_and_line(commbot, tmp_path, body, line, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message) as info:
        bind(path, commbot)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
