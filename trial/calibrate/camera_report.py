"""What ``hil calibrate camera`` writes: the camera's CAL.yaml entry (devices/calibration.py reads it back: the
default surface's law under ``params: {depth: ...}``, every other surface's under ``surfaces``), the summary lines
and camera_calibration.png (valid fraction per 5-degree bin of incidence per surface, the fitted law, its 80 %
angle; the residuals against depth with the fitted noise)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .camera_fit import BIN_DEG, CameraFit, PixelObservations, p_valid
from .capture import Capture
from .report import plain_python, write_checked
from .rig import Rig


def write_camera_cal(fits: dict[str, CameraFit], capture: Capture, obs: PixelObservations, rig: Rig,
                     path: Path) -> None:
    """CAL.yaml with the camera's entry; written only if the loader takes it (report.write_checked)."""
    import yaml

    from hil.devices.surfaces import load_surfaces

    default = load_surfaces().default
    entry: dict[str, Any] = {"part": capture.part, "serial": capture.serial, "sensor": capture.sensor}
    others = {}
    for name, fit in fits.items():
        record = _fit_record(fit, obs)
        if name == default:
            entry.update(params={"depth": fit.params()}, fit=record)
        else:
            others[name] = {"params": fit.params(), "fit": record}
    if others:
        entry["surfaces"] = others
    if entry["serial"] is None:
        del entry["serial"]
    doc = plain_python({"schema": 1, "robot": "", "rig": str(rig.source), "log": capture.source, "parts": [entry]})
    text = ("# written by hil calibrate camera: the twin of this camera loads it through a profile's `calibration:`\n"
            + yaml.safe_dump(doc, sort_keys=False))
    write_checked(text, path)


def _fit_record(fit: CameraFit, obs: PixelObservations) -> dict[str, Any]:
    return {"angle50_ci_deg": [round(v, 3) for v in fit.angle50_ci],
            "width_ci_deg": [round(v, 3) for v in fit.width_ci],
            "angle80_deg": round(fit.angle80_deg, 3), "angle80_ci_deg": [round(v, 3) for v in fit.angle80_ci],
            "angle80_measured_deg": None if math.isnan(fit.angle80_measured_deg) else
            round(fit.angle80_measured_deg, 3),
            "noise_z2_ci": [round(v, 7) for v in fit.noise_z2_ci], "bias_m": round(fit.bias_m, 5),
            "pixels": fit.pixels, "valid_pixels": fit.valid_pixels, "stride_px": obs.stride, "frames": obs.frames}


def camera_summary(fits: dict[str, CameraFit], obs: PixelObservations) -> str:
    """The fit in a few lines per surface, and what was left out."""
    lines = [f"{obs.frames} frames at a stride of {obs.stride} pixels: {obs.sampled} pixels looked at, "
             f"{len(obs.valid)} on the rig; left out: "
             + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in obs.left_out.items())]
    for name, fit in fits.items():
        measured = ("never below 80 %" if math.isnan(fit.angle80_measured_deg)
                    else f"{fit.angle80_measured_deg:.1f} deg")
        lines += [f"surface {name}: {fit.pixels} pixels ({fit.valid_pixels} valid)",
                  f"  dropout: angle50 {fit.angle50_deg:.2f} deg (95 % {fit.angle50_ci[0]:.2f}..{fit.angle50_ci[1]:.2f}),"
                  f" width {fit.width_deg:.2f} deg ({fit.width_ci[0]:.2f}..{fit.width_ci[1]:.2f})",
                  f"  80 % of pixels valid up to {fit.angle80_deg:.1f} deg (95 % {fit.angle80_ci[0]:.1f}.."
                  f"{fit.angle80_ci[1]:.1f}; the capture's own: {measured}) (the sensor-simulation reference)",
                  f"  noise: sigma = {fit.noise_z2:.5f} z^2 (95 % {fit.noise_z2_ci[0]:.5f}..{fit.noise_z2_ci[1]:.5f}),"
                  f" bias {1000 * fit.bias_m:+.2f} mm"]
        lines += [f"  note: {n}" for n in fit.notes]
    return "\n".join(lines)


def camera_plot(fits: dict[str, CameraFit], obs: PixelObservations, path: Path) -> None:
    """Left: per surface the valid fraction per 5-degree bin (points), the fitted law (line) and its 80 % angle
    (dashed); right: the valid pixels' residuals against expected depth with +-1 sigma of the fitted noise."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    grid = np.linspace(0.0, 90.0, 361)
    for k, (name, fit) in enumerate(fits.items()):
        colour = f"C{k}"
        centres = [b["lo_deg"] + BIN_DEG / 2 for b in fit.bins]
        left.plot(centres, [b["valid"] if b["enough"] else np.nan for b in fit.bins], "o", color=colour,
                  label=f"{name}: measured ({fit.pixels} pixels)")
        left.plot(grid, p_valid(grid, fit), "-", color=colour,
                  label=f"{name}: angle50 {fit.angle50_deg:.1f}, width {fit.width_deg:.1f} deg")
        left.axvline(fit.angle80_deg, color=colour, ls="--", lw=1, label=f"{name}: 80 % valid up to "
                                                                      f"{fit.angle80_deg:.1f} deg")
        mine = obs.valid & (obs.surface == obs.names.index(name))
        z, res = obs.z[mine], (obs.measured - obs.z)[mine]
        shown = np.arange(len(z))[:: max(1, len(z) // 4000)]
        right.plot(z[shown], 1000 * res[shown], ".", ms=2, alpha=0.4, color=colour)
        zz = np.linspace(max(0.0, float(z.min())), float(z.max()), 50) if len(z) else np.array([])
        for sign in (1, -1):
            right.plot(zz, 1000 * (fit.bias_m + sign * fit.noise_z2 * zz ** 2), color=colour,
                       label=f"{name}: sigma = {fit.noise_z2:.5f} z^2" if sign > 0 else None)
    left.axhline(0.8, color="0.6", lw=0.8)
    left.set(xlabel="incidence on the surface (deg)", ylabel="valid fraction", ylim=(-0.05, 1.05), xlim=(0, 90),
             title="depth dropout per 5-degree bin")
    left.legend(loc="lower left", fontsize=7)
    right.set(xlabel="expected depth z (m)", ylabel="residual (mm)", title="noise (+-1 sigma)")
    right.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
