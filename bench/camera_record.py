"""What recording the cameras costs a trial, side by side in one run; the figures that matter are the ratios.

  python -m bench.camera_record [--smoke] [--duration 40] [--rounds 3] [--rates 0,5,2,1] [--against DIR]

(a) encode  one recorded frame of the demo (320x240, decoded from its log) JPEG-encoded by each candidate, best
            of 5 x 50: Pillow at quality 85 (what the log uses), Pillow at 75, OpenCV's imencode at 85 (when cv2 is
            installed: it is not a dependency of hil).
(b) trial   the demo (`hil demo`, seed 0, ``--duration`` simulated s) at each camera recording rate of ``--rates``
            (0: none), each trial in its own child process after a 1 s warm-up trial, the sides alternating
            (order reversed every round), the minimum wall of ``--rounds`` per side; printed: each side's wall and
            its speed against the trial without cameras (target: the default rate >= 85 %), by wall and by CPU. ``--against DIR``
            adds that checkout at 0 and 5 Hz beside them (before/after).

--smoke: (a) with 5 encodes, (b) 0.5 s trials at 0 and 5 Hz, one round, no warm-up (exits 0; figures mean nothing).
"""
from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

from ._smoke import parse_with_smoke
from .loop import ROOT, CpuMeter, trial_walls


def _frame_from_mcap():
    """A 320x240 RGB frame as the demo's log holds it (its last head camera image, decoded)."""
    import numpy as np
    from mcap.reader import make_reader
    from PIL import Image

    from hil.trial import Trial
    from hil.trial.presets import demo_spec

    with tempfile.TemporaryDirectory(prefix="hil-bench-camrec-") as tmp:
        Trial(spec=demo_spec(duration=1.0, camera_rate=5.0)).run(Path(tmp) / "t").raise_for_status()
        last = None
        with open(Path(tmp) / "t" / "trial.mcap", "rb") as f:
            for _schema, channel, message in make_reader(f).iter_messages(topics=["/foxglove/head_camera/image"]):
                last = message.data
    data = _jpeg_of(last)
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _jpeg_of(protobuf: bytes) -> bytes:
    """The JPEG inside a foxglove.CompressedImage message: the SOI marker to the end of the EOI marker."""
    start, end = protobuf.find(b"\xff\xd8"), protobuf.rfind(b"\xff\xd9")
    return protobuf[start:end + 2]


def encoders() -> dict:
    from PIL import Image

    def pillow(quality):
        def encode(rgb):
            out = io.BytesIO()
            Image.fromarray(rgb).save(out, format="JPEG", quality=quality)
            return out.getvalue()
        return encode

    out = {"Pillow quality 85 (the log's)": pillow(85), "Pillow quality 75": pillow(75)}
    try:
        import cv2

        out["OpenCV imencode quality 85"] = lambda rgb: cv2.imencode(".jpg", rgb[..., ::-1],
                                                                     [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes()
    except ImportError:
        pass
    return out


def encode_section(n: int, out=print) -> dict:
    rgb = _frame_from_mcap()
    result = {}
    out(f"(a) JPEG encode of one recorded {rgb.shape[1]}x{rgb.shape[0]} frame, best of 5 x {n}")
    for name, encode in encoders().items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                data = encode(rgb)
            best = min(best, (time.perf_counter() - start) / n)
        result[name] = (best, len(data))
        out(f"  {name:<34} {best * 1e3:7.2f} ms  {len(data):7d} bytes")
    return result


def trial_section(duration_s: float, rates: list[float], rounds: int, against: Path | None, warm: bool = True,
                  out=print, one_process: bool = False) -> dict:
    """(b): the demo at each camera rate, each trial in a child process of its own, or with ``one_process`` (the
    smoke run: bench.loop's ``trial_walls``; its figures mean nothing) this checkout's trials in this process, whose
    crowd is warm from (a)'s trial, and another checkout's each round in one child."""
    sides = [(f"this checkout, cameras {r:g} Hz" if r else "this checkout, no cameras", ROOT, r) for r in rates]
    if against is not None:
        sides += [(f"{against}, cameras {r:g} Hz" if r else f"{against}, no cameras", against, r) for r in (0.0, 5.0)]
    walls: dict[str, list[float]] = {label: [] for label, _, _ in sides}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in sides}
    with CpuMeter() as cpu:
        for r in range(rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            for root in dict.fromkeys(root for _, root, _ in order):
                mine = [(label, rate) for label, where, rate in order if where == root]
                jobs = [(duration_s, {"camera_rate": rate}, warm) for _, rate in mine]
                gots = trial_walls(root, jobs, one_process, here=one_process and root == ROOT)
                for (label, _), got in zip(mine, gots):
                    walls[label].append(got["wall_s"])
                    cpus[label].append(got["cpu_s"])
    each = "this checkout's in this process" if one_process else "each trial in its own process"
    out(f"(b) the demo, {duration_s:g} s simulated, {each}"
        f"{' after a 1 s warm-up trial' if warm else ''}, {rounds} alternating round(s), min wall per side")
    result = {}
    bases = {str(root): (min(walls[label]), min(cpus[label])) for label, root, rate in sides if rate == 0}
    out(f"  {'side':<46} {'wall':>8} {'RTF':>6} {'speed':>7} {'CPU':>8} {'by CPU':>7}")
    for label, root, rate in sides:
        wall, cpu_s = min(walls[label]), min(cpus[label])
        speed, cpu_speed = bases[str(root)][0] / wall, bases[str(root)][1] / cpu_s
        result[label] = {"wall_s": wall, "cpu_s": cpu_s, "speed_of_no_cameras": speed,
                         "cpu_speed_of_no_cameras": cpu_speed, "walls": walls[label], "cpus": cpus[label]}
        out(f"  {label:<46} {wall:7.2f}s {duration_s / wall:6.2f} {speed:7.0%} {cpu_s:7.2f}s {cpu_speed:7.0%}")
    out("  speed: the trial without cameras' min wall over this side's (the same checkout); by CPU: the same with "
        "the CPU time of the trial's process, its threads and its crowd (what other processes' load moves least)")
    out(f"  {cpu.note()}")
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.camera_record", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=40.0, help="simulated s of each demo trial (40)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    parser.add_argument("--rates", default="0,5,2,1", help="camera recording rates, Hz (0,5,2,1; 0 must be in)")
    parser.add_argument("--encodes", type=int, default=50, help="encodes per timing in (a) (50)")
    parser.add_argument("--against", type=Path, default=None, help="another checkout at 0 and 5 Hz beside")
    parser.add_argument("--only", choices=("encode", "trial"), default=None)
    args = parse_with_smoke(parser, argv, duration=0.5, rounds=1, rates="0,5", encodes=5)
    rates = [float(r) for r in args.rates.split(",")]
    if 0.0 not in rates:
        parser.error("--rates must include 0 (the side every other is compared with)")
    results = {}
    if args.only in (None, "encode"):
        results["encode"] = encode_section(args.encodes)
    if args.only in (None, "trial"):
        results["trial"] = trial_section(args.duration, rates, args.rounds, args.against, warm=not args.smoke,
                                         one_process=args.smoke)
    return results


if __name__ == "__main__":
    main()
