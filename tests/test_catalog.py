"""The part catalog and the communication robot built from it.

- every catalog source validates, compiles to bytes that fit the CPC block and decode back to the same
  descriptor, and has physically possible inertias (rechecked here with numpy, independently of validation);
- sensor models refer to registers and collision shapes the part really declares;
- config/robots/commbot.yaml builds, forms one tree rooted at the carriage (read back from the port tables the
  parts store), has 17 servo joints and 2 wheels, a plausible mass, and a geometry that makes sense (wheels on the
  floor, nothing below it, ~1.15 m tall, no two parts inside each other), and answers a broadcast ping;
- malformed descriptors: one test per validation rule the catalog relies on, each checking that the error says
  file:line, the part and the field.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from hil.devices.catalog import DYNAMIXEL_DIR, PARTS_DIR, compiled_part, load_part, load_source, part_names
from hil.devices.control_table import VELOCITY_MODE
from hil.devices.descriptor.camera import camera_spec
from hil.devices.descriptor.validate import principal_moments
from hil.devices.control_table.cpc import CPC_BASE, CPC_HEADER_LEN, DESCRIPTOR_ADDRESS, parse_cpc_header
from hil.devices.descriptor import (MAX_DESCRIPTOR_BYTES, DescriptorError, Pose, decode_descriptor, descriptor_sha256,
                                encode_descriptor)
from hil.devices.protocol import RESET_ALL_BUT_ID
from hil.devices.yaml_source import load_yaml_file
from hil.firmware_sim.assembly import load_assembly, resolve_assembly_path
from hil.firmware_sim.cpc_part import SERVO_KINDS, table_for
from hil.runtime.bus import BusHost
from hil.runtime.transports import open_transport

PART_NAMES = part_names()
DYNAMIXEL_SOURCES = sorted(DYNAMIXEL_DIR.glob("*.yaml"))
IDENTITY_ADDRESSES = set(range(0, 14)) | {65, 68, 70}  # the identity block of a non-servo CPC part
SERVO_JOINT_KINDS = ("servo_joint", "gripper")


def inertia_matrix(body) -> np.ndarray:
    return np.array(body.inertial.inertia, dtype=float)


# --- every catalog source -----------------------------------------------------------------------------------------

def test_the_catalog_has_the_commbot_parts():
    assert {"carriage", "wheel_motor", "range_ring", "bumper", "torso", "cpc_servo", "bracket_l", "bracket_j",
            "head_mount", "upper_arm", "forearm", "hand", "head", "camera", "speaker"} <= set(PART_NAMES)


@pytest.mark.parametrize("name", PART_NAMES)
def test_part_compiles_fits_the_cpc_block_and_decodes_back_equal(name):
    desc = load_part(name)
    data, sha = compiled_part(name)
    assert len(data) < MAX_DESCRIPTOR_BYTES
    assert sha == descriptor_sha256(data)
    assert decode_descriptor(data, name) == desc
    assert encode_descriptor(decode_descriptor(data, name)) == data  # canonical: same descriptor, same bytes
    table_for(desc, len(data))  # the firmware can lay it out (no register collides with the table or CPC block)


@pytest.mark.parametrize("path", DYNAMIXEL_SOURCES, ids=lambda p: p.stem)
def test_plain_servo_source_validates_and_decodes_back_equal(path):
    desc = load_source(path, name_is_stem=False)
    data = encode_descriptor(desc)
    assert len(data) < MAX_DESCRIPTOR_BYTES
    assert decode_descriptor(data, desc.name) == desc


def test_the_validators_principal_moments_are_numpys_eigenvalues():
    """The descriptor check's own 3x3 eigenvalues (plain floats: numpy stays out of a part-loading process) against
    numpy's eigvalsh: random inertias from 1e-8 to 10, diagonal ones, and rotated square plates (two equal moments,
    the third their sum: on the triangle inequality's edge, where a loose solver would refuse a real part)."""
    rng = np.random.default_rng(7)
    cases = [np.diag(rng.uniform(1e-6, 1e-3, 3)), np.diag([2.0, 2.0, 2.0])]
    for scale in 10.0 ** rng.uniform(-8, 1, 300):
        a = rng.uniform(-1, 1, (3, 3)) * scale
        cases.append(a + a.T)
        rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        cases.append(rotation @ np.diag([scale, scale, 2 * scale]) @ rotation.T)
    for m in cases:
        m = (m + m.T) / 2
        got = principal_moments(tuple(tuple(float(x) for x in row) for row in m))
        expected = np.linalg.eigvalsh(m)
        assert np.allclose(got, expected, rtol=0, atol=1e-13 * np.abs(expected).max()), (m, got, expected)
    plate = principal_moments(tuple(tuple(float(x) for x in row) for row in cases[-1]))
    assert plate[2] <= plate[0] + plate[1] + 1e-12 * plate[2], plate


@pytest.mark.parametrize("path", sorted(PARTS_DIR.glob("*.yaml")) + DYNAMIXEL_SOURCES, ids=lambda p: p.stem)
def test_inertias_are_physically_possible(path):
    desc = load_source(path, name_is_stem=False)
    for body in desc.bodies:
        what = f"{desc.name}.{body.name}"
        m = inertia_matrix(body)
        assert np.allclose(m, m.T), what
        moments = np.linalg.eigvalsh(m)
        assert moments[0] > 0, f"{what}: not positive definite {moments}"
        assert moments[2] <= moments[0] + moments[1] + 1e-12 * moments[2], f"{what}: triangle inequality {moments}"
        # a solid of this mass: radius of gyration between 1 mm and 0.5 m
        gyration = np.sqrt(moments / body.inertial.mass)
        assert 1e-3 < gyration.min() and gyration.max() < 0.5, f"{what}: radii of gyration {gyration}"


@pytest.mark.parametrize("name", PART_NAMES)
def test_function_registers_stay_clear_of_identity_block_and_cpc_area(name):
    desc = load_part(name)
    if desc.kind in SERVO_KINDS and desc.model_number == 1020:
        return  # XM430-compatible table: checked register by register by table_for (previous test)
    for reg in desc.registers:
        addresses = set(range(reg.address, reg.address + reg.size))
        assert not addresses & IDENTITY_ADDRESSES, f"{name}.{reg.name} at {reg.address}"
        assert reg.address + reg.size <= CPC_BASE, f"{name}.{reg.name} at {reg.address}"


@pytest.mark.parametrize("name", PART_NAMES)
def test_sensor_models_refer_to_what_the_part_declares(name):
    desc = load_part(name)
    registers = {r.name for r in desc.registers}
    for sensor in desc.sensors:
        params = sensor.params
        body = desc.body(sensor.body)
        if sensor.kind == "range_ring":
            assert len(params["yaw_deg"]) == len(params["registers"]) > 0
            assert set(params["registers"]) <= registers
            assert set(params["invalid_counters"]) == {"no_hit", "range", "angle", "noise"}
            assert set(params["invalid_counters"].values()) <= registers
            assert 0 < params["min_range_m"] < params["max_range_m"]
            assert params["variant"] in ("ultrasonic", "infrared")
            if params["variant"] == "ultrasonic":
                assert 0 < params["cone_half_angle_deg"] < 90
            no_target = params["no_target_raw"]
            for reg in params["registers"]:
                spec = desc.register(reg)
                assert spec.size == 2 and spec.unit == "m" and spec.scale == 0.001
                assert 0 <= no_target < 1 << (8 * spec.size) and spec.default == no_target
                assert spec.address >= 0x80
            a, b = params["noise_sigma_m"]
            assert a >= 0 and b >= 0
            assert 0 < params["dropout_angle50_deg"] < 90 and params["dropout_width_deg"] > 0
        elif sensor.kind == "contact":
            assert params["register"] in registers and desc.register(params["register"]).size == 1
            for zone in params["zones"]:
                assert 0 <= zone["bit"] < 8
                assert 0 <= zone["collision"] < len(body.collisions)
        elif sensor.kind == "camera":
            spec = camera_spec(params)  # the whole block checked (devices/descriptor/camera.py)
            assert spec.width > 0 and spec.height > 0 and spec.fx > 0 and spec.rate_hz > 0 and spec.delivers
        else:
            pytest.fail(f"{name}: sensor {sensor.name} of unknown kind {sensor.kind!r}")


# --- the communication robot --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def commbot():
    return load_assembly("commbot")


@pytest.fixture(scope="module")
def commbot_entries():
    return {e["id"]: e for e in load_yaml_file(resolve_assembly_path("commbot"))["parts"]}


def stored_descriptor(part):
    """What the scan reads: the descriptor bytes in the part's CPC block, checked against their hash."""
    header = parse_cpc_header(bytes(part.memory.data[CPC_BASE:CPC_BASE + CPC_HEADER_LEN]))
    data = bytes(part.memory.data[DESCRIPTOR_ADDRESS:DESCRIPTOR_ADDRESS + header.descriptor_length])
    assert descriptor_sha256(data) == header.descriptor_sha256
    return header, decode_descriptor(data, f"id {part.id}")


def test_commbot_builds_every_part(commbot, commbot_entries):
    assert [p.id for p in commbot.parts] == list(commbot_entries)
    for part in commbot.parts:
        entry = commbot_entries[part.id]
        header, desc = stored_descriptor(part)
        assert desc == load_part(entry["part"])
        assert part.memory.get("model_number") == desc.model_number
        assert header.port_count == len(desc.ports)


def test_commbot_port_tables_form_one_tree_rooted_at_the_carriage(commbot, commbot_entries):
    parent_of: dict[int, tuple[int, str]] = {}
    for part in commbot.parts:
        header, desc = stored_descriptor(part)
        for port, child in zip(desc.ports, header.port_table):
            if child is None:
                continue
            assert not port.parent, f"id {part.id}: a child on its parent connector"
            assert child not in parent_of, f"id {child} hangs from two ports"
            parent_of[child] = (part.id, port.name)
    ids = {p.id for p in commbot.parts}
    assert set(parent_of) <= ids
    roots = ids - set(parent_of)
    assert roots == {1}
    assert stored_descriptor(commbot.parts[0])[1].name == "carriage"
    for part_id in ids:  # every part reaches the root, without a cycle
        seen, cur = set(), part_id
        while cur in parent_of:
            assert cur not in seen, f"cycle through id {cur}"
            seen.add(cur)
            cur = parent_of[cur][0]
        assert cur == 1
    # the port tables say what the assembly says
    assert parent_of == {i: (e["parent"], e["port"]) for i, e in commbot_entries.items() if "parent" in e}


def test_commbot_has_17_servo_joints_and_2_wheels(commbot):
    descs = [stored_descriptor(p)[1] for p in commbot.parts]
    servo_joints = [j for d in descs if d.kind in SERVO_JOINT_KINDS for j in d.moving_joints]
    wheels = [j for d in descs if d.kind == "wheel" for j in d.moving_joints]
    assert len(servo_joints) == 17
    assert len(wheels) == 2 and all(j.type == "continuous" for j in wheels)
    assert sum(d.kind == "gripper" for d in descs) == 2
    # every joint is driven through the registers its part declares
    for d in descs:
        for j in d.moving_joints:
            if d.kind in SERVO_KINDS:
                assert {"present_position", "torque_enable", "operating_mode"} <= set(j.registers)


def test_commbot_mass_is_plausible(commbot):
    total = sum(b.inertial.mass for p in commbot.parts for b in stored_descriptor(p)[1].bodies)
    assert 15.0 <= total <= 40.0


def test_servo_like_parts_start_and_factory_reset_into_their_own_defaults():
    """A wheel is in velocity mode from the start and after a factory reset; the reset keeps the CPC block."""
    with BusHost(open_transport("sim://commbot"), timeout_s=0.1) as bus:
        device = bus.transport.device
        wheel, hand = device.part(2), device.part(18)
        assert wheel.memory.get("operating_mode") == VELOCITY_MODE
        assert hand.memory.get("min_position_limit") == 2048 and hand.memory.get("max_position_limit") == 2831
        cpc_before = bytes(wheel.memory.data[CPC_BASE:])
        bus.write(2, 11, bytes([3]))  # position mode, then back to the factory's
        assert bus.read(2, 11, 1) == bytes([3])
        bus.factory_reset(2, RESET_ALL_BUT_ID)
        assert bus.read(2, 11, 1) == bytes([VELOCITY_MODE])
        assert bytes(wheel.memory.data[CPC_BASE:]) == cpc_before


def test_commbot_answers_a_broadcast_ping_with_every_id(commbot_entries):
    with BusHost(open_transport("sim://commbot"), timeout_s=0.1) as bus:
        found = bus.ping_all()
    assert set(found) == set(commbot_entries)
    for device_id, (model, _firmware) in found.items():
        assert model == load_part(commbot_entries[device_id]["part"]).model_number


# --- commbot geometry: forward kinematics at zero joint angles, carriage frame at the origin ----------------------

def transform(pose: Pose) -> np.ndarray:
    r, p, y = pose.rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    out = np.eye(4)
    out[:3, :3] = [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                   [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                   [-sp, cp * sr, cp * cr]]
    out[:3, 3] = pose.xyz
    return out


def body_frames(commbot, entries) -> dict[tuple[int, str], np.ndarray]:
    """World frame of every body: a child's parent connector coincides with its parent's port (URDF joints)."""
    descs = {p.id: p.descriptor for p in commbot.parts}
    frames: dict[tuple[int, str], np.ndarray] = {}

    def place(part_id: int, base: np.ndarray) -> None:
        desc = descs[part_id]
        frames[(part_id, desc.bodies[0].name)] = base
        for joint in desc.joints:
            frames[(part_id, joint.child)] = frames[(part_id, joint.parent)] @ transform(joint.pose)
        for child_id, entry in entries.items():
            if entry.get("parent") == part_id:
                port = next(p for p in desc.ports if p.name == entry["port"])
                connector = transform(descs[child_id].parent_port.pose)
                place(child_id, frames[(part_id, port.body)] @ transform(port.pose) @ np.linalg.inv(connector))

    place(1, np.eye(4))
    assert len(frames) == sum(len(d.bodies) for d in descs.values())
    return frames


def oriented_box(shape, frame: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, axes, half extents) of a box enclosing the shape (cylinders and spheres by their bounding box)."""
    world = frame @ transform(shape.pose)
    if shape.kind == "box":
        half = np.array(shape.size) / 2
    elif shape.kind == "cylinder":
        half = np.array([shape.size[0], shape.size[0], shape.size[1] / 2])
    elif shape.kind == "capsule":
        half = np.array([shape.size[0], shape.size[0], shape.size[1] / 2 + shape.size[0]])
    elif shape.kind == "sphere":
        half = np.full(3, shape.size[0])
    else:
        pytest.fail(f"no bounding box for a {shape.kind}")
    return world[:3, 3], world[:3, :3], half


def z_range(box) -> tuple[float, float]:
    centre, axes, half = box
    reach = np.abs(axes) @ half
    return centre[2] - reach[2], centre[2] + reach[2]


def boxes_overlap(a, b, margin: float = 1e-6) -> bool:
    """Separating-axis test for two oriented boxes; touching faces do not count."""
    (ca, ra, ha), (cb, rb, hb) = a, b
    d = cb - ca
    axes = [ra[:, i] for i in range(3)] + [rb[:, i] for i in range(3)]
    axes += [np.cross(ra[:, i], rb[:, j]) for i in range(3) for j in range(3)]
    for axis in axes:
        n = np.linalg.norm(axis)
        if n < 1e-9:
            continue
        axis = axis / n
        if abs(axis @ d) >= np.abs(axis @ ra) @ ha + np.abs(axis @ rb) @ hb - margin:
            return False
    return True


@pytest.fixture(scope="module")
def geometry(commbot, commbot_entries):
    frames = body_frames(commbot, commbot_entries)
    descs = {p.id: p.descriptor for p in commbot.parts}
    boxes = [(part_id, body, oriented_box(shape, frame))
             for (part_id, body), frame in frames.items() for shape in descs[part_id].body(body).collisions]
    return frames, descs, boxes


def test_commbot_stands_on_its_wheels_and_caster_and_is_about_1_15_m_tall(geometry):
    _frames, descs, boxes = geometry
    lows = {}
    for part_id, _body, box in boxes:
        lows.setdefault(descs[part_id].name, []).append(z_range(box)[0])
    assert min(min(v) for v in lows.values()) > -1e-9  # nothing below the floor
    assert min(lows["wheel_motor"]) == pytest.approx(0, abs=1e-9)
    assert min(lows["carriage"]) == pytest.approx(0, abs=1e-9)  # the caster
    others = [z for name, zs in lows.items() if name not in ("wheel_motor", "carriage") for z in zs]
    assert min(others) > 0.02  # only the wheels and the caster touch the floor
    top = max(z_range(box)[1] for *_, box in boxes)
    assert 1.1 <= top <= 1.2


def test_commbot_wheels_turn_about_the_lateral_axis_left_and_right(geometry):
    frames, descs, _boxes = geometry
    for part_id, side in ((2, 1), (3, -1)):
        joint = descs[part_id].moving_joints[0]
        world = frames[(part_id, joint.parent)] @ transform(joint.pose)
        axis = world[:3, :3] @ np.array(joint.axis)
        assert np.allclose(axis, [0, side, 0], atol=1e-9)
        assert world[1, 3] == pytest.approx(side * 0.2, abs=0.05)
        assert world[0, 3] == pytest.approx(0, abs=1e-9) and world[2, 3] == pytest.approx(0.1, abs=1e-9)


def test_commbot_joint_axes_are_pitch_roll_yaw_as_described(geometry):
    frames, descs, _boxes = geometry

    def axis(part_id):
        joint = descs[part_id].moving_joints[0]
        return np.round(frames[(part_id, joint.parent)][:3, :3] @ transform(joint.pose)[:3, :3] @ joint.axis, 9)

    for shoulder in (10, 20):  # pitch (lateral), roll (forward), yaw (vertical), elbow (lateral)
        assert [np.flatnonzero(axis(shoulder + k)).tolist() for k in (0, 2, 4, 6)] == [[1], [0], [2], [1]]
    assert [np.flatnonzero(axis(i)).tolist() for i in (30, 32, 34)] == [[2], [1], [0]]  # neck yaw, pitch, roll
    for eye in (40, 45):
        assert [np.flatnonzero(axis(eye + k)).tolist() for k in (0, 2)] == [[2], [1]]  # pan, tilt
    for hand in (18, 28):
        assert np.count_nonzero(axis(hand)) == 1


def test_commbot_arms_hang_at_the_torso_sides_and_the_head_is_on_top(geometry):
    frames, descs, boxes = geometry
    torso = [box for part_id, _b, box in boxes if part_id == 6][0]
    torso_half_width = torso[2][1]
    for hand, side in ((18, 1), (28, -1)):
        y = frames[(hand, "palm")][1, 3]
        assert side * y > torso_half_width + 0.03
        assert frames[(hand, "palm")][2, 3] > 0.25  # above the range ring
    torso_top = z_range(torso)[1]
    head = [box for part_id, _b, box in boxes if descs[part_id].name == "head"]
    assert min(z_range(box)[0] for box in head) > torso_top
    cameras = [frames[(i, "camera")] for i in (43, 48)]
    assert all(np.allclose(c[:3, :3], np.eye(3), atol=1e-9) for c in cameras)  # both look forward, upright
    assert cameras[0][1, 3] == pytest.approx(-cameras[1][1, 3])


def test_commbot_parts_do_not_overlap(geometry):
    _frames, descs, boxes = geometry
    clashes = []
    for (ida, ba, a), (idb, bb, b) in itertools.combinations(boxes, 2):
        if ida == idb:
            continue
        # cheap reject on world-aligned bounds first
        if np.any(np.abs(a[0] - b[0]) > np.abs(a[1]) @ a[2] + np.abs(b[1]) @ b[2]):
            continue
        if boxes_overlap(a, b):
            clashes.append(f"{descs[ida].name} (id {ida}).{ba} / {descs[idb].name} (id {idb}).{bb}")
    assert not clashes


# --- malformed descriptors: each validation rule names file:line, the part and the field --------------------------

GOOD_SOURCE = """\
schema: 1
name: bad_part
kind: servo_joint
bodies:
  - name: base
    mass: 0.1
    inertia: {ixx: 1.0e-05, iyy: 1.0e-05, izz: 1.0e-05}
  - name: arm
    mass: 0.05
    com: [0, 0, 0.02]
    inertia: {ixx: 2.0e-06, iyy: 2.0e-06, izz: 1.0e-06}
joints:
  - name: hinge
    type: revolute
    parent: base
    child: arm
    xyz: [0, 0, 0.03]
    limits: {lower: -1.0, upper: 1.0, effort: 1.0, velocity: 1.0}
ports:
  - {name: case, body: base, parent: true}
  - {name: tip, body: arm, xyz: [0, 0, 0.04]}
"""


def write_source(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad_part.yaml"
    path.write_text(text)
    return path


def line_of(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def test_the_good_source_of_the_malformed_cases_is_valid(tmp_path):
    desc = load_source(write_source(tmp_path, GOOD_SOURCE))
    assert desc.name == "bad_part" and len(desc.bodies) == 2


@pytest.mark.parametrize("old, new, marker, field, words", [
    pytest.param("{ixx: 2.0e-06, iyy: 2.0e-06, izz: 1.0e-06}", "{ixx: 2.0e-06, iyy: 2.0e-06, izz: -1.0e-06}",
                 "izz: -1.0e-06", "bodies[1].inertia", "not positive definite", id="inertia-not-positive-definite"),
    pytest.param("{ixx: 2.0e-06, iyy: 2.0e-06, izz: 1.0e-06}", "{ixx: 2.0e-06, iyy: 2.0e-06, izz: 1.0e-06, ixy: 3.0e-06}",
                 "ixy: 3.0e-06", "bodies[1].inertia", "not positive definite", id="inertia-indefinite-off-diagonal"),
    pytest.param("{ixx: 2.0e-06, iyy: 2.0e-06, izz: 1.0e-06}", "{ixx: 1.0e-06, iyy: 1.0e-06, izz: 5.0e-06}",
                 "izz: 5.0e-06", "bodies[1].inertia", "triangle inequality", id="inertia-triangle-inequality"),
    pytest.param("    mass: 0.05\n", "", "- name: arm", "bodies[1].mass", "missing field", id="missing-field"),
    pytest.param("child: arm", "child: forearm", "child: forearm", "joints[0].child", "no body named 'forearm'",
                 id="unknown-joint-body"),
    pytest.param("{name: tip, body: arm, xyz: [0, 0, 0.04]}", "{name: tip, body: arm, xyz: [0, 0, 0.04], parent: true}",
                 "ports:", "ports", "exactly one port must be the parent connector", id="two-parent-ports"),
])
def test_malformed_descriptor_names_file_line_part_and_field(tmp_path, old, new, marker, field, words):
    assert GOOD_SOURCE.count(old) == 1
    text = GOOD_SOURCE.replace(old, new)
    path = write_source(tmp_path, text)
    with pytest.raises(DescriptorError) as info:
        load_source(path)
    error = info.value
    assert (error.part, error.field) == ("bad_part", field)
    assert str(error).startswith(f"{path}:{line_of(text, marker)}: part 'bad_part': {field}: ")
    assert words in str(error)
