"""What goes into a calibration and what comes out of it is checked: a rig's turn and drive values (bounded,
refused at the key's file:line), a calibration log's meta and readings (one line naming what is wrong, never a
traceback), and a CAL.yaml (each number bounded at file:line; `hil calibrate fit` never writes a file its own
loader refuses, and a refused fit leaves the file that was there)."""
from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest

from calibration_helpers import RingRig
from hil.devices.calibration import load_calibration
from hil.devices.yaml_source import ConfigError
from hil.trial.calibrate.fit import FitError, fit_ring, observations
from hil.trial.calibrate.log import META, RING, CalibrationLogError, CalibrationWriter, read_log
from hil.trial.calibrate.report import write_cal
from hil.trial.calibrate.rig import load_rig

RIG_LINES = ["start: [0, 0, 0]",  # 1
             "walls:",  # 2
             "  - {from: [1, -1], to: [1, 1]}",  # 3
             "turn:",  # 4
             "  rate_deg_s: 15",  # 5
             "drive:",  # 6
             "  distance_m: 0.4",  # 7
             "  speed_m_s: 0.1",  # 8
             "  times: 1"]  # 9


def rig_with(tmp_path: Path, line: int, text: str) -> Path:
    """The rig with line ``line`` replaced by ``text`` (a section's line replaced: its indented lines dropped)."""
    lines = list(RIG_LINES)
    lines[line - 1] = text
    if not text.startswith(" "):
        while line < len(lines) and lines[line].startswith(" "):
            del lines[line]
    path = tmp_path / "rig.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_rig_with_good_turn_and_drive_values_loads(tmp_path):
    rig = load_rig(rig_with(tmp_path, 9, "  times: 2"))
    assert (rig.drive_times, rig.drive_distance_m, rig.drive_speed_m_s) == (2, 0.4, 0.1)
    assert rig.drive_s == pytest.approx(2 * 2 * 0.4 / 0.1)
    assert rig.turn_rate_rad_s == pytest.approx(math.radians(15))


@pytest.mark.parametrize("line, text, says", [
    (9, "  times: 1e18", "rig drive: times must be a whole number within 0..10, not 1e+18"),
    (9, "  times: 1.5", "times must be a whole number within 0..10, not 1.5"),
    (9, "  times: true", "times must be a whole number within 0..10, not True"),
    (8, "  speed_m_s: 0", "rig drive: speed_m_s must be a number within 0.02..1, not 0"),
    (8, "  speed_m_s: .inf", "speed_m_s must be a number within 0.02..1, not inf"),
    (8, "  speed_m_s: fast", "speed_m_s must be a number within 0.02..1, not 'fast'"),
    (7, "  distance_m: .nan", "distance_m must be a number within 0..3, not nan"),
    (7, "  distance_m: -0.4", "distance_m must be a number within 0..3, not -0.4"),
    (7, "  distance_m: 1e300", "distance_m must be a number within 0..3"),
    (5, "  rate_deg_s: fast", "rig turn: rate_deg_s must be a number within 1..90 (slow enough"),
    (5, "  rate_deg_s: 0", "rate_deg_s must be a number within 1..90"),
    (5, "  turns: 1e9", "rig turn: turns must be a number within 0.1..10, not 1000000000.0"),
    (5, "  step_deg: [6]", "rig turn: step_deg must be a number within 0.5..45, not [6]"),
    (6, "drive: [0.4, 0.1, 1]", "rig: drive must be a mapping"),
    (4, "turn: fast", "rig: turn must be a mapping"),
    (7, "  distance: 0.4", "rig drive: unknown key 'distance'"),
])
def test_bad_turn_and_drive_values_are_refused_at_their_line(tmp_path, line, text, says):
    path = rig_with(tmp_path, line, text)
    with pytest.raises(ConfigError) as caught:
        load_rig(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert says in str(caught.value), str(caught.value)


def test_a_drive_without_a_distance_is_refused(tmp_path):
    path = tmp_path / "rig.yaml"
    path.write_text("\n".join(RIG_LINES[:6] + ["  times: 2"]) + "\n")
    with pytest.raises(ConfigError, match=r"rig.yaml:7: rig drive: distance_m is missing"):
        load_rig(path)


CAL = """\
schema: 1
parts:
  - part: range_ring
    sensor: ring
    params:
      dropout_angle50_deg: 52.0
      dropout_width_deg: 4.0
      noise_sigma_m: [0.01, 0.02]
"""


def test_a_calibration_file_in_bounds_loads(tmp_path):
    path = tmp_path / "CAL.yaml"
    path.write_text(CAL)
    (entry,) = load_calibration(path).entries
    assert entry.params == {"dropout_angle50_deg": 52.0, "dropout_width_deg": 4.0, "noise_sigma_m": [0.01, 0.02]}


@pytest.mark.parametrize("old, new, line, says", [
    ("noise_sigma_m: [0.01, 0.02]", "noise_sigma_m: [1e308, 0.02]", 8, "noise_sigma_m must be two finite numbers "
                                                                       "within 0..1"),
    ("noise_sigma_m: [0.01, 0.02]", "noise_sigma_m: [.inf, 0.02]", 8, "noise_sigma_m must be two finite"),
    ("dropout_width_deg: 4.0", "dropout_width_deg: 1e308", 7, "dropout_width_deg must be finite numbers within "
                                                              "0.001..90, not 1e+308"),
    ("dropout_width_deg: 4.0", "dropout_width_deg: 0", 7, "dropout_width_deg must be finite numbers within"),
    ("dropout_angle50_deg: 52.0", "dropout_angle50_deg: 1e308", 6, "dropout_angle50_deg must be finite numbers "
                                                                   "within 0..180"),
    ("dropout_width_deg: 4.0", "min_range_m: 1e308", 7, "min_range_m must be finite numbers within 0..100"),
    ("dropout_width_deg: 4.0", "max_range_m: 1e308", 7, "max_range_m must be finite numbers within 0.001..100"),
    ("dropout_width_deg: 4.0", "{min_range_m: 3.0, max_range_m: 2.0}", 5, "max_range_m (2.0) must exceed "
                                                                          "min_range_m (3.0)"),
])
def test_a_calibration_file_with_numbers_out_of_bounds_is_refused_at_their_line(tmp_path, old, new, line, says):
    path = tmp_path / "CAL.yaml"
    text = CAL.replace(old, new)
    if new.startswith("{"):  # the params as one flow mapping on the params line
        text = CAL.split("    params:")[0] + f"    params: {new}\n"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_calibration(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert says in str(caught.value), str(caught.value)


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    stand = RingRig(tmp_path_factory.mktemp("rig"))
    yield stand
    stand.close()


def write_log(path: Path, meta, samples: list) -> Path:
    writer = CalibrationWriter(path)
    writer.write(META, 0.0, meta)
    for k, sample in enumerate(samples):
        writer.write(RING, 0.1 * k, sample)
    writer.close()
    return path


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def error_lines(run: subprocess.CompletedProcess) -> list[str]:
    """What the command said on stderr, but pybullet's own banner (printed when it is imported)."""
    return [line for line in run.stderr.strip().splitlines() if not line.startswith("pybullet build time")]


def test_a_fit_on_readings_of_1e308_m_is_refused_in_one_line_and_writes_nothing(stand, tmp_path):
    good = stand.readings({}, seed=1)
    samples = [{**s, "ranges": [1e308 if r is not None else None for r in s["ranges"]]} for s in good.samples]
    log = write_log(tmp_path / "calibration.mcap", good.meta, samples)
    with pytest.raises(FitError, match=r"reading #1 \(t=0.0\): a range of 1e\+308: a reading is null"):
        observations(read_log(log), stand.rig)
    rig = tmp_path / "rig.yaml"
    rig.write_text(Path(stand.rig.source).read_text())
    run = hil("calibrate", "fit", str(log), "--rig", str(rig), "--out", str(tmp_path / "CAL.yaml"), cwd=tmp_path)
    lines = error_lines(run)
    assert run.returncode == 2 and len(lines) == 1 and "a range of 1e+308" in lines[0], run.stderr
    assert not (tmp_path / "CAL.yaml").exists()


@pytest.mark.parametrize("meta, says", [
    ([1, 2], f"{META} must be a JSON object, not list"),
    ({"robot": "x", "ring": "ring"}, "ring must be a JSON object, not str"),
    ({"robot": "x", "ring": {"part": "range_ring", "sensor": "ring", "params": [], "ring_in_base": {}}},
     "ring.params must be a JSON object"),
    ({"robot": "x", "ring": {"part": "range_ring", "sensor": "ring", "params": {},
                             "ring_in_base": {"rotation": [[1, 0, 0]], "translation": [0, 0, 0]}}},
     "ring.ring_in_base.rotation must be 3 x 3 finite numbers"),
])
def test_a_log_with_a_wrong_meta_is_refused_in_one_line(tmp_path, meta, says):
    sample = {"t": 0.0, "x": 0.0, "y": 0.0, "yaw": 0.0, "ranges": [None] * 12, "still": True}
    log = write_log(tmp_path / "calibration.mcap", meta, [sample])
    with pytest.raises(CalibrationLogError, match=says.replace("[", r"\[")) as caught:
        read_log(log)
    assert str(log) in str(caught.value)
    if meta == [1, 2]:  # the probe's case, end to end: one line, no traceback
        rig = tmp_path / "rig.yaml"
        rig.write_text("\n".join(RIG_LINES[:3]) + "\n")
        run = hil("calibrate", "fit", str(log), "--rig", str(rig), "--out", str(tmp_path / "CAL.yaml"),
                  cwd=tmp_path)
        lines = error_lines(run)
        assert run.returncode == 2 and len(lines) == 1 and says in lines[0], run.stderr


@pytest.mark.parametrize("sample, says", [
    ({"yaw": math.inf}, "yaw must be a finite number"),
    ({"x": "0"}, "x must be a finite number"),
    ({"ranges": [None] * 11}, "has 11 ranges but the ring has 12 sensors"),
    ({"ranges": [-1.0] + [None] * 11}, "a range of -1.0"),
    ({"ranges": ["1.0"] + [None] * 11}, "a range of '1.0'"),
])
def test_a_reading_the_fit_cannot_use_is_named(stand, sample, says):
    log = stand.readings({}, seed=1, steps=4)
    log.samples[2].update(sample)
    with pytest.raises(FitError, match=rf"reading #3 \(t=0.2\d*\).*{says}"):
        observations(log, stand.rig)


def test_the_fit_never_writes_a_file_its_loader_refuses(stand, tmp_path):
    log = stand.readings({}, seed=2)
    fit = fit_ring(log, stand.rig)
    path = tmp_path / "CAL.yaml"
    write_cal(fit, log, stand.rig, path, tmp_path / "calibration.mcap")
    written = path.read_text()
    (entry,) = load_calibration(path).entries  # what it writes, its loader takes
    assert entry.params["dropout_angle50_deg"] == pytest.approx(fit.angle50_deg, abs=1e-3)
    for broken in (dataclasses.replace(fit, noise_a_m=math.inf), dataclasses.replace(fit, width_deg=math.nan),
                   dataclasses.replace(fit, noise_b=1e308)):
        with pytest.raises(FitError, match=r"CAL.yaml: not written: the fit gave numbers a calibration file may "
                                           r"not hold \(calibration part #1: noise_sigma_m|dropout_width_deg"):
            write_cal(broken, log, stand.rig, path, tmp_path / "calibration.mcap")
        assert path.read_text() == written  # the file that was there is left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CAL.yaml"]  # no half-written spare left behind
