"""A virtual robot's world saved whole and put back: physics, people's bodies, every part's firmware.

What pybullet keeps and what it does not (measured, tests/test_state.py and docs/ARCHITECTURE.md "Rewind"):

- ``p.saveBullet(file)`` / ``p.restoreState(fileName=file)`` restore every multibody's base and joint positions
  and velocities and the contact manifolds (matched by broadphase uid: their warm start), bit for bit, *into a
  world holding the same bodies created in the same order*. So the people's bodies are re-created here from
  their spawn/remove history (``Pedestrians.history``), which reproduces pybullet's body ids, its LIFO free list
  and the broadphase uids, before the file is loaded;
- it does not keep the joint motors (targets, forces: they are re-commanded from each servo's control table,
  a latched hold at the position it latched at) nor the motors' last applied torque (the position drives read
  it: saved here and handed to the first step after a restore);
- restoring perturbs the next steps by ~1e-14 when motors act beside contacts (a motor's solver state that no
  API reaches), so :func:`save_world` puts the running world through the very restore a later resume does:
  the original run and every run resumed from its state then agree bit for bit.

Everything else that makes the world go on is plain data taken from the firmware: control tables (bytes),
pending RegWrites, watchdog timers and latches, the drives' torque filter, the ring's generator and counters,
the interlock, the crowd link's last answer and what it has not yet handed to the log. The crowd process's own
part goes over the bridge (bridge/crowd_state.py).
"""
from __future__ import annotations

import zlib
from typing import Any

import pybullet as p

from ..part import PartFirmware
from .sensing import ContactFirmware, RangeRingFirmware
from .servo import JointServo, PositionDrives

STATE_FORMAT = 1


class StateError(RuntimeError):
    """A saved state cannot be put into this world (another robot, map, crowd...); the message says what."""


def history_of(embodied) -> list[list] | None:
    """The record of every body ``embodied``'s people had (:attr:`Pedestrians.history`; started on the first call,
    which must come before any tick), or None without a crowd."""
    crowd = embodied.crowd
    if crowd is None:
        return None
    return crowd.pedestrians.record_history()


# --- saving ------------------------------------------------------------------------------------------------------
def save_world(embodied, bullet_path: str, *, roundtrip: bool = True) -> dict[str, Any]:
    """Write pybullet's state to ``bullet_path`` and return the rest as plain data (msgpack-able). Called between
    physics steps (under ``embodied.device.lock`` when another thread may step). The world is put back from the
    file it just wrote (see the module's docstring), so it continues exactly as a resumed one will
    (``roundtrip=False``: left as it is, for a run whose own past had no restore there to agree with)."""
    world = embodied.world
    client = world.client
    parts = save_parts(embodied)
    p.saveBullet(str(bullet_path), physicsClientId=client)
    if roundtrip:
        p.restoreState(fileName=str(bullet_path), physicsClientId=client)
    crowd = embodied.crowd
    history = history_of(embodied)
    return {"format": STATE_FORMAT, "steps": world.steps, "time_step_s": world.time_step_s,
            "bodies": list(history) if history is not None else [], "parts": parts,
            "people": crowd.save_state() if crowd is not None else None, "check": bodies_state(embodied)}


def save_parts(embodied) -> list[dict[str, Any]]:
    """Every part's control table and firmware state, in the device's order."""
    out = []
    for part in embodied.parts:
        entry: dict[str, Any] = {"id": part.id, "serial": part.serial_number,
                                 "memory": zlib.compress(bytes(part.memory.data), 1),  # descriptor blocks: 10x
                                 "time_s": part.time_s, "pending": list(part.pending) if part.pending else None}
        if isinstance(part, JointServo):
            entry["servo"] = part.save_state()
        elif isinstance(part, RangeRingFirmware):
            ring = part.model.save_state()
            entry["ring"] = {"rng": plain_state(ring["rng"]), "counters": ring["counters"]}
        elif isinstance(part, ContactFirmware):
            entry["interlock"] = [part.interlock.pressed, part.interlock.trips]
        out.append(entry)
    faults = getattr(embodied.device, "faults", None)
    if faults is not None and hasattr(faults, "save_state"):
        out.append({"faults": plain_state(faults.save_state())})
    return out


# --- restoring ---------------------------------------------------------------------------------------------------
def restore_world(embodied, state: dict[str, Any], bullet_path: str) -> None:
    """Put a saved world back into ``embodied``, freshly built the same way and not yet stepped; StateError if
    it cannot be (another format, time step, or a world that has already run)."""
    world = embodied.world
    if state.get("format") != STATE_FORMAT:
        raise StateError(f"state format {state.get('format')!r}; this hil reads format {STATE_FORMAT}")
    if abs(state["time_step_s"] - world.time_step_s) > 1e-15:
        raise StateError(f"the state's physics step is {state['time_step_s']:g} s, this world's {world.time_step_s:g} s")
    if world.steps != 0:
        raise StateError(f"a state goes into a world that has not run yet; this one is at step {world.steps}")
    history = history_of(embodied)
    if state["bodies"]:
        if history is None:
            raise StateError("the state has people and this world has no crowd")
        embodied.crowd.pedestrians.replay(state["bodies"])
    p.restoreState(fileName=str(bullet_path), physicsClientId=world.client)
    world.steps = int(state["steps"])
    check = state.get("check")
    if check is not None:
        here = bodies_state(embodied)
        off = [name for name in check if name not in here or
               max(abs(a - b) for a, b in zip(check[name], here[name])) > 1e-9]
        if off or set(here) != set(check):
            raise StateError(f"the restored bodies are not where they were saved: {', '.join(off[:5]) or 'others'}")
    if state.get("people") is not None and embodied.crowd is not None:
        embodied.crowd.restore_state(state["people"])
    restore_parts(embodied, state["parts"])


def restore_parts(embodied, saved: list[dict[str, Any]]) -> None:
    """Control tables and firmware state back as saved, motors re-commanded from them (also after a host has
    scanned and brought the robot up over a restored world: its reads and writes are undone here)."""
    by_serial = {(entry["id"], entry["serial"]): entry for entry in saved if "id" in entry}
    parts: list[PartFirmware] = list(embodied.parts)
    missing = [f"id {part.id}" for part in parts if (part.id, part.serial_number) not in by_serial]
    if missing or len(by_serial) != len(parts):
        raise StateError(f"the state's parts differ from this robot's (not in the state: {', '.join(missing) or '-'};"
                         f" the state has {len(by_serial)} parts, the robot {len(parts)})")
    applied: dict[int, float] = {}
    for part in parts:
        entry = by_serial[(part.id, part.serial_number)]
        part.memory.data[:] = zlib.decompress(entry["memory"])
        part.time_s = entry["time_s"]
        part.pending = (entry["pending"][0], bytes(entry["pending"][1])) if entry["pending"] else None
        if isinstance(part, JointServo):
            applied[part.joint.index] = part.restore_state(entry["servo"])
        elif isinstance(part, RangeRingFirmware):
            part.model.restore_state({"rng": from_plain(entry["ring"]["rng"]), "counters": entry["ring"]["counters"]})
        elif isinstance(part, ContactFirmware):
            part.interlock.pressed, part.interlock.trips = bool(entry["interlock"][0]), int(entry["interlock"][1])
    faults = getattr(embodied.device, "faults", None)
    saved_faults = next((entry["faults"] for entry in saved if "faults" in entry), None)
    if faults is not None and saved_faults is not None and hasattr(faults, "restore_state"):
        faults.restore_state(from_plain(saved_faults))
    if applied:
        PositionDrives.of(embodied.world, embodied.robot).applied_once = applied


# --- what a test compares -----------------------------------------------------------------------------------------
def bodies_state(embodied) -> dict[str, list[float]]:
    """Every body's base pose and velocity and every joint's position and velocity, by a stable name
    (robot joints by part and joint, people by person id): what restoring must put back."""
    world, robot = embodied.world, embodied.robot
    client = world.client
    out: dict[str, list[float]] = {}
    (pos, orn), (lin, ang) = p.getBasePositionAndOrientation(robot.body_id, physicsClientId=client), \
        p.getBaseVelocity(robot.body_id, physicsClientId=client)
    out["robot"] = [*pos, *orn, *lin, *ang]
    for j in range(p.getNumJoints(robot.body_id, physicsClientId=client)):
        q, qd, _, _ = p.getJointState(robot.body_id, j, physicsClientId=client)
        out[f"robot.joint{j}"] = [q, qd]
    if embodied.crowd is not None:
        for pid, body in sorted(embodied.crowd.pedestrians.bodies.items()):
            (pos, orn), (lin, ang) = p.getBasePositionAndOrientation(body, physicsClientId=client), \
                p.getBaseVelocity(body, physicsClientId=client)
            out[f"person{pid}"] = [*pos, *orn, *lin, *ang]
    return out


def registers_state(embodied) -> dict[int, bytes]:
    """Every part's control table bytes by ID."""
    return {part.id: bytes(part.memory.data) for part in embodied.parts}


# --- generator states as msgpack-able data (PCG64's state is a 128-bit integer) ------------------------------------
BIG = "__int__"


def plain_state(value: Any) -> Any:
    """A generator's state with integers beyond 64 bits as {"__int__": "digits"} and tuples as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, (float, str, bytes)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 63) else {BIG: str(value)}
    if isinstance(value, dict):
        return {str(k): plain_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return {"__tuple__": [plain_state(v) for v in value]} if isinstance(value, tuple) else \
            [plain_state(v) for v in value]
    raise TypeError(f"cannot save a {type(value).__name__} in a state")


def from_plain(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {BIG}:
            return int(value[BIG])
        if set(value) == {"__tuple__"}:
            return tuple(from_plain(v) for v in value["__tuple__"])
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    return value
