"""The ``states/`` folder of a recorded trial.

    states/manifest.json         what a resume trusts: every file's size and SHA-256, each state's time (manifest.py)
    states/index.json            the fingerprint, every state kept ({t, file, why}), the journals' lengths
    states/state_000005000.msgpack   one state (t in ms in the name): world, host, crowd, task; msgpack
    states/state_000005000.bullet    pybullet's part of it (p.saveBullet)
    states/commands.msgpack      every bus cycle's time and the joint commands set since the one before
    states/crowd_ticks.msgpack   every tick the world sent the crowd (t, robot, people's actual states)

The journals are streams of msgpack objects appended at every save (and when the trial ends), so a killed trial
keeps what it had saved. Nothing here is pickle: a state file is data, read with msgpack's strict defaults, and
only after its size and hash matched the manifest. Every file is read as a regular file of bounded size (a
symlink to /dev/zero or a FIFO is refused, not read), and index.json is checked field by field: a folder that is
not what it should be is refused in one line naming the file and what is wrong (:class:`StatesError`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import msgpack

STATES = "states"
INDEX = "index.json"
COMMANDS = "commands.msgpack"
CROWD_TICKS = "crowd_ticks.msgpack"
MAX_INDEX_BYTES = 16 << 20  # index.json, manifest.json: a 240 s demo's are ~5 kB
STATE_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")  # a state's file name without its suffix: never a path


class StatesError(ValueError):
    """A ``states/`` folder (or a file in it) is not what a trial wrote; the message names the file and what."""


def state_name(t_s: float, why: str) -> str:
    ms = round(t_s * 1000)
    return f"state_{ms:09d}" if why in ("start", "periodic") else f"state_{ms:09d}_{why}"


def write_state(folder: Path, name: str, state: dict[str, Any]) -> bytes:
    """Write one state's msgpack (atomically); returns the bytes written (the manifest hashes them)."""
    data = msgpack.packb(state, use_bin_type=True)
    write_atomic(folder / f"{name}.msgpack", data)
    return data


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def unpack_state(data: bytes, path: Path) -> dict[str, Any]:
    """A state's msgpack (already checked against the manifest) as a dict; StatesError naming ``path``."""
    try:
        state = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise StatesError(f"{path}: not a saved state ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict):
        raise StatesError(f"{path}: not a saved state (a {type(state).__name__}, not a map)")
    return state


def pack_stream(items: list) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    return b"".join(packer.pack(item) for item in items)


def append_stream(path: Path, items: list) -> bytes:
    """Append ``items`` to a journal; returns the bytes appended (the manifest hashes them)."""
    data = pack_stream(items)
    if data:
        with open(path, "ab") as f:
            f.write(data)
    return data


def unpack_stream(data: bytes, path: Path, count: int | None = None) -> list:
    """The first ``count`` objects (all with None) of a journal's bytes (the length the manifest vouches for, so
    whole); StatesError naming ``path`` when they are not a stream of msgpack objects."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1 << 20))
    unpacker.feed(data)
    out: list = []
    try:
        while count is None or len(out) < count:
            out.append(unpacker.unpack())
    except msgpack.OutOfData:
        pass
    except (ValueError, msgpack.FormatError, msgpack.StackError) as exc:
        raise StatesError(f"{path}: not a journal of msgpack objects at object {len(out)} "
                          f"({type(exc).__name__}: {exc})") from None
    return out


def read_regular(path: Path, max_bytes: int, *, prefix: bool = False) -> bytes:
    """A regular file's bytes, at most ``max_bytes`` of them (StatesError for anything else: missing, a device,
    a FIFO, a folder, too large; ``prefix``: its first ``max_bytes``, whatever follows). Opened without blocking,
    so a FIFO is refused rather than waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise StatesError(f"{path} is missing") from None
    except OSError as exc:
        raise StatesError(f"{path}: cannot open it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise StatesError(f"{path} is not a regular file (a {_kind(mode)})")
        data = f.read(max_bytes if prefix else max_bytes + 1)
    if len(data) > max_bytes:
        raise StatesError(f"{path} is larger than {max_bytes:,} bytes")
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def write_index(folder: Path, index: dict[str, Any]) -> None:
    write_atomic(folder / INDEX, json.dumps(index, indent=1, sort_keys=True).encode("utf-8"))


def read_json(path: Path) -> Any:
    """A JSON file of ``states/`` (bounded, regular); StatesError naming it when it is not JSON."""
    try:
        return json.loads(read_regular(path, MAX_INDEX_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, StatesError):
            raise
        raise StatesError(f"{path}: not JSON ({exc})") from None


def read_index(folder: Path) -> dict[str, Any]:
    """``folder/index.json``, its fields checked (StatesError naming the file and the field)."""
    path = Path(folder) / INDEX
    index = read_json(path)
    if not isinstance(index, dict):
        raise StatesError(f"{path}: expected a JSON object, not {type(index).__name__}")
    check_states(index.get("states"), path, "states")
    for key in ("trial", "fingerprint", "resumed_from"):
        if index.get(key) is not None and not isinstance(index[key], dict):
            raise StatesError(f"{path}: field {key}: expected an object, not {index[key]!r:.60}")
    seconds(index.get("log_end_s"), path, "log_end_s", allow_none=True)
    return index


def check_states(states: Any, path: Path, field: str) -> list[dict[str, Any]]:
    """A list of kept states, each {t: seconds, file: a plain name, why: text}; StatesError naming the field."""
    if not isinstance(states, list):
        raise StatesError(f"{path}: field {field}: expected a list of states, not {states!r:.60}")
    for k, entry in enumerate(states):
        where = f"{field}[{k}]"
        if not isinstance(entry, dict):
            raise StatesError(f"{path}: field {where}: expected an object {{t, file, why}}, not {entry!r:.60}")
        seconds(entry.get("t"), path, f"{where}.t")
        name = entry.get("file")
        if not isinstance(name, str) or not STATE_NAME.fullmatch(name):
            raise StatesError(f"{path}: field {where}.file: expected a state's name in states/ (letters, digits, "
                              f"_), not {name!r:.60}")
        if not isinstance(entry.get("why"), str):
            raise StatesError(f"{path}: field {where}.why: expected text, not {entry.get('why')!r:.60}")
    return states


def seconds(value: Any, path: Path, field: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise StatesError(f"{path}: field {field}: expected seconds (a number >= 0), not {value!r:.60}")
    return float(value)


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
    """Whether the robot's fixed links were merged into one pybullet link (the world's ``merge_fixed``)."""
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
