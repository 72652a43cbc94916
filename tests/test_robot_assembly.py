"""The robot assembled in one place (runtime/robot/assembly.py): a part found at open and the same part plugged
in while running become the same joints, sensors and model; a newcomer that cannot be assembled leaves the
robot's assembly as it was; the assembly is frozen.

On the commbot's left arm alone (config/robots/left_arm.yaml) as an in-process bus without a world, so a robot
opens in a fraction of a second; the forearm and hand are left out of one copy and plugged in while it runs
(firmware_sim/hotplug.py)."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest

from hil.devices.catalog import load_part
from hil.devices.descriptor import descriptor_from_dict, descriptor_to_dict
from hil.firmware_sim import hotplug
from hil.runtime.robot import Robot
from hil.runtime.robot.assembly import Assembly

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
FOREARM, HAND = 8, 9
HAND_JOINT = "horn/mount/horn/mount/horn/elbow/horn/hand:finger"  # tree path : the hand descriptor's joint
FOREARM_SENSOR = "horn/mount/horn/mount/horn/elbow/horn"  # the forearm's contact sensor, by its tree path


def arm_without(tmp_path, *ids: int) -> str:
    """config/robots/left_arm.yaml without the parts at ``ids``, written under tmp_path."""
    text = (ROOT / "config/robots/left_arm.yaml").read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if not any(line.startswith(f"  - {{id: {i},") for i in ids)]
    path = tmp_path / f"arm_without_{'_'.join(map(str, ids))}.yaml"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return str(path)


def profile(tmp_path, assembly: str, **extra) -> dict:
    return {"bus": f"sim://{assembly}?world=0", "clock": "real", "cache_dir": str(tmp_path / "cache"),
            "rescan_s": 0.05, **extra}


def run_until_event(robot, kind: str, seconds: float = 2.0) -> list:
    """Loop (real clock, 100 Hz) until a part event of ``kind`` or ``seconds``; the events of that kind."""
    for _ in robot.loop(hz=100, duration_s=seconds):
        if any(e.kind == kind for e in robot.part_events):
            break
    return [e for e in robot.part_events if e.kind == kind]


def joints_of(robot) -> dict:
    return {name: (j.part_id, j.part_joint, j.path, j.mode, j.joint_type, j.limits) for name, j in robot.joints.items()}


def test_opening_and_adoption_assemble_the_same_robot_from_the_same_parts(tmp_path):
    with Robot.open(profile(tmp_path, "left_arm")) as opened:
        at_open = opened.assembly
        joints, sensors = joints_of(opened), {n: (s.part_id, type(s).__name__) for n, s in opened.sensors.items()}
        masses = {link.name: link.inertia.mass for link in at_open.model.links}
        read_items, drivers = at_open.cycle.read_items, set(at_open.drivers)
        names_q = at_open.model.joint_names
    with Robot.open(profile(tmp_path, arm_without(tmp_path, FOREARM, HAND))) as robot:
        before = robot.assembly
        shoulder = robot.joints["root:horn"]
        assert HAND_JOINT not in robot.joints and len(robot.virtual.parts) == 7
        dev = robot.bus.transport.device
        hotplug.add(dev, FOREARM, "forearm", 7, "horn")
        hotplug.add(dev, HAND, "hand", FOREARM, "hand")
        new = run_until_event(robot, "new")
        assert sorted(e.part_id for e in new) == [FOREARM, HAND], robot.notes
        after = robot.assembly
        assert after is not before and robot.joints["root:horn"] is shoulder, "kept handles stay the controller's"
        assert joints_of(robot) == joints
        assert {n: (s.part_id, type(s).__name__) for n, s in robot.sensors.items()} == sensors
        assert {link.name: link.inertia.mass for link in after.model.links} == masses
        assert after.model.joint_names == names_q and after.cycle.read_items == read_items
        assert set(after.drivers) == drivers
    # the values themselves, from the catalog's descriptors
    hand = load_part("hand")
    finger = next(j for j in hand.moving_joints if j.name == "finger")
    assert joints[HAND_JOINT][:2] == (HAND, "finger") and joints[HAND_JOINT][5] == finger.limits
    assert sensors[FOREARM_SENSOR] == (FOREARM, "ContactSensor")
    hand_mass = sum(m for name, m in masses.items() if name.startswith("hand"))
    assert hand_mass == pytest.approx(sum(b.inertial.mass for b in hand.bodies)) and hand_mass > 0
    assert len(names_q) == 5  # four arm servos and the hand's finger


BROKEN_DRIVER = "raise RuntimeError('calibration table missing')\n"


def hand_with_broken_driver():
    doc = descriptor_to_dict(load_part("hand"))
    doc["name"], doc["model_number"] = "hand_v2", doc["model_number"] + 1
    doc["driver"] = {"source": BROKEN_DRIVER, "sha256": hashlib.sha256(BROKEN_DRIVER.encode()).hexdigest(),
                     "signature": "", "key_id": ""}
    return descriptor_from_dict(doc)


def test_a_part_that_cannot_be_assembled_leaves_the_running_assembly_untouched(tmp_path):
    desc = hand_with_broken_driver()
    trust = tmp_path / "trust.yaml"
    trust.write_text(f"sha256: [\"{desc.driver.sha256}\"]\n")
    with Robot.open(profile(tmp_path, arm_without(tmp_path, HAND), trust_file=str(trust))) as robot:
        before = robot.assembly
        names = {name: (j.name, j.path) for name, j in robot.joints.items()}
        hotplug.add(robot.bus.transport.device, HAND, desc, FOREARM, "hand")
        refused = run_until_event(robot, "quarantined")
        assert [e.part_id for e in refused] == [HAND], robot.notes
        assert "trusted driver code failed to load" in refused[0].detail
        assert robot.assembly is before, "nothing swapped"
        assert HAND not in robot.virtual.parts and HAND_JOINT not in robot.joints
        assert {name: (j.name, j.path) for name, j in robot.joints.items()} == names
        assert robot.part_events == refused
        ticks = robot.ticks
        for _ in robot.loop(hz=100, duration_s=0.3):  # rescans go on: the refused part is not tried again
            pass
        assert robot.ticks > ticks and robot.part_events == refused and robot.assembly is before


def test_the_assembly_is_frozen(tmp_path):
    with Robot.open(profile(tmp_path, "left_arm")) as robot:
        assembly = robot.assembly
        assert isinstance(assembly, Assembly)
        with pytest.raises(dataclasses.FrozenInstanceError):
            assembly.base = None  # type: ignore[misc]
        with pytest.raises(TypeError):
            assembly.drivers[HAND] = None  # type: ignore[index]
        with pytest.raises(TypeError):
            assembly.joints[HAND_JOINT] = None  # type: ignore[index]
        with pytest.raises(AttributeError):
            robot.joints = {}  # type: ignore[misc]
        with pytest.raises(AttributeError):
            robot.model = None  # type: ignore[misc]
        assert isinstance(assembly.notes, tuple)
        assert robot.assembly is assembly and HAND_JOINT in robot.joints
