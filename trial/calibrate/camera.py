"""``hil calibrate camera``: a depth camera's dropout and noise per surface from a capture of a rig, written as the
camera's CAL.yaml entry with camera_calibration.png beside it.

capture.py reads the capture (a TUM RGB-D folder with its poses), camera_geometry.py ray-casts every sampled pixel
against the rig, camera_fit.py fits, camera_report.py writes. The fit is the capture's alone: nothing of a
renderer's labels or ground truth is used, so a real camera's capture is fitted exactly as a virtual one is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .camera_fit import DEFAULT_STRIDE, CameraFit, PixelObservations, fit_camera, pixel_observations
from .camera_report import camera_plot, camera_summary, write_camera_cal
from .capture import Capture, read_tum_capture
from .rig import Rig, load_rig


def fit_capture(capture: Capture, rig: Rig, stride: int = DEFAULT_STRIDE, only: list[str] | None = None,
                progress: Callable[[str], None] = lambda line: None
                ) -> tuple[dict[str, CameraFit], PixelObservations]:
    """(the fit per surface, the pixels it used) of a capture (in memory: a virtual capture's too)."""
    obs = pixel_observations(capture, rig, stride, progress)
    fits = fit_camera(obs, capture, only, rig.source)
    for fit in fits.values():
        fit.notes[:0] = capture.notes
    return fits, obs


def write_outputs(fits: dict[str, CameraFit], obs: PixelObservations, capture: Capture, rig: Rig,
                  cal: Path) -> str:
    """CAL.yaml at ``cal`` and camera_calibration.png beside it; the summary."""
    write_camera_cal(fits, capture, obs, rig, cal)
    camera_plot(fits, obs, cal.with_name("camera_calibration.png"))
    return camera_summary(fits, obs)


def calibrate_camera(capture_path: Path, rig_path: Path, cal: Path, *, pose: str | None = None,
                     part: str = "camera", stride: int | None = None, only: list[str] | None = None,
                     progress: Callable[[str], None] = lambda line: None) -> str:
    """Read, fit, write; the summary. Every refusal is a ValueError naming the file, the camera, the surface."""
    rig = load_rig(rig_path)
    capture = read_tum_capture(capture_path, part, pose, progress)
    fits, obs = fit_capture(capture, rig, DEFAULT_STRIDE if stride is None else stride, only, progress)
    return write_outputs(fits, obs, capture, rig, cal)
