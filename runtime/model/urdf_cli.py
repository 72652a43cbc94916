"""``hil urdf``: write the URDF of a scanned robot.

Kept out of runtime/cli.py so the model owns its command; runtime/cli.py wires it next to ``hil scan``, which
owns the bus arguments and the scan::

    def _cmd_urdf(args: argparse.Namespace) -> int:
        from .model import urdf_cli

        profile, robot = _scanned(args, quiet=args.output == "-")  # --bus URL, or every bus of --profile P
        semantics = load_semantics(profile.semantics) if profile is not None and profile.semantics else None
        return urdf_cli.run(args, robot, cameras_of(robot, semantics))  # the blueprint's camera names

    urdf = sub.add_parser("urdf", help="scan a bus (--bus) or every bus of a profile (--profile) and write its URDF")
    _add_bus_arguments(urdf)
    from .model.urdf_cli import add_arguments as add_urdf_arguments
    add_urdf_arguments(urdf)
    urdf.set_defaults(func=_cmd_urdf)

With ``--profile P`` the robot is every bus of the profile merged at its mounts (runtime.robot.multibus, as
``Robot.open`` does), so the URDF is the whole robot. The scan's progress and this command's summary go to
stderr, so ``hil urdf --bus URL > robot.urdf`` works. Each camera gets its optical frame (``NAME_optical_frame``,
runtime.model.urdf), named as the robot names the camera (the profile's semantics file, else the part's tree path),
as the ROS bridge's ``/robot_description`` has it.
A robot without a root part raises ModelError (a ValueError), which ``hil`` reports as an error (exit 2).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.runtime.scan.robot import VirtualRobot

from .model import build_model
from .urdf import camera_links, to_urdf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``hil urdf`` other than how to reach the bus."""
    parser.add_argument("-o", "--output", default="-", help="URDF file to write ('-' for stdout, the default)")
    parser.add_argument("--name", default=None,
                        help="robot name in the URDF (default: from the bus URL, or the profile's file name)")
    parser.add_argument("--mesh-dir", default=None,
                        help="write mesh shapes there as OBJ files (default: meshes become bounding boxes)")


def run(args: argparse.Namespace, robot: VirtualRobot, cameras: list[tuple[str, int, str]] = ()) -> int:
    """Build the model of ``robot`` and write its URDF to ``args.output``, with an optical frame for each of
    ``cameras`` ((name, part's robot-wide ID, body): runtime.robot.assembly.cameras_of); 0 on success."""
    model = build_model(robot, name=args.name)
    text = to_urdf(model, mesh_dir=args.mesh_dir, cameras=camera_links(model, cameras))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {len(model.links)} links, {model.nq} moving joints, "
              f"{sum(link.inertia.mass for link in model.links):.3f} kg", file=sys.stderr)
    for problem in robot.problems:
        print(f"hil urdf: note: {problem}", file=sys.stderr)
    return 0
