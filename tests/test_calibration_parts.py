"""``hil calibrate --write-parts``: a calibration stored in the part itself, so that a twin built from a
scan of the robot carries it (the modular-robot reference's self-description).

Real parts: the commbot served by another process on a real pty (`hil sim commbot --pty`), whose ring's CPC block
has the descriptor mailbox; the `hil calibrate write` command in a subprocess; a new Robot.open that scans the
robot again; the mixed trial's shadow ring built from that scan. A read-only part and a staging that went wrong
are firmware parts on the in-process bus.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SimProcess

from hil.devices.calibration import SensorCalibration, apply
from hil.devices.catalog import compiled_part, load_part
from hil.devices.control_table.cpc import (DESCRIPTOR_WRITE_CHUNK, DESCRIPTOR_WRITE_LENGTH, DESCRIPTOR_WRITE_OFFSET,
                                       DESCRIPTOR_WRITE_STATUS, WRITE_BAD_HASH)
from hil.devices.descriptor import encode_descriptor
from hil.firmware_sim import VirtualBusDevice
from hil.firmware_sim.cpc_part import build_cpc_part
from hil.runtime.bus import BusHost
from hil.runtime.scan import NoCache, scan_bus
from hil.runtime.scan.descriptor_store import DescriptorNotWritable, DescriptorWriteError, store_descriptor
from hil.runtime.transports.sim import SimTransport

WRITTEN = {"dropout_angle50_deg": 51.25, "dropout_width_deg": 4.5, "noise_sigma_m": [0.0125, 0.0215]}


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def ring_of(robot):
    from hil.runtime.robot.sensors import RangeRing

    return next(s for s in robot.sensors.values() if isinstance(s, RangeRing))


def test_write_parts_stores_the_numbers_and_a_new_scan_builds_the_twin_with_them(tmp_path):
    from hil.runtime import Robot
    from hil.runtime.robot.overlay import ring_geometry
    from hil.firmware_sim.shadow import ShadowWorld

    sim = SimProcess("--pty", "--no-world", assembly="commbot")
    try:
        profile = tmp_path / "real.yaml"
        profile.write_text(f"bus: {sim.where}\nclock: real\nsemantics: commbot\ncache_dir: {tmp_path / 'cache'}\n")
        with Robot.open(profile) as robot:
            ring = ring_of(robot)
            part = robot.virtual.parts[ring.part_key]
            serial, before = part.serial_number, part.sha256
            catalog = dict(next(s for s in part.descriptor.sensors if s.name == "ring").params)
        assert catalog["dropout_angle50_deg"] == 55.0  # the catalog's, before
        (tmp_path / "CAL.yaml").write_text(yaml.safe_dump({"schema": 1, "parts": [
            {"part": "range_ring", "serial": serial, "sensor": "ring", "params": WRITTEN},
            {"part": "range_ring", "serial": serial + 1, "sensor": "ring", "params": {"dropout_width_deg": 2.0}}]}))
        run = hil("calibrate", "write", "CAL.yaml", "--profile", "real.yaml", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert f"serial {serial}) sensor ring: stored dropout_angle50_deg" in run.stdout, run.stdout
        warning = next(line for line in run.stderr.splitlines() if "matches no part on the bus" in line)
        assert "CAL.yaml:" in warning and f"serial {serial + 1}" in warning, run.stderr

        with Robot.open(profile) as robot:  # a new open: a new scan of the same parts
            ring = ring_of(robot)
            part = robot.virtual.parts[ring.part_key]
            assert part.serial_number == serial and part.sha256 != before
            params = next(s for s in part.descriptor.sensors if s.name == "ring").params
            assert {k: params[k] for k in WRITTEN} == WRITTEN
            assert {k: v for k, v in params.items() if k not in WRITTEN} == \
                {k: v for k, v in catalog.items() if k not in WRITTEN}, "only the calibrated numbers changed"
            sensor, ring_in_base = ring_geometry(robot, ring)  # the mixed trial's twin ring, from the scan
            with ShadowWorld(sensor, ring_in_base) as shadow:
                config = shadow.model.config
                assert (config.dropout_angle50_deg, config.dropout_width_deg) == (51.25, 4.5)
                assert tuple(config.noise_sigma_m) == (0.0125, 0.0215)
            from hil.trial.calibrate.run import ring_meta

            assert ring_meta(robot)["params"]["dropout_angle50_deg"] == 51.25  # what a calibration log records
    finally:
        sim.stop()


def test_an_in_process_bus_has_nothing_to_store_in(tmp_path):
    (tmp_path / "virtual.yaml").write_text("bus: sim://commbot\nclock: real\nsemantics: commbot\n")
    (tmp_path / "CAL.yaml").write_text(yaml.safe_dump({"schema": 1, "parts": [
        {"part": "range_ring", "sensor": "ring", "params": WRITTEN}]}))
    run = hil("calibrate", "write", "CAL.yaml", "--profile", "virtual.yaml", cwd=tmp_path)
    assert run.returncode == 0 and "nothing stored" in run.stderr and "calibration: CAL.yaml" in run.stderr, run.stderr


def ring_part(writable: bool = True):
    data, sha = compiled_part("range_ring")
    return build_cpc_part(load_part("range_ring"), data, sha, 4, 4242, writable_descriptor=writable)


def new_descriptor() -> bytes:
    return encode_descriptor(apply(load_part("range_ring"), (SensorCalibration("range_ring", "ring", WRITTEN),)))


def test_a_read_only_part_refuses_and_keeps_its_descriptor():
    part = ring_part(writable=False)
    bus = BusHost(SimTransport("sim://test", device=VirtualBusDevice([part])))
    with pytest.raises(DescriptorNotWritable, match="part 4: its descriptor memory is not writable"):
        store_descriptor(bus, 4, new_descriptor())
    assert scan_bus(bus, NoCache()).parts[4].sha256 == compiled_part("range_ring")[1].hex()


def test_a_staging_that_does_not_check_is_refused_whole():
    """A chunk that arrived changed (the hash does not match what was staged): the part says why and keeps the
    descriptor it had; the same bytes sent again are stored, and a factory reset keeps them (factory data now)."""
    part = ring_part()
    bus = BusHost(SimTransport("sim://test", device=VirtualBusDevice([part])))
    data = new_descriptor()
    for offset in range(0, len(data), DESCRIPTOR_WRITE_CHUNK):
        chunk = bytearray(data[offset:offset + DESCRIPTOR_WRITE_CHUNK].ljust(DESCRIPTOR_WRITE_CHUNK, b"\0"))
        if offset == DESCRIPTOR_WRITE_CHUNK:
            chunk[7] ^= 0x10
        bus.write(4, DESCRIPTOR_WRITE_OFFSET, offset.to_bytes(4, "little") + bytes(chunk))
    bus.write(4, DESCRIPTOR_WRITE_LENGTH, len(data).to_bytes(4, "little") + hashlib.sha256(data).digest() + b"\x01")
    assert bus.read(4, DESCRIPTOR_WRITE_STATUS, 1)[0] == WRITE_BAD_HASH
    assert scan_bus(bus, NoCache()).parts[4].sha256 == compiled_part("range_ring")[1].hex()
    store_descriptor(bus, 4, data)
    bus.factory_reset(4, 0x02)
    again = scan_bus(bus, NoCache()).parts[4]
    assert again.sha256 == hashlib.sha256(data).hexdigest()
    assert next(s for s in again.descriptor.sensors if s.name == "ring").params["dropout_width_deg"] == 4.5
    with pytest.raises(DescriptorWriteError, match="does not fit"):
        store_descriptor(bus, 4, b"")
