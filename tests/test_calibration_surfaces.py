"""Calibration per surface: a rig's faces name their surface, the fit recovers each surface's law, the CAL.yaml
keeps them all, the twin (and a part written with it) measures with them, the check reports per surface.

Real parts: the ring firmware's own model draws every reading from pybullet ray casts between the rig's walls
(tests/calibration_helpers.py), each ray with the law of the face it hit; the hidden numbers are the test's, set
as a calibration sets them (the sensor's params and its ``surfaces``), never anything the fit computed.
"""
from __future__ import annotations

import pytest
import yaml

from calibration_helpers import RingRig

GLASS = {"dropout_angle50_deg": 38.0, "dropout_width_deg": 4.0, "noise_sigma_m": [0.008, 0.012]}
PLASTER = {"dropout_angle50_deg": 52.0, "dropout_width_deg": 6.0, "noise_sigma_m": [0.004, 0.01]}
RIG = """\
start: [0.0, 0.0, 0.0]
walls:
  - {name: window, from: [1.0, -4.0], to: [1.0, 4.0], surface: glass}
  - {name: wall, from: [-1.6, -4.0], to: [-1.6, 4.0]}
turn: {rate_deg_s: 15, turns: 1.0, step_deg: 6}
"""


@pytest.fixture(scope="module")
def two_surfaces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rig")
    stand = RingRig(folder, RIG)
    try:
        hidden = {**PLASTER, "surfaces": {"glass": GLASS}}
        yield stand, stand.readings(hidden, seed=11, steps=240, per_step=2), folder
    finally:
        stand.close()


def test_a_two_surface_rig_recovers_both_laws_within_the_fits_intervals(two_surfaces):
    from hil.trial.calibrate.fit import fit_surfaces

    stand, log, _ = two_surfaces
    assert stand.rig.surfaces == ("glass", "plaster")  # the unnamed face and the floor: the default surface
    fits = fit_surfaces(log, stand.rig)
    assert set(fits) == {"glass", "plaster"}
    for name, truth in (("glass", GLASS), ("plaster", PLASTER)):
        fit = fits[name]
        lo, hi = fit.angle50_ci
        assert lo <= truth["dropout_angle50_deg"] <= hi, (name, fit.angle50_deg, fit.angle50_ci)
        lo, hi = fit.width_ci
        assert lo <= truth["dropout_width_deg"] <= hi, (name, fit.width_deg, fit.width_ci)
        assert hi / lo < 3.0 and fit.angle50_ci[1] - fit.angle50_ci[0] < 10.0, (name, fit)  # intervals that say much
        for value, (lo, hi) in zip(truth["noise_sigma_m"], (fit.noise_a_ci, fit.noise_b_ci)):
            assert lo <= value <= hi, (name, fit.noise_a_m, fit.noise_b, fit.noise_a_ci, fit.noise_b_ci)
    # the two laws really differ here: a single law could not hold both within its intervals
    assert fits["plaster"].angle50_ci[0] > fits["glass"].angle50_ci[1]


def test_the_calibration_file_keeps_every_surface_and_the_twin_measures_with_them(two_surfaces, tmp_path):
    from hil.devices.calibration import apply, load_calibration
    from hil.devices.catalog import load_part
    from hil.firmware_sim.sensors.surface_law import SurfaceLaws
    from hil.trial.calibrate.fit import fit_surfaces
    from hil.trial.calibrate.report import write_cal

    stand, log, _ = two_surfaces
    fits = fit_surfaces(log, stand.rig)
    path = tmp_path / "CAL.yaml"
    write_cal(fits, log, stand.rig, path, tmp_path / "calibration.mcap")
    doc = yaml.safe_load(path.read_text())
    entry = doc["parts"][0]
    assert entry["params"]["dropout_angle50_deg"] == round(fits["plaster"].angle50_deg, 3)
    assert entry["surfaces"]["glass"]["params"]["dropout_angle50_deg"] == round(fits["glass"].angle50_deg, 3)
    assert "angle50_ci_deg" in entry["surfaces"]["glass"]["fit"]
    calibrated = apply(load_part("range_ring"), load_calibration(path).entries)
    params = next(s for s in calibrated.sensors if s.name == "ring").params
    laws = SurfaceLaws("ring", params["dropout_angle50_deg"], params["dropout_width_deg"], params["noise_sigma_m"],
                       params["surfaces"])
    assert laws.law("glass").angle50_deg == entry["surfaces"]["glass"]["params"]["dropout_angle50_deg"]
    assert laws.law(None).angle50_deg == entry["params"]["dropout_angle50_deg"]  # the default surface: params
    assert laws.law("glass").specular_below_deg > 0  # the table's saturation still holds for a measured law


def test_an_old_single_law_calibration_loads_as_the_default_surface(tmp_path):
    from hil.devices.calibration import apply, load_calibration
    from hil.devices.catalog import load_part
    from hil.firmware_sim.sensors.surface_law import SurfaceLaws

    path = tmp_path / "CAL.yaml"
    path.write_text("schema: 1\nparts:\n  - part: range_ring\n    sensor: ring\n"
                    "    params: {dropout_angle50_deg: 47.5, dropout_width_deg: 3.0, noise_sigma_m: [0.01, 0.02]}\n")
    params = next(s for s in apply(load_part("range_ring"), load_calibration(path).entries).sensors
                  if s.name == "ring").params
    assert "surfaces" not in params
    laws = SurfaceLaws("ring", params["dropout_angle50_deg"], params["dropout_width_deg"], params["noise_sigma_m"])
    assert (laws.law(None).angle50_deg, laws.law("plaster").width_deg) == (47.5, 3.0)
    assert laws.law("glass").angle50_deg == 47.5 - 20.0  # other surfaces: the table's factors on the calibrated law


def test_a_calibration_naming_an_unknown_surface_is_refused_at_its_line(tmp_path):
    from hil.devices.calibration import load_calibration
    from hil.devices.yaml_source import ConfigError

    path = tmp_path / "CAL.yaml"
    path.write_text("schema: 1\nparts:\n  - part: range_ring\n    sensor: ring\n    surfaces:\n      glas:\n"
                    "        params: {dropout_angle50_deg: 30.0}\n")
    with pytest.raises(ConfigError) as err:
        load_calibration(path)
    assert f"{path}:6" in str(err.value) and "'glas'" in str(err.value) and "glass" in str(err.value)


def test_fitting_a_surface_the_rig_lacks_is_refused_naming_the_rig_and_its_surfaces(two_surfaces):
    from hil.trial.calibrate.fit import FitError, fit_surfaces

    stand, log, _ = two_surfaces
    with pytest.raises(FitError) as err:
        fit_surfaces(log, stand.rig, only=["metal"])
    assert "'metal'" in str(err.value) and str(stand.rig.source) in str(err.value)
    assert "glass" in str(err.value) and "plaster" in str(err.value)
    only = fit_surfaces(log, stand.rig, only=["glass"])  # one surface asked for: the other keeps its stated law
    assert set(only) == {"glass"}
    assert only["glass"].angle50_ci[0] <= GLASS["dropout_angle50_deg"] <= only["glass"].angle50_ci[1]


def test_check_reports_per_surface_and_finds_a_twin_wrong_on_glass_only(two_surfaces):
    from hil.trial.calibrate.report import check

    stand = two_surfaces[0]
    hidden = {**PLASTER, "surfaces": {"glass": GLASS}}
    real = stand.readings(hidden, seed=14, steps=240, per_step=8)  # 20 readings and more in a sensor's bins
    good = stand.readings(hidden, seed=12, steps=240, per_step=8)
    ok, lines = check(real, good, stand.rig)
    assert ok, "\n".join(lines)
    assert any(" glass " in line for line in lines) and any(" plaster " in line for line in lines)
    wrong = stand.readings({**PLASTER, "surfaces": {"glass": dict(GLASS, dropout_angle50_deg=55.0)}}, seed=13,
                           steps=240, per_step=8)
    ok, lines = check(real, wrong, stand.rig)
    failed = [line for line in lines if line.endswith("FAIL") and line.startswith("sensor")]
    assert not ok and failed and all(" glass " in line for line in failed), "\n".join(lines)


def test_a_part_written_again_keeps_every_surface_it_stores(tmp_path):
    """What --write-parts stores (devices.calibration.apply, encoded as the part's descriptor): a second
    calibration adds its surfaces to the part's and replaces only those it names."""
    from hil.devices.calibration import apply, load_calibration
    from hil.devices.catalog import load_part
    from hil.devices.descriptor.codec import decode_descriptor, encode_descriptor

    def cal(name: str, text: str):
        path = tmp_path / name
        path.write_text("schema: 1\nparts:\n  - part: range_ring\n    sensor: ring\n" + text)
        return load_calibration(path).entries

    first = cal("a.yaml", "    surfaces:\n      glass: {params: {dropout_angle50_deg: 31.0}}\n"
                          "      metal: {params: {dropout_angle50_deg: 44.0}}\n")
    second = cal("b.yaml", "    params: {dropout_width_deg: 5.0}\n    surfaces:\n"
                           "      metal: {params: {dropout_angle50_deg: 46.0, noise_sigma_m: [0.01, 0.0]}}\n")
    stored = decode_descriptor(encode_descriptor(apply(load_part("range_ring"), first)))
    again = decode_descriptor(encode_descriptor(apply(stored, second)))
    params = next(s for s in again.sensors if s.name == "ring").params
    assert params["surfaces"] == {"glass": {"dropout_angle50_deg": 31.0},
                                  "metal": {"dropout_angle50_deg": 46.0, "noise_sigma_m": [0.01, 0.0]}}
    assert params["dropout_width_deg"] == 5.0 and params["dropout_angle50_deg"] == 55.0  # the catalog's, kept


def test_a_rig_face_of_an_unknown_surface_names_the_rig_line_and_the_known_surfaces(tmp_path):
    from hil.devices.yaml_source import ConfigError
    from hil.trial.calibrate.rig import load_rig

    path = tmp_path / "rig.yaml"
    path.write_text(RIG.replace("surface: glass", "surface: resin"))
    with pytest.raises(ConfigError) as err:
        load_rig(path)
    message = str(err.value)
    assert f"{path}:3" in message and "'resin'" in message and "plastic" in message and "plaster" in message
