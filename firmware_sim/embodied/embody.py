"""The virtual robot in its world: an assembly's parts given a pybullet body, sensors and a clock.

``embody(assembly)`` builds the world (floor, optional map), builds the robot from the parts' descriptors and
port tables, swaps each part's firmware for its world-backed version (servos and wheels drive joints, the ring
casts rays, contact sensors read contact points, the bumper stops the wheels), and returns a VirtualBusDevice
serving those parts, with its time source:

- ``clock="real"``: the world is paced to wall time; before each instruction (and, when served, whenever the
  line is quiet) it is stepped toward now, at most ``MAX_CATCH_UP_S`` behind (a stalled process skips the
  rest and counts it in ``Pacer.skipped_s`` rather than spiralling); served on a pty or TCP it steps one
  physics step at a time between looks at the line, so a world that falls behind never delays a reply;
- ``clock="sim"``: the world stands still until someone calls ``world.advance_to`` / ``world.step`` (the clock
  master of the lockstep protocol); the device reads the world's time.

A robot on several buses whose main bus is this world gives the other buses' parts bodies here as *mirrors*
(``EmbodiedRobot.mirror_parts``, world/mirror.py), and the host writes the real joints' readings into them after
each bus cycle (``set_mirrored_positions``), so the world's geometry, mass and contacts stay the real robot's.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pybullet as p

from hil.devices.descriptor import PartDescriptor

from ..assembly import Assembly
from ..bus_device import VirtualBusDevice
from ..faults import FaultInjector
from ..part import PartFirmware
from ..servo import ServoFirmware
from ..timing import WireTiming
from ..world import RobotBody, RobotBuildError, World, build_robot, load_map
from ..world.world import STEP_EPSILON
from ..world.mirror import MirrorBody, build_mirror
from .adopt import adopt
from .reembody import install as install_reembody
from .camera import CameraError, CameraFirmware, silence
from .sensing import ContactFirmware, RangeRingFirmware, part_seed
from .servo import Interlock, JointServo

if TYPE_CHECKING:
    from hil.bridge.security import Security

MAX_CATCH_UP_S = 0.25
CLOCKS = ("real", "sim")
CROWD_MODES = ("lockstep", "realtime", "pipelined")  # pipelined: lockstep, one-tick lag (crowd_bridge.py)


class Pacer:
    """Keeps a world at wall time: ``pacer(now)`` steps it toward ``now - start``.

    ``max_steps`` bounds one call's work. A served device (serve.py) steps one piece at a time and looks at the
    line between pieces, so an instruction is answered after at most one physics step even when the world has
    fallen behind (a loaded machine, a heavy map): a real part answers in microseconds whatever its
    surroundings do, and a host's 25 ms reply timeout must not depend on how fast the physics runs. Returns
    True while the world is still behind (call again soon)."""

    def __init__(self, world: World, start_s: float):
        self.world, self.start_s = world, start_s
        self.skipped_s = 0.0

    def __call__(self, now_s: float, max_steps: int | None = None) -> bool:
        world = self.world
        target = now_s - self.start_s - self.skipped_s
        behind = target - world.time_s
        if behind > MAX_CATCH_UP_S:
            self.skipped_s += behind - MAX_CATCH_UP_S
            target = world.time_s + MAX_CATCH_UP_S
        world.advance_to(target, max_steps)
        return target - world.time_s >= world.time_step_s * (1.0 - STEP_EPSILON)


@dataclass
class EmbodiedRobot:
    world: World
    robot: RobotBody
    device: VirtualBusDevice
    parts: tuple[PartFirmware, ...]
    interlock: Interlock
    clock: str
    pacer: Pacer | None = None
    _lockstep: tuple | None = None
    crowd: object | None = None  # the CrowdBridge (crowd_bridge.attach_crowd) when a crowd is connected
    cameras: dict | None = None  # part ID -> CameraFirmware (camera.py): frames on demand, beside the bus
    cameras_gone: dict[int, str] = field(default_factory=dict)  # part ID -> why its camera is gone (a swap)
    seed: int = 0  # the world's seed (a camera swapped in draws its depth noise from it and its serial)
    watchdog_s: float = 0.5  # the servos' default Bus Watchdog (a swapped-in servo gets it too: reembody.py)

    # --- cameras (camera.py): pixels never go over the bus -------------------------------------------------------
    def camera_frame(self, part_id: int, name: str | None = None, observe: bool = False) -> dict:
        """The camera's frame of the current frame period (rendered now if none was yet), taken under the
        device's lock so no step runs mid-render. CameraError names the camera and why it cannot give one.
        ``observe``: for a recording, which changes nothing the controller's frames use (camera.py)."""
        with self.device.lock:
            camera = (self.cameras or {}).get(part_id)
            if camera is None:
                raise CameraError(self.cameras_gone.get(part_id) or f"part {part_id} is not a camera of this world "
                                  f"(cameras: {', '.join(map(str, sorted(self.cameras or {}))) or 'none'})")
            silent = silence(self.device, part_id)
            if silent:
                raise CameraError(f"{camera.camera(name).label} gives no frames: {silent}")
            return camera.frame(name, observe)

    def lockstep(self, stall_timeout_s: float | None = None):
        """The lockstep clock of this world (created on first use): (core, condition). The world is the master;
        advancing time steps it, under the device's lock so no instruction sees a world mid-step."""
        if self._lockstep is None:
            from hil.bridge.lockstep import DEFAULT_STALL_TIMEOUT_S, LockstepCore

            def advance(t_s: float) -> None:
                with self.device.lock:
                    self.world.advance_to(t_s)

            core = LockstepCore(advance, stall_timeout_s or DEFAULT_STALL_TIMEOUT_S, start_s=self.world.time_s)
            self._lockstep = (core, threading.Condition())
        return self._lockstep

    # --- mirrored parts (world/mirror.py): parts on the host's other buses, given bodies in this world -----------
    def mirror_parts(self, name: str, parts: Mapping[int, PartDescriptor], children: Mapping[int, Mapping[str, int]],
                     root: int, mount: tuple[int, str]) -> MirrorBody:
        """Give the parts of another bus bodies in this world, hung at ``mount`` = (part ID, port name) of this
        robot or of an earlier mirror (IDs must not collide with this robot's: the host's robot-wide IDs don't).
        ``parts``: ID -> descriptor as read from the real parts; ``children``: ID -> {port name: child ID}.
        Taken under the device's lock, so no instruction and no clock master sees half a mirror."""
        with self.device.lock:
            robot = self.robot
            carriers = (robot, *robot.mirrors)
            clash = sorted(set(parts) & {pid for body in carriers for pid in body.parts})
            if clash:
                raise RobotBuildError(f"mirror {name!r}: part IDs {', '.join(map(str, clash))} are already in the "
                                      "world")
            carrier = next((body for body in carriers if mount[0] in body.parts), None)
            if carrier is None:
                raise RobotBuildError(f"mirror {name!r}: the mount part {mount[0]} is neither a part of the world's "
                                      "robot nor of a mirror")
            mirror = build_mirror(carrier, parts, children, root, tuple(mount), name=name,
                                  others=tuple(b for b in carriers if b is not carrier))
            robot.mirrors.append(mirror)
            return mirror

    def set_mirrored_positions(self, positions: Mapping[tuple[int, str], float]) -> None:
        """Move mirrored joints to the positions read from their real parts: (part ID, joint name) -> rad or m.
        Written under the device's lock, between two world steps (and never mid-step under the sim clock's
        master); a key no mirror has is a KeyError naming it, and nothing is applied."""
        by_mirror: dict[int, dict[tuple[int, str], float]] = {}
        with self.device.lock:
            mirrors = self.robot.mirrors
            for key, q in positions.items():
                k = next((k for k, m in enumerate(mirrors) if key[0] in m.parts), None)
                if k is None:
                    raise KeyError(f"no mirrored part has ID {key[0]} (joint {key[1]!r})")
                mirrors[k].joint(*key)  # KeyError for a joint the part does not have
                by_mirror.setdefault(k, {})[key] = q
            for k, values in by_mirror.items():
                mirrors[k].set_positions(values)

    def robot_pose(self) -> dict:
        """The robot base's ground truth now: {x, y, yaw, vx, vy} (m, rad, m/s in the world frame). Read it between
        steps (under ``device.lock`` when another thread may step the world)."""
        body = self.robot
        (x, y, _), quat = body.base_pose()
        (vx, vy, _), _ = p.getBaseVelocity(body.body_id, physicsClientId=body.client)
        return {"x": x, "y": y, "yaw": yaw_of(quat), "vx": vx, "vy": vy}

    def close(self) -> None:
        if self.crowd is not None:
            self.crowd.close()
        self.world.close()

    def __enter__(self) -> "EmbodiedRobot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def embody(assembly: Assembly, *, clock: str = "real", gui: bool = False, map_name: str | None = None,
           base_xy_yaw: tuple[float, float, float] = (0.0, 0.0, 0.0), seed: int = 0, watchdog_s: float = 0.5,
           timing: WireTiming | None = None, faults: FaultInjector | None = None,
           time_step_s: float | None = None, crowd_endpoint: str | None = None, crowd_period_s: float = 0.1,
           crowd_timeout_s: float = 10.0, security: Security | None = None,
           crowd_mode: str = "lockstep", merge_fixed: bool = True) -> EmbodiedRobot:
    """``crowd_endpoint``: a served crowd (``hil crowd --serve``) ticked every ``crowd_period_s`` of world time
    (see crowd_bridge.py); its pedestrians live in this world and the ring sees them. ``security``: a
    :class:`bridge.security.Security` that CURVE-encrypts the crowd link (for a crowd served with ``--keys``); it
    is checked before the world is built, so bad keys cost nothing. ``merge_fixed``: bodies joined by fixed joints
    are one pybullet link (world/merge.py); False builds one link per body (for comparisons)."""
    if security is not None:
        security.check_client()
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, not {clock!r}")
    _check_crowd_mode(crowd_mode, clock)
    world = World(gui=gui, **({"time_step_s": time_step_s} if time_step_s else {}))
    try:
        if map_name:
            world.add_map(load_map(map_name))
        robot = build_robot(world, assembly.parts, base_xy_yaw, link_friction=_frictions(assembly.parts),
                            merge_fixed=merge_fixed)
        interlock = Interlock()
        parts = _embody_parts(world, robot, assembly.parts, interlock, seed, watchdog_s)
    except BaseException:
        world.close()
        raise
    if clock == "real":
        start = time.perf_counter()
        pacer = Pacer(world, start)
        device = VirtualBusDevice(parts, timing=timing, faults=faults, clock=time.perf_counter, ticker=pacer,
                                  tick_period_s=world.time_step_s)
    else:
        pacer = None
        device = VirtualBusDevice(parts, timing=timing, faults=faults, clock=lambda: world.time_s)
    embodied = EmbodiedRobot(world, robot, device, parts, interlock, clock, pacer, watchdog_s=watchdog_s, seed=seed)
    install_reembody(embodied)  # a part swapped on the bus (hotplug.swap) takes its physics in the world
    embodied.cameras = _attach_cameras(embodied, seed)
    if gui:  # the viewer's camera follows the robot (read between steps, in the stepping thread)
        world.camera_target = lambda: tuple(embodied.robot_pose()[k] for k in ("x", "y", "yaw"))
    if crowd_endpoint:
        if crowd_mode == "realtime":  # crowd_realtime.py: streams, the world never waits for the crowd
            from .crowd_realtime import attach_realtime_crowd as attach_crowd
        else:
            from .crowd_bridge import attach_crowd

        extra = {"pipelined": True} if crowd_mode == "pipelined" else {}
        try:
            attach_crowd(embodied, crowd_endpoint, period_s=crowd_period_s, timeout_s=crowd_timeout_s,
                         security=security, **extra)
        except BaseException:
            embodied.close()
            raise
    return embodied


def _attach_cameras(embodied: EmbodiedRobot, seed: int) -> dict[int, CameraFirmware]:
    """The camera parts, given the world, the robot and the crowd (looked up when a frame is made: it attaches
    after the parts). Their bus firmware is kept as it is (a camera has no registers beyond the common ones)."""
    from ..world.figures import Gait

    gait = Gait(seed)  # one per world: both eyes see the same people in the same step
    cameras = {}
    for part in embodied.parts:
        desc = getattr(part, "descriptor", None)
        if desc is not None and any(s.kind == "camera" for s in desc.sensors):
            camera = adopt(CameraFirmware, part).attach(embodied.world, embodied.robot,
                                                        part_seed(seed, part.serial_number),
                                                        lambda: embodied.crowd, gait)
            cameras[part.id] = camera
    return cameras


def _check_crowd_mode(crowd_mode: str, clock: str) -> None:
    """Real-time streaming only beside a world on the real clock: a sim-clock world is deterministic only when the
    crowd is ticked in lockstep with it."""
    if crowd_mode not in CROWD_MODES:
        raise ValueError(f"crowd_mode must be one of {', '.join(CROWD_MODES)}, not {crowd_mode!r}")
    if crowd_mode == "realtime" and clock != "real":
        raise ValueError(f"crowd_mode=realtime needs clock=real, not clock={clock}: a world on the simulator's "
                         "clock is deterministic only with its crowd in lockstep (crowd_mode=lockstep, the default)")


def _frictions(parts: Iterable[PartFirmware]) -> dict[tuple[int, str], float]:
    return {(part.id, body.name): body.friction for part in parts if hasattr(part, "descriptor")
            for body in part.descriptor.bodies if body.friction is not None}


def _embody_parts(world: World, robot: RobotBody, parts: Iterable[PartFirmware], interlock: Interlock, seed: int,
                  watchdog_s: float) -> tuple[PartFirmware, ...]:
    out: list[PartFirmware] = []
    wheels: list[JointServo] = []
    contacts: list[ContactFirmware] = []
    for part in parts:
        desc = getattr(part, "descriptor", None)
        kinds = {s.kind for s in desc.sensors} if desc is not None else set()
        if isinstance(part, ServoFirmware) and desc is not None and desc.moving_joints:
            joint = robot.joint(part.id, desc.moving_joints[0].name)
            servo = adopt(JointServo, part).attach(world, robot, joint, watchdog_s, interlock)
            if desc.kind == "wheel":
                wheels.append(servo)
            out.append(servo)
        elif "range_ring" in kinds:
            out.append(adopt(RangeRingFirmware, part).attach(world, robot, part_seed(seed, part.serial_number)))
        elif "contact" in kinds:
            contact = adopt(ContactFirmware, part)
            contacts.append(contact)
            out.append(contact)
        else:
            out.append(part)
    for contact in contacts:  # after the wheels exist
        contact.attach(world, robot, interlock, wheels)
    return tuple(out)


def yaw_of(quat) -> float:
    """The yaw (rad) of a pybullet quaternion (x, y, z, w)."""
    x, y, z, w = quat
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
