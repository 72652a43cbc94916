"""What the depth camera's projector costs: a frame without a projector (``baseline_m: 0``: one render) against a
frame with the catalog camera's projector beside the lens and with one 8 cm above it (a second render from the
projector's pose, its depth read back, the shadow-map test), side by side in one run.

  python -m bench.projector [--smoke] [--frames N] [--rounds R] [--renderer gl|tiny]

The commbot in the lab map (walls, floor, the robot's own shapes), its left eye (320x240) rendering through the
same code a trial's camera uses (firmware_sim/embodied/camera.py ``_Camera.render``); rounds alternate the three
cameras so all see the same machine load. Printed: the median wall time per frame of each, the ratios to the
frame without a projector, the projector's picture size, and the shadow-map test alone (numpy).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

LEFT_EYE = 43  # config/robots/commbot.yaml


def _cameras(embodied):
    from hil.devices.descriptor.camera import Projector
    from hil.firmware_sim.embodied.camera import _Camera

    part = embodied.cameras[LEFT_EYE]
    base = part.camera()
    spec = base.spec
    variants = {
        "no projector": dataclasses.replace(spec, depth=dataclasses.replace(spec.depth, baseline_m=0.0)),
        "beside (5 cm)": spec,
        "above (8 cm)": dataclasses.replace(spec, depth=dataclasses.replace(
            spec.depth, projector=Projector((0.0, 0.0, 0.08)))),
    }
    return {name: _Camera(part, base.name, base.body, s, 0) for name, s in variants.items()}


def run(frames: int, rounds: int) -> list[str]:
    from hil.firmware_sim import load_assembly
    from hil.firmware_sim.embodied.embody import embody

    embodied = embody(load_assembly("commbot"), clock="sim", watchdog_s=0.0, map_name="lab")
    try:
        cameras = _cameras(embodied)
        times: dict[str, list[float]] = {name: [] for name in cameras}
        for camera in cameras.values():
            camera.render(0.0)  # warm-up: shaders, buffers, the projector's framebuffer
        for _ in range(rounds):
            for name, camera in cameras.items():
                for k in range(frames):
                    start = time.perf_counter()
                    camera.render(0.1 * k)
                    times[name].append(time.perf_counter() - start)
        lines = []
        base = statistics.median(times["no projector"])
        renderer = cameras["no projector"]._renderer.name
        for name, camera in cameras.items():
            median = statistics.median(times[name])
            size = f"{camera.projector.width}x{camera.projector.height}" if camera.projector else "-"
            lines.append(f"{name:15s} {median * 1000:7.1f} ms/frame  x{median / base:4.2f}  projector picture {size}")
        lines.append(f"renderer {renderer}, {rounds} rounds x {frames} frames each")
        lines.append(_lit_cost(cameras["beside (5 cm)"]))
        return lines
    finally:
        embodied.close()


def _lit_cost(camera) -> str:
    """The shadow-map test alone on one frame's depth (the projector's picture as the camera would get it)."""
    import numpy as np

    z = np.full((camera.spec.height, camera.spec.width), 3.0, np.float32)
    projector_z = np.full((camera.projector.height, camera.projector.width), 3.0, np.float32)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        camera.projector.lit(z, projector_z)
        times.append(time.perf_counter() - start)
    return f"shadow-map test alone: {statistics.median(times) * 1000:.1f} ms/frame"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--renderer", choices=("gl", "tiny"), default=None)
    parser.add_argument("--smoke", action="store_true", help="the smallest settings (2 frames, 1 round): that "
                                                             "it runs, not its figures (tests/test_bench_smoke.py)")
    args = parser.parse_args()
    if args.renderer:
        os.environ["HIL_CAMERA_RENDERER"] = args.renderer
    if args.smoke:
        args.frames, args.rounds = 2, 1
    for line in run(args.frames, args.rounds):
        print(line)


if __name__ == "__main__":
    main()
