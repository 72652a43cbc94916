"""``hil trial --ros`` (a trial on the ROS 2 graph) and ``hil ros`` (which Python the bridge runs in; a bridge to
a link already open)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .defaults import DEFAULT_HZ, DEFAULT_RTF, DEFAULT_WATCHDOG_S

ROS_DESCRIPTION = """\
The ROS 2 bridge: a trial's robot on the ROS 2 graph (/clock, /odom, /scan, /joint_states, /tf,
/robot_description, /tf_static, /people/markers, /people/ground_truth, /diagnostics, each camera's image_raw,
depth/image_raw and camera_info, the contact switches (/bumper, /bumper/left, ...), /contacts, /scenario/line;
/cmd_vel drives the base,
/forward_position_controller/commands and /joint_trajectory_controller/joint_trajectory the joints). Run a trial
with it:

  hil trial --ros --map lab --goal 3,0 --duration 60      # no Python controller: ROS nodes drive (/cmd_vel)
  hil trial my_ros_trial.yaml                              # a trial file with controller: ros, the same
  hil trial my_controller.py --ros                         # a Python controller's trial, watched from ROS
  hil demo --ros                                           # the demo, watched from ROS
  hil run my_controller.py --profile virtual --ros         # a controller's run, watched from ROS

Without options, says which Python the bridge would run in (where rclpy imports), or what to install or source.
With --state and --commands, bridges a trial's link that another process opened."""


def add_ros_arguments(parser: argparse.ArgumentParser, *, publish_only: bool = False) -> None:
    """``--ros`` and its options; ``publish_only`` (``hil demo``: the trial has its own controller): no driver's
    options (rtf, hz, watchdog)."""
    group = parser.add_argument_group("ROS 2 (docs/ROS.md)")
    if publish_only:
        group.add_argument("--ros", action="store_true",
                           help="publish the trial on ROS 2 (a bridge process in ROS's Python; its controller "
                                "drives: /cmd_vel and the joint commands are not applied)")
    else:
        group.add_argument("--ros", action="store_true",
                           help="bridge the trial to ROS 2 (a bridge process in ROS's Python); with no controller "
                                "given, /cmd_vel drives the base")
        group.add_argument("--ros-rtf", type=float, metavar="X",
                           help=f"with no controller: trial seconds per wall second (default: the trial file's "
                                f"ros.rtf, else {DEFAULT_RTF:g})")
        group.add_argument("--ros-watchdog", type=float, metavar="S",
                           help=f"stop the base after S trial seconds without /cmd_vel (default: ros.watchdog_s, "
                                f"else {DEFAULT_WATCHDOG_S:g})")
        group.add_argument("--ros-hz", type=float, metavar="HZ",
                           help=f"with no controller: bus cycles (and /odom, /scan) per trial second (default: "
                                f"ros.hz, else {DEFAULT_HZ:g})")
    group.add_argument("--ros-python", metavar="PATH",
                       help="the Python where rclpy imports (default: ros.python, HIL_ROS_PYTHON, this one, "
                            ".venv-ros of a checkout, python3 on PATH)")
    group.add_argument("--ros-wait-for", action="append", default=None, metavar="NODE",
                       help="start the trial's clock only once a node of this name is on the ROS graph (repeat "
                            "for more; /ns/name or name): a stack launched beside the trial misses none of it")


# the --ros-* options and the trial file's ros: keys they stand for, with their defaults
_OPTION_OF_KEY = {"rtf": ("ros_rtf", DEFAULT_RTF), "hz": ("ros_hz", DEFAULT_HZ),
                  "watchdog_s": ("ros_watchdog", DEFAULT_WATCHDOG_S), "wait_for": ("ros_wait_for", None),
                  "python": ("ros_python", None)}


def settle_ros_options(args: argparse.Namespace, from_file: Any = None) -> None:
    """Fill the --ros-* options the command line left out from a trial file's ``ros:`` (``from_file``, checked by
    trial/spec.py), then from the defaults: the command line wins over the file, the file over the defaults."""
    from_file = from_file or {}
    for key, (option, default) in _OPTION_OF_KEY.items():
        if getattr(args, option, None) is None:
            setattr(args, option, from_file.get(key, default))


class RosSession:
    """The link, the bridge process and, for a trial with no controller, the driver."""

    def __init__(self, args: argparse.Namespace, err: Any = None):
        from .drive import RosDrive
        from .launch import BridgeProcess, find_ros_python
        from .link import RosLink

        # a Python given is not checked apart: the bridge starting in it is the check (wait_ready says what is
        # missing), so ROS's Python starts once
        settle_ros_options(args)
        python = find_ros_python(args.ros_python, check_given=False)
        self.link = RosLink(err=err)
        self.drive = RosDrive(self.link, hz=args.ros_hz, rtf=args.ros_rtf, watchdog_s=args.ros_watchdog)
        self.bridge = None
        try:
            self.wait_for = list(getattr(args, "ros_wait_for", None) or ())
            waits = [arg for name in self.wait_for for arg in ("--wait-for", name)]
            self.bridge = BridgeProcess(python, self.link.state_endpoint, self.link.command_endpoint, err=err,
                                        extra=waits)
            self.bridge.wait_ready()
        except BaseException:  # Ctrl-C while it waits for nodes included: nothing is left running
            if self.bridge is not None:
                self.bridge.stop()
            self.link.close()
            raise
        print(f"ros: bridge up ({python}); link state {self.link.state_endpoint}, commands "
              f"{self.link.command_endpoint}; ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}; with no "
              f"controller: rtf {self.drive.rtf:g}, {self.drive.hz:g} Hz, watchdog {self.drive.watchdog_s:g} s",
              flush=True)

    @property
    def settings(self) -> dict[str, Any]:
        """What the driver runs with, as a trial file's ``ros:`` says it (the trial's log keeps it in /trial/meta)."""
        out: dict[str, Any] = {"rtf": self.drive.rtf, "hz": self.drive.hz, "watchdog_s": self.drive.watchdog_s}
        if self.wait_for:
            out["wait_for"] = list(self.wait_for)
        return out

    @property
    def taps(self) -> tuple:
        return self.link.taps

    @property
    def hooks(self) -> tuple:
        return self.link.hooks

    def close(self) -> None:
        try:
            self.link.close()
        finally:
            self.bridge.stop()


def open_ros(args: argparse.Namespace | None) -> RosSession | None:
    """The session ``--ros`` asks for, started; None when not asked."""
    if args is None or not getattr(args, "ros", False):
        return None
    return RosSession(args)


def register(sub) -> None:
    ros = sub.add_parser("ros", help="the ROS 2 bridge: which Python it runs in, or bridge an open link",
                         description=ROS_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    ros.add_argument("--state", metavar="ENDPOINT", help="a trial link's state endpoint (tcp://127.0.0.1:PORT)")
    ros.add_argument("--commands", metavar="ENDPOINT", help="the same link's command endpoint")
    ros.add_argument("--ros-python", metavar="PATH", help="the Python where rclpy imports")
    ros.set_defaults(func=cmd_ros)


def register_rosbag(actions) -> None:
    """``hil log rosbag``: an action of ``hil log`` (trial/cli.py); rosbags is imported when it runs."""
    bag = actions.add_parser("rosbag", help="write a trial's log as a rosbag2 (MCAP, ROS 2 CDR) that ros2 bag play "
                                            "replays: /clock, /odom, /tf, /scan, /joint_states, /robot_description, "
                                            "/tf_static, the people, /diagnostics, the contacts, /scenario/line, "
                                            "/cmd_vel as applied")
    bag.add_argument("log", help="a trial folder or its trial.mcap")
    bag.add_argument("--out", metavar="BAG_DIR",
                     help="the bag folder to write (must not exist; default: rosbag/ in the trial folder)")
    bag.set_defaults(func=_cmd_rosbag)


def _cmd_rosbag(args: argparse.Namespace) -> int:
    from .rosbag import run

    return run(args)


def cmd_ros(args: argparse.Namespace) -> int:
    from .launch import DISCOVERY_PROFILE, BridgeProcess, RosUnavailable, find_ros_python

    try:
        python = find_ros_python(args.ros_python)
    except RosUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    if not (args.state and args.commands):
        if args.state or args.commands:
            print("hil ros: give both --state and --commands (a trial's link), or neither", file=sys.stderr)
            return 2
        print(f"hil ros: the bridge runs in {python} (rclpy imports there); start a trial with: hil trial --ros")
        print(f"hil ros: nodes started before a trial find its bridge at once with hil's Fast DDS profile: export "
              f"FASTRTPS_DEFAULT_PROFILES_FILE={DISCOVERY_PROFILE}")
        return 0
    bridge = BridgeProcess(python, args.state, args.commands)
    try:
        return bridge.proc.wait() or 0
    except KeyboardInterrupt:
        bridge.stop()
        return 130
