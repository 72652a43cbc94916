"""`hil scan --profile` and `hil urdf --profile` as a user runs them (subprocesses, real output): every bus of a
profile scanned alone and merged at its mounts, as Robot.open does. The robot is the split commbot of
test_multibus.py: its body in the scanning process (sim://commbot_body, no world) and its left arm served by
another process on a real pty (`hil sim left_arm --pty --no-world`, conftest's ``arm``), mounted on the torso's
shoulder_left port. The arm's IDs (1..9) collide with the body's on purpose: parts are told apart by bus + ID.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pybullet as p
import pytest

from tests.test_cli_scan import assert_optical_frames

BODY = "sim://commbot_body?world=0"
COMMBOT = "sim://commbot?world=0"
NOWHERE = "/dev/hil-no-such-port"
ARM_PARTS = 9
MOUNT = "{part: torso, port: shoulder_left}"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("descriptors")


def hil(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HIL_CACHE_DIR": str(cache)})


def profile(tmp_path: Path, arm_url: str, body: str = BODY, mount: str = MOUNT, name: str = "two.yaml") -> Path:
    """A two-bus profile file; the arm's bus is on line 5 (errors about its mount name that line)."""
    path = tmp_path / name
    path.write_text(f"clock: real\nsemantics: commbot\nbuses:\n  - {{name: body, url: '{body}'}}\n"
                    f"  - {{name: arm, url: '{arm_url}', mount: {mount}}}\n")
    return path


def scan_json(*args: str, cache: Path) -> dict:
    proc = hil("scan", *args, "--json", cache=cache)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- the tree -----------------------------------------------------------------------------------------------------
def test_scan_profile_shows_the_arm_under_the_torsos_shoulder_on_its_own_bus(arm, tmp_path, cache_dir):
    proc = hil("scan", "--profile", str(profile(tmp_path, arm.where)), cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{tmp_path / 'two.yaml'}: 40 parts, 17 DoF (+2 wheels), 2 buses"
    assert lines[1] == f"bus body: {BODY}&clock=real, 31 parts, main bus"
    assert lines[2] == f"bus arm: {arm.where}, {ARM_PARTS} parts, mounted on torso [body:6] port shoulder_left"
    torso = next(i for i, line in enumerate(lines) if line.strip().startswith("torso: [body:6] torso (hub)"))
    shoulder = next(i for i, line in enumerate(lines) if "shoulder_left: [arm:1]" in line)
    depth = len(lines[torso]) - len(lines[torso].lstrip())
    assert len(lines[shoulder]) - len(lines[shoulder].lstrip()) == depth + 2  # a child of the torso
    assert lines[shoulder].strip().startswith("shoulder_left: [arm:1] cpc_servo (servo_joint) joints: horn")
    assert lines[shoulder].endswith("<- mount of bus arm")
    # the arm's nine parts follow, deeper than the shoulder's port, each named by its bus and its ID on it
    arm_lines = lines[shoulder:shoulder + ARM_PARTS]
    assert [line.split("[", 1)[1].split("]", 1)[0] for line in arm_lines] == [f"arm:{i}" for i in range(1, 10)]
    assert all(len(line) - len(line.lstrip()) > depth + 2 for line in arm_lines[1:])
    assert sum("[arm:" in line for line in lines) == ARM_PARTS
    assert "hand: [arm:9] hand (gripper) joints: finger" in proc.stdout
    assert "shoulder_right: [body:20] cpc_servo" in proc.stdout  # the body's own arm, on the body's bus
    assert "QUARANTINED" not in proc.stdout and "problem:" not in proc.stdout


def test_scan_profile_json_gives_each_part_its_bus_wire_id_and_the_commbots_paths(arm, tmp_path, cache_dir):
    merged = scan_json("--profile", str(profile(tmp_path, arm.where)), cache=cache_dir)
    body = scan_json("--bus", BODY, cache=cache_dir)
    arm_alone = scan_json("--bus", arm.where, cache=cache_dir)
    commbot = scan_json("--bus", COMMBOT, cache=cache_dir)
    # part count: body + arm = the commbot's; DoF too
    assert len(merged["parts"]) == len(body["parts"]) + len(arm_alone["parts"]) == len(commbot["parts"]) == 40
    assert merged["dof"] == commbot["dof"] == 17
    assert merged["quarantined"] == {} and merged["problems"] == []
    # every arm part: bus "arm", its ID on that bus (as the arm alone reports it, matched by serial)
    arm_ids = {part["serial"]: part["id"] for part in arm_alone["parts"]}
    on_arm = [part for part in merged["parts"] if part["bus"] == "arm"]
    assert len(on_arm) == ARM_PARTS
    assert {part["serial"]: part["wire_id"] for part in on_arm} == arm_ids
    assert all(part["id"] == 256 + part["wire_id"] for part in on_arm)  # robot-wide: bus index * 256 + ID
    assert all(part["path"].startswith("torso/shoulder_left") for part in on_arm)
    body_ids = {part["serial"]: part["id"] for part in body["parts"]}
    on_body = [part for part in merged["parts"] if part["bus"] == "body"]
    assert {part["serial"]: part["wire_id"] for part in on_body} == body_ids
    # the arm's root hangs from the torso's shoulder_left port, across the buses
    by_id = {part["id"]: part for part in merged["parts"]}
    root = next(part for part in on_arm if part["wire_id"] == 1)
    assert root["parent_port"] == "shoulder_left" and root["path"] == "torso/shoulder_left"
    assert (by_id[root["parent_id"]]["bus"], by_id[root["parent_id"]]["wire_id"]) == ("body", 6)
    assert merged["buses"] == [
        {"name": "body", "url": f"{BODY}&clock=real", "parts": 31, "mount": None},
        {"name": "arm", "url": arm.where, "parts": ARM_PARTS,
         "mount": {"part_id": 6, "path": "torso", "bus": "body", "wire_id": 6, "name": "torso",
                   "port": "shoulder_left"}}]
    # the same tree as the one-bus commbot: the same paths hold the same kinds of part
    assert ({part["path"]: part["name"] for part in merged["parts"]}
            == {part["path"]: part["name"] for part in commbot["parts"]})


def test_scan_profile_bus_replaces_the_main_bus_and_a_one_bus_profile_is_bus_main(arm, tmp_path, cache_dir):
    # the profile's main bus is nowhere; --bus puts the body there (as hil run --bus does)
    path = profile(tmp_path, arm.where, body=NOWHERE)
    merged = scan_json("--profile", str(path), "--bus", BODY, cache=cache_dir)
    assert [(bus["name"], bus["url"]) for bus in merged["buses"]] == [("body", f"{BODY}&clock=real"),
                                                                      ("arm", arm.where)]
    assert len(merged["parts"]) == 40
    one = tmp_path / "one.yaml"
    one.write_text(f"clock: real\nbus: '{COMMBOT}'\n")
    single = scan_json("--profile", str(one), cache=cache_dir)
    assert single["buses"] == [{"name": "main", "url": f"{COMMBOT}&clock=real", "parts": 40, "mount": None}]
    assert all(part["bus"] == "main" and part["wire_id"] == part["id"] for part in single["parts"])
    tree = hil("scan", "--profile", str(one), cache=cache_dir)
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.splitlines()[:2] == [f"{one}: 40 parts, 17 DoF (+2 wheels)",
                                            f"bus main: {COMMBOT}&clock=real, 40 parts, main bus"]


# --- the URDF -----------------------------------------------------------------------------------------------------
def pybullet_mass(path: Path) -> tuple[float, int]:
    """(total mass, joint count) of a URDF as pybullet loads it (floating base: a fixed base reports mass 0)."""
    client = p.connect(p.DIRECT)
    try:
        body = p.loadURDF(str(path), flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=client)
        joints = p.getNumJoints(body, physicsClientId=client)
        mass = sum(p.getDynamicsInfo(body, link, physicsClientId=client)[0] for link in range(-1, joints))
        return mass, joints
    finally:
        p.disconnect(client)


def test_urdf_profile_is_the_whole_robot_with_the_commbots_mass(arm, tmp_path, cache_dir):
    out, reference = tmp_path / "two.urdf", tmp_path / "commbot.urdf"
    proc = hil("urdf", "--profile", str(profile(tmp_path, arm.where)), "-o", str(out), cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stderr and "59 links, 19 moving joints" in proc.stderr
    ref = hil("urdf", "--bus", COMMBOT, "-o", str(reference), cache=cache_dir)
    assert ref.returncode == 0, ref.stderr
    text = out.read_text()
    assert '<robot name="two">' in text  # named after the profile, not its main bus (commbot_body)
    mass, joints = pybullet_mass(out)
    ref_mass, ref_joints = pybullet_mass(reference)
    assert joints == ref_joints and text.count("<link ") == reference.read_text().count("<link ") == 59 + 2
    assert_optical_frames(text, {"head_camera", "right_camera"})  # named by the profile's semantics (commbot)
    assert mass == pytest.approx(ref_mass, rel=1e-9) and mass > 10


# --- errors -------------------------------------------------------------------------------------------------------
def test_a_bad_mount_names_the_profile_line_and_exits_2(arm, tmp_path, cache_dir):
    path = profile(tmp_path, arm.where, mount="{part: torso, port: shoulder_right}")
    for command in (["scan", "--profile", str(path)], ["urdf", "--profile", str(path), "-o", str(tmp_path / "x.urdf")]):
        proc = hil(*command, cache=cache_dir)
        assert proc.returncode == 2, proc.stdout
        assert (f"hil: error: {path}:5: bus arm: port 'shoulder_right' of part body:6 (torso) is already occupied "
                "by body:20 (cpc_servo)") in proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "x.urdf").exists()
    typo = profile(tmp_path, arm.where, mount="{part: torsoo, port: shoulder_left}", name="typo.yaml")
    proc = hil("scan", "--profile", str(typo), cache=cache_dir)
    assert proc.returncode == 2 and f"{typo}:5: bus arm: mount.part 'torsoo' is no part" in proc.stderr
    assert "did you mean 'torso'" in proc.stderr
    assert arm.alive  # scanned and let go: the arm's device goes on serving


def test_a_bad_profile_or_an_unreachable_bus_is_a_clear_error(tmp_path, cache_dir):
    unknown = profile(tmp_path, NOWHERE, mount="{part: 'nope:6', port: shoulder_left}", name="unknown.yaml")
    proc = hil("scan", "--profile", str(unknown), cache=cache_dir)
    assert proc.returncode == 2 and f"{unknown}:5: bus arm: mount.part 'nope:6' names bus 'nope'" in proc.stderr
    gone = profile(tmp_path, NOWHERE, name="gone.yaml")
    proc = hil("urdf", "--profile", str(gone), "-o", str(tmp_path / "x.urdf"), cache=cache_dir)
    assert proc.returncode == 2 and f"hil: error: {gone}:5: bus arm: {NOWHERE}: cannot open" in proc.stderr
    proc = hil("scan", "--profile", str(tmp_path / "missing.yaml"), cache=cache_dir)
    assert proc.returncode == 2 and "missing.yaml" in proc.stderr and "Traceback" not in proc.stderr
    proc = hil("scan", cache=cache_dir)
    assert proc.returncode == 2 and "give --bus URL (one bus) or --profile P" in proc.stderr


def test_a_silent_bus_is_named_with_its_line(tmp_path, cache_dir):
    import pty

    controller, device = pty.openpty()  # a port that opens but where nothing answers
    try:
        path = profile(tmp_path, os.ttyname(device))
        proc = hil("scan", "--profile", str(path), "--no-cache", cache=cache_dir)
        assert proc.returncode == 2, proc.stdout
        assert f"{path}:5: bus arm ({os.ttyname(device)}): no robot to open (no part answered)" in proc.stderr
    finally:
        os.close(controller)
        os.close(device)
