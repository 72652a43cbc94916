"""Scanning a bus of self-describing parts: the tree, the cache, and one test per kind of bad part.

The parts are real firmware (firmware_sim) on the in-process virtual bus; bad parts are made by storing bad
bytes in an otherwise valid part's CPC block, as a faulty or tampered part would.
"""
from __future__ import annotations

import hashlib

import msgpack

from hil.devices.catalog import compiled_part, load_part
from hil.devices.control_table.cpc import PORT_TABLE_ADDRESS
from hil.devices.descriptor import descriptor_to_dict
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.firmware_sim.servo import ServoFirmware
from hil.devices.control_table import XM430_W350
from hil.runtime.bus import BusHost
from hil.runtime.scan import DescriptorCache, NoCache, ScanReport, scan_bus
from hil.runtime.scan.format import robot_json, robot_tree_text
from hil.runtime.transports.sim import SimTransport

SERVO = "cpc_servo"


def servo_part(device_id: int, child: int | None = None, data: bytes | None = None, sha: bytes | None = None):
    good, good_sha = compiled_part(SERVO)
    data = good if data is None else data
    sha = hashlib.sha256(data).digest() if sha is None else sha
    return build_cpc_part(load_part(SERVO), data, sha, device_id, 1000 + device_id,
                          {"horn": child} if child is not None else {})


def chain(n: int, first: int = 1) -> list:
    """n servo modules, each on the previous one's horn."""
    ids = list(range(first, first + n))
    return [servo_part(i, ids[k + 1] if k + 1 < n else None) for k, i in enumerate(ids)]


def scan(parts, cache=None, report=None):
    bus = BusHost(SimTransport("sim://test", device=VirtualBusDevice(parts)))
    return scan_bus(bus, cache if cache is not None else NoCache(), report=report)


def test_chain_scans_into_the_right_tree():
    robot = scan(chain(5))
    assert robot.root_id == 1 and not robot.quarantined and not robot.problems
    assert [(p.id, d) for p, d in robot.walk()] == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]
    assert robot.parts[3].parent_id == 2 and robot.parts[3].parent_port == "horn"
    assert robot.parts[2].children == {"horn": 3}
    assert robot.dof == 5
    assert robot.path(3) == "horn/horn"
    assert robot.parts[4].serial_number == 1004
    assert robot.parts[4].sha256 == compiled_part(SERVO)[1].hex()


def test_warm_scan_reads_only_headers(tmp_path):
    cache = DescriptorCache(tmp_path)
    cold, warm = ScanReport(), ScanReport()
    first = scan(chain(4), cache, cold)
    second = scan(chain(4), cache, warm)
    assert cold.descriptors_read == 4 and cold.descriptor_bytes_read == 4 * len(compiled_part(SERVO)[0])
    assert warm.descriptors_read == 0 and warm.descriptor_bytes_read == 0 and warm.descriptors_from_cache == 4
    assert robot_json(first) == robot_json(second)


def test_corrupted_cache_entry_is_not_trusted(tmp_path):
    cache = DescriptorCache(tmp_path)
    scan(chain(2), cache)
    entry = next(tmp_path.glob("*.msgpack"))
    entry.write_bytes(entry.read_bytes()[:-5])
    report = ScanReport()
    robot = scan(chain(2), cache, report)
    assert report.descriptors_read == 2 and not robot.quarantined


def test_plain_servo_is_described_by_the_catalog():
    parts = chain(2) + [ServoFirmware(XM430_W350, 9)]
    parts[1].memory.data[PORT_TABLE_ADDRESS + 1] = 9  # the last module's horn holds the plain servo
    robot = scan(parts)
    plain = robot.parts[9]
    assert not plain.self_describing and plain.descriptor.name == "XM430-W350"
    assert plain.parent_id == 2 and plain.parent_port == "horn" and robot.dof == 3


# --- one test per bad input: each gives its clear error and nothing else breaks ---

def _doc():
    return descriptor_to_dict(load_part(SERVO))


def _bad_part(device_id: int, doc: dict):
    return servo_part(device_id, data=msgpack.packb(doc, use_bin_type=True))


def test_non_positive_definite_inertia_quarantines_the_part():
    doc = _doc()
    doc["bodies"][1]["inertia"]["izz"] = -1e-6
    parts = chain(3)
    parts[2] = _bad_part(3, doc)
    robot = scan(parts)
    assert "id 3" in robot.quarantined[3] and "bodies[1].inertia" in robot.quarantined[3]
    assert "positive definite" in robot.quarantined[3]
    assert set(robot.parts) == {1, 2} and "quarantined" in " ".join(robot.problems)


def test_missing_field_quarantines_the_part():
    doc = _doc()
    del doc["bodies"][0]["mass"]
    parts = chain(3)
    parts[1] = _bad_part(2, doc)
    parts[1].memory.data[PORT_TABLE_ADDRESS + 1] = 3
    robot = scan(parts)
    assert "bodies[0].mass" in robot.quarantined[2] and "missing field" in robot.quarantined[2]
    assert set(robot.parts) == {1, 3}, "the rest comes up"
    assert any("detached" in p for p in robot.problems)


def test_wrong_hash_quarantines_the_part():
    parts = chain(3)
    good, _ = compiled_part(SERVO)
    parts[2] = servo_part(3, data=good, sha=hashlib.sha256(b"something else").digest())
    robot = scan(parts)
    assert "hash mismatch" in robot.quarantined[3]
    assert set(robot.parts) == {1, 2}


def test_truncated_descriptor_quarantines_the_part():
    good, _ = compiled_part(SERVO)
    parts = chain(3)
    parts[2] = servo_part(3, data=good[:-40])  # header length and hash describe the truncated bytes
    robot = scan(parts)
    assert "truncated" in robot.quarantined[3]
    assert set(robot.parts) == {1, 2}


def test_cycle_in_port_tables_is_reported_and_the_rest_comes_up():
    parts = chain(2) + [servo_part(7, 8), servo_part(8, 7)]
    robot = scan(parts)
    assert "cycle" in robot.quarantined[7] and "7 -> 8 -> 7" in robot.quarantined[7]
    assert 8 in robot.quarantined
    assert robot.root_id == 1 and set(robot.parts) == {1, 2}


def test_duplicate_id_is_quarantined():
    parts = chain(3) + [servo_part(2)]
    robot = scan(parts)
    assert "duplicate ID" in robot.quarantined[2]
    assert 1 in robot.parts and 3 in robot.parts
    assert any("id 1 port 'horn'" in p and "quarantined" in p for p in robot.problems)


def test_dangling_port_is_reported():
    parts = chain(2)
    parts[1].memory.data[PORT_TABLE_ADDRESS + 1] = 42
    robot = scan(parts)
    assert any("dangling" in p and "42" in p for p in robot.problems)
    assert set(robot.parts) == {1, 2} and not robot.quarantined


def test_tree_text_shows_parts_and_quarantine():
    parts = chain(2) + [servo_part(2)]
    text = robot_tree_text(scan(parts))
    assert "[1] cpc_servo (servo_joint)" in text and "QUARANTINED id 2" in text
