"""`hil scan` and `hil urdf` as a user runs them: subprocesses, real output."""
from __future__ import annotations

import json
import subprocess
import sys


def hil(*args: str, env_cache: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], capture_output=True, text=True, timeout=120,
                          env={"HIL_CACHE_DIR": env_cache, "PATH": "/usr/bin:/bin"})


def test_scan_json_lists_every_part_with_its_identity(tmp_path):
    proc = hil("scan", "--bus", "sim://commbot", "--json", env_cache=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["dof"] == 17 and doc["root_id"] == 1 and len(doc["parts"]) == 40
    by_id = {p["id"]: p for p in doc["parts"]}
    elbow = by_id[16]
    assert set(elbow) >= {"id", "serial", "model", "kind", "parent_id", "parent_port", "sha256", "joints"}
    assert elbow["model"] == 1020 and elbow["kind"] == "servo_joint" and elbow["joints"] == ["horn"]
    assert elbow["parent_id"] == 15 and elbow["parent_port"] == "elbow" and len(elbow["sha256"]) == 64
    assert isinstance(elbow["serial"], int)
    assert doc["quarantined"] == {} and doc["problems"] == []


def test_scan_tree_for_people(tmp_path):
    proc = hil("scan", "--bus", "sim://commbot", env_cache=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sim://commbot: 40 parts, 17 DoF (+2 wheels)")
    assert "wheel_left: [2] wheel_motor (wheel)" in proc.stdout


def test_urdf_command_writes_a_robot(tmp_path):
    out = tmp_path / "commbot.urdf"
    proc = hil("urdf", "--bus", "sim://commbot", "-o", str(out), env_cache=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.count("<link ") == 59 + 2 and text.count('type="revolute"') + text.count('type="continuous"') == 19
    assert_optical_frames(text, {f"torso/neck/horn/mount/horn/mount/horn/head/eye_{side}/horn/mount/horn"
                                 for side in ("left", "right")})  # no semantics: the cameras' tree paths


def assert_optical_frames(text: str, cameras: set[str]) -> None:
    """Each camera's NAME_optical_frame hangs from its camera body's link on a fixed joint NAME_optical_joint,
    rpy (-pi/2, 0, -pi/2) (REP-103, as the ROS bridge's /robot_description), and weighs nothing."""
    import math
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    links = {el.get("name"): el for el in root.findall("link")}
    joints = {el.get("name"): el for el in root.findall("joint")}
    assert {name[:-len("_optical_frame")] for name in links if name.endswith("_optical_frame")} == cameras
    for camera in cameras:
        joint = joints[f"{camera}_optical_joint"]
        assert joint.get("type") == "fixed" and joint.find("child").get("link") == f"{camera}_optical_frame"
        parent = joint.find("parent").get("link")
        assert parent in links and "camera" in parent, parent  # the camera part's body
        rpy = [float(v) for v in joint.find("origin").get("rpy").split()]
        assert rpy == [-math.pi / 2, 0.0, -math.pi / 2]
        assert float(links[f"{camera}_optical_frame"].find("inertial/mass").get("value")) == 0.0


def test_scan_of_a_bad_url_is_a_clear_error(tmp_path):
    proc = hil("scan", "--bus", "sim://no_such_robot", env_cache=str(tmp_path))
    assert proc.returncode == 2 and "no assembly of that name" in proc.stderr
