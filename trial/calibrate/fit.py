"""The fit: the ring's dropout, noise and range limits from a calibration log and its rig (the sensor-simulation
reference).

Per reading of each sensor, the rig's geometry and the logged pose give every ray's expected range and incidence
on the nearest surface, a face or the floor (geometry.py). The law fitted is the firmware's own
(firmware_sim/sensors/ring_law.py, imported, not re-derived), so the numbers mean what the firmware does with
them: each ray that meets a surface within range survives unless it drops out with probability
logistic((incidence - angle50) / width); the sensor reads the nearest surviving echo plus Gaussian noise
sigma = a + b r, and a noisy value beyond the range limits is rejected. Hence:

- dropout (angle50, width) by maximum likelihood of valid/invalid over every reading taken still (fitted_rows:
  a turning reading's pose lags it), leaving out the readings of the ring's first period (its registers'
  power-on values, not a measure) and a sensor that never echoes (silent_sensors, named): P(valid) = sum over
  the sensor's rays, nearest first, of P(the first to survive) * P(its noisy range accepted) (scipy.optimize,
  Nelder-Mead on angle50 and log width), with 95 % intervals from the likelihood's curvature (a numerical
  Hessian); the acceptance needs the noise, so dropout and noise are fitted twice, the second dropout fit with
  the first noise fit's sigma;
- the sensor-simulation reference's threshold beside it: the incidence below which 80 % of the valid readings lie;
- noise (bias, a, b) by maximum likelihood of the residuals of readings whose nearest ray surely survived
  (its dropout probability < 1 %), so the true range of the echo is known;
- the minimum and maximum range seen; the valid fraction per 5-degree bin of the axis ray's incidence.

Surfaces (:func:`fit_surfaces`). Each face of the rig names its surface (the floor is the default surface); a rig
that shows the ring one surface is fitted as above. With several, every ray is drawn with the law of the surface
it meets (as the firmware does, firmware_sim/sensors/surface_law.py), so the dropout of every surface seen (the
nearest surface of at least MIN_READINGS readings) is fitted jointly by maximum likelihood over all readings
(angle50 and log width per surface; a surface seen less keeps the law the log's ring states for it), with 95 %
intervals from the joint Hessian; the noise of each surface from the sure readings whose echo came from it.

Named, not fitted: a reading that is not a finite pose and ranges within 0..MAX_READING_M, too few readings
(MIN_READINGS), a bin with too few points (reported as such), a pose that drifts off the rig (odometry farther
than MAX_DRIFT_M from the start while turning), readings that contradict the rig (a valid echo where no ray
meets a surface, more than MAX_CONTRADICTING of them), a number the likelihood cannot bound (flat in it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hil.firmware_sim.sensors.ring_law import (acceptance, can_echo, dropout_probability, nearest_first,
                                               valid_probability)
from hil.firmware_sim.sensors.surface_law import SurfaceLaws

from .geometry import expected_rays, ray_pattern
from .log import CalibrationLog
from .rig import Rig

BIN_DEG = 5.0
MIN_BIN_POINTS = 20
MIN_READINGS = 200
MAX_DRIFT_M = 0.05
MAX_CONTRADICTING = 0.02
SURE_INCIDENCE_DEG = 15.0  # ...or its incidence below this (a wide dropout transition leaves few sure rays)
SURE_SURVIVAL = 0.01  # the nearest ray's dropout probability below this: its echo is the reading's true range
MAX_READING_M = 100.0  # no range ring measures farther (devices/calibration.py PARAM_BOUNDS agrees)
MAX_POSE = 1e4  # m, rad: an odometry pose beyond this is not a robot turning before a rig
ECHO_SLACK_M = (0.2, 0.1)  # a valid reading farther than 0.2 m + 10 % from every ray's surface is not the rig's
FIRST_PERIODS = 0.999  # readings within the ring's first period may precede its first measure: left out
MAX_LOG_HALF_WIDTH = 3.0  # an interval on log width wider than a factor e^3 either way bounds nothing
MAX_ANGLE_HALF_DEG = 45.0  # ...nor one on angle50 wider than +-45 degrees


class FitError(ValueError):
    """The data cannot give the numbers (named: what and how much)."""


@dataclass
class Observations:
    """One row per (reading, sensor) that the rig explains."""

    sensor: np.ndarray  # sensor index
    valid: np.ndarray  # bool
    still: np.ndarray  # bool: taken with the robot still (the pose exact; the noise fit uses only these)
    measured: np.ndarray  # m (nan when invalid)
    ranges: np.ndarray  # (n, rays) expected range of each ray (inf: meets no face within max range)
    incidence: np.ndarray  # (n, rays) deg
    axis_incidence: np.ndarray  # deg (nan when the axis ray meets no face)
    dropped_drift: int = 0
    contradicting: int = 0
    no_face: int = 0
    min_range_m: float = 0.0
    max_range_m: float = math.inf
    stated_noise: tuple[float, float] = (0.0, 0.0)  # the log's noise_sigma_m: the first dropout fit's acceptance
    surface: np.ndarray | None = None  # (n, rays) index into surface_names of what each ray meets (-1: nothing)
    surface_names: tuple[str, ...] = ()

    def subset(self, mask: np.ndarray) -> Observations:
        """The rows of ``mask`` (one sensor's, say), with the same ring."""
        return Observations(self.sensor[mask], self.valid[mask], self.still[mask], self.measured[mask],
                            self.ranges[mask], self.incidence[mask], self.axis_incidence[mask],
                            min_range_m=self.min_range_m, max_range_m=self.max_range_m,
                            stated_noise=self.stated_noise,
                            surface=None if self.surface is None else self.surface[mask],
                            surface_names=self.surface_names)

    @property
    def surfaces(self) -> np.ndarray:
        """(n, rays) surface index of every ray (all 0 when the rig named none)."""
        return np.zeros(self.ranges.shape, int) if self.surface is None else self.surface

    @property
    def nearest_surface(self) -> np.ndarray:
        """Per row, the surface its nearest ray meets (where its echo, if it is the first to survive, comes from)."""
        nearest = np.argmin(self.ranges, axis=1)
        return self.surfaces[np.arange(len(nearest)), nearest]

    @property
    def saturated(self) -> np.ndarray:
        """(n, rays): rays that meet their surface below its specular limit (the surface table's), whose echo
        the firmware loses whatever the dropout law says; all False for a rig of surfaces without one."""
        from hil.devices.surfaces import load_surfaces

        table = load_surfaces()
        limits = np.array([table.law(n).specular_below_deg for n in self.surface_names] + [0.0])
        return np.nan_to_num(self.incidence, nan=90.0) < limits[self.surfaces]  # -1 (nothing) -> the 0.0 at the end

    @property
    def axis_surface(self) -> np.ndarray:
        """Per row, the surface its axis ray meets (-1: nothing); the 5-degree bins go by the axis ray."""
        return self.surfaces[:, 0]


@dataclass
class RingFit:
    angle50_deg: float
    width_deg: float
    angle50_ci: tuple[float, float]
    width_ci: tuple[float, float]
    angle80_deg: float
    noise_a_m: float
    noise_b: float
    noise_a_ci: tuple[float, float]
    noise_b_ci: tuple[float, float]
    bias_m: float
    min_range_m: float
    max_range_m: float
    readings: int
    noise_points: int
    bins: list[dict[str, Any]] = field(default_factory=list)  # pooled valid fraction per axis-incidence bin
    per_sensor: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    surface: str = ""  # the surface these numbers are the law of ("": every reading pooled, one law)

    def params(self) -> dict[str, Any]:
        """What CAL.yaml sets in the twin (devices/calibration.py CALIBRATED_PARAMS)."""
        return {"dropout_angle50_deg": round(self.angle50_deg, 3), "dropout_width_deg": round(self.width_deg, 3),
                "noise_sigma_m": [round(self.noise_a_m, 5), round(self.noise_b, 5)]}


def observations(log: CalibrationLog, rig: Rig) -> Observations:
    meta = log.meta["ring"]
    params = meta["params"]
    try:  # the ring's own model judges its params (a ValueError naming the param)
        origins, dirs, per = ray_pattern(params, meta.get("sensor", "ring"))
    except ValueError as exc:
        raise FitError(f"the log's ring cannot be modelled: {exc}") from None
    n_sensors = len(params["yaw_deg"])
    min_r, max_r = float(params["min_range_m"]), float(params["max_range_m"])
    if not 0.0 < max_r <= MAX_READING_M:
        raise FitError(f"the log's ring has max_range_m {max_r}: a range ring measures within 0..{MAX_READING_M:g} m")
    for k, sample in enumerate(log.samples):
        _check_sample(sample, k, n_sensors)
    rows: dict[str, list] = {k: [] for k in ("sensor", "valid", "still", "measured", "ranges", "incidence", "axis",
                                             "surface")}
    names = rig.surfaces
    # face k -> its surface's index; len(faces) (the floor) -> the default surface's; -1 (nothing) stays -1
    surface_of = np.array([names.index(f.surface) for f in rig.faces] + [names.index(_default_surface()), -1])
    drift = contradicting = no_face = 0
    first_measure_s = FIRST_PERIODS / float(log.meta.get("hz") or params.get("update_hz") or 10.0)
    for sample in log.samples:
        if _number(sample.get("t")) and sample["t"] < first_measure_s:  # the registers' power-on values
            continue
        if math.hypot(sample["x"], sample["y"]) > MAX_DRIFT_M:
            drift += 1
            continue
        t, inc, met = expected_rays(rig, (sample["x"], sample["y"], sample["yaw"]), meta["ring_in_base"], origins,
                                    dirs)
        t = np.where(t <= max_r, t, np.inf)
        ranges = sample["ranges"]
        for k in range(n_sensors):
            rt, ri, rm = t[k * per:(k + 1) * per], inc[k * per:(k + 1) * per], met[k * per:(k + 1) * per]
            measured = ranges[k]
            if measured is not None and not _explained(measured, rt):
                contradicting += 1  # an echo where the rig has nothing
                continue
            if not np.isfinite(rt).any():
                no_face += 1
                continue
            rows["sensor"].append(k)
            rows["valid"].append(measured is not None)
            rows["still"].append(bool(sample.get("still", True)))
            rows["measured"].append(math.nan if measured is None else float(measured))
            rows["ranges"].append(np.where(rt >= min_r, rt, np.inf))
            rows["incidence"].append(ri)
            rows["axis"].append(ri[0] if np.isfinite(rt[0]) else math.nan)
            rows["surface"].append(np.where(np.isfinite(rt), surface_of[rm], -1))
    n = len(rows["sensor"])
    total = n + contradicting + no_face
    if drift > 0.1 * len(log.samples):
        raise FitError(f"the pose drifted off the rig: {drift} of {len(log.samples)} readings were taken more than "
                       f"{MAX_DRIFT_M} m from the start (odometry); was the robot held in place, or its wheels "
                       "slipping?")
    if total and contradicting > MAX_CONTRADICTING * total:
        raise FitError(f"{contradicting} of {total} readings contradict the rig: a valid echo where no ray meets a "
                       f"face of {rig.source} (something stands where the rig has nothing, or the start pose is "
                       "wrong)")
    if n < MIN_READINGS:
        raise FitError(f"too few readings that see the rig: {n} (at least {MIN_READINGS}); turn more slowly or "
                       "for more turns")
    return Observations(np.array(rows["sensor"]), np.array(rows["valid"]), np.array(rows["still"], dtype=bool),
                        np.array(rows["measured"]),
                        np.array(rows["ranges"]), np.array(rows["incidence"]), np.array(rows["axis"], dtype=float),
                        drift, contradicting, no_face, min_r, max_r,
                        tuple(float(v) for v in params["noise_sigma_m"]),  # type: ignore[arg-type]
                        np.array(rows["surface"], dtype=int), names)


def _default_surface() -> str:
    from hil.devices.surfaces import load_surfaces

    return load_surfaces().default


def _explained(measured: float, ray_ranges: np.ndarray) -> bool:
    """Whether a valid reading lies near some ray's surface (else something stood where the rig has nothing)."""
    finite = ray_ranges[np.isfinite(ray_ranges)]
    return bool(np.any(np.abs(finite - measured) <= ECHO_SLACK_M[0] + ECHO_SLACK_M[1] * finite))


def _check_sample(sample: dict, index: int, n_sensors: int) -> None:
    """One reading as the fit needs it: a finite pose and a range per sensor, each None (no echo) or a finite
    number within 0..MAX_READING_M; else FitError naming the reading (a 1e308 m echo would make the noise fit
    infinite and blind the twin built from it)."""
    where = f"reading #{index + 1} (t={sample.get('t')!r:.20})"
    for key in ("x", "y", "yaw"):
        value = sample.get(key)
        if not _number(value) or abs(value) > MAX_POSE:
            raise FitError(f"{where}: {key} must be a finite number within +-{MAX_POSE:g}, not {value!r:.40}")
    ranges = sample.get("ranges")
    if not isinstance(ranges, list) or len(ranges) != n_sensors:
        got = f"{len(ranges)} ranges" if isinstance(ranges, list) else f"ranges {ranges!r:.40}"
        raise FitError(f"{where} has {got} but the ring has {n_sensors} sensors")
    bad = [r for r in ranges if r is not None and not (_number(r) and 0.0 <= r <= MAX_READING_M)]
    if bad:
        raise FitError(f"{where}: a range of {bad[0]!r:.40}: a reading is null (no echo) or a finite number "
                       f"within 0..{MAX_READING_M:g} m")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class _LawInputs:
    """What the firmware's law needs per row that does not change while the dropout is fitted: the rays ordered
    nearest first, which of them can echo, and each one's chance that its noisy range is accepted."""

    incidence: np.ndarray
    echo: np.ndarray
    accept: np.ndarray
    surface: np.ndarray  # each ray's surface index, nearest first
    saturated: np.ndarray  # each ray lost to its surface's specular limit, nearest first


def _law_inputs(obs: Observations, noise: tuple) -> _LawInputs:
    """``noise``: (a, b) numbers, or arrays of them per surface index."""
    order = nearest_first(obs.ranges)
    ranges = np.take_along_axis(obs.ranges, order, axis=1)
    incidence = np.nan_to_num(np.take_along_axis(obs.incidence, order, axis=1), nan=90.0)
    surface = np.take_along_axis(obs.surfaces, order, axis=1)
    a, b = (np.asarray(v, dtype=float)[surface] if np.ndim(v) else v for v in noise)
    return _LawInputs(incidence, can_echo(ranges, obs.min_range_m),
                      acceptance(ranges, a, b, obs.min_range_m, obs.max_range_m), surface,
                      np.take_along_axis(obs.saturated, order, axis=1))


def _p_valid_law(law: _LawInputs, angle50: float | np.ndarray, width: float | np.ndarray) -> np.ndarray:
    """P(valid) per row; ``angle50`` and ``width`` numbers, or arrays of them per surface index."""
    if np.ndim(angle50):
        angle50, width = np.asarray(angle50)[law.surface], np.asarray(width)[law.surface]
    drop = np.where(law.echo & ~law.saturated, dropout_probability(law.incidence, angle50, width), 1.0)
    return valid_probability(drop, law.accept)


def p_valid(obs: Observations, angle50: float, width: float, noise: tuple[float, float]) -> np.ndarray:
    """Each row's probability of a valid reading under the firmware's law with these numbers."""
    return _p_valid_law(_law_inputs(obs, noise), angle50, width)


def _dropout_nll(theta: np.ndarray, law: _LawInputs, valid: np.ndarray) -> float:
    angle50, width = theta[0], math.exp(min(theta[1], 10.0))
    p = np.clip(_p_valid_law(law, angle50, width), 1e-12, 1 - 1e-12)
    return -float(np.sum(np.where(valid, np.log(p), np.log1p(-p))))


def _hessian(f, x: np.ndarray, step: np.ndarray) -> np.ndarray:
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * step[i], np.eye(n)[j] * step[j]
            h[i, j] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * step[i] * step[j])
    return h


def _intervals(f, x: np.ndarray, step: np.ndarray) -> np.ndarray:
    """95 % half-widths from the inverse Hessian of the negative log-likelihood (nan where it is not positive
    definite: the likelihood does not curve up around the estimate in every direction)."""
    h = _hessian(f, x, step)
    if not np.all(np.isfinite(h)) or np.any(np.linalg.eigvalsh((h + h.T) / 2) <= 0):
        return np.full(len(x), np.nan)
    cov = np.linalg.inv(h)
    return 1.96 * np.sqrt(np.clip(np.diag(cov), 0.0, None))


def fit_dropout(obs: Observations, start: tuple[float, float] = (50.0, 5.0),
                noise: tuple[float, float] | None = None, near: bool = False) -> tuple[float, float, tuple, tuple]:
    """(angle50, width, their 95 % intervals) by maximum likelihood under the firmware's law; ``noise`` (a, b)
    gives the acceptance of a noisy range at the limits (default: the log's stated noise); ``near``: the start is
    already close (a refit), so one descent from it, not three 15 degrees apart. FitError when the likelihood
    cannot bound a number (flat or not curving up in it), naming which and why."""
    from scipy.optimize import minimize

    law = _law_inputs(obs, obs.stated_noise if noise is None else noise)
    f = lambda th: _dropout_nll(th, law, obs.valid)  # noqa: E731
    best = None
    for a50 in (start[0],) if near else (start[0] - 15, start[0], start[0] + 15):
        res = minimize(f, np.array([a50, math.log(start[1])]), method="Nelder-Mead",
                       options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 2000})
        if best is None or res.fun < best.fun:
            best = res
    angle50, log_w = best.x
    half = _intervals(f, best.x, np.array([0.05, 0.01]))
    _check_bounded(obs, angle50, log_w, half)
    width = math.exp(log_w)
    return (angle50, width, (angle50 - half[0], angle50 + half[0]),
            (width * math.exp(-half[1]), width * math.exp(half[1])))


def _check_bounded(obs: Observations, angle50: float, log_w: float, half: np.ndarray) -> None:
    """FitError, naming the number and why, when the likelihood does not bound angle50 or width (it is flat in
    it, or the optimiser ran off to where no ring's numbers lie): such an interval says nothing."""
    n, valid = len(obs.valid), int(obs.valid.sum())
    why = (f"none of its {n} readings is valid (a covered or dead sensor?)" if valid == 0 else
           f"all of its {n} readings are valid, none shows the dropout" if valid == n else
           f"its {n} readings ({valid} valid) hardly see the dropout's transition")
    width = math.exp(min(log_w, 10.0))
    if not (math.isfinite(half[0]) and math.isfinite(half[1])):
        raise FitError(f"the dropout fit cannot bound angle50 or width: the likelihood is flat or not curving up "
                       f"at angle50 {angle50:.3g} deg, width {width:.3g} deg; {why}")
    if half[0] > MAX_ANGLE_HALF_DEG or not 0.0 <= angle50 <= 180.0:
        raise FitError(f"the dropout fit cannot bound angle50: {angle50:.3g} deg, its 95 % interval "
                       f"+-{min(half[0], 1e9):.3g} deg; {why}")
    if half[1] > MAX_LOG_HALF_WIDTH or log_w > math.log(90.0):
        raise FitError(f"the dropout fit cannot bound width: {width:.3g} deg, its 95 % interval a factor "
                       f"e^{min(half[1], 999.0):.3g} either way; {why}")


def noise_points(obs: Observations, angle50: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """(mask of the readings the noise fit uses, each reading's expected echo range): valid, still, and the
    nearest ray sure to survive, so the reading is that ray's range plus noise."""
    nearest = np.argmin(obs.ranges, axis=1)
    rows = np.arange(len(nearest))
    inc, expected = obs.incidence[rows, nearest], obs.ranges[rows, nearest]
    sure = (0.5 * (1.0 + np.tanh(0.5 * (inc - angle50) / width)) < SURE_SURVIVAL) | (inc < SURE_INCIDENCE_DEG)
    sure &= ~obs.saturated[rows, nearest]  # a saturated nearest ray never echoes: the reading is another ray's
    return obs.valid & obs.still & sure & np.isfinite(expected), expected


def fit_noise(obs: Observations, angle50: float, width: float) -> tuple[float, float, float, tuple, tuple, int]:
    """(bias, a, b, a interval, b interval, points) from the readings whose true echo range is known."""
    from scipy.optimize import minimize

    use, expected = noise_points(obs, angle50, width)
    r, res = expected[use], (obs.measured - expected)[use]
    if len(r) < MIN_READINGS // 2:
        raise FitError(f"too few readings whose echo is sure for the noise fit: {len(r)} (at least "
                       f"{MIN_READINGS // 2}); stand the robot nearer the face")

    def nll(theta):
        bias, a, b = theta
        sigma = a + b * r
        if np.any(sigma <= 1e-6) or a < 0 or b < 0:
            return 1e12
        return float(np.sum(np.log(sigma) + 0.5 * ((res - bias) / sigma) ** 2))

    x0 = np.array([float(np.mean(res)), max(float(np.std(res)) / 2, 1e-3), 0.005])
    best = minimize(nll, x0, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-8, "maxiter": 4000})
    bias, a, b = best.x
    half = _intervals(nll, best.x, np.array([1e-4, 1e-4, 1e-4]))
    return bias, a, b, (a - half[1], a + half[1]), (b - half[2], b + half[2]), int(len(r))


def angle80(obs: Observations) -> float:
    """The sensor-simulation reference's threshold: the axis incidence below which 80 % of the valid readings lie."""
    valid = obs.axis_incidence[obs.valid & np.isfinite(obs.axis_incidence)]
    return float(np.percentile(valid, 80)) if len(valid) else math.nan


def valid_bins(obs: Observations, mask: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Valid fraction per 5-degree bin of the axis ray's incidence (bins with too few points say so)."""
    mask = np.ones(len(obs.valid), bool) if mask is None else mask
    out = []
    for lo in np.arange(0.0, 90.0, BIN_DEG):
        sel = mask & (obs.axis_incidence >= lo) & (obs.axis_incidence < lo + BIN_DEG)
        n = int(sel.sum())
        out.append({"lo_deg": float(lo), "n": n, "valid": (float(obs.valid[sel].mean()) if n else None),
                    "enough": n >= MIN_BIN_POINTS})
    return out


def fit_law(obs: Observations) -> tuple[tuple[float, float, tuple, tuple], tuple]:
    """The pooled fit: (fit_dropout's and fit_noise's results). The dropout's likelihood needs the noise (a noisy
    range beyond the limits is rejected) and the noise fit needs the dropout (which readings are sure), so the
    dropout is fitted with the log's stated noise, the noise with that dropout, and both once more."""
    angle50, width, _, _ = fit_dropout(obs)
    _, a, b, _, _, _ = fit_noise(obs, angle50, width)
    dropout = fit_dropout(obs, (angle50, width), noise=(a, b), near=True)
    return dropout, fit_noise(obs, dropout[0], dropout[1])


def fitted_rows(obs: Observations) -> np.ndarray:
    """The rows the fit uses: those read with the robot still, whose logged pose is the pose the ring measured
    from (a reading taken while turning was measured up to one ring period before the odometry read with it:
    the 1.5 degrees at 15 deg/s that widened the width and moved angle50 end to end); all rows when fewer than
    MIN_READINGS were still."""
    return obs.still.copy() if obs.still.sum() >= MIN_READINGS else np.ones(len(obs.still), bool)


def silent_sensors(obs: Observations) -> list[int]:
    """Sensors with at least MIN_BIN_POINTS readings that see the rig and not one valid: covered, dead or
    unplugged, not a dropout (a sensor facing a wall squarely would echo); the law has no such sensor, so the fit
    leaves them out and says so."""
    return [k for k in sorted(set(obs.sensor.tolist()))
            if (obs.sensor == k).sum() >= MIN_BIN_POINTS and not obs.valid[obs.sensor == k].any()]


def fit_ring(log: CalibrationLog, rig: Rig) -> RingFit:
    obs = observations(log, rig)
    silent = silent_sensors(obs)
    use = fitted_rows(obs) & ~np.isin(obs.sensor, silent)
    (angle50, width, a_ci, w_ci), (bias, a, b, na_ci, nb_ci, points) = fit_law(obs.subset(use))
    measured = obs.measured[obs.valid]
    fit = RingFit(angle50, width, a_ci, w_ci, angle80(obs), a, b, na_ci, nb_ci, bias,
                  float(measured.min()), float(measured.max()), int(use.sum()), points, valid_bins(obs))
    if not obs.still.all():
        fit.notes.append(f"{int((~obs.still).sum())} of {len(obs.still)} sensor readings were taken while turning: "
                         "left out of the fit (their pose lags the reading)" if obs.still[use].all() else
                         f"only {int(obs.still.sum())} readings were taken still: the turning ones are fitted too")
    yaw = log.meta["ring"]["params"]["yaw_deg"]
    for k in sorted(set(obs.sensor.tolist())):
        sel = obs.sensor == k
        entry: dict[str, Any] = {"sensor": k, "readings": int(sel.sum()), "bins": valid_bins(obs.subset(sel))}
        try:
            if k in silent:
                raise FitError(f"none of its {int(sel.sum())} readings that see the rig is valid (covered, dead or "
                               "unplugged?): left out of the fit")
            s50, sw, s50_ci, _ = fit_dropout(obs.subset(sel & use), (angle50, width), noise=(a, b), near=True)
            entry.update(angle50_deg=s50, width_deg=sw, angle50_ci=list(s50_ci))
        except FitError as exc:  # one sensor's readings may not bound its own numbers: said, and the pooled fit stands
            entry["note"] = f"sensor {k} (yaw {yaw[k]:g} deg) not fitted alone: {exc}"
            fit.notes.append(entry["note"])
        fit.per_sensor.append(entry)
    thin = [b for b in fit.bins if 0 < b["n"] < MIN_BIN_POINTS]
    if thin:
        fit.notes.append(f"{len(thin)} bins have fewer than {MIN_BIN_POINTS} points (not judged): "
                         + ", ".join(f"{b['lo_deg']:.0f}-{b['lo_deg'] + BIN_DEG:.0f} deg ({b['n']})" for b in thin))
    if obs.contradicting:
        fit.notes.append(f"{obs.contradicting} readings contradict the rig (an echo where it has no face); left out")
    if obs.dropped_drift:
        fit.notes.append(f"{obs.dropped_drift} readings taken off the rig's start (drift) were left out")
    fit.surface = obs.surface_names[0] if len(obs.surface_names) == 1 else ""
    return fit


def fit_surfaces(log: CalibrationLog, rig: Rig, only: tuple[str, ...] | list[str] | None = None) -> dict[str, RingFit]:
    """The law of every surface the rig shows the ring enough of, by surface name (module docstring). ``only``
    fits those surfaces (others seen keep the ring's stated law); a surface the rig lacks is refused (FitError
    naming the rig and its surfaces), as is one it has but the ring saw too little of."""
    obs = observations(log, rig)
    names = obs.surface_names
    for name in only or ():
        if name not in names:
            raise FitError(f"the rig {rig.source} has no face of surface {name!r}: it cannot calibrate it (its "
                           f"surfaces: {', '.join(names)}, the floor's included)")
    silent = silent_sensors(obs)
    use = fitted_rows(obs) & ~np.isin(obs.sensor, silent)
    counts = np.bincount(obs.nearest_surface[use & (obs.nearest_surface >= 0)], minlength=len(names))
    seen = [k for k in range(len(names)) if counts[k] >= MIN_READINGS]
    wanted = [names.index(n) for n in only] if only else seen
    short = [names[k] for k in wanted if k not in seen]
    if short:
        raise FitError(f"too few readings whose echo comes from surface {short[0]!r}: "
                       f"{counts[names.index(short[0])]} (at least {MIN_READINGS}); turn more slowly or stand nearer "
                       "its face")
    if len(names) == 1 or (len(seen) == 1 and not only):
        fit = fit_ring(log, rig)  # one surface: the single law of every reading
        fit.surface = names[seen[0]] if seen else names[0]
        return {fit.surface: fit}
    return _joint_fit(log, obs, use, silent, wanted)


def _stated_laws(log: CalibrationLog, names: tuple[str, ...]) -> np.ndarray:
    """(surfaces, 4): angle50, width, noise a, b per surface as the log's ring states them (its params, the
    surface table's factors or its own measured laws)."""
    meta = log.meta["ring"]
    params = meta["params"]
    laws = SurfaceLaws(meta.get("sensor", "ring"), float(params["dropout_angle50_deg"]),
                       float(params["dropout_width_deg"]), params["noise_sigma_m"], params.get("surfaces"))
    return np.array([[law.angle50_deg, law.width_deg, law.noise_a_m, law.noise_b]
                     for law in (laws.law(n) for n in names)])


def _joint_dropout(obs: Observations, laws: np.ndarray, free: list[int], near: bool) -> tuple[np.ndarray, np.ndarray]:
    """angle50 and width of the ``free`` surfaces by maximum likelihood of every reading at once, each ray with
    its surface's law (the others held at ``laws``); returns (fitted laws, 95 % half-widths (angle50, log width)
    per free surface). FitError when the likelihood cannot bound one, naming the surface."""
    from scipy.optimize import minimize

    law = _law_inputs(obs, (laws[:, 2], laws[:, 3]))

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        angle50, width = laws[:, 0].copy(), laws[:, 1].copy()
        angle50[free], width[free] = theta[0::2], np.exp(np.minimum(theta[1::2], 10.0))
        return angle50, width

    def nll(theta: np.ndarray) -> float:
        p = np.clip(_p_valid_law(law, *unpack(theta)), 1e-12, 1 - 1e-12)
        return -float(np.sum(np.where(obs.valid, np.log(p), np.log1p(-p))))

    start = np.ravel([[laws[k, 0], math.log(laws[k, 1])] for k in free])
    best = None
    for shift in (0.0,) if near else (-15.0, 0.0, 15.0):
        x0 = start.copy()
        x0[0::2] += shift
        res = minimize(nll, x0, method="Nelder-Mead",
                       options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 4000 * len(free), "adaptive": True})
        if best is None or res.fun < best.fun:
            best = res
    half = _intervals(nll, best.x, np.tile([0.05, 0.01], len(free)))
    names = obs.surface_names
    for j, k in enumerate(free):
        rows = obs.nearest_surface == k
        try:
            _check_bounded(obs.subset(rows), best.x[2 * j], best.x[2 * j + 1], half[2 * j:2 * j + 2])
        except FitError as exc:
            raise FitError(f"surface {names[k]!r}: {exc}") from None
    angle50, width = unpack(best.x)
    fitted = laws.copy()
    fitted[:, 0], fitted[:, 1] = angle50, width
    return fitted, half.reshape(-1, 2)


def _joint_fit(log: CalibrationLog, obs: Observations, use: np.ndarray, silent: list[int],
               free: list[int]) -> dict[str, RingFit]:
    names = obs.surface_names
    sub = obs.subset(use)
    laws = _stated_laws(log, names)
    laws, _ = _joint_dropout(sub, laws, free, near=False)
    noise: dict[int, tuple] = {}
    for near in (True, False):  # noise with the first dropout, the dropout with that noise, the noise again
        for k in free:
            rows = sub.subset(sub.nearest_surface == k)
            noise[k] = fit_noise(rows, laws[k, 0], laws[k, 1])
            laws[k, 2], laws[k, 3] = noise[k][1], noise[k][2]
        if near:
            laws, half = _joint_dropout(sub, laws, free, near=True)
    out: dict[str, RingFit] = {}
    for j, k in enumerate(free):
        bias, a, b, a_ci, b_ci, points = noise[k]
        angle50, width = laws[k, 0], laws[k, 1]
        mine = obs.axis_surface == k
        measured = obs.measured[obs.valid & (obs.nearest_surface == k)]
        fit = RingFit(angle50, width, (angle50 - half[j, 0], angle50 + half[j, 0]),
                      (width * math.exp(-half[j, 1]), width * math.exp(half[j, 1])),
                      angle80(obs.subset(mine)), a, b, a_ci, b_ci, bias,
                      float(measured.min()) if len(measured) else math.nan,
                      float(measured.max()) if len(measured) else math.nan,
                      int((use & (obs.nearest_surface == k)).sum()), points, valid_bins(obs, mine), surface=names[k])
        for s in sorted(set(obs.sensor[mine].tolist())):
            sel = mine & (obs.sensor == s)
            fit.per_sensor.append({"sensor": s, "readings": int(sel.sum()), "bins": valid_bins(obs, sel)})
        held = [names[i] for i in range(len(names)) if i not in free]
        if held:
            fit.notes.append(f"fitted jointly with {', '.join(names[i] for i in free if i != k) or 'nothing else'}; "
                             f"the rays on {', '.join(held)} drawn with the law the log's ring states for them")
        if silent:
            fit.notes.append(f"sensors {', '.join(map(str, silent))} never echo: left out of the fit")
        out[names[k]] = fit
    return out
