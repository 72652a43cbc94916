"""hil calibrate: a virtual robot with hidden ring numbers stands in for the real one; the calibration
run on it recovers them, the twin built from the fit agrees with it bin by bin, and the catalog twin does not.

Real parts: the commbot's virtual bus in process with its pybullet world (the rig as its map), the ring firmware
measuring with the hidden numbers (given by a profile's `calibration:`), the host reading the ring over the bus,
the `hil calibrate` command in a subprocess, scipy's optimiser.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from calibration_helpers import RIG  # the wall rig (a corridor's two faces), shared with the stand's readings
from hil.trial.calibrate.log import META, RING, CalibrationLogError, CalibrationWriter, read_log
from hil.trial.calibrate.rig import load_rig

HIDDEN = {"dropout_angle50_deg": 52.0, "dropout_width_deg": 4.0, "noise_sigma_m": [0.01, 0.02]}


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def profile(folder: Path, name: str, seed: int, calibration: str | None) -> str:
    text = f"bus: sim://commbot?seed={seed}\nclock: sim\nsemantics: commbot\n"
    if calibration:
        text += f"calibration: {calibration}\n"
    (folder / f"{name}.yaml").write_text(text)
    return f"{name}.yaml"


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The "real" run (a virtual ring with hidden numbers), made once per run of the suite (tests/once.py): the
    tests read its folder and write their own runs into their tmp_path."""
    from once import once_per_run

    def run_real(folder: Path) -> None:
        (folder / "rig.yaml").write_text(RIG)
        (folder / "hidden.yaml").write_text(yaml.safe_dump(
            {"schema": 1, "parts": [{"part": "range_ring", "sensor": "ring", "params": HIDDEN}]}))
        real = hil("calibrate", "ring", "--profile", profile(folder, "real", 7, "hidden.yaml"), "--rig", "rig.yaml",
                   "--out", "real", cwd=folder)
        assert real.returncode == 0, real.stderr[-3000:]
        (folder / "real.stdout").write_text(real.stdout)

    folder = once_per_run(tmp_path_factory, "calibrate-real", run_real)
    return folder, (folder / "real.stdout").read_text()


def test_the_run_recovers_the_hidden_numbers(calibrated):
    folder, stdout = calibrated
    cal = yaml.safe_load((folder / "real" / "CAL.yaml").read_text())
    (entry,) = cal["parts"]
    assert (entry["part"], entry["sensor"]) == ("range_ring", "ring") and isinstance(entry["serial"], int)
    params = entry["params"]
    assert abs(params["dropout_angle50_deg"] - 52.0) <= 2.0, params
    assert abs(params["dropout_width_deg"] - 4.0) <= 1.5, params
    a, b = params["noise_sigma_m"]
    assert abs(a - 0.01) <= 0.25 * 0.01 and abs(b - 0.02) <= 0.25 * 0.02, params
    lo, hi = entry["fit"]["angle50_ci_deg"]
    assert 0.0 < hi - lo <= 4.0 and lo <= 52.0 <= hi, entry["fit"]  # says something, and holds the truth
    lo, hi = entry["fit"]["width_ci_deg"]  # (how often they do over many runs: tests/test_calibration_coverage.py)
    assert lo <= 4.0 <= hi, entry["fit"]
    assert (folder / "real" / "calibration.png").stat().st_size > 10_000
    assert "angle50" in stdout and "the sensor-simulation reference" in stdout


def test_the_twin_with_the_fit_agrees_and_the_catalog_twin_does_not(calibrated, tmp_path):
    folder, _ = calibrated
    real = str(folder / "real" / "calibration.mcap")
    (tmp_path / "rig.yaml").write_text(RIG)
    for name, cal in (("twin", str(folder / "real" / "CAL.yaml")), ("catalog", None)):
        run = hil("calibrate", "ring", "--profile", profile(tmp_path, name, 11, cal), "--rig", "rig.yaml",
                  "--out", name, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
    twin = hil("calibrate", "check", real, "twin/calibration.mcap", "--rig", "rig.yaml", cwd=tmp_path)
    assert twin.returncode == 0 and "pass:" in twin.stdout, twin.stdout[-3000:]
    catalog = hil("calibrate", "check", real, "catalog/calibration.mcap", "--rig", "rig.yaml", cwd=tmp_path)
    assert catalog.returncode == 1 and "FAIL" in catalog.stdout, catalog.stdout[-3000:]


def _log(path: Path, meta: dict | None, samples: list[dict]) -> Path:
    writer = CalibrationWriter(path)
    if meta is not None:
        writer.write(META, 0.0, meta)
    for k, sample in enumerate(samples):
        writer.write(RING, 0.1 * k, sample)
    writer.close()
    return path


def test_fit_refuses_logs_it_cannot_fit_in_one_line(calibrated, tmp_path):
    folder, _ = calibrated
    meta = read_log(folder / "real" / "calibration.mcap").meta
    sample = {"t": 0.0, "x": 0.0, "y": 0.0, "yaw": 0.0, "ranges": [None] * 12, "still": True}
    cases = {
        "no ring readings": _log(tmp_path / "empty.mcap", meta, []),
        "without yaw": _log(tmp_path / "noyaw.mcap", meta, [{k: v for k, v in sample.items() if k != "yaw"}]),
        "has no range ring": _log(tmp_path / "other.mcap", {"robot": "servo_chain", "ring": None}, [sample]),
        "not a calibration log": _log(tmp_path / "trial.mcap", None, [sample]),
    }
    for expected, path in cases.items():
        with pytest.raises(CalibrationLogError, match=expected):
            read_log(path)
        run = hil("calibrate", "fit", str(path), "--rig", str(folder / "rig.yaml"), "--out", str(tmp_path / "c.yaml"),
                  cwd=tmp_path)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and expected in lines[-1] and str(path) in lines[-1], run.stderr


def test_a_bad_rig_or_calibration_is_refused_at_file_and_line(tmp_path):
    from hil.devices.calibration import load_calibration
    from hil.devices.yaml_source import ConfigError

    rig = tmp_path / "rig.yaml"
    rig.write_text("start: [0, 0, 0]\nwalls:\n  - {from: [0.1, -1], to: [0.1, 1]}\n")
    with pytest.raises(ConfigError, match=r"rig.yaml:2: .*within 0.3 m of the start"):
        load_rig(rig)
    rig.write_text("start: [0, 0, 0]\nwalls: []\n")
    with pytest.raises(ConfigError, match=r"rig.yaml:2: .*walls is empty"):
        load_rig(rig)
    cal = tmp_path / "cal.yaml"
    cal.write_text("schema: 1\nparts:\n  - part: range_ring\n    sensor: ring\n    params: {dropout_angel50_deg: 5}\n")
    with pytest.raises(ConfigError, match=r"cal.yaml:5: .*unknown param 'dropout_angel50_deg'"):
        load_calibration(cal)


def test_a_calibration_for_a_part_the_robot_lacks_is_a_warning_not_applied(tmp_path):
    from hil.devices.calibration import load_calibration
    from hil.firmware_sim import load_assembly
    from hil.firmware_sim.assembly import calibrated

    cal = tmp_path / "cal.yaml"
    cal.write_text("schema: 1\nparts:\n  - {part: range_ring, serial: 5, sensor: ring, params: {dropout_width_deg: 2}}\n"
                   "  - {part: range_ring, sensor: ring, params: {dropout_width_deg: 3}}\n")
    assembly, applied, warnings = calibrated(load_assembly("commbot"), load_calibration(cal))
    assert len(applied) == 1 and len(warnings) == 1 and "cal.yaml:3" in warnings[0] and "serial 5" in warnings[0]
    ring = next(p for p in assembly.parts if getattr(p, "descriptor", None) and p.descriptor.name == "range_ring")
    assert next(s for s in ring.descriptor.sensors if s.name == "ring").params["dropout_width_deg"] == 3


def test_a_trial_against_a_glancing_wall_counts_why_readings_failed(tmp_path):
    """metrics.json's sensors.ring.invalid equals the ring firmware's own counter deltas over the trial."""
    from hil.firmware_sim.embodied import RangeRingFirmware
    from hil.trial import Trial

    seen: dict[str, dict] = {}

    def glance(robot):
        """Creep towards the lab's south wall at 20 degrees to it: the front sensor sees it at ~70 degrees."""
        ring = next(p for p in robot.bus.transport.embodied.parts if isinstance(p, RangeRingFirmware))
        seen["start"] = ring.model.counters
        for tick in robot.loop(hz=10):
            robot.base.drive(0.1, 0.0)
        seen["end"] = ring.model.counters

    r = Trial(glance, map="lab", start=(-3.0, -1.8, -0.35), duration=6.0, seed=2).run(tmp_path / "glance")
    invalid = json.loads((tmp_path / "glance" / "metrics.json").read_text())["sensors"]["ring"]["invalid"]
    assert "end" in seen, r.error
    # the firmware's counters after the controller's last tick; the log's last read is after the same tick
    expected = {cause: seen["end"][cause] - seen["start"][cause] for cause in seen["end"]}
    assert {k: v for k, v in invalid.items() if k != "total"} == expected
    assert invalid["angle"] > 0 and invalid["total"] == sum(expected.values())
    from hil.trial.record.log import read_log as read_trial

    ticks = [m.data for m in read_trial(tmp_path / "glance" / "trial.mcap").messages["/robot/sensors"]]
    for tick in ticks:  # the log says per reading why it failed (the part's code), and only where it failed
        assert [c is None for c in tick["ring_cause"]] == [r is not None for r in tick["ring"]], tick
    assert any("angle" in tick["ring_cause"] for tick in ticks)
    report = hil("report", str(tmp_path / "glance"), cwd=tmp_path)
    assert report.returncode == 0 and "ring invalid" in report.stdout and "angle" in report.stdout, report.stdout


# the fit alone, judged against the hidden numbers that made the readings (tests/calibration_helpers.py: the ring
# firmware's own model on a stand before the rig's walls), never against anything the fit computed
@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    from calibration_helpers import RingRig

    stand = RingRig(tmp_path_factory.mktemp("stand"))
    yield stand
    stand.close()


def fitted(stand, hidden: dict, seed: int, per_step: int) -> dict:
    from hil.trial.calibrate.fit import fit_law, observations

    obs = observations(stand.readings(hidden, seed, per_step=per_step), stand.rig)
    (angle50, width, angle50_ci, width_ci), (_bias, a, b, a_ci, b_ci, _points) = fit_law(obs)
    return {"angle50": (angle50, angle50_ci), "width": (width, width_ci), "a": (a, a_ci), "b": (b, b_ci)}


@pytest.mark.parametrize("angle50, width, a, b", [
    (40.0, 3.0, 0.003, 0.01),
    (55.0, 8.0, 0.02, 0.03),
    (70.0, 3.0, 0.02, 0.03),
    (48.0, 6.0, 0.008, 0.015),
])
def test_the_fit_finds_hidden_numbers_over_a_grid(stand, angle50, width, a, b):
    """Tolerances from the spread of fits over seeds (about 3 standard deviations), not from the fit's intervals;
    a fit that returned its start (50, 5) or the catalog's numbers (55, 8, 0.003, 0.01) fails every row."""
    got = fitted(stand, {"dropout_angle50_deg": angle50, "dropout_width_deg": width, "noise_sigma_m": [a, b]},
                 seed=7, per_step=2)
    assert abs(got["angle50"][0] - angle50) <= 1.5, got
    assert abs(got["width"][0] / width - 1.0) <= 0.3, got
    assert abs(got["a"][0] - a) <= 0.15 * a + 0.001, got
    assert abs(got["b"][0] / b - 1.0) <= 0.12, got


def test_a_sensor_that_never_echoes_is_named_in_one_line_and_the_fit_stands(stand, tmp_path):
    """A covered sensor (every reading of sensor 3 null): its own fit cannot bound its numbers, and says so in one
    line naming it; the command still fits the others, no traceback, and their interval holds the truth."""
    from hil.trial.calibrate.fit import FitError, fit_dropout, observations

    log = stand.readings({"dropout_angle50_deg": 50.0, "dropout_width_deg": 5.0, "noise_sigma_m": [0.01, 0.02]},
                         seed=5)
    for sample in log.samples:
        sample["ranges"][3] = None
    obs = observations(log, stand.rig)
    with pytest.raises(FitError, match=r"cannot bound angle50.*none of its \d+ readings is valid"):
        fit_dropout(obs.subset(obs.sensor == 3))
    path = _log(tmp_path / "calibration.mcap", log.meta, log.samples)
    (tmp_path / "rig.yaml").write_text(RIG)
    run = hil("calibrate", "fit", str(path), "--rig", "rig.yaml", "--out", "CAL.yaml", cwd=tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    (line,) = [line for line in run.stdout.splitlines() if "sensor 3" in line]
    assert line.startswith("note: sensor 3 (yaw 90 deg) not fitted alone: none of its") and "left out" in line
    entry = yaml.safe_load((tmp_path / "CAL.yaml").read_text())["parts"][0]
    lo, hi = entry["fit"]["angle50_ci_deg"]
    assert lo <= 50.0 <= hi, entry["fit"]


def test_the_run_that_once_ended_in_an_overflow_fits_and_holds_the_truth(tmp_path):
    """Hidden angle50 58, width 8, sigma 0.01 + 0.015 r, seed 21, walls at 1.1 and -2.4 m: `hil calibrate ring`
    once ended in `OverflowError: math range error` (one sensor's interval, after the power-on reading read
    before the ring's first measure pulled its fit off). Now it fits: no traceback, the interval holds 58."""
    from calibration_helpers import rig_text

    (tmp_path / "rig.yaml").write_text(rig_text(1.1, -2.4))
    (tmp_path / "hidden.yaml").write_text(yaml.safe_dump({"schema": 1, "parts": [
        {"part": "range_ring", "sensor": "ring", "params": {
            "dropout_angle50_deg": 58.0, "dropout_width_deg": 8.0, "noise_sigma_m": [0.01, 0.015]}}]}))
    run = hil("calibrate", "ring", "--profile", profile(tmp_path, "real", 21, "hidden.yaml"), "--rig", "rig.yaml",
              "--out", "out", cwd=tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    entry = yaml.safe_load((tmp_path / "out" / "CAL.yaml").read_text())["parts"][0]
    lo, hi = entry["fit"]["angle50_ci_deg"]
    assert lo <= 58.0 <= hi, entry["fit"]
    assert abs(entry["params"]["dropout_width_deg"] / 8.0 - 1.0) <= 0.25, entry["params"]
