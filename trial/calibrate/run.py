"""``hil calibrate ring``: the calibration run on the robot a profile opens (real, mixed or virtual).

The robot turns in place slowly (and, where the rig asks, drives back and forth along its start heading),
recording every ring reading with its odometry pose into calibration.mcap, then the fit runs on that log
(trial/calibrate/fit.py) exactly as ``hil calibrate fit`` would on a log brought from the robot's computer.
A virtual robot (a sim:// bus) is stood in the rig: the rig becomes its map and its start its pose.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from .log import META, RING, CalibrationWriter
from .rig import Rig, rig_map_text

SETTLE_S = 0.5  # still at the start and between moves: the first readings see the rig from the start pose
STEP_PAUSE_S = 0.5  # the turn goes in steps of rig.step_deg with a still pause after each: a reading taken while
# turning was measured up to one ring period before the pose read with it (1 deg at 10 deg/s, several cm of range
# at a slant), so the noise fit uses only readings of a still robot ("still" in the log)


def virtual_bus(bus: str, rig: Rig, out: Path) -> str:
    """A sim:// bus stood in the rig (its map, its start pose); any other bus is returned as it is."""
    if not bus.startswith("sim://"):
        return bus
    map_path = out / "rig_map.yaml"
    map_path.write_text(rig_map_text(rig))
    x, y, yaw = rig.start
    extra = f"map={map_path}&pose={x},{y},{yaw}"
    return bus + ("&" if "?" in bus else "?") + extra


def ring_meta(robot: Any) -> dict[str, Any] | None:
    """The ring's identity, params and placement in the base frame (None: the robot has no range ring)."""
    import numpy as np

    from hil.runtime.model import create_data, forward_kinematics
    from hil.runtime.robot.sensors import RANGE_RING, RangeRing

    ring = next((s for s in robot.sensors.values() if isinstance(s, RangeRing)), None)
    if ring is None:
        return None
    part = robot.virtual.parts[ring.part_key]
    desc = part.descriptor
    sensor = next(s for s in desc.sensors if s.kind == RANGE_RING and s.params.get("registers"))
    model = robot.model
    index = next(i for i, k in enumerate(model.links) if k.bus_id == ring.part_key and k.body == sensor.body)
    placements = forward_kinematics(model, create_data(model), np.zeros(model.nq))
    base, ring_frame = placements[0], placements[index]
    rotation = base.rotation.T @ ring_frame.rotation
    translation = base.rotation.T @ (ring_frame.translation - base.translation)
    counters = sensor.params.get("invalid_counters") or {}
    return {"name": ring.name, "part": desc.name, "serial": part.serial_number, "bus_id": ring.part_id,
            "sensor": sensor.name, "params": {k: v for k, v in sensor.params.items()},
            "ring_in_base": {"rotation": rotation.tolist(), "translation": translation.tolist()},
            "counters": {cause: [desc.register(reg).address, desc.register(reg).size]
                         for cause, reg in counters.items()}}


def read_counters(ring: Any, counters: dict[str, list[int]]) -> dict[str, int]:
    if not counters or ring.host is None:
        return {}
    return {cause: int.from_bytes(ring.host.read(ring.part_id, address, size), "little")
            for cause, (address, size) in counters.items()}


def record_run(robot: Any, rig: Rig, path: Path, robot_name: str,
               progress: Callable[[str], None] = lambda line: None) -> int:
    """Drive the rig's moves and record every ring update; the number of readings recorded."""
    meta = ring_meta(robot)
    if meta is None:
        raise ValueError(f"{robot_name} has no range ring: nothing to calibrate")
    ring = robot.sensors[meta["name"]]
    hz = float(meta["params"].get("update_hz", 10.0))
    plan = _plan(rig)
    total = plan[-1][0]
    writer = CalibrationWriter(path)
    try:
        writer.write(META, 0.0, {"robot": robot_name, "rig": rig.source, "ring": meta, "hz": hz})
        start = robot.clock.now()
        x0, y0, yaw0 = robot.base.odometry  # the rig's start (a mixed robot's odometry starts at start_pose)
        c0, s0 = math.cos(yaw0), math.sin(yaw0)
        shown, moved_at = -1, 0.0
        for tick in robot.loop(hz=hz):
            t = tick.time - start
            v, w = _command(plan, t)
            if v or w:
                moved_at = t
            robot.base.drive(v, w)
            ox, oy, oyaw = robot.base.odometry
            dx, dy = ox - x0, oy - y0
            x, y, yaw = c0 * dx + s0 * dy, -s0 * dx + c0 * dy, oyaw - yaw0  # in the frame of the start
            sample = {"t": t, "x": x, "y": y, "yaw": yaw, "ranges": ring.real_ranges,
                      "still": t - moved_at > 2.0 / hz, "counters": read_counters(ring, meta["counters"])}
            if ring.virtual_ranges is not None:  # a mixed robot: the shadow (twin) ring beside the real one
                sample["virtual"] = list(ring.virtual_ranges)
            writer.write(RING, t, sample)
            if int(10 * t / total) != shown:
                shown = int(10 * t / total)
                progress(f"calibrate: {min(100, 10 * shown)} % ({t:.0f} of {total:.0f} s), "
                         f"{writer.samples} readings")
            if t >= total:
                break
        robot.base.stop()
        robot.cycle()
    finally:
        writer.close()
    return writer.samples


def _plan(rig: Rig) -> list[tuple[float, float, float]]:
    """(end time s, v m/s, w rad/s) of each move: settle, the turn, settle, back and forth, settle."""
    moves = [(SETTLE_S, 0.0, 0.0)]
    steps = max(1, round(rig.turns * 360.0 / rig.step_deg))
    for _ in range(steps):
        moves += [(rig.turn_s / steps, 0.0, rig.turn_rate_rad_s), (STEP_PAUSE_S, 0.0, 0.0)]
    leg = rig.drive_distance_m / rig.drive_speed_m_s if rig.drive_times else 0.0
    for _ in range(rig.drive_times):
        moves += [(leg, -rig.drive_speed_m_s, 0.0), (SETTLE_S, 0.0, 0.0), (leg, rig.drive_speed_m_s, 0.0),
                  (SETTLE_S, 0.0, 0.0)]
    out, t = [], 0.0
    for duration, v, w in moves:
        t += duration
        out.append((t, v, w))
    return out


def _command(plan: list[tuple[float, float, float]], t: float) -> tuple[float, float]:
    for end, v, w in plan:
        if t < end:
            return v, w
    return 0.0, 0.0


def calibrate_ring(profile: str | Path, rig: Rig, out: Path, *, bus: str | None = None,
                   progress: Callable[[str], None] = print) -> Path:
    """Open the robot, record the run into out/calibration.mcap; its path."""
    from hil.runtime.robot import Robot
    from hil.runtime.robot.profile import load_profile

    out.mkdir(parents=True, exist_ok=True)
    loaded = load_profile(profile, bus=bus)
    url = virtual_bus(loaded.bus, rig, out)
    robot = Robot.open(loaded, bus=url)
    path = out / "calibration.mcap"
    try:
        n = record_run(robot, rig, path, Path(str(loaded.source)).stem, progress)
    finally:
        robot.close()
    progress(f"calibrate: {n} readings in {path}")
    return path
