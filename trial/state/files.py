"""The ``states/`` folder of a recorded trial.

    states/index.json            the fingerprint, every state kept ({t, file, why}), the journals' lengths
    states/state_000005000.msgpack   one state (t in ms in the name): world, host, crowd, task; msgpack
    states/state_000005000.bullet    pybullet's part of it (p.saveBullet)
    states/commands.msgpack      every bus cycle's time and the joint commands set since the one before
    states/crowd_ticks.msgpack   every tick the world sent the crowd (t, robot, people's actual states)

The journals are streams of msgpack objects appended at every save (and when the trial ends), so a killed trial
keeps what it had saved. Nothing here is pickle: a state file is data, read with msgpack's strict defaults.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import msgpack

STATES = "states"
INDEX = "index.json"
COMMANDS = "commands.msgpack"
CROWD_TICKS = "crowd_ticks.msgpack"


def state_name(t_s: float, why: str) -> str:
    ms = round(t_s * 1000)
    return f"state_{ms:09d}" if why in ("start", "periodic") else f"state_{ms:09d}_{why}"


def write_state(folder: Path, name: str, state: dict[str, Any]) -> Path:
    path = folder / f"{name}.msgpack"
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgpack.packb(state, use_bin_type=True))
    os.replace(tmp, path)
    return path


def read_state(path: Path) -> dict[str, Any]:
    return msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)


def append_stream(path: Path, items: list) -> None:
    if not items:
        return
    with open(path, "ab") as f:
        packer = msgpack.Packer(use_bin_type=True)
        for item in items:
            f.write(packer.pack(item))


def read_stream(path: Path, count: int | None = None) -> list:
    """The first ``count`` objects of a journal (all with None); a torn last object is left out."""
    if not path.exists():
        return []
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 31)
    unpacker.feed(path.read_bytes())
    out = []
    try:
        for item in unpacker:
            out.append(item)
            if count is not None and len(out) >= count:
                break
    except (msgpack.OutOfData, ValueError):
        pass
    return out


def write_index(folder: Path, index: dict[str, Any]) -> None:
    tmp = folder / (INDEX + ".tmp")
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / INDEX)


def read_index(folder: Path) -> dict[str, Any]:
    return json.loads((folder / INDEX).read_text(encoding="utf-8"))


# --- the world a state belongs to ------------------------------------------------------------------------------
def _file_digest(path: Any) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(str(path)).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def fingerprint(spec, task, embodied) -> dict[str, Any]:
    """What a state must agree with to be put into a world: the robot (its parts: IDs, serials, descriptors), the
    map (its file), the crowd (rates, scenario, density, start band, seed), hil's version, the merge setting."""
    from ..versions import versions

    parts = sorted((part.id, part.serial_number, repr(getattr(part, "descriptor", None))) for part in embodied.parts)
    robot_digest = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    crowd = {"rates": [_file_digest(p) for p in task.rates], "scenario": _file_digest(task.scenario),
             "background": task.background, "scale": spec.crowd_scale, "start": spec.crowd_start, "seed": spec.seed}
    return {"robot": f"{spec.robot} {robot_digest}", "map": f"{task.map_name} {_file_digest(task.map_path)}",
            "crowd": hashlib.sha256(json.dumps(crowd, sort_keys=True).encode()).hexdigest()[:16],
            "crowd_detail": crowd, "hil": versions().get("hil"), "merge_fixed": merge_setting(embodied)}


def merge_setting(embodied) -> bool:
    """Whether the robot's fixed links were merged into one pybullet link (issue 24's ``merge_fixed``)."""
    return bool(getattr(embodied.robot, "merge_fixed", False))


def differences(saved: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """What differs between a state's fingerprint and this world's, in words."""
    out = []
    for key in ("robot", "map", "crowd", "hil", "merge_fixed"):
        if saved.get(key) != here.get(key):
            if key == "crowd":
                a, b = saved.get("crowd_detail") or {}, here.get("crowd_detail") or {}
                what = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
                out.append(f"crowd ({', '.join(what) or 'its files'}: {[a.get(k) for k in what]} in the state, "
                           f"{[b.get(k) for k in what]} here)")
            else:
                out.append(f"{key} ({saved.get(key)!r} in the state, {here.get(key)!r} here)")
    return out
