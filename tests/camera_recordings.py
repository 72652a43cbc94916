"""Shared by the recorded-camera tests: small recordings written from known geometry with OpenCV alone (not with
hil's reader), in the TUM RGB-D layout (rgb/, depth/ PNGs, rgb.txt, depth.txt; 16-bit depth, 5000 per metre)
or as a video."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

FX = FY = 228.5  # the catalog camera: 320 x 240, 70 degrees horizontal
CX, CY = 159.5, 119.5
W, H = 320, 240
TUM_SCALE = 5000.0


def slab_depth(distance_m: float, half_width_m: float, wall_m: float | None = None,
               left_m: float = 0.0) -> np.ndarray:
    """Depth (m, NaN = none) of a fronto-parallel slab ``distance_m`` ahead, ``2 half_width_m`` wide and as tall as
    the image, its centre ``left_m`` left of the optical axis, with a wall ``wall_m`` ahead behind it (None:
    nothing measured)."""
    u = np.arange(W, dtype=float)
    left = -(u - CX) / FX * distance_m  # how far left of the axis column u sees at the slab's distance
    depth = np.full((H, W), np.nan if wall_m is None else wall_m, np.float32)
    depth[:, np.abs(left - left_m) <= half_width_m] = distance_m
    return depth


def write_tum(folder: Path, rgb: list[np.ndarray], depth: list[np.ndarray] | None, stamps: list[float],
              depth_lag_s: float = 0.004) -> Path:
    """A TUM RGB-D recording: frame k's colour at stamps[k], its depth ``depth_lag_s`` later (the two streams of
    a real camera are not taken at the same instant)."""
    (folder / "rgb").mkdir(parents=True)
    rgb_lines = ["# color images", "# timestamp filename"]
    for stamp, image in zip(stamps, rgb):
        name = f"rgb/{stamp:.6f}.png"
        assert cv2.imwrite(str(folder / name), image[..., ::-1].copy())  # OpenCV writes BGR
        rgb_lines.append(f"{stamp:.6f} {name}")
    (folder / "rgb.txt").write_text("\n".join(rgb_lines) + "\n")
    if depth is not None:
        (folder / "depth").mkdir()
        depth_lines = ["# depth maps", "# timestamp filename"]
        for stamp, metres in zip(stamps, depth):
            units = np.where(np.isfinite(metres), np.round(np.nan_to_num(metres) * TUM_SCALE), 0).astype(np.uint16)
            name = f"depth/{stamp + depth_lag_s:.6f}.png"
            assert cv2.imwrite(str(folder / name), units)
            depth_lines.append(f"{stamp + depth_lag_s:.6f} {name}")
        (folder / "depth.txt").write_text("\n".join(depth_lines) + "\n")
    return folder


def colour(rgb: tuple[int, int, int]) -> np.ndarray:
    return np.full((H, W, 3), rgb, np.uint8)


def write_video(path: Path, colours: list[tuple[int, int, int]], fps: float = 10.0) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (W, H))
    assert writer.isOpened()
    for rgb in colours:
        writer.write(colour(rgb)[..., ::-1].copy())
    writer.release()
    return path
