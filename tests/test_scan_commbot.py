"""The communication robot scanned from its parts: in-process and over a real pty, and changed by editing its
assembly only (the modular-robot reference: parts can be added or removed freely because each carries its own data)."""
from __future__ import annotations

from pathlib import Path

from conftest import SimProcess
from hil.runtime.bus import BusHost
from hil.runtime.scan import DescriptorCache, ScanReport, scan_bus
from hil.runtime.scan.format import robot_json
from hil.runtime.transports import open_transport

COMMBOT = Path(__file__).resolve().parent.parent / "config" / "robots" / "commbot.yaml"
ARM = {10, 11, 12, 13, 14, 15, 16, 17, 18}


def scan(url: str, cache_dir: Path, report: ScanReport | None = None):
    with BusHost(open_transport(url)) as bus:
        return scan_bus(bus, DescriptorCache(cache_dir), report=report)


def check_commbot(robot) -> None:
    assert not robot.quarantined and not robot.problems
    assert len(robot.parts) == 40 and robot.root_id == 1
    assert robot.dof == 17
    assert sum(len(p.descriptor.moving_joints) for p in robot.parts.values() if p.kind == "wheel") == 2
    carriage = robot.parts[1]
    assert carriage.descriptor.name == "carriage" and carriage.parent_id is None
    assert carriage.children == {"wheel_left": 2, "wheel_right": 3, "ring": 4, "bumper": 5, "torso": 6}
    assert robot.parts[18].kind == "gripper" and robot.path(18).startswith("torso/shoulder_left/")
    assert robot.parts[43].kind == "camera" and robot.parts[43].parent_id == 42
    depth = {p.id: d for p, d in robot.walk()}
    assert len(depth) == 40, "every part is reachable from the root"


def test_commbot_in_process(tmp_path):
    check_commbot(scan("sim://commbot", tmp_path))


def test_commbot_over_a_pty_matches_in_process(tmp_path):
    device = SimProcess("--pty", assembly="commbot")
    try:
        cold, warm = ScanReport(), ScanReport()
        over_pty = scan(device.where, tmp_path, cold)
        again = scan(device.where, tmp_path, warm)
    finally:
        device.stop()
    check_commbot(over_pty)
    in_process = scan("sim://commbot", tmp_path)
    strip = lambda r: {k: v for k, v in robot_json(r).items() if k != "bus"}
    assert strip(over_pty) == strip(in_process) == strip(again)
    assert cold.descriptors_read > 0 and warm.descriptors_read == 0, "the second scan reads only headers"


def _edit_assembly(tmp_path: Path, drop: set[int] = frozenset(), extra: str = "") -> str:
    lines = [line for line in COMMBOT.read_text().splitlines()
             if not any(f"id: {i}," in line for i in drop)]
    path = tmp_path / "variant.yaml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return f"sim://{path}"


def test_removing_an_arm_changes_the_scanned_robot(tmp_path):
    robot = scan(_edit_assembly(tmp_path, drop=ARM), tmp_path)
    assert not robot.quarantined and not robot.problems
    assert len(robot.parts) == 31 and robot.dof == 17 - 5
    assert "shoulder_left" not in robot.parts[6].children


def test_adding_a_part_changes_the_scanned_robot(tmp_path):
    extra = "  - {id: 60, part: cpc_servo, parent: 6, port: shoulder_left}\n"
    robot = scan(_edit_assembly(tmp_path, drop=ARM, extra=extra), tmp_path)
    assert not robot.quarantined and not robot.problems, robot.problems
    assert len(robot.parts) == 32 and robot.parts[60].parent_id == 6 and robot.dof == 17 - 5 + 1
