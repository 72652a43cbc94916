"""Do `hil calibrate camera`'s 95 % intervals hold the truth? The commbot's left eye is swapped for a camera part
whose depth law is hidden (chosen here, never by the fit), turned before a plaster wall 1.6 m ahead (four headings,
one 160 x 120 frame each, the world's renderer and the camera's own failure model), and fitted from its depth and
poses alone. Each world seed draws every pixel anew. Prints one row per run and, per number, the coverage (how
often the 95 % interval held the truth) and the mean and spread of (estimate - truth) / standard error.

    python -m bench.camera_calibration_coverage [--seeds N] [--stride S] [--smoke]
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._smoke import parse_with_smoke

LAWS = ((60.0, 4.0, 0.002), (70.0, 6.0, 0.001), (50.0, 3.0, 0.003))  # angle50 deg, width deg, noise_z2
WALL_X = 1.6
CATALOG_CAMERA = Path(__file__).resolve().parents[1] / "hil" / "devices" / "catalog" / "parts" / "camera.yaml"


def camera_part(folder: Path, angle50: float, width: float, noise_z2: float) -> Path:
    """The catalog camera's part file at 160 x 120 with this depth law."""
    new = {"width": "160", "height": "120", "dropout_angle50_deg": f"{angle50}", "dropout_width_deg": f"{width}",
           "noise_z2": f"{noise_z2}"}
    rows = []
    for row in CATALOG_CAMERA.read_text().splitlines(keepends=True):
        key = row.strip().split(":")[0]
        if key in new and row.startswith("      "):
            rows.append(f"{row[:len(row) - len(row.lstrip())]}{key}: {new.pop(key)}\n")
        else:
            rows.append(row)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "camera.yaml"
    path.write_text("".join(rows))
    return path


def main(argv: list[str] | None = None) -> int:
    from hil.trial.calibrate.camera import fit_capture
    from hil.trial.calibrate.camera_capture import virtual_frames
    from hil.trial.calibrate.capture import capture_from_frames
    from hil.trial.calibrate.rig import load_rig

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="world seeds per law")
    parser.add_argument("--stride", type=int, default=1, help="the fit's pixel stride")
    args = parse_with_smoke(parser, argv, seeds=1)
    tmp = Path(tempfile.mkdtemp(prefix="camcal-"))
    rig_path = tmp / "rig.yaml"
    rig_path.write_text(f"start: [0.0, 0.0, 0.0]\nwalls:\n  - {{name: wall, from: [{WALL_X}, -6.0], "
                        f"to: [{WALL_X}, 6.0], surface: plaster}}\n")
    rig = load_rig(rig_path)
    held = {"angle50": 0, "width": 0, "noise_z2": 0, "angle80": 0}
    z: dict[str, list[float]] = {"angle50": [], "log width": [], "noise_z2": []}
    runs = 0
    print(f"{'law':>18} {'seed':>4} {'angle50 (95 %)':>22} {'width (95 %)':>20} {'noise_z2 (95 %)':>28} {'s':>5}")
    for k, (angle50, width, noise_z2) in enumerate(LAWS):
        part = camera_part(tmp / f"law{k}", angle50, width, noise_z2)
        for seed in range(1, args.seeds + 1):
            start = time.perf_counter()
            frames = virtual_frames(rig, tmp / f"law{k}", part, seed=seed)
            fit = fit_capture(capture_from_frames(frames, part), rig, stride=args.stride)[0]["plaster"]
            runs += 1
            law80 = angle50 + width * math.log(0.2 / 0.8)
            held["angle50"] += fit.angle50_ci[0] <= angle50 <= fit.angle50_ci[1]
            held["width"] += fit.width_ci[0] <= width <= fit.width_ci[1]
            held["noise_z2"] += fit.noise_z2_ci[0] <= noise_z2 <= fit.noise_z2_ci[1]
            held["angle80"] += fit.angle80_ci[0] <= law80 <= fit.angle80_ci[1]
            z["angle50"].append((fit.angle50_deg - angle50) / ((fit.angle50_ci[1] - fit.angle50_ci[0]) / 3.92))
            z["log width"].append(math.log(fit.width_deg / width)
                                  / (math.log(fit.width_ci[1] / fit.width_ci[0]) / 3.92))
            z["noise_z2"].append((fit.noise_z2 - noise_z2) / ((fit.noise_z2_ci[1] - fit.noise_z2_ci[0]) / 3.92))
            print(f"{angle50:6g}/{width:g}/{noise_z2:g} {seed:4d} {fit.angle50_deg:7.2f} ({fit.angle50_ci[0]:.2f}-"
                  f"{fit.angle50_ci[1]:.2f}) {fit.width_deg:6.2f} ({fit.width_ci[0]:.2f}-{fit.width_ci[1]:.2f}) "
                  f"{fit.noise_z2:.5f} ({fit.noise_z2_ci[0]:.5f}-{fit.noise_z2_ci[1]:.5f}) "
                  f"{time.perf_counter() - start:5.2f}")
    print(f"coverage over {runs} runs (stride {args.stride}): "
          + ", ".join(f"{name} {count} of {runs}" for name, count in held.items()))
    print("(estimate - truth) / standard error: "
          + ", ".join(f"{name} mean {np.mean(v):+.2f} spread {np.std(v):.2f}" for name, v in z.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
