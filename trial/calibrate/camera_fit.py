"""The depth camera's fit: per surface of the rig, its dropout (angle50, width) and noise (noise_z2) from a capture
(capture.py) and the rig's geometry (camera_geometry.py), under the camera's own law
(firmware_sim/sensors/camera.py, docs/CAMERAS.md): a pixel on a surface within range and lit by the projector
drops out with probability logistic((incidence - angle50) / width) (the ring's law, ring_law.dropout_probability,
imported), the rest reads its exact depth z plus Gaussian noise of sigma = noise_z2 * z^2.

- **Which pixels.** Every ``stride``-th pixel of every frame, each with the depth, incidence and surface its ray
  meets on the rig (a face, or the floor: the default surface); left out and counted: pixels whose footprint is
  not on one face (the sky, edges), expected nearer than min range or beyond max range (RANGE_MARGIN_M inside the
  limits: a pixel at the limit is either), in the projector's shadow, below their surface's specular limit (the
  surface table's ``specular_below_deg``: such a pixel saturates whatever the dropout law says), and valid pixels
  that contradict the rig
  (farther than CONTRADICTION_SLACK from the expected depth: something stands where the rig has nothing). More
  than MAX_CONTRADICTING of them refuses the capture (the rig's distances or the pose are wrong).
- **Dropout** by maximum likelihood of each pixel's valid/invalid (Bernoulli) given its incidence: a logistic
  regression, Newton's method with step halving on valid ~ logistic(b0 + b1 * incidence) (the likelihood is
  concave there: one maximum, whatever the start), then
  angle50 = -b0 / b1, width = -1 / b1. 95 % intervals from the Fisher information (exact for this model) carried
  to (angle50, log width) by the delta method, as the ring's on (angle50, log width).
- **The 80 % angle** (the sensor-simulation reference's threshold, read here as the incidence at which 80 % of the
  pixels are still valid): the law's, angle50 + width * ln(0.2 / 0.8), with its interval (delta method), and the
  capture's own, where the valid fraction in 1-degree bins, made non-increasing (pool adjacent violators), first
  falls below 80 % (interpolated): a check of the law's shape against the data, free of the logistic's form.
- **Noise** by maximum likelihood of the valid pixels' residuals (measured - expected depth) under
  N(bias, (noise_z2 z^2)^2): bias the 1/z^4-weighted mean, noise_z2 the root mean square of residual / z^2; its
  interval from the Gaussian's information (noise_z2 * (1 +- 1.96 / sqrt(2 n))).

**Pixel correlation.** The simulator draws every pixel on its own, so its pixels are independent trials and the
intervals hold at any stride. A real depth camera's are not: its depth comes from a matching window (stereo) or a
speckle pattern several pixels wide, and holes come in blobs, so neighbouring pixels share their fate and an
interval that counts each as an independent draw is too narrow. The default stride (DEFAULT_STRIDE, 4 pixels in
each direction: one pixel in 16) keeps pixels farther apart than a typical matching window; frames of a still
camera repeat much of the same pattern too, so a real capture should move the camera between frames.

Refused, named (FitError: the capture, the camera, the surface): no pixel of the capture on the rig within range,
a surface asked for that the rig lacks or the capture saw too little of (MIN_PIXELS), a surface none of whose
pixels is valid or all of whose pixels are (a frozen depth stream, hole filling: nothing shows the dropout), a
valid fraction that does not fall with incidence, numbers the likelihood cannot bound (as the ring's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hil.firmware_sim.sensors.ring_law import dropout_probability

from .camera_geometry import NOTHING, PixelGrid, expected_pixels
from .capture import Capture
from .fit import BIN_DEG, MAX_ANGLE_HALF_DEG, MAX_LOG_HALF_WIDTH, MIN_BIN_POINTS, FitError
from .rig import Rig

DEFAULT_STRIDE = 4
MIN_PIXELS = 500  # pixels of a surface (valid or not) below which it is not fitted
RANGE_MARGIN_M = 0.02
SPECULAR_MARGIN_DEG = 0.5  # pixels this close above their surface's specular limit are left out too
CONTRADICTION_SLACK = (0.05, 0.05)  # m + this fraction of z: a valid pixel farther from the rig is not the rig's
MAX_CONTRADICTING = 0.02
ANGLE80_VALID = 0.8
MEASURED_BIN_DEG = 1.0
Z95 = 1.96


@dataclass
class PixelObservations:
    """One row per sampled pixel that the rig explains."""

    incidence: np.ndarray  # deg
    valid: np.ndarray  # bool
    z: np.ndarray  # expected depth (m along the optical axis)
    measured: np.ndarray  # m, nan where invalid
    surface: np.ndarray  # index into names
    names: tuple[str, ...]
    frames: int
    stride: int
    sampled: int = 0  # pixels looked at (frames x the grid)
    left_out: dict[str, int] = field(default_factory=dict)  # not_on_rig, range, shadow, contradicting

    def subset(self, mask: np.ndarray) -> PixelObservations:
        return PixelObservations(self.incidence[mask], self.valid[mask], self.z[mask], self.measured[mask],
                                 self.surface[mask], self.names, self.frames, self.stride, self.sampled,
                                 dict(self.left_out))


@dataclass
class CameraFit:
    surface: str
    angle50_deg: float
    width_deg: float
    angle50_ci: tuple[float, float]
    width_ci: tuple[float, float]
    angle80_deg: float  # the law's: angle50 + width * ln(0.2 / 0.8)
    angle80_ci: tuple[float, float]
    angle80_measured_deg: float  # the capture's own (nan: its valid fraction never falls below 80 %)
    noise_z2: float
    noise_z2_ci: tuple[float, float]
    bias_m: float
    pixels: int
    valid_pixels: int
    bins: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def params(self) -> dict[str, Any]:
        """What CAL.yaml sets in the camera's ``depth`` params (devices/calibration.py CAMERA_DEPTH_PARAMS)."""
        return {"dropout_angle50_deg": round(self.angle50_deg, 3), "dropout_width_deg": round(self.width_deg, 3),
                "noise_z2": round(self.noise_z2, 6)}


def _what(capture: Capture) -> str:
    return f"{capture.source} (camera {capture.part}/{capture.sensor})"


def pixel_observations(capture: Capture, rig: Rig, stride: int = DEFAULT_STRIDE,
                       progress: Callable[[str], None] = lambda line: None) -> PixelObservations:
    """Each sampled pixel's incidence, validity, expected and measured depth and surface (module docstring);
    FitError when no pixel sees the rig or too many contradict it."""
    from hil.devices.surfaces import load_surfaces

    if not (isinstance(stride, int) and 1 <= stride <= 64):
        raise FitError(f"--stride must be a whole number of pixels within 1..64, not {stride!r}")
    names = rig.surfaces
    table = load_surfaces()
    surface_of = np.array([names.index(f.surface) for f in rig.faces] + [names.index(table.default)])
    # a pixel below its surface's specular limit saturates whatever the dropout law says (glass head on)
    limits = np.array([table.law(n).specular_below_deg for n in names])
    specular = np.where(limits > 0, limits + SPECULAR_MARGIN_DEG, 0.0)
    grid = PixelGrid.of(capture.pinhole, stride)
    projector = capture.depth.projector_pose()
    lens_projector = None if projector is None or not any(projector.position) else np.array(projector.position)
    low, high = capture.depth.min_range_m + RANGE_MARGIN_M, capture.depth.max_range_m - RANGE_MARGIN_M
    rows: dict[str, list] = {k: [] for k in ("incidence", "valid", "z", "measured", "surface")}
    counts = {"not_on_rig": 0, "range": 0, "shadow": 0, "specular": 0, "contradicting": 0}
    for k, frame in enumerate(capture.frames):
        if frame.depth.shape != (capture.pinhole.height, capture.pinhole.width):
            raise FitError(f"{_what(capture)}: frame {k} is {frame.depth.shape[1]}x{frame.depth.shape[0]} pixels, "
                           f"not the camera's {capture.pinhole.width}x{capture.pinhole.height}")
        seen = expected_pixels(rig, grid, frame.position, frame.rotation, lens_projector)
        measured = frame.depth[grid.rows, grid.cols].astype(float)
        on = seen.met != NOTHING
        in_range = on & (seen.z >= low) & (seen.z <= high)
        lit = in_range & ~seen.shadow
        valid = np.isfinite(measured)
        far = valid & (np.abs(measured - seen.z) > CONTRADICTION_SLACK[0] + CONTRADICTION_SLACK[1] * seen.z)
        glare = lit & (seen.incidence < specular[surface_of[np.where(on, seen.met, 0)]])
        keep = lit & ~far & ~glare
        counts["not_on_rig"] += int((~on).sum())
        counts["range"] += int((on & ~in_range).sum())
        counts["shadow"] += int((in_range & seen.shadow).sum())
        counts["specular"] += int(glare.sum())
        counts["contradicting"] += int((lit & far & ~glare).sum())
        rows["incidence"].append(seen.incidence[keep])
        rows["valid"].append(valid[keep])
        rows["z"].append(seen.z[keep])
        rows["measured"].append(measured[keep])
        rows["surface"].append(surface_of[seen.met[keep]])
        if _tenth(k, len(capture.frames)):
            progress(f"calibrate camera: frame {k + 1} of {len(capture.frames)}, "
                     f"{sum(len(v) for v in rows['valid'])} pixels on the rig")
    obs = PixelObservations(*(np.concatenate(rows[k]) for k in ("incidence", "valid", "z", "measured", "surface")),
                            names, len(capture.frames), stride, len(grid.rows) * len(capture.frames), counts)
    looked = len(obs.valid) + counts["contradicting"]
    if not looked:
        raise FitError(f"{_what(capture)}: no pixel of its {len(capture.frames)} frames sees a face of {rig.source} "
                       f"or the floor within {capture.depth.min_range_m:g}..{capture.depth.max_range_m:g} m and "
                       "lit by the projector: is the camera's pose right?")
    if counts["contradicting"] > MAX_CONTRADICTING * looked:
        raise FitError(f"{_what(capture)}: {counts['contradicting']} of {looked} valid pixels on the rig read "
                       f"farther than {CONTRADICTION_SLACK[0]:g} m + {100 * CONTRADICTION_SLACK[1]:g} % from the "
                       f"depth {rig.source} puts there (more than {100 * MAX_CONTRADICTING:g} %): the rig's "
                       "distances or the camera's pose are wrong, or something stands in front of the rig")
    return obs


def _tenth(k: int, n: int) -> bool:
    """Whether frame k (of n) is the last or crosses a tenth of the way: progress lines, ten at most."""
    return k == n - 1 or int(10 * (k + 1) / n) != int(10 * k / n)


def fit_camera(obs: PixelObservations, capture: Capture, only: list[str] | tuple[str, ...] | None = None,
               rig_source: str = "the rig") -> dict[str, CameraFit]:
    """The law of every surface the capture saw enough of (``only``: those surfaces, each required)."""
    counts = np.bincount(obs.surface, minlength=len(obs.names))
    for name in only or ():
        if name not in obs.names:
            raise FitError(f"{rig_source} has no face of surface {name!r}: it cannot calibrate it (its surfaces: "
                           f"{', '.join(obs.names)}, the floor's included)")
        if counts[obs.names.index(name)] < MIN_PIXELS:
            raise FitError(f"{_what(capture)}, surface {name!r}: {counts[obs.names.index(name)]} pixels see it "
                           f"(at least {MIN_PIXELS}); stand the camera nearer its face or take more frames")
    wanted = list(only) if only else [n for k, n in enumerate(obs.names) if counts[k] >= MIN_PIXELS]
    if not wanted:
        raise FitError(f"{_what(capture)}: no surface of the rig is seen by {MIN_PIXELS} pixels (most: "
                       f"{int(counts.max()) if len(counts) else 0})")
    out = {}
    for name in wanted:
        fit = fit_surface(obs.subset(obs.surface == obs.names.index(name)), f"{_what(capture)}, surface {name!r}",
                          name, capture.depth)
        skipped = [n for k, n in enumerate(obs.names) if 0 < counts[k] < MIN_PIXELS and n not in wanted]
        if skipped:
            fit.notes.append(f"surfaces seen by fewer than {MIN_PIXELS} pixels, not fitted: {', '.join(skipped)}")
        out[name] = fit
    return out


def fit_surface(obs: PixelObservations, what: str, name: str, stated) -> CameraFit:
    """One surface's law from its pixels; ``stated`` (DepthFailure): the law the part states (the start)."""
    n, valid = len(obs.valid), int(obs.valid.sum())
    if valid == 0:
        raise FitError(f"{what}: none of its {n} pixels is valid (a covered lens, or no depth stream?)")
    if valid == n:
        raise FitError(f"{what}: all of its {n} pixels are valid, none shows the dropout (incidences "
                       f"{np.nanmin(obs.incidence):.0f}..{np.nanmax(obs.incidence):.0f} deg): a frozen or "
                       "hole-filled depth stream, or a capture that never sees the surface at a slant")
    beta, cov = _logistic(obs.incidence, obs.valid, stated)
    b0, b1 = beta
    if not b1 < 0:
        raise FitError(f"{what}: the valid fraction does not fall with incidence (slope {b1:+.3g} per deg): not "
                       "a dropout the camera's law can fit")
    angle50, width = -b0 / b1, -1.0 / b1
    jac = np.array([[-1.0 / b1, b0 / b1 ** 2], [0.0, -1.0 / b1]])  # d(angle50, log width) / d(b0, b1)
    cov_theta = jac @ cov @ jac.T
    half = Z95 * np.sqrt(np.clip(np.diag(cov_theta), 0.0, None))
    if not np.all(np.isfinite(half)) or half[0] > MAX_ANGLE_HALF_DEG or not 0.0 <= angle50 <= 180.0:
        raise FitError(f"{what}: the dropout fit cannot bound angle50: {angle50:.3g} deg +-{half[0]:.3g}; its {n} "
                       f"pixels ({valid} valid) hardly see the dropout's transition")
    if half[1] > MAX_LOG_HALF_WIDTH or width > 90.0:
        raise FitError(f"{what}: the dropout fit cannot bound width: {width:.3g} deg, its 95 % interval a factor "
                       f"e^{half[1]:.3g} either way; its {n} pixels ({valid} valid) hardly see the transition")
    angle80 = (math.log(ANGLE80_VALID / (1 - ANGLE80_VALID)) - b0) / b1
    grad = np.array([-1.0 / b1, -(math.log(ANGLE80_VALID / (1 - ANGLE80_VALID)) - b0) / b1 ** 2])
    half80 = Z95 * math.sqrt(max(float(grad @ cov @ grad), 0.0))
    z2, z2_ci, bias = fit_noise_z2(obs, what)
    return CameraFit(name, angle50, width, (angle50 - half[0], angle50 + half[0]),
                     (width * math.exp(-half[1]), width * math.exp(half[1])), angle80,
                     (angle80 - half80, angle80 + half80), measured_angle80(obs), z2, z2_ci, bias, n, valid,
                     valid_bins(obs))


def _logistic(incidence: np.ndarray, valid: np.ndarray, stated) -> tuple[np.ndarray, np.ndarray]:
    """(b0, b1) of valid ~ logistic(b0 + b1 incidence) by Newton's method from the stated law, each step halved
    until the likelihood rises (a full Newton step from far off overshoots and can oscillate), and their
    covariance (the inverse Fisher information)."""
    x = np.column_stack([np.ones(len(incidence)), incidence])
    y = valid.astype(float)

    def loglik(b: np.ndarray) -> float:
        eta = x @ b
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)))

    def information(b: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ b, -500, 500)))
        return (x * (p * (1 - p))[:, None]).T @ x, p

    beta = np.array([stated.dropout_angle50_deg / stated.dropout_width_deg, -1.0 / stated.dropout_width_deg])
    current = loglik(beta)
    for _ in range(200):
        info, p = information(beta)
        try:
            step = np.linalg.solve(info, x.T @ (y - p))
        except np.linalg.LinAlgError:
            break
        t = 1.0
        while t > 1e-8:
            trial = loglik(beta + t * step)
            if trial >= current:
                break
            t /= 2
        if t <= 1e-8:
            break
        beta, gain = beta + t * step, trial - current
        current = trial
        if gain < 1e-9 and np.all(np.abs(t * step) < 1e-9 * (1 + np.abs(beta))):
            break
    info, _ = information(beta)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        cov = np.full((2, 2), np.inf)
    return beta, cov


def fit_noise_z2(obs: PixelObservations, what: str) -> tuple[float, tuple[float, float], float]:
    """(noise_z2, its 95 % interval, bias m) from the valid pixels' residuals (module docstring)."""
    ok = obs.valid
    n = int(ok.sum())
    if n < MIN_PIXELS // 5:
        raise FitError(f"{what}: {n} valid pixels, too few for the noise fit (at least {MIN_PIXELS // 5})")
    res, z2 = obs.measured[ok] - obs.z[ok], obs.z[ok] ** 2
    weights = 1.0 / z2 ** 2
    bias = float(np.sum(weights * res) / np.sum(weights))
    k = float(np.sqrt(np.mean(((res - bias) / z2) ** 2)))
    half = Z95 / math.sqrt(2 * n)
    return k, (k * (1 - half), k * (1 + half)), bias


def valid_bins(obs: PixelObservations, width: float = BIN_DEG) -> list[dict[str, Any]]:
    """The valid fraction per ``width``-degree bin of incidence (``enough``: at least MIN_BIN_POINTS pixels)."""
    out = []
    for lo in np.arange(0.0, 90.0, width):
        sel = (obs.incidence >= lo) & (obs.incidence < lo + width)
        n = int(sel.sum())
        out.append({"lo_deg": float(lo), "n": n, "valid": float(obs.valid[sel].mean()) if n else None,
                    "enough": n >= MIN_BIN_POINTS})
    return out


def measured_angle80(obs: PixelObservations) -> float:
    """The capture's own 80 % angle: the valid fraction per 1-degree bin made non-increasing in incidence (pool
    adjacent violators, weighted by the bins' pixels: a sparse bin's chance dip does not count as the fall), then
    where it first falls below 80 %, interpolated between that bin's centre and the one before; nan when it never
    does (or already starts below)."""
    bins = [b for b in valid_bins(obs, MEASURED_BIN_DEG) if b["n"]]
    blocks: list[list[float]] = []  # [weighted sum, weight, first bin, last bin]
    for k, b in enumerate(bins):
        blocks.append([b["valid"] * b["n"], float(b["n"]), k, k])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            blocks[-1][0] += last[0]
            blocks[-1][1] += last[1]
            blocks[-1][3] = last[3]
    fitted = np.empty(len(bins))
    for total, weight, first, last in blocks:
        fitted[int(first):int(last) + 1] = total / weight
    centres = [b["lo_deg"] + MEASURED_BIN_DEG / 2 for b in bins]
    for k in range(1, len(bins)):
        if fitted[k] < ANGLE80_VALID <= fitted[k - 1]:
            return centres[k - 1] + (centres[k] - centres[k - 1]) * (fitted[k - 1] - ANGLE80_VALID) / (
                fitted[k - 1] - fitted[k])
    return math.nan


def p_valid(incidence: np.ndarray, fit: CameraFit) -> np.ndarray:
    """The fitted law's chance that a pixel at this incidence is valid."""
    return 1.0 - dropout_probability(incidence, fit.angle50_deg, fit.width_deg)
