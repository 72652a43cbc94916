"""``hil calibrate ring | fit | check``: the ring's numbers from a scan of a rig (trial/calibrate)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DESCRIPTION = """\
Calibrate the range ring (or the depth camera) of a robot against a rig (the sensor-simulation reference: a virtual
sensor must measure what the real one would). The rig file says what stands where (a flat wall at a measured distance, a corner, a box) and the
robot's start pose against it; the robot turns in place slowly (and drives back and forth where the rig asks).

  hil calibrate ring --profile real --rig rig.yaml --out cal/      # record cal/calibration.mcap, fit, write CAL.yaml
  hil calibrate fit cal/calibration.mcap --rig rig.yaml --out CAL.yaml   # the fit alone (a log from the robot)
  hil calibrate check real.mcap twin.mcap --rig rig.yaml           # does the twin read what the real ring reads?
  hil calibrate check mixed/calibration.mcap --rig rig.yaml        # ...the real and shadow ring of a mixed run
  hil calibrate ring ... --write-parts                             # ...and store the numbers in the parts too
  hil calibrate write CAL.yaml --profile real                      # store a CAL.yaml in the parts it names
  hil calibrate camera capture/ --rig rig.yaml --out cal/          # the depth camera's law from a TUM capture
  hil calibrate camera-capture --rig rig.yaml --out capture/       # a virtual capture of the rig (TUM folder)

A profile's `calibration: CAL.yaml` makes its virtual twin carry the fitted numbers."""


def register(sub) -> None:
    cal = sub.add_parser("calibrate", help="fit the range ring's dropout and noise from a scan of a rig",
                         description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = cal.add_subparsers(dest="verb", required=True)
    ring = verbs.add_parser("ring", help="run the calibration on the robot a profile opens, then fit")
    ring.add_argument("--profile", required=True, help="the robot (real, mixed or virtual)")
    ring.add_argument("--bus", help="replace the profile's bus URL")
    ring.add_argument("--rig", required=True, type=Path)
    ring.add_argument("--out", required=True, type=Path, help="a folder (calibration.mcap, CAL.yaml, "
                                                              "calibration.png) or a CAL.yaml path")
    ring.add_argument("--write-parts", action="store_true", help="also store the fitted numbers in the parts "
                      "whose descriptor memory is writable (a twin built from a scan then carries them)")
    ring.set_defaults(func=cmd_ring)
    fit = verbs.add_parser("fit", help="fit a recorded calibration.mcap")
    fit.add_argument("log", type=Path)
    fit.add_argument("--rig", required=True, type=Path)
    fit.add_argument("--out", required=True, type=Path, help="the CAL.yaml to write (calibration.png beside it)")
    fit.add_argument("--write-parts", metavar="PROFILE", help="also store the fitted numbers in the parts of the "
                     "robot this profile opens, where their descriptor memory is writable")
    fit.add_argument("--surface", action="append", metavar="NAME", help="fit only this surface of the rig's "
                     "(repeatable; default: every surface the ring saw enough of)")
    fit.set_defaults(func=cmd_fit)
    write = verbs.add_parser("write", help="store a CAL.yaml's numbers in the parts it names (where their "
                                           "descriptor memory is writable)")
    write.add_argument("cal", type=Path)
    write.add_argument("--profile", required=True, help="the robot whose parts get the numbers")
    write.add_argument("--bus", help="replace the profile's bus URL")
    write.set_defaults(func=cmd_write)
    check = verbs.add_parser("check", help="compare the real ring with the twin's bin by bin (+-10 pp): a mixed "
                                           "run's two sides, or a real and a twin calibration log")
    check.add_argument("real", type=Path, help="a mixed trial's trial.mcap or a mixed calibration run's "
                                              "calibration.mcap (their real and virtual sides), or a real run's "
                                              "calibration log")
    check.add_argument("twin", type=Path, nargs="?", help="the twin's calibration log (omit for a mixed run)")
    check.add_argument("--rig", required=True, type=Path)
    check.set_defaults(func=cmd_check)
    camera = verbs.add_parser("camera", help="fit the depth camera's dropout and noise per surface from a capture "
                                             "of a rig (a TUM RGB-D folder)")
    camera.add_argument("capture", type=Path, help="a TUM RGB-D folder: depth.txt, depth/*.png, camera.yaml, and "
                                                   "groundtruth.txt (each frame's pose) unless --pose")
    camera.add_argument("--rig", required=True, type=Path, help="the rig (the ring's rig file; faces name their "
                                                                "surface and may give their height)")
    camera.add_argument("--out", required=True, type=Path, help="a folder (CAL.yaml, camera_calibration.png) or a "
                                                                "CAL.yaml path")
    camera.add_argument("--pose", help="one fixed pose for every frame: x,y,z,yaw,pitch of the lens in the rig frame "
                                       "(m, deg; yaw from the rig's x axis, pitch up), for a capture without "
                                       "groundtruth.txt")
    camera.add_argument("--part", default="camera", help="the camera part (a catalog name or a part file): its "
                                                         "range limits and projector, and the CAL.yaml entry's part "
                                                         "(default: camera)")
    camera.add_argument("--stride", type=int, default=None, help="fit every STRIDE-th pixel in each direction "
                                                                 "(default 4: a real camera's neighbouring pixels "
                                                                 "are not independent)")
    camera.add_argument("--surface", action="append", metavar="NAME", help="fit only this surface of the rig's "
                                                                           "(repeatable; default: every surface "
                                                                           "the capture saw enough of)")
    camera.set_defaults(func=cmd_camera)
    record = verbs.add_parser("camera-capture", help="a virtual capture of the rig by the commbot's left eye, "
                                                     "written as a TUM RGB-D folder with its poses")
    record.add_argument("--rig", required=True, type=Path)
    record.add_argument("--out", required=True, type=Path, help="the TUM folder to write")
    record.add_argument("--part", type=Path, help="a camera part file to swap in for the eye (its depth numbers "
                                                  "are what the capture then shows)")
    record.set_defaults(func=cmd_camera_capture)


def _outputs(out: Path) -> tuple[Path, Path]:
    """(folder, CAL.yaml path) from --out (a folder, or a .yaml file)."""
    if out.suffix in (".yaml", ".yml"):
        return out.parent, out
    return out, out / "CAL.yaml"


def cmd_ring(args) -> int:
    from .rig import load_rig
    from .run import calibrate_ring

    rig = load_rig(args.rig)
    folder, cal = _outputs(args.out)
    log = calibrate_ring(args.profile, rig, folder, bus=args.bus,
                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    code = _fit_and_write(log, rig, cal)
    return _write_parts(args.profile, cal, args.bus) if args.write_parts and code == 0 else code


def cmd_fit(args) -> int:
    from .rig import load_rig

    folder, cal = _outputs(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    code = _fit_and_write(args.log, load_rig(args.rig), cal, args.surface)
    return _write_parts(args.write_parts, cal, None) if args.write_parts and code == 0 else code


def cmd_write(args) -> int:
    return _write_parts(args.profile, args.cal, args.bus)


def _write_parts(profile, cal: Path, bus: str | None) -> int:
    """Store the CAL.yaml in the parts; warnings (no such part, read-only memory) do not fail the command."""
    from .parts import write_parts

    report = write_parts(profile, cal, bus=bus)
    for line in report.stored:
        print(line)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if not report.stored:
        print("no part stores the calibration", file=sys.stderr)
    return 0


def _fit_and_write(log_path: Path, rig, cal: Path, only: list[str] | None = None) -> int:
    from .fit import fit_surfaces, observations
    from .log import read_log
    from .report import plot, summary, write_cal

    log = read_log(log_path)
    fits = fit_surfaces(log, rig, only)
    write_cal(fits, log, rig, cal, log_path)
    picture = cal.with_name("calibration.png")
    first = next(iter(fits.values()))  # one picture: the first surface's, of the readings its axis rays met
    obs = observations(log, rig)
    if len(fits) > 1:
        obs = obs.subset(obs.axis_surface == obs.surface_names.index(first.surface))
    plot(first, obs, picture)
    print(summary(fits))
    print(f"wrote {cal} and {picture}")
    return 0


def cmd_check(args) -> int:
    from .log import is_calibration_log, mixed_sides, mixed_trial_sides, read_log
    from .report import check
    from .rig import load_rig

    rig = load_rig(args.rig)
    if args.twin is None:
        if is_calibration_log(args.real):  # a calibration run on a mixed robot
            real, twin = mixed_sides(read_log(args.real), args.real)
        else:  # a mixed trial's log (hil run --record)
            real, twin = mixed_trial_sides(args.real, rig.start)
        ok, lines = check(real, twin, rig, sides=("real", "virtual"))
    else:
        ok, lines = check(read_log(args.real), read_log(args.twin), rig)
    print("\n".join(lines))
    return 0 if ok else 1


def cmd_camera(args) -> int:
    from .camera import calibrate_camera

    folder, cal = _outputs(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    print(calibrate_camera(args.capture, args.rig, cal, pose=args.pose, part=args.part, stride=args.stride,
                           only=args.surface, progress=lambda line: print(line, file=sys.stderr, flush=True)))
    print(f"wrote {cal} and {cal.with_name('camera_calibration.png')}")
    return 0


def cmd_camera_capture(args) -> int:
    from .camera_capture import record_capture
    from .rig import load_rig

    folder = record_capture(load_rig(args.rig), args.out, args.part,
                            progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"wrote {folder} (depth.txt, groundtruth.txt, camera.yaml)")
    return 0
