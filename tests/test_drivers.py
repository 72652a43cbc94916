"""Register conversions to SI, and driver code that runs only when trusted (hash allow-list or signature)."""
from __future__ import annotations

import hashlib
import math

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from hil.devices.catalog import load_part
from hil.devices.descriptor import DescriptorError, descriptor_from_dict, descriptor_to_dict
from hil.runtime.drivers import ConversionError, TrustStore, load_part_driver

IR_SOURCE = """
# Sharp-style infrared ranger: the output voltage falls as 1/distance, which no scale+offset can express.
REGISTERS = {"range_raw"}
def to_si(register, raw):
    volts = raw * 5.0 / 1023
    return 0.2774 / (volts - 0.0459) if volts > 0.0459 else float("inf")
def from_si(register, value):
    return round((0.2774 / value + 0.0459) * 1023 / 5.0)
"""


def ir_part(source=IR_SOURCE, signature="", key_id="", sha=None):
    doc = descriptor_to_dict(load_part("cpc_servo"))
    doc["name"], doc["kind"], doc["model_number"] = "ir_ranger", "range_sensor_ring", 0x4801
    doc["joints"] = []
    doc["bodies"] = doc["bodies"][:1]
    doc["ports"] = [doc["ports"][0]]
    doc["registers"] = [{"name": "range_raw", "address": 0x80, "size": 2, "unit": "m"},
                        {"name": "temperature", "address": 0x82, "size": 1, "unit": "degC", "scale": 0.5,
                         "offset": -20.0}]
    doc["driver"] = {"source": source, "sha256": sha or hashlib.sha256(source.encode()).hexdigest(),
                     "signature": signature, "key_id": key_id}
    return descriptor_from_dict(doc)


def test_table_conversions_are_si_and_refuse_out_of_range():
    driver = load_part_driver(7, load_part("cpc_servo"), TrustStore())
    assert driver.to_si("present_position", 2048) == pytest.approx(0.0)
    assert driver.from_si("goal_position", math.pi / 2) == 3072
    assert driver.to_si("present_velocity", 100) == pytest.approx(100 * 0.229 * 2 * math.pi / 60)
    with pytest.raises(ConversionError, match="id 7 register torque_enable"):
        driver.from_si("torque_enable", 2.0)
    with pytest.raises(ConversionError, match="no register 'nope'"):
        driver.to_si("nope", 0)


def test_untrusted_code_does_not_run_and_says_how_to_trust_it():
    desc = ir_part()
    driver = load_part_driver(12, desc, TrustStore(source="/tmp/trust.yaml"))
    assert driver.to_si("range_raw", 300) == 300.0, "the table conversion, not the code"
    assert "not run" in driver.message and f"hil trust {desc.driver.sha256}" in driver.message
    assert driver.to_si("temperature", 100) == pytest.approx(30.0)


def test_allow_listed_hash_runs_the_code():
    desc = ir_part()
    driver = load_part_driver(12, desc, TrustStore(hashes={desc.driver.sha256}))
    assert driver.to_si("range_raw", 300) == pytest.approx(0.2774 / (300 * 5 / 1023 - 0.0459))
    assert driver.from_si("range_raw", driver.to_si("range_raw", 300)) == 300
    assert driver.to_si("temperature", 100) == pytest.approx(30.0), "registers the code does not claim keep the table"
    assert "allow-listed" in driver.message


def _keypair():
    key = Ed25519PrivateKey.generate()
    return key, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def test_signed_code_runs_with_a_trusted_key_only():
    key, public = _keypair()
    desc = ir_part(signature=key.sign(IR_SOURCE.encode()).hex(), key_id="lab")
    trusted = load_part_driver(3, desc, TrustStore(keys={"lab": public}))
    assert trusted.to_si("range_raw", 300) != 300.0 and "signed by trusted key 'lab'" in trusted.message
    _, other_public = _keypair()
    forged = load_part_driver(3, desc, TrustStore(keys={"lab": other_public}))
    assert forged.to_si("range_raw", 300) == 300.0 and "does not verify" in forged.message
    unknown = load_part_driver(3, desc, TrustStore())
    assert "unknown key 'lab'" in unknown.message


def test_tampered_source_fails_validation():
    with pytest.raises(DescriptorError, match="driver.sha256"):
        ir_part(sha=hashlib.sha256(b"the original").hexdigest())


def test_trust_file_round_trip(tmp_path):
    path = tmp_path / "trust.yaml"
    store = TrustStore.load(path)
    assert not store.hashes
    desc = ir_part()
    store.add_hash(desc.driver.sha256, path)
    reloaded = TrustStore.load(path)
    assert reloaded.decide(desc.driver).trusted


def test_bad_trust_file_names_the_file(tmp_path):
    path = tmp_path / "trust.yaml"
    path.write_text("sha256: [abc]\n")
    with pytest.raises(ValueError, match="trust.yaml:1"):
        TrustStore.load(path)
