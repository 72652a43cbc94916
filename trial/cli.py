"""The trial layer's subcommands of ``hil``: ``trial``, ``demo``, ``run`` and ``report`` (all through trial.run.Trial),
and ``log repair`` (trial/record/repair.py).

Exit status of ``hil trial`` and ``hil demo``: 0 the trial ran to its end (duration, goal, or the controller
returned) and passed its verdict (trial/verdict.py); 1 it failed its verdict (the criteria not met are named on
the summary line; ``--no-fail`` makes this 0), or the controller raised or the world or crowd failed (the
traceback or the reason is printed, and the folder keeps what was recorded); 2 the trial could not start (a bad
spec, file, bus or controller: the message says where and what); 130 Ctrl-C. ``hil run`` has no verdict: 0 when
its controller ran to its end.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

TRIAL_DESCRIPTION = """\
Run a controller in a trial: the virtual robot (or a profile's robot) in a map, with a crowd and a staged
scenario, on the simulator's clock (as fast as the CPU allows, the same every time) or the real one. Writes
OUT/trial.mcap, OUT/metrics.json and OUT/topdown.png and prints the metrics.

  hil trial wander_avoid.py --map lab --duration 20 --out trials/mine
  hil trial guide_robot.py --map arcade --scenario child_interacts --seed 3   # the map's start and goal
  hil trial my_trial.yaml --seed 4            # a trial file; options given here override its keys
  hil trial --keys                            # every key of a trial file: type, default, meaning

The controller is a file defining main(robot) (or a script using the global robot), or a module
(package.module[:function]); `hil examples --copy DIR` gives some to start from. Parameters given with --param
reach it as robot.params; a controller that declares PARAMS = {name: default} refuses any other name.

Without --start or --goal the map's own start: and goal: are used (the arcade: the west hall to the east hall).
The trial passes when it ran to its end and met its success criteria (--success; default: the goal reached when
there is a goal, and no robot-initiated collision); the summary line says passed or failed and which criteria
were not met, and a failed trial exits 1 (--no-fail: 0)."""

RUN_DESCRIPTION = """\
Run a controller file on the robot a profile describes: real (serial port), virtual in this process
(sim://), or virtual in another process (hil sim --pty), on the real or the simulator's clock.

The file either defines main(robot), called with the opened robot (loop with `for tick in robot.loop(hz)`),
or is a plain script that finds the opened robot in the global `robot` (pace it with time.sleep and call
robot.cycle() once per bus cycle). time.time/monotonic/perf_counter/sleep follow the profile's clock.
At the end the wheels are stopped, the servos keep holding, and a summary is printed.

--record DIR logs the run as a trial, unknown to the controller: every bus cycle's clock, pose (the world's
ground truth when the bus is an in-process world, beside odometry) and joints, sensors (a mixed trial's real
and virtual ring readings apart), the people of a crowd (with who touched the robot and the script lines that
ran), bus statistics once a second, the profile and the map, into DIR/trial.mcap; at the end (also after
Ctrl-C or a controller error) DIR/metrics.json and DIR/topdown.png are built from it (hil report DIR)."""


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    from .foxglove_live.cli import add_foxglove_arguments
    from .view.cli import add_view_arguments as add

    add(parser)
    add_foxglove_arguments(parser)


def register(sub) -> None:
    """Add ``hil trial``, ``hil demo``, ``hil run``, ``hil report`` and ``hil view``."""
    trial = sub.add_parser("trial", help="run a controller in a trial (map, crowd, scenario, goal), recorded and "
                                         "measured", description=TRIAL_DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    trial.add_argument("target", nargs="?", help="a controller (x.py, package.module[:function]) or a trial file "
                                                 "(x.yaml); none with --ros: ROS 2 nodes drive (/cmd_vel)")
    trial.add_argument("--keys", action="store_true", help="list every key of a trial file (type, default, meaning) "
                                                           "and exit")
    _add_trial_arguments(trial)
    add_view_arguments(trial)
    from .ros_link.cli import add_ros_arguments

    add_ros_arguments(trial)
    trial.set_defaults(func=cmd_trial)

    demo = sub.add_parser("demo", help="the main job on the built-in virtual robot (no hardware): the guide robot "
                                       "meets a child in the arcade")
    demo.add_argument("--duration", type=float,
                      help="longest trial in simulated seconds (default 240; it ends 3 s after the goal; servo "
                           "chain: 3)")
    demo.add_argument("--scenario", default="guide_meets_child",
                      help="the staged scene (a script on the config search path or a path) over the background "
                           "crowd; 'none': background only (default guide_meets_child: the child scene of "
                           "the crowd-simulation reference on the route)")
    demo.add_argument("--gui", action="store_true", help="watch it in the pybullet viewer (needs a display)")
    _add_camera_arguments(demo, default="0, or $HIL_CAMERA_RATE")
    demo.add_argument("--out", help="trial folder: trial.mcap, metrics.json, topdown.png (default trials/demo-SEED)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the crowd and the sensors (default 0)")
    demo.add_argument("--crowd", metavar="ENDPOINT", help="use a crowd already served there (default: start one)")
    demo.add_argument("--crowd-timeout", type=float, default=10.0,
                      help="seconds of wall time the world waits for a crowd tick before failing (default 10)")
    demo.add_argument("--servo-chain", action="store_true", help="the bus-only demo: 17 servos, 100 Hz, 1 Mbaud")
    demo.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_no_fail(demo)
    add_view_arguments(demo)
    add_ros_arguments(demo, publish_only=True)  # hil demo --ros: published, its own controller drives
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser("run", help="run a controller file on the robot a profile describes (real or virtual)",
                         description=RUN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("controller", help="a Python file defining main(robot), or a script using the global robot "
                                        "(or a module: package.module[:function])")
    run.add_argument("--profile", required=True,
                     help="profile: config/profiles/virtual.yaml (or a name on the config search path: virtual)")
    run.add_argument("--duration", type=float, metavar="S", help="stop after S (> 0) seconds of the profile's clock")
    run.add_argument("--bus", metavar="URL", help="override the profile's bus (e.g. the /dev/pts/N of hil sim --pty)")
    run.add_argument("--record", metavar="DIR",
                     help="record the run as a trial: DIR/trial.mcap, then DIR/metrics.json and DIR/topdown.png")
    run.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                     help="a controller parameter (robot.params[KEY]; VALUE read as YAML: 0.4, true, [1, 2])")
    run.add_argument("--stall", type=float, dest="stall_s", metavar="S",
                     help="on the simulator's clock: wall seconds its time may stand still before the run fails, "
                          "naming where the controller waits (default 30)")
    from hil.runtime.native.cli import add_arguments as add_native_arguments

    add_native_arguments(run)  # --native PROGRAM -- ARGS: a compiled controller (runtime/native)
    add_view_arguments(run)
    add_ros_arguments(run, publish_only=True)  # hil run --ros: published, the controller drives
    run.set_defaults(func=cmd_run)

    examples = sub.add_parser("examples", help="list the example controllers shipped with hil, or copy them (with "
                                               "their pytest scenario tests) into a folder to start from")
    examples.add_argument("--copy", metavar="DIR", help="copy the examples into DIR (DIR/tests: the scenario tests)")
    examples.set_defaults(func=cmd_examples)

    report = sub.add_parser("report", help="rebuild metrics.json and topdown.png of a trial folder from its log")
    report.add_argument("dir", help="trial folder holding trial.mcap")
    report.add_argument("--no-repair", action="store_true",
                        help="leave a log cut short by a crash as it is (default: repair it first, as `hil log "
                             "repair` does, so that every MCAP tool opens it; the original is kept)")
    report.set_defaults(func=cmd_report)

    from .view.cli import register as register_view

    register_view(sub)
    from .calibrate.cli import register as register_calibrate  # hil calibrate (trial/calibrate: the ring's numbers)

    register_calibrate(sub)
    from .foxglove_live.cli import register_layout

    register_layout(sub)
    from .sweep.cli import register as register_sweep  # hil sweep (trial/sweep: many trials on Dask)

    register_sweep(sub)
    from .ros_link.cli import register as register_ros  # hil ros (trial/ros_link: the ROS 2 bridge)

    register_ros(sub)

    from .record import repair

    log = sub.add_parser("log", help="trial logs: repair one cut short by a crash (hil log repair DIR), write "
                                            "one as a rosbag2 (hil log rosbag DIR)")
    actions = log.add_subparsers(dest="log_action", required=True, metavar="ACTION")
    fix = actions.add_parser("repair", help="rewrite a log cut short by a crash complete and indexed, so that "
                                            "every MCAP tool opens it", description=repair.__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    repair.add_arguments(fix)
    fix.set_defaults(func=repair.run)
    from .ros_link.cli import register_rosbag  # hil log rosbag (trial/ros_link/rosbag.py)

    register_rosbag(actions)


def _add_trial_arguments(parser: argparse.ArgumentParser) -> None:
    world = parser.add_argument_group("the world (default: the virtual commbot in this process)")
    world.add_argument("--robot", help="an assembly on the config search path (commbot) or its file")
    world.add_argument("--profile", help="a profile instead (virtual, real, mixed, config/profiles/x.yaml)")
    world.add_argument("--bus", metavar="URL", help="with --profile: replace its main bus")
    world.add_argument("--clock", choices=("sim", "real"), help="sim: lockstep, deterministic (default); real")
    world.add_argument("--gui", action="store_true", default=None, help="the pybullet viewer (needs a display)")
    task = parser.add_argument_group("the task")
    task.add_argument("--map", help="a map on the config search path (arcade, lab) or its file")
    task.add_argument("--crowd", help="rates files for the background crowd (weekday | weekday,weekend | a path), "
                                      "or none (default none)")
    task.add_argument("--crowd-scale", type=float, metavar="X", help="multiply the appearance rates by X (0..100)")
    task.add_argument("--crowd-start", metavar="'DAY HH:MM'", help="day and time at trial time 0 ('sat 14:00')")
    task.add_argument("--crowd-endpoint", metavar="EP", help="a crowd already served (hil crowd --serve EP)")
    task.add_argument("--allow-objectives", dest="allow_objectives", metavar="MODULES",
                      help="comma-separated modules the rates files' objectives.user may be imported from (none "
                           "unless given: importing runs their code)")
    task.add_argument("--crowd-timeout", type=float, dest="crowd_timeout_s", metavar="S",
                      help="wall seconds the world waits for the crowd (default 10)")
    task.add_argument("--stall", type=float, dest="stall_s", metavar="S",
                      help="wall seconds the simulator's time may stand still before the trial fails, naming where "
                           "the controller waits (default 30)")
    task.add_argument("--scenario", help="a staged script (child_interacts, a .scn file) or none")
    task.add_argument("--start", metavar="X,Y[,YAW]|PLACE", help="the robot's start pose in the map (m, m, rad) or "
                                                                 "a place; write --start=-18,0,0 for a negative X")
    task.add_argument("--goal", metavar="X,Y|PLACE", help="the goal (m) or a place of the map")
    task.add_argument("--goal-radius", type=float, metavar="M", help="within this of the goal counts (default 0.5)")
    task.add_argument("--end-on-goal", action=argparse.BooleanOptionalAction, default=None,
                      help="end the trial a little after the goal is reached (default yes)")
    task.add_argument("--after-goal", type=float, dest="after_goal_s", metavar="S",
                      help="seconds the trial goes on after the goal (default 3)")
    task.add_argument("--seed", type=int, help="seeds the crowd, the sensors and the faults (default 0)")
    task.add_argument("--duration", type=float, metavar="S", help="longest trial, seconds of its clock (default 120)")
    agent = parser.add_argument_group("the controller")
    agent.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                       help="a controller parameter (robot.params[KEY]; VALUE read as YAML: 0.4, true, [1, 2])")
    agent.add_argument("--name", help="a label for the summary")
    verdict = parser.add_argument_group("the verdict")
    verdict.add_argument("--success", action="append", metavar="CRITERION",
                         help="what the trial must meet to pass, once per criterion: COLUMN or 'COLUMN OP VALUE' on "
                              "the metrics ('min_distance_m >= 0.5 or none'); replaces the default goal.reached (with "
                              "a goal) and collisions.robot_initiated == 0")
    _add_no_fail(verdict)
    out = parser.add_argument_group("output")
    out.add_argument("--out", help="trial folder (default trials/NAME-SEED)")
    out.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_camera_arguments(out)

    states = parser.add_argument_group("saved states (trial/state/)")
    states.add_argument("--from", dest="resume_from", metavar="DIR@SECONDS",
                        help="start from the state the trial in DIR saved at or before SECONDS (its other keys are "
                             "the original's unless given here)")
    states.add_argument("--state-every", type=float, dest="state_every", metavar="S",
                        help="seconds of trial time between saved states in OUT/states/ (default 5; 0: none)")


def _add_no_fail(group) -> None:
    group.add_argument("--no-fail", action="store_true",
                       help="exit 0 when the trial ran to its end, passed or not (the summary still says)")


def _add_camera_arguments(group, default: str = "5") -> None:
    group.add_argument("--camera-rate", type=float, dest="camera_rate", metavar="HZ",
                       help=f"record each camera's images at HZ (default {default}; 0: none; needs hil[camera])")
    group.add_argument("--camera-depth", action="store_true", default=None, dest="camera_depth",
                       help="also record each camera's depth image (foxglove.RawImage)")


def parse_params(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dict, each VALUE read as a YAML scalar or flow collection."""
    from hil.devices.yaml_source import load_yaml_text, plain

    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"--param {item!r}: expected KEY=VALUE with KEY a name (cruise_m_s=0.4)")
        params[key.strip()] = plain(load_yaml_text(value, f"--param {key}", "param"))
    return params


_TRIAL_KEYS = ("robot", "profile", "bus", "clock", "gui", "map", "crowd", "crowd_scale", "crowd_start",
               "crowd_endpoint", "crowd_timeout_s", "stall_s", "scenario", "start", "goal", "goal_radius", "end_on_goal",
               "after_goal_s", "seed", "duration", "name", "camera_rate", "camera_depth", "allow_objectives")


def cmd_trial(args: argparse.Namespace) -> int:
    from .ros_link.cli import open_ros
    from .run import Trial

    if args.keys:
        from .spec_doc import keys_text

        print(keys_text())
        return 0
    keys = {k: getattr(args, k) for k in _TRIAL_KEYS if getattr(args, k) is not None}
    if args.success:
        keys["success"] = args.success
    if args.param:
        keys["params"] = parse_params(args.param)
    for key in ("resume_from", "state_every"):
        if getattr(args, key, None) is not None:
            keys[key] = getattr(args, key)
    target = args.target
    if target is None and not getattr(args, "ros", False):
        raise ValueError("hil trial: give a controller (x.py, package.module) or a trial file (x.yaml), or --ros "
                         "to let ROS 2 nodes drive")
    from .ros_link.launch import RosUnavailable
    from .spec import ROS_CONTROLLER

    spec = _trial_spec(target, keys) if target is not None else None  # a bad file: nothing starts
    if spec is not None and spec.controller == ROS_CONTROLLER:
        args.ros = True  # controller: ros is hil trial --ros with no controller
    from .ros_link.cli import settle_ros_options

    settle_ros_options(args, spec.ros if spec is not None else None)  # the command line wins over ros:
    try:
        ros = open_ros(args)
    except RosUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        if spec is None or spec.controller == ROS_CONTROLLER:
            spec = _ros_spec(spec, keys, ros)
        if ros is not None and spec.controller is not ros.drive:
            print(f"ros: /cmd_vel and the joint commands are not applied: the trial's controller is {spec.label}",
                  flush=True)
        out = Path(args.out) if args.out else Path("trials") / f"{spec.label}-{spec.seed}"
        return _run_and_report(Trial(spec=spec), out, quiet=args.quiet, args=args, ros=ros)
    finally:
        if ros is not None:
            ros.close()


def _ros_spec(spec: Any, keys: dict[str, Any], ros: Any) -> Any:
    """The spec of a trial ROS 2 nodes drive: ``hil trial --ros`` with no controller, or a trial file's
    ``controller: ros`` (its keys kept, the bridge's driver as the controller; named ros unless it has a name)."""
    from dataclasses import replace

    from .spec import make_spec

    if spec is None:
        keys.setdefault("name", "ros")
        return make_spec(ros.drive, source="hil trial", ros=ros.settings, **keys)
    return replace(spec, controller=ros.drive, name=spec.name or "ros", ros=ros.settings)  # the log says what ran


def _trial_spec(target: str, keys: dict[str, Any]) -> Any:
    """The spec ``hil trial`` was given: a trial file, a saved state or a controller."""
    from .spec import load_trial_file, make_spec

    if target.endswith((".yaml", ".yml")):
        spec = load_trial_file(target, **keys)
    elif keys.get("resume_from"):
        from .state.attach import spec_from_state

        spec = spec_from_state(target, **keys)  # the original trial's keys, the controller and these on top
    else:
        spec = make_spec(target, source="hil trial", **keys)
    return spec


def cmd_demo(args: argparse.Namespace) -> int:
    if args.servo_chain:
        from hil.runtime.servo_chain_demo import run_servo_chain_demo

        from .spec import MAX_DURATION_S

        duration = 3.0 if args.duration is None else args.duration
        if not 0 < duration <= MAX_DURATION_S:  # also NaN
            raise ValueError(f"hil demo: --duration must be > 0 and at most MAX_DURATION_S={MAX_DURATION_S:g} s (a "
                             f"week), not {duration}")
        run_servo_chain_demo(duration_s=duration)
        return 0
    from .presets import DEMO_DURATION_S, demo_spec
    from .run import Trial

    spec = demo_spec(seed=args.seed, scenario=args.scenario,
                     duration=DEMO_DURATION_S if args.duration is None else args.duration, gui=args.gui,
                     crowd_endpoint=args.crowd, crowd_timeout_s=args.crowd_timeout, source="hil demo",
                     **{k: getattr(args, k) for k in ("camera_rate", "camera_depth") if getattr(args, k, None) is not None})
    if spec.gui:
        _check_display()
    out = Path(args.out or f"trials/demo-{args.seed}")
    from .ros_link.cli import open_ros
    from .ros_link.launch import RosUnavailable

    try:
        ros = open_ros(args)  # --ros: published only (the demo's controller drives)
    except RosUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    if ros is not None:
        print("ros: /cmd_vel and the joint commands are not applied: the demo's controller drives", flush=True)
    try:
        return _run_and_report(Trial(spec=spec), out, quiet=args.quiet, args=args, ros=ros)
    finally:
        if ros is not None:
            ros.close()


def _check_display() -> None:
    from hil.firmware_sim.world import display_available  # the world knows what its viewer needs

    if not display_available():
        raise ValueError("--gui needs a display and DISPLAY is not set; run without --gui (the trial is the same, "
                         "only unwatched) or from a desktop session")


def start_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean a trial could not start and that say where and what (a config file:line, a part's
    descriptor, a bus, a crowd or clock that does not answer, a controller that cannot be loaded): printed as one
    line, exit status 2. Anything else is a bug and keeps its traceback."""
    from hil.bridge.crowd_link import CrowdLinkError
    from hil.bridge.lockstep import LockstepError
    from hil.bridge.realtime import LinkError
    from hil.devices.descriptor import DescriptorError
    from hil.devices.yaml_source import ConfigError
    from hil.runtime.bus import BusError
    from hil.runtime.clock.base import ClockError
    from hil.runtime.drivers.part_driver import DriverCodeError
    from hil.runtime.model import ModelError
    from hil.runtime.robot.overlay import CrowdOverlayError
    from hil.runtime.robot.runner import ControllerError

    from .task import TrialError

    return (ConfigError, DescriptorError, ControllerError, BusError, ClockError, ModelError, OSError,
            CrowdOverlayError, CrowdLinkError, LinkError, LockstepError, DriverCodeError, TrialError)


def _run_and_report(trial, out: Path, *, quiet: bool, args: argparse.Namespace | None = None,
                    ros: Any = None) -> int:
    from .report.build import format_metrics, in_red

    from .foxglove_live.cli import close_live, open_live

    progress = None if quiet else (lambda line: print(line, flush=True))
    viewer = None
    fox = open_live(args, trial.spec.label, trial.spec.duration)  # --foxglove: served from the log's taps
    served = {"taps": fox.taps, "hooks": fox.hooks} if fox is not None else {}
    if ros is not None:  # --ros: the bridge's link taps the log and follows the cycles as the live server does
        served = {"taps": served.get("taps", ()) + ros.taps, "hooks": served.get("hooks", ()) + ros.hooks}
    try:
        if args is not None and getattr(args, "view", False):
            from .view.cli import run_viewed

            result, viewer = run_viewed(trial, out, args, progress, **served)
        else:
            result = trial.run(out, progress=progress, **served)
    except start_errors() as exc:
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if fox is not None and viewer is None:
            close_live(fox, args)
    if result.traceback:
        print(result.traceback, file=sys.stderr, end="")
    if result.metrics is not None:
        print(in_red(format_metrics(result.metrics.to_dict()), sys.stdout.isatty()))
    print(result.summary_line(), flush=True)
    if result.metrics is not None:
        print(f"wrote {out}/trial.mcap, metrics.json, topdown.png (open again with: hil report {out}, "
              f"hil view {out})")
    elif result.report_error is not None:  # e.g. a full disk: say what is there and what is not
        print(f"wrote {out}/trial.mcap; the report (metrics.json, topdown.png) failed: {result.report_error}")
    if viewer is not None:
        from .view.cli import linger

        linger(viewer, args.view_linger)
        close_live(fox, args)
    if result.status == "ok" and not result.passed and getattr(args, "no_fail", False):
        return 0
    return 0 if result.passed else {"interrupted": 130}.get(result.status, 1)


def cmd_run(args: argparse.Namespace) -> int:
    """Exit 0 when the controller returned or ran its duration, 1 when it raised (traceback shown), 2 when the
    robot could not be opened (the message says where and what), 130 on Ctrl-C."""
    from hil.runtime.native.cli import maybe_run

    from .run import Trial
    from .spec import make_spec

    native_status = maybe_run(args)  # None unless --native (or native: true in the profile)
    if native_status is not None:
        return native_status
    from .ros_link.cli import open_ros
    from .ros_link.launch import RosUnavailable

    ros = None
    try:
        stall = {} if args.stall_s is None else {"stall_s": args.stall_s}
        trial = Trial(spec=make_spec(args.controller, source="hil run", profile=args.profile, bus=args.bus,
                                     duration=args.duration, params=parse_params(args.param), end_on_goal=False,
                                     **stall))
        viewer = None
        from .foxglove_live.cli import close_live, open_live

        try:
            ros = open_ros(args)  # --ros: published only (the controller drives), from the log's taps as --foxglove
        except RosUnavailable as exc:
            print(exc, file=sys.stderr)
            return 2
        fox = open_live(args, trial.spec.label, trial.spec.duration)  # --foxglove: served from the log (so it records, like --view)
        served = {"taps": fox.taps, "hooks": fox.hooks} if fox is not None else {}
        if ros is not None:
            print("ros: /cmd_vel and the joint commands are not applied: the run's controller drives", flush=True)
            served = {"taps": served.get("taps", ()) + ros.taps, "hooks": served.get("hooks", ()) + ros.hooks}
        try:
            if args.view or fox is not None or ros is not None:
                import tempfile

                from .view.cli import run_viewed

                record = Path(args.record) if args.record else Path(tempfile.mkdtemp(prefix="hil-run-view-"))
                if args.view:
                    result, viewer = run_viewed(trial, record, args, **served)
                else:
                    result = trial.run(record, **served)
            else:
                result = trial.run(args.record)
        finally:
            if fox is not None and viewer is None:
                close_live(fox, args)
    except start_errors() as exc:
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if ros is not None:
            ros.close()
    if result.traceback:
        print(result.traceback, file=sys.stderr, end="")
    elif result.error:  # a failure without a traceback (a stall, a lost world) says what it was
        print(f"hil run: {result.error}", file=sys.stderr)
    print(result.run_text, flush=True)
    if viewer is not None:
        from .view.cli import linger

        linger(viewer, args.view_linger)
        close_live(fox, args)
    return {"ok": 0, "interrupted": 130}.get(result.status, 1)


def cmd_report(args: argparse.Namespace) -> int:
    from .report.build import cli

    return cli(args)


def cmd_examples(args: argparse.Namespace) -> int:
    """List the shipped examples (first line of each docstring), or copy them all to start a project from."""
    import ast

    from hil.devices.config_path import builtin_examples

    source = builtin_examples()
    files = sorted(p for p in source.glob("*.py"))
    if args.copy:
        target = Path(args.copy)
        if target.exists() and any(target.iterdir()):
            raise ValueError(f"{target}: not empty; copy the examples into a new or empty folder")
        copied = copy_examples(source, target)
        print(f"copied {len(copied)} files to {target}: {len(files)} example controllers, their trial files, the "
              f"rig, native/ and ros/ sources and the scenario tests (tests/); try:\n"
              f"  hil trial {target / 'survive_unplug.yaml'}\n  pytest {target / 'tests'}")
        return 0
    for path in files:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        print(f"{path.name:<18} {first if len(first) <= 100 else first[:99] + '~'}")
    print(f"(in {source}; hil examples --copy DIR to start from them)")
    return 0


EXAMPLE_SUFFIXES = (".py", ".yaml", ".md", ".c")  # what the examples are made of (no caches, no built programs)


def copy_examples(source: Path, target: Path) -> list[Path]:
    """Every file of the shipped examples (controllers, trial files, the calibration rig, native/ and ros/
    sources, the scenario tests) copied to ``target`` with its folder, so that each example runs from there as
    the docs write it. Returns the copied files."""
    import shutil

    copied = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or path.suffix not in EXAMPLE_SUFFIXES or "__pycache__" in relative.parts:
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
        copied.append(target / relative)
    return copied
