"""What a fit writes: CAL.yaml (devices/calibration.py reads it back), calibration.png, and the agreement check."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .fit import MIN_BIN_POINTS, Observations, RingFit, observations, valid_bins
from .log import CalibrationLog
from .rig import Rig

AGREEMENT_PP = 10.0
Z95 = 1.96  # a bin fails when the difference exceeds AGREEMENT_PP by more than its sampling error can explain


def write_cal(fits: RingFit | dict[str, RingFit], log: CalibrationLog, rig: Rig, path: Path, log_path: Path) -> None:
    """CAL.yaml of one fit or of one per surface: the default surface's (or a pooled fit's) numbers are the
    entry's ``params``, every other surface's go under ``surfaces`` (devices/calibration.py)."""
    import yaml

    from hil.devices.surfaces import load_surfaces

    ring = log.meta["ring"]
    default = load_surfaces().default
    fits = fits if isinstance(fits, dict) else {fits.surface: fits}
    entry: dict[str, Any] = {"part": ring["part"], "serial": ring["serial"], "sensor": ring["sensor"]}
    others = {}
    for name, fit in fits.items():
        if name in ("", default):
            entry.update(params=fit.params(), fit=_fit_record(fit))
        else:
            others[name] = {"params": fit.params(), "fit": _fit_record(fit)}
    if others:
        entry["surfaces"] = others
    if entry["serial"] is None:
        del entry["serial"]
    doc = {"schema": 1, "robot": log.meta.get("robot", ""), "rig": str(rig.source), "log": str(log_path),
           "parts": [entry]}
    doc = plain_python(doc)
    text = ("# written by hil calibrate: the twin of this robot loads it through a profile's `calibration:`\n"
            + yaml.safe_dump(doc, sort_keys=False))
    write_checked(text, path)


def _fit_record(fit: RingFit) -> dict[str, Any]:
    return {"angle50_ci_deg": [round(v, 3) for v in fit.angle50_ci],
            "width_ci_deg": [round(v, 3) for v in fit.width_ci],
            "angle80_deg": round(fit.angle80_deg, 3), "noise_a_ci_m": [round(v, 5) for v in fit.noise_a_ci],
            "noise_b_ci": [round(v, 5) for v in fit.noise_b_ci], "bias_m": round(fit.bias_m, 5),
            "min_range_seen_m": round(fit.min_range_m, 4), "max_range_seen_m": round(fit.max_range_m, 4),
            "readings": fit.readings, "noise_points": fit.noise_points}


def write_checked(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` only if the CAL.yaml loader takes it (devices/calibration.py: its own checks,
    not a copy of them), through a file beside it and a rename: what a fit writes always loads, and a fit
    refused leaves the file that was there."""
    import os

    from hil.devices.calibration import load_calibration
    from hil.devices.yaml_source import ConfigError

    from .fit import FitError

    spare = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    spare.write_text(text)
    try:
        load_calibration(spare)
    except BaseException as exc:
        spare.unlink(missing_ok=True)
        if isinstance(exc, ConfigError):
            raise FitError(f"{path}: not written: the fit gave numbers a calibration file may not hold "
                           f"({exc.message})") from None
        raise
    os.replace(spare, path)


def plain_python(value: Any) -> Any:
    """numpy scalars as Python numbers (YAML's safe dumper knows only those)."""
    if isinstance(value, dict):
        return {k: plain_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_python(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def summary(fit: RingFit | dict[str, RingFit]) -> str:
    """The fit in a few lines (one block per surface when there are several)."""
    if isinstance(fit, dict):
        if len(fit) == 1:
            return summary(next(iter(fit.values())))
        return "\n".join(f"surface {name}:\n" + "\n".join("  " + line for line in summary(one).splitlines())
                         for name, one in fit.items())
    lines = [f"dropout: angle50 {fit.angle50_deg:.2f} deg (95 % {fit.angle50_ci[0]:.2f}..{fit.angle50_ci[1]:.2f}), "
             f"width {fit.width_deg:.2f} deg ({fit.width_ci[0]:.2f}..{fit.width_ci[1]:.2f}); 80 % of valid readings "
             f"below {fit.angle80_deg:.1f} deg (the sensor-simulation reference)",
             f"noise: sigma = {fit.noise_a_m:.4f} + {fit.noise_b:.4f} r m (a {fit.noise_a_ci[0]:.4f}..{fit.noise_a_ci[1]:.4f},"
             f" b {fit.noise_b_ci[0]:.4f}..{fit.noise_b_ci[1]:.4f}), bias {1000 * fit.bias_m:+.1f} mm "
             f"({fit.noise_points} readings)",
             f"range seen: {fit.min_range_m:.3f}..{fit.max_range_m:.3f} m; {fit.readings} readings fitted"]
    return "\n".join(lines + [f"note: {n}" for n in fit.notes])


def plot(fit: RingFit, obs: Observations, path: Path) -> None:
    """Valid fraction per bin with the fitted model, per sensor and pooled; noise residuals against range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .fit import p_valid

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    model = p_valid(obs, fit.angle50_deg, fit.width_deg, (fit.noise_a_m, fit.noise_b))
    centres = [b["lo_deg"] + 2.5 for b in fit.bins]
    for entry in fit.per_sensor:
        ys = [b["valid"] if b["enough"] else np.nan for b in entry["bins"]]
        left.plot(centres, ys, color="0.75", lw=0.8)
    left.plot(centres, [b["valid"] if b["enough"] else np.nan for b in fit.bins], "o", color="C0",
              label="measured (all sensors)")
    predicted = [float(model[(obs.axis_incidence >= b["lo_deg"]) & (obs.axis_incidence < b["lo_deg"] + 5)].mean())
                 if b["enough"] else np.nan for b in fit.bins]
    left.plot(centres, predicted, "-", color="C3", label=f"fit: angle50 {fit.angle50_deg:.1f}, width "
                                                        f"{fit.width_deg:.1f} deg")
    left.axvline(fit.angle80_deg, color="C2", ls="--", label=f"80 % of valid below {fit.angle80_deg:.1f} deg")
    left.set(xlabel="incidence of the sensor's axis on the face (deg)", ylabel="valid fraction", ylim=(-0.05, 1.05),
             title="dropout (grey: each sensor)")
    left.legend(loc="lower left", fontsize=8)
    from .fit import noise_points

    ok, r = noise_points(obs, fit.angle50_deg, fit.width_deg)
    right.plot(r[ok], (obs.measured - r)[ok] * 1000, ".", ms=2, color="C0", alpha=0.5,
               label=f"{int(ok.sum())} readings fitted (still, nearest ray sure to echo)")
    rr = np.linspace(max(0.0, r[ok].min()), r[ok].max(), 50)
    for sign in (1, -1):
        right.plot(rr, 1000 * (fit.bias_m + sign * (fit.noise_a_m + fit.noise_b * rr)), color="C3")
    right.legend(loc="upper left", fontsize=8)
    right.set(xlabel="expected range (m)", ylabel="residual (mm)",
              title=f"noise: sigma = {fit.noise_a_m:.4f} + {fit.noise_b:.4f} r (+-1 sigma)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


NOISE_AGREEMENT = 0.25  # the residual spread of the twin within +-25 % of the real one's


def _residuals(obs: Observations) -> np.ndarray:
    """Each row's reading minus its nearest ray's expected range (nan where invalid or nothing is expected)."""
    nearest = np.argmin(obs.ranges, axis=1)
    r = obs.ranges[np.arange(len(nearest)), nearest]
    return np.where(obs.valid & np.isfinite(r), obs.measured - r, np.nan)


def _sd_mm(res: np.ndarray, sel: np.ndarray) -> str:
    values = res[sel & np.isfinite(res)]
    return f"{1000 * float(np.std(values)):.0f}" if len(values) >= 2 else "-"


def check(real: CalibrationLog, twin: CalibrationLog, rig: Rig,
          sides: tuple[str, str] = ("real", "twin")) -> tuple[bool, list[str]]:
    """Per sensor and 5-degree bin, the real against the twin's valid fraction and residual spread; passes when
    every bin with enough data on both sides is within AGREEMENT_PP and the spread of the readings below 30
    degrees within NOISE_AGREEMENT. ``sides`` names the two in the lines (a mixed run: real, virtual).

    A bin of 20 readings has a binomial standard error of up to 11 pp on its own: where the fraction is between
    0 and 1 (the dropout's transition), +-10 pp alone would fail a perfect twin in some of a hundred bins by
    chance. So a bin fails when |difference| > AGREEMENT_PP + 1.96 * (the difference's standard error): the twin
    is judged within +-10 pp wherever the data can tell, and a twin that is off (the catalog's numbers against
    a different part: 40-90 pp in the transition) still fails."""
    a, b = observations(real, rig), observations(twin, rig)
    res_a, res_b = _residuals(a), _residuals(b)
    lines, ok, judged = [], True, 0
    names = a.surface_names
    for k, s in [(k, s) for s in range(len(names)) for k in sorted(set(a.sensor.tolist()) | set(b.sensor.tolist()))]:
        # a rig of one surface reads as before; with several, each line says which surface its axis ray met
        label = f"{names[s]} " if len(names) > 1 else ""
        in_a_s, in_b_s = (a.sensor == k) & (a.axis_surface == s), (b.sensor == k) & (b.axis_surface == s)
        for ra, rb in zip(valid_bins(a, in_a_s), valid_bins(b, in_b_s)):
            if not (ra["n"] >= MIN_BIN_POINTS and rb["n"] >= MIN_BIN_POINTS):
                continue
            judged += 1
            diff = 100 * (rb["valid"] - ra["valid"])
            se = 100 * math.sqrt(ra["valid"] * (1 - ra["valid"]) / ra["n"] + rb["valid"] * (1 - rb["valid"]) / rb["n"])
            allowed = AGREEMENT_PP + Z95 * se
            bad = abs(diff) > allowed
            ok &= not bad
            lo = ra["lo_deg"]
            in_a = in_a_s & (a.axis_incidence >= lo) & (a.axis_incidence < lo + 5)
            in_b = in_b_s & (b.axis_incidence >= lo) & (b.axis_incidence < lo + 5)
            lines.append(f"sensor {k:2d} {label}{lo:4.0f}-{lo + 5:.0f} deg: {sides[0]} "
                         f"{100 * ra['valid']:5.1f} % {sides[1]} {100 * rb['valid']:5.1f} % ({diff:+5.1f} pp of "
                         f"+-{allowed:.0f}; n {ra['n']}/{rb['n']}; noise sd {_sd_mm(res_a, in_a)}/"
                         f"{_sd_mm(res_b, in_b)} mm){'  FAIL' if bad else ''}")
    if not judged:
        return False, ["no bin has enough readings on both sides to judge"]
    noise_ok, noise = _noise_lines(a, b, res_a, res_b, sides)
    ok &= noise_ok
    lines += noise
    lines.append(f"{'pass' if ok else 'FAIL'}: {judged} bins judged, tolerance +-{AGREEMENT_PP:.0f} pp plus "
                 f"{Z95} standard errors of each bin's difference; noise within +-{100 * NOISE_AGREEMENT:.0f} %")
    return ok, lines


def _noise_lines(a: Observations, b: Observations, res_a: np.ndarray, res_b: np.ndarray,
                 sides: tuple[str, str]) -> tuple[bool, list[str]]:
    out, sd = [], []
    for name, obs, res in zip(sides, (a, b), (res_a, res_b)):
        values = res[np.isfinite(res) & (obs.axis_incidence < 30)]
        sd.append(float(np.std(values)) if len(values) >= MIN_BIN_POINTS else math.nan)
        out.append(f"noise ({name}): residual sd {1000 * sd[-1]:.1f} mm over {len(values)} readings below 30 deg")
    if not all(math.isfinite(v) and v > 0 for v in sd):
        return False, out + ["noise: too few readings below 30 deg to compare"]
    ratio = sd[1] / sd[0]
    good = abs(ratio - 1) <= NOISE_AGREEMENT
    out.append(f"noise: {sides[1]} / {sides[0]} = {ratio:.2f}{'' if good else '  FAIL'}")
    return good, out
