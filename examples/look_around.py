"""Turn the head and watch the head camera: the same file on the virtual bus in this process, on a device served
by ``hil sim`` in another process (its frames over the camera endpoint), or on the real robot's RGB-D eye.

    hil run examples/look_around.py --profile config/profiles/virtual.yaml --duration 4
    hil sim commbot --pty --clock sim --clock-endpoint tcp://127.0.0.1:5757 \\
        --camera-endpoint tcp://127.0.0.1:5758 --map lab          # prints /dev/pts/N
    hil run examples/look_around.py --profile config/profiles/pty.yaml --bus /dev/pts/N --duration 4

The neck swings left and right; every camera frame (10 Hz) it prints the frame's time, the neck's angle, the
share of valid depth pixels and the nearest thing straight ahead; on a camera without depth (``camera.has_depth``
False: a webcam, an RGB-only recording) it says so once and prints the image's mean brightness instead.
``LOOK_AROUND_OUT=file.png`` saves the last RGB frame beside its depth (Pillow; RGB alone without depth).
"""
from __future__ import annotations

import math
import os

import numpy as np

CAMERA = "head_camera"
NECK = "head.neck_yaw"
HZ = 20.0
SWING_RAD, PERIOD_S = 0.5, 4.0


def ahead_m(depth: np.ndarray) -> float:
    """The nearest valid depth in the image's central 20 x 20 pixels (inf when none is valid)."""
    h, w = depth.shape
    centre = depth[h // 2 - 10:h // 2 + 10, w // 2 - 10:w // 2 + 10]
    valid = centre[np.isfinite(centre)]
    return float(valid.min()) if valid.size else math.inf


def main(robot) -> None:
    camera, neck = robot.sensors[CAMERA], robot.joints[NECK]
    last_t, frame = None, None
    if not camera.has_depth:
        print(f"look_around: camera {camera.name!r} has no depth ({camera.device or 'it gives none'}): printing "
              "the image's brightness instead", flush=True)
    for tick in robot.loop(hz=HZ):
        neck.target = SWING_RAD * math.sin(2 * math.pi * tick.time / PERIOD_S)
        frame = camera.frame()  # a read within a frame period returns that period's frame (with its own time)
        if frame.t != last_t:
            last_t = frame.t
            if frame.depth is None:
                print(f"t={frame.t:5.2f} s  neck {neck.position:+.2f} rad  brightness "
                      f"{float(frame.rgb.mean()):5.1f} / 255", flush=True)
                continue
            valid = float(np.isfinite(frame.depth).mean())
            print(f"t={frame.t:5.2f} s  neck {neck.position:+.2f} rad  depth valid {100 * valid:4.1f} %  "
                  f"ahead {ahead_m(frame.depth):.2f} m", flush=True)
    out = os.environ.get("LOOK_AROUND_OUT")
    if out and frame is not None:
        from PIL import Image

        picture = frame.rgb
        if frame.depth is not None:
            depth = np.nan_to_num(frame.depth, nan=0.0)
            grey = (255 * np.clip(depth / max(float(depth.max()), 1e-6), 0, 1)).astype(np.uint8)
            picture = np.hstack([frame.rgb, np.repeat(grey[..., None], 3, axis=2)])
        Image.fromarray(picture).save(out)


if __name__ == "__main__":
    from hil.runtime import Robot

    with Robot.open("config/profiles/virtual.yaml") as robot:
        main(robot)
