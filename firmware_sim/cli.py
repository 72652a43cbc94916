"""``hil sim ASSEMBLY --pty | --tcp PORT``: serve a virtual bus device until SIGINT/SIGTERM.

The first line on stdout is where to connect (the pty path, or the socket:// URL), so scripts and tests can
start the device as a subprocess and read one line.
"""
from __future__ import annotations

import argparse
import math
import signal
import sys
import threading

from hil.devices.map_format import MAX_COORDINATE_M

from .assembly import load_assembly
from .bus_device import VirtualBusDevice
from .faults import FaultInjector
from .pty_link import check_link_path
from .serve import serve_pty, serve_serial, serve_tcp
from .timing import WireTiming

MAX_OPTION_S = 3600.0  # --watchdog-ms, --stall-timeout


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assembly", nargs="?",
                        help="name under config/robots/ (e.g. servo_chain) or a path to a YAML file")
    parser.add_argument("--list-models", action="store_true",
                        help="print every servo model a robot file's 'model:' may name (ROBOTIS's model number and "
                             "name) and exit")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="serve on a new pseudo-terminal; prints its path")
    where.add_argument("--tcp", type=int, metavar="PORT", help="serve on TCP (0 picks a free port)")
    where.add_argument("--serial", metavar="PATH", help="serve on a physical serial port (its --baud: the port's "
                                                       "speed, default 1000000; the wire times itself)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address to bind (default loopback only)")
    parser.add_argument("--pty-link", metavar="PATH",
                        help="with --pty: keep a symlink PATH to the pty while serving (a stable port_name for a "
                             "ros2_control URDF, e.g. /tmp/ttyHIL0); refused if PATH exists and is not a link a "
                             "killed hil sim left")
    timing = parser.add_argument_group("wire-timing emulation (off unless asked)")
    timing.add_argument("--baud", type=int, help="emulate wire time at this baud rate")
    timing.add_argument("--latency-ms", type=float, help="emulate a USB adapter latency timer")
    timing.add_argument("--no-return-delay", action="store_true", help="ignore the parts' return delay time")
    world = parser.add_argument_group("the pybullet world (for assemblies of self-describing parts)")
    world.add_argument("--clock", choices=("real", "sim"), default="real",
                       help="real: the world runs paced to wall time; sim: it advances only when the clock master "
                            "steps it (lockstep)")
    world.add_argument("--clock-endpoint", default="tcp://127.0.0.1:5757",
                       help="with --clock sim: where the lockstep clock is served (ZeroMQ; loopback by default; "
                            "tcp://127.0.0.1:* picks a free port). Printed as the second line of stdout")
    world.add_argument("--camera-endpoint", metavar="EP",
                       help="serve the world's camera frames for controllers in other processes (ZeroMQ REQ/REP, "
                            "firmware_sim/camera_server.py; e.g. tcp://127.0.0.1:5758, tcp://127.0.0.1:* for a free "
                            "port; loopback unless --keys secures it). Printed as 'camera EP' on stdout after the clock line; a "
                            "profile's camera_endpoint: points the robot at it")
    world.add_argument("--keys", metavar="DIR",
                       help="CURVE-encrypt the ZeroMQ endpoints served (the clock with --clock sim, "
                            "--camera-endpoint, --control) and admit only clients whose key is in DIR/authorized/ (a "
                            "key directory made by 'hil keys DIR'); needed off loopback. The bus itself "
                            "(--pty/--tcp) is not ZeroMQ and stays as it is")
    world.add_argument("--stall-timeout", type=float, default=10.0,
                       help="with --clock sim: a participant awake longer than this (wall s) fails the run")
    world.add_argument("--gui", action="store_true", help="open the pybullet viewer (needs a display)")
    world.add_argument("--map", help="a map under config/maps/ (e.g. lab) or a path; default: an empty floor")
    world.add_argument("--pose", default="0,0,0", help="robot start pose x,y,yaw in m, m, rad (default 0,0,0)")
    world.add_argument("--watchdog-ms", type=float, default=500.0,
                       help="stop actuators not addressed for this long (Bus Watchdog; 0: off; default 500)")
    world.add_argument("--calibration", metavar="CAL.yaml",
                       help="build the parts a calibration names with its numbers (hil calibrate: a stand-in for a "
                            "real robot whose ring measures otherwise than the catalog says)")
    world.add_argument("--hidden", metavar="CAL.yaml",
                       help="the parts a calibration names measure with its numbers but describe themselves as "
                            "before (a real part whose catalog numbers are off: what hil calibrate finds)")
    world.add_argument("--no-world", action="store_true",
                       help="no physics: servos follow a first-order response (the only mode for plain servos)")
    faults = parser.add_argument_group("fault injection (off unless asked)")
    faults.add_argument("--faults", metavar="FILE", help="a YAML list of timed faults (unplug, plug, reboot, swap, "
                                                         "overload, noise; as a trial's faults:) run on the world's "
                                                         "time")
    faults.add_argument("--semantics", metavar="FILE", help="blueprint names for --faults (e.g. "
                                                            "config/semantics/commbot.yaml)")
    faults.add_argument("--control", metavar="ENDPOINT",
                        help="serve a live fault control (ZeroMQ; e.g. tcp://127.0.0.1:* picks a free port; loopback "
                             "unless told otherwise, CURVE with --keys): `hil sim fault unplug PART --control "
                             "ENDPOINT`. Printed on stdout as `control ENDPOINT` after the address (and clock) lines")
    faults.add_argument("--chain-stops", action="store_true",
                        help="a fast read's reply stops at the first silent part, as a real bus's chained reply "
                             "does (default: every present part answers its slot)")
    faults.add_argument("--bitflip", type=float, default=0.0, help="probability of a flipped bit, per bit")
    faults.add_argument("--drop", type=float, default=0.0, help="probability of a dropped reply, per reply")
    faults.add_argument("--seed", type=int, default=0, help="seed of the fault injector and of the sensors' noise")


def build_device(args: argparse.Namespace) -> VirtualBusDevice:
    """The device the arguments describe: embodied in a world when the parts describe themselves."""
    _check_durations(args)
    assembly = load_assembly(args.assembly)
    if getattr(args, "calibration", None):
        from hil.devices.calibration import load_calibration

        from .assembly import calibrated

        assembly, _, warnings = calibrated(assembly, load_calibration(args.calibration))
        for warning in warnings:
            print(f"hil sim: warning: {warning}", file=sys.stderr, flush=True)
    if getattr(args, "hidden", None):
        from hil.devices.calibration import load_calibration

        from .assembly import calibrated

        assembly, _, warnings = calibrated(assembly, load_calibration(args.hidden), stored=False)
        for warning in warnings:
            print(f"hil sim: warning: {warning}", file=sys.stderr, flush=True)
    timing = None if getattr(args, "serial", None) else WireTiming.parse(args.baud, args.latency_ms,
                                                                          return_delay=not args.no_return_delay)
    faults = None
    if args.bitflip or args.drop:
        faults = FaultInjector(seed=args.seed, bit_flip_rate=args.bitflip, drop_rate=args.drop)
    chain_stops = bool(getattr(args, "chain_stops", False))
    if args.no_world or not all(hasattr(part, "descriptor") for part in assembly.parts):
        return VirtualBusDevice(assembly.parts, timing=timing, faults=faults, chain_stops=chain_stops)
    from .embodied import embody

    embodied = embody(assembly, clock=args.clock, gui=args.gui, map_name=args.map, base_xy_yaw=_pose(args.pose),
                      seed=args.seed, watchdog_s=args.watchdog_ms / 1000.0, timing=timing, faults=faults)
    embodied.device.embodied = embodied  # keeps the world alive as long as the device
    embodied.device.chain_stops = chain_stops
    return embodied.device


def _pose(text: str) -> tuple[float, float, float]:
    try:
        x, y, yaw = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--pose {text!r}: expected x,y,yaw (three numbers)") from None
    if not all(math.isfinite(v) and abs(v) <= MAX_COORDINATE_M for v in (x, y, yaw)):
        raise ValueError(f"--pose {text!r}: x, y, yaw must be finite and within MAX_COORDINATE_M={MAX_COORDINATE_M:g}")
    return x, y, yaw


def _check_durations(args: argparse.Namespace) -> None:
    """--watchdog-ms (0: off) and --stall-timeout (> 0): at most an hour; NaN or 1e12 is a typo, not a setting."""
    checks = (("--watchdog-ms", args.watchdog_ms, 0.0 <= args.watchdog_ms <= MAX_OPTION_S * 1000, "0..3.6e6 ms"),
              ("--stall-timeout", args.stall_timeout, 0.0 < args.stall_timeout <= MAX_OPTION_S, "> 0, up to 3600 s"))
    for flag, value, ok, allowed in checks:
        if not ok:
            raise ValueError(f"hil sim: {flag} must be {allowed} (MAX_OPTION_S: an hour), not {value}")


def list_models() -> str:
    """One line per servo model the virtual bus can be: ROBOTIS's model number and name."""
    from hil.devices.control_table import TABLES_BY_MODEL

    return "\n".join(f"{number:5d}  {table.model_name}" for number, table in sorted(TABLES_BY_MODEL.items()))


def _check_where(args: argparse.Namespace) -> None:
    if not args.assembly:
        raise ValueError("hil sim: name a robot (e.g. hil sim servo_chain --pty), or ask for --list-models")
    if not (args.pty or args.tcp is not None or args.serial):
        raise ValueError("hil sim: say where to serve: --pty, --tcp PORT or --serial PATH")
    if args.pty_link is not None:
        if not args.pty:
            raise ValueError("hil sim: --pty-link names the pty of --pty; it needs --pty")
        check_link_path(args.pty_link)


def run(args: argparse.Namespace) -> int:
    if args.list_models:
        print(list_models())
        return 0
    _check_where(args)
    security = _served_security(args)  # a bad key directory stops us before anything is built or bound
    _check_camera_endpoint(args)
    device = build_device(args)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    clock_server = _clock_server(device, args, security)
    try:
        camera_server = _camera_server(device, args, security)
    except BaseException:
        if clock_server is not None:
            clock_server.close()
        raise
    _arm_faults(device, args)
    try:
        control = _control(device, args, security)
    except BaseException:
        if clock_server is not None:
            clock_server.close()
        if camera_server is not None:
            camera_server.close()
        raise

    def ready(where: str) -> None:
        print(where, flush=True)
        if clock_server is not None:
            print(f"clock {clock_server.endpoint}", flush=True)
        if camera_server is not None:
            print(f"camera {camera_server.endpoint}", flush=True)
        if control is not None:
            print(f"control {control.endpoint}", flush=True)
        linked = f" (linked at {args.pty_link})" if args.pty and args.pty_link else ""
        print(f"serving {len(device.parts)} parts of {args.assembly}{linked}; stop with Ctrl-C", file=sys.stderr,
              flush=True)

    try:
        if args.pty:
            serve_pty(device, stop, ready, link=args.pty_link)
        elif args.serial:
            serve_serial(device, stop, ready, args.serial, args.baud or 1_000_000)
        else:
            serve_tcp(device, stop, ready, port=args.tcp, host=args.host)
    finally:
        if control is not None:
            control.close()
        if clock_server is not None:
            clock_server.close()
        if camera_server is not None:
            camera_server.close()
        _report_faults(device)
    return 0


def _arm_faults(device: VirtualBusDevice, args: argparse.Namespace) -> None:
    """--faults FILE: checked (file:line) and bound to the device's parts before serving starts."""
    if not getattr(args, "faults", None):
        return
    from .fault_plan import assembly_resolver, load_fault_file

    embodied = getattr(device, "embodied", None)
    if embodied is None:
        raise ValueError("hil sim: --faults runs on the world's time: it needs a world (not --no-world)")
    plan = load_fault_file(args.faults)
    plan.bind(assembly_resolver(device.parts, args.semantics))
    plan.attach(embodied.world, device, args.seed)


def _control(device: VirtualBusDevice, args: argparse.Namespace, security=None):
    """--control ENDPOINT: the live fault control (control.py), names resolved as --faults resolves them."""
    if not getattr(args, "control", None):
        return None
    from .control import FaultControl
    from .fault_plan import assembly_resolver

    embodied = getattr(device, "embodied", None)
    semantics = args.semantics
    return FaultControl(device, args.control, lambda parts: assembly_resolver(parts, semantics),
                        world=embodied.world if embodied is not None else None, seed=args.seed, security=security)


def _report_faults(device: VirtualBusDevice) -> None:
    """What the injector did, at exit, so a host's CRC errors and timeouts can be checked against it."""
    if device.faults is not None:
        print(device.faults.summary(), file=sys.stderr, flush=True)


def _served_security(args: argparse.Namespace):
    """The keys (``--keys``) of every ZeroMQ endpoint served (clock, camera, control), loaded and checked up front;
    None serves them plain (on loopback)."""
    if not args.keys:
        return None
    secured = ((args.clock == "sim" and not args.no_world) or getattr(args, "control", None)
               or getattr(args, "camera_endpoint", None))
    if not secured:
        raise ValueError("hil sim: --keys secures the lockstep clock endpoint (--clock sim, with a world), the "
                         "--camera-endpoint and the --control endpoint: give one of them")
    from hil.bridge.security import Security

    security = Security.load(args.keys)
    security.check_server()
    return security


def _check_camera_endpoint(args: argparse.Namespace) -> None:
    endpoint = getattr(args, "camera_endpoint", None)
    if endpoint is not None and not endpoint.startswith(("tcp://", "ipc://")):
        raise ValueError(f"hil sim: --camera-endpoint {endpoint!r}: a ZeroMQ endpoint such as tcp://127.0.0.1:5758")
    if endpoint is not None and args.no_world:
        raise ValueError("hil sim: --camera-endpoint: --no-world has no world to render camera frames in")


def _camera_server(device: VirtualBusDevice, args: argparse.Namespace, security=None):
    """With --camera-endpoint, the world's cameras served beside the bus (firmware_sim/camera_server.py)."""
    endpoint = getattr(args, "camera_endpoint", None)
    if not endpoint:
        return None
    embodied = getattr(device, "embodied", None)
    if embodied is None:
        raise ValueError(f"hil sim: --camera-endpoint: {args.assembly} has no world (--no-world, or parts that do "
                         f"not describe themselves): there is nothing to render camera frames in")
    if not embodied.cameras:
        raise ValueError(f"hil sim: --camera-endpoint: {args.assembly} has no camera part")
    from .camera_server import CameraServer

    return CameraServer(embodied, endpoint, security=security)


def _clock_server(device: VirtualBusDevice, args: argparse.Namespace, security=None):
    """With --clock sim, the world's lockstep clock served over ZeroMQ for participants in other processes
    (CURVE-secured with ``security``)."""
    embodied = getattr(device, "embodied", None)
    if embodied is None or embodied.clock != "sim":
        if security is not None and not getattr(args, "control", None) and not getattr(args, "camera_endpoint", None):
            raise ValueError(f"hil sim: --keys: {args.assembly} has no world (its parts do not describe "
                             f"themselves), so there is no lockstep clock to secure")
        return None
    from hil.bridge.lockstep import ClockServer

    core, _ = embodied.lockstep(args.stall_timeout)
    faults = device.faults
    return ClockServer(core, args.clock_endpoint, lock=device.lock, security=security,
                       status=lambda: {"faults": faults.status() if faults is not None else None})


FAULT_ACTIONS = ("unplug", "plug", "reboot", "swap", "noise", "overload", "status")


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=FAULT_ACTIONS, help="what to do (overload: the servo latches an overload "
                                                             "error until rebooted; status: what was done so far)")
    parser.add_argument("part", nargs="?", help="the part: bus ID, tree path (torso/shoulder_right) or blueprint "
                                                "name (hil sim --semantics); for a new part, its free bus ID")
    parser.add_argument("--control", required=True, metavar="ENDPOINT", help="the `control` line hil sim printed")
    parser.add_argument("--with", dest="with_", metavar="CATALOG_PART", help="swap: the part put in its place")
    parser.add_argument("--new", metavar="CATALOG_PART", help="plug: a new part (with --parent and --port)")
    parser.add_argument("--parent", help="plug --new: the part it hangs on (name or ID)")
    parser.add_argument("--port", help="plug --new: the parent's free port")
    parser.add_argument("--boot-s", type=float, help="reboot: how long it stays silent (default 0.5)")
    parser.add_argument("--bitflip", type=float, help="noise: probability of a flipped bit, per bit (0 ends it)")
    parser.add_argument("--for", dest="for_s", type=float, help="noise: for this long (s; default: until changed)")
    parser.add_argument("--keys", metavar="DIR", help="the key directory when hil sim serves the control with --keys")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")


def run_fault(args: argparse.Namespace) -> int:
    """``hil sim fault ACTION PART --control ENDPOINT``: one request, the answer printed as a JSON line."""
    import json

    from .control import ControlError, send_fault

    payload: dict = {}
    if args.part is not None:
        payload["part"] = int(args.part) if args.part.isdigit() else args.part
    for key, value in (("with", args.with_), ("new", args.new), ("parent", args.parent), ("port", args.port),
                       ("boot_s", args.boot_s), ("bitflip", args.bitflip), ("for_s", args.for_s)):
        if value is not None:
            payload[key] = int(value) if key == "parent" and value.isdigit() else value
    security = None
    if args.keys:
        from hil.bridge.security import Security

        security = Security.load(args.keys)
        security.check_client()
    try:
        reply = send_fault(args.control, args.action, payload, timeout_s=args.timeout, security=security)
    except ControlError as exc:
        raise ValueError(f"hil sim fault {args.action}: refused: {exc}"
                         + (f" (field {exc.field})" if exc.field else "")) from None
    except ConnectionError as exc:
        raise ValueError(str(exc)) from None
    print(json.dumps(reply), flush=True)
    return 0


class _SimParser(argparse.ArgumentParser):
    """``hil sim ASSEMBLY ...`` serves; ``hil sim fault ...`` talks to one that serves. The first word decides
    (no assembly is called ``fault``), which argparse's subparsers cannot express beside a positional."""

    fault_parser: argparse.ArgumentParser

    def parse_known_args(self, args=None, namespace=None):
        if args and args[0] == "fault":
            return self.fault_parser.parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def register(sub) -> None:
    """``hil sim``: the device side's one subcommand (and ``hil sim fault``, its live control's client)."""
    sim = sub.add_parser("sim", help="serve a virtual bus device on a pty or TCP (hil sim fault ...: unplug, plug, "
                                     "reboot, swap a part of one that serves with --control)",
                         epilog="hil sim fault {unplug,plug,reboot,swap,noise,overload,status} [PART] --control EP "
                                "[--with CATALOG_PART] [--new CATALOG_PART --parent P --port PORT] [--bitflip R "
                                "--for S]: see hil sim fault --help")
    add_arguments(sim)
    sim.set_defaults(func=run)
    fault = argparse.ArgumentParser(prog="hil sim fault", description="send a fault to a running hil sim (started "
                                                                      "with --control ENDPOINT)")
    add_fault_arguments(fault)
    fault.set_defaults(func=run_fault)
    sim.__class__ = _SimParser  # the parser argparse made, taught the one extra word
    sim.fault_parser = fault
