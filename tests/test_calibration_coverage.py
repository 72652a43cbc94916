"""The calibration fit's 95 % intervals hold the truth about 95 % of the time, over a grid of hidden numbers this
test chooses (angle50 35..65 deg, width 2..10 deg, three noise settings, two corridors, two seeds each).

Real parts: the ring firmware's own model (firmware_sim.sensors.RangeRingModel) draws every reading from
pybullet ray casts on a stand at the commbot's ring height above a floor, between the rig's walls
(tests/calibration_helpers.py); the real fit (trial/calibrate/fit.py's fit_law, what `hil calibrate` runs) sees
only the readings and the rig. The truth is the test's, never anything the fit computed. The end-to-end runs
through `hil calibrate ring` on the virtual commbot are in tests/test_calibration.py and, many seeds of them,
in `python -m bench.calibration_coverage`.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from calibration_helpers import RingRig, rig_text

ANGLE50 = (35.0, 42.5, 50.0, 57.5, 65.0)
WIDTH = (2.0, 4.0, 6.0, 8.0, 10.0)
NOISE = ((0.003, 0.01), (0.01, 0.015), (0.02, 0.03))
CORRIDORS = ((1.0, -2.6), (1.1, -2.4))
SEEDS = 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One fit per (angle50, width, seed): each number's truth, estimate and 95 % interval (logs for width, whose
    interval is symmetric in log width). The 50 fits are some 10 s of CPU, made once per run of the suite
    (tests/once.py) and kept as JSON, as the six tests that read them may land on both xdist workers."""
    from once import once_per_run

    folder = once_per_run(tmp_path_factory, "calibration-coverage", _fit_the_grid)
    return json.loads((folder / "runs.json").read_text())


def _fit_the_grid(folder: Path) -> None:
    """runs.json: for each run and number, [truth, estimate, [low, high]] (plain floats)."""
    from hil.trial.calibrate.fit import fit_law, observations

    stands = []
    out = []
    try:
        for k, c in enumerate(CORRIDORS):
            (folder / f"corridor{k}").mkdir()
            stands.append(RingRig(folder / f"corridor{k}", rig_text(*c)))
        for k, (angle50, width) in enumerate(itertools.product(ANGLE50, WIDTH)):
            for seed in range(SEEDS):
                a, b = NOISE[(k + seed) % len(NOISE)]
                stand = stands[(k + seed) % len(stands)]
                hidden = {"dropout_angle50_deg": angle50, "dropout_width_deg": width, "noise_sigma_m": [a, b]}
                log = stand.readings(hidden, seed=3000 + 10 * k + seed)
                (e50, ew, ci50, ciw), (_, ea, eb, cia, cib, _) = fit_law(observations(log, stand.rig))
                out.append({"angle50": _number(angle50, e50, ci50),
                            "width": _number(np.log(width), np.log(ew), (np.log(ciw[0]), np.log(ciw[1]))),
                            "a": _number(a, ea, cia), "b": _number(b, eb, cib)})
    finally:
        for stand in stands:
            stand.close()
    (folder / "runs.json").write_text(json.dumps(out))


def _number(truth, estimate, interval) -> list:
    return [float(truth), float(estimate), [float(interval[0]), float(interval[1])]]


@pytest.mark.parametrize("name", ["angle50", "width", "a", "b"])
def test_the_95_percent_interval_holds_the_truth_in_at_least_90_percent_of_runs(runs, name):
    """Measured: angle50 48, width 48, a 47, b 49 of 50 runs. The fit without the floor and the rejection of noisy
    ranges at the limits: angle50 46, width 44 (and 39, 37 of 50 with twice the readings a run: its bias is
    fixed in degrees while the intervals shrink)."""
    inside = [lo <= truth <= hi for truth, _, (lo, hi) in (run[name] for run in runs)]
    assert sum(inside) >= 0.9 * len(runs), (name, sum(inside), len(runs))


@pytest.mark.parametrize("name", ["angle50", "width"])
def test_no_bias_beyond_the_interval_and_the_interval_not_too_wide(runs, name):
    """Each run's error in units of its own standard error (half-width / 1.96): over the grid their mean is near 0
    (|mean| <= 0.5: a bias of half a standard error would already show at 50 runs, whose mean has a standard
    error of 0.14) and their spread near 1 (0.6..1.5: an interval three times too wide never misses, and fails)."""
    z = np.array([(est - truth) / ((hi - lo) / 2 / 1.96) for truth, est, (lo, hi) in (run[name] for run in runs)])
    assert abs(z.mean()) <= 0.5, (name, z.mean())
    assert 0.6 <= z.std(ddof=1) <= 1.5, (name, z.std(ddof=1))
    bias = np.mean([est - truth for truth, est, _ in (run[name] for run in runs)])
    half = np.mean([(hi - lo) / 2 for _, _, (lo, hi) in (run[name] for run in runs)])
    assert abs(bias) <= 0.5 * half, (name, bias, half)


def test_the_fits_probability_of_a_valid_reading_is_the_firmwares_frequency(tmp_path):
    """At each of 20 headings on a stand, the ring firmware measures 300 times with numbers this test chooses; per
    (heading, sensor) the fraction of valid readings it drew agrees with the probability the fit's likelihood
    gives them (trial/calibrate/fit.py's p_valid, the firmware's law with the rig's geometry): each difference in
    units of its binomial standard error, their mean square near 1 and none beyond 4.5. Measured: 41 geometries,
    mean square 0.81, largest 2.5; the likelihood without the floor and the rejection of noisy ranges at the
    limits that the fit had before: mean square 9.0, largest 10.5 (where the far wall is seen past 3 m)."""
    from hil.trial.calibrate.fit import observations, p_valid

    stand = RingRig(tmp_path, rig_text(1.1, -2.4))
    try:
        log = stand.readings({"dropout_angle50_deg": 50.0, "dropout_width_deg": 8.0, "noise_sigma_m": [0.02, 0.03]},
                             seed=9, steps=20, per_step=300)
    finally:
        stand.close()
    obs = observations(log, stand.rig)
    p = p_valid(obs, 50.0, 8.0, (0.02, 0.03))
    groups: dict[float, list[int]] = {}  # rows of one geometry (heading, sensor) share their probability
    for prob, valid in zip(p.tolist(), obs.valid.tolist()):
        counts = groups.setdefault(round(prob, 9), [0, 0])
        counts[0] += 1
        counts[1] += int(valid)
    z = np.array([(k / n - prob) / np.sqrt(prob * (1 - prob) / n) for prob, (n, k) in groups.items()
                  if n >= 50 and 1e-6 < prob < 1 - 1e-6])
    assert len(z) >= 20, len(z)  # many geometries in the dropout's transition, not only sure ones
    assert np.mean(z ** 2) <= 1.5 and np.abs(z).max() <= 4.5, (np.mean(z ** 2), np.abs(z).max())
