"""Robot assemblies (config/robots/*.yaml) turned into the firmware of their parts.

An assembly lists parts by bus ID. A self-describing part names its catalog entry (``part:``) and, unless it
is the root on the host's connector, the part and port it hangs from; the virtual device writes the port
tables from that. A plain Dynamixel servo names its model (``model:``) and has no port table of its own.

    name: commbot
    parts:
      - {id: 1, part: carriage}
      - {id: 2, part: wheel_motor, parent: 1, port: wheel_left}
      - {id: 40, model: XM430-W350, parent: 12, port: horn}
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hil.devices.catalog import compiled_part, load_part, part_names
from hil.devices.control_table import TABLES_BY_NAME
from hil.devices.descriptor import PartDescriptor
from hil.devices import config_path
from hil.devices.yaml_source import SourceDict, check_keys, load_yaml_mapping, require

from .cpc_part import CpcBuildError, build_cpc_part
from .part import PartFirmware
from .servo import ServoFirmware

SERVO_MODELS = TABLES_BY_NAME  # a plain servo's ``model:``, spelled as ROBOTIS names it (XM430-W350)
ASSEMBLY_KEYS = ("name", "parts", "description")
PART_KEYS = ("id", "part", "model", "parent", "port", "serial")
MAX_SERIAL = 2 ** 64 - 1  # the CPC block's serial is 64 bits


@dataclass(frozen=True)
class Assembly:
    name: str
    source: str
    parts: tuple[PartFirmware, ...]


def resolve_assembly_path(name_or_path: str) -> Path:
    """A name on the config search path (``commbot``: ./config/robots, $HIL_PATH, hil's own) or a path to a YAML
    file."""
    return config_path.resolve(name_or_path, "robots", "assembly")


def default_serial(assembly: str, device_id: int) -> int:
    """A stable 64-bit serial for a virtual part (real parts carry theirs from the factory)."""
    return int.from_bytes(hashlib.sha256(f"{assembly}:{device_id}".encode()).digest()[:8], "little")


def load_assembly(name_or_path: str) -> Assembly:
    path = resolve_assembly_path(name_or_path)
    doc = load_yaml_mapping(path, "assembly", "robot")
    check_keys(doc, ASSEMBLY_KEYS, "assembly")
    name = require(doc, "name", str, "assembly")
    entries = require(doc, "parts", list, "assembly")
    if not entries:
        raise doc.error("parts", "assembly: parts is empty; an assembly needs at least one part")
    seen: dict[int, SourceDict] = {}
    for index, entry in enumerate(entries):
        what = f"part #{index + 1}"
        if not isinstance(entry, SourceDict):
            raise doc.error("parts", f"{what} must be a mapping such as {{id: 1, part: carriage}}, not {entry!r}")
        check_keys(entry, PART_KEYS, what)
        device_id = require(entry, "id", int, what)
        if "serial" in entry:
            serial = require(entry, "serial", int, what)
            if not 0 <= serial <= MAX_SERIAL:
                raise entry.error("serial", f"{what}: serial {serial} does not fit 64 bits")
        if not 0 <= device_id <= 252:
            raise entry.error("id", f"{what}: id {device_id} is outside 0..252")
        if device_id in seen:
            raise entry.error("id", f"{what}: id {device_id} is already used by the part on line {seen[device_id].line}")
        if ("part" in entry) == ("model" in entry):
            raise entry.error(None, f"{what}: give exactly one of 'part' (catalog) or 'model' (plain Dynamixel)")
        seen[device_id] = entry
    children = _port_tables(entries, seen)
    _check_no_cycle(entries, seen)
    parts = [_build(entry, name, children.get(entry["id"], {})) for entry in entries]
    return Assembly(name=name, source=str(path), parts=tuple(parts))


def _descriptor(entry: SourceDict) -> PartDescriptor:
    try:
        return load_part(entry["part"])
    except KeyError:
        raise entry.error("part", f"unknown catalog part {entry['part']!r}; known: {', '.join(part_names())}") from None


def _port_tables(entries: list, by_id: dict[int, SourceDict]) -> dict[int, dict[str, int]]:
    """parent ID -> {port name: child ID}, checked against the parents' descriptors."""
    tables: dict[int, dict[str, int]] = {}
    for entry in entries:
        if "parent" not in entry and "port" not in entry:
            continue
        parent_id = require(entry, "parent", int, f"part id {entry['id']}")
        port = require(entry, "port", str, f"part id {entry['id']}")
        parent = by_id.get(parent_id)
        if parent is None:
            raise entry.error("parent", f"part id {entry['id']}: parent id {parent_id} is not in the assembly")
        if "part" not in parent:
            raise entry.error("parent", f"part id {entry['id']}: parent id {parent_id} is a plain servo, which has "
                                        "no port table; mount the child on a self-describing part")
        desc = _descriptor(parent)
        child_ports = [p.name for p in desc.child_ports]
        if port not in child_ports:
            raise entry.error("port", f"part id {entry['id']}: {desc.name} (id {parent_id}) has no child port "
                                      f"{port!r}; ports: {', '.join(child_ports)}")
        table = tables.setdefault(parent_id, {})
        if port in table:
            raise entry.error("port", f"part id {entry['id']}: port {port!r} of id {parent_id} already holds id {table[port]}")
        table[port] = entry["id"]
    return tables


def _check_no_cycle(entries: list, by_id: dict[int, SourceDict]) -> None:
    """Refuse a part that mounts on itself or on a chain that comes back to it, at the line of its ``parent:``
    (the world would otherwise say "parts 2 form a cycle detached from the root 1" with no file)."""
    for entry in entries:
        chain, parent_id = [entry["id"]], entry.get("parent")
        while parent_id is not None:
            if parent_id == entry["id"]:
                how = "on itself" if len(chain) == 1 else \
                    "on a chain that comes back to it (" + " -> ".join(map(str, [*chain, parent_id])) + ")"
                raise entry.error("parent", f"part id {entry['id']}: mounts {how}; a robot is a tree hanging from "
                                            "one root part")
            if parent_id in chain:
                break  # a cycle that does not pass through this entry: reported at one of its own members
            chain.append(parent_id)
            parent_id = by_id[parent_id].get("parent")


def _build(entry: SourceDict, assembly: str, children: dict[str, int]) -> PartFirmware:
    device_id = entry["id"]
    serial = entry.get("serial", default_serial(assembly, device_id))
    if "model" in entry:
        table = SERVO_MODELS.get(entry["model"])
        if table is None:
            raise entry.error("model", f"part id {device_id}: unknown model {entry['model']!r}; "
                                       f"known: {', '.join(sorted(SERVO_MODELS))}")
        return ServoFirmware(table, device_id, serial_number=serial)
    desc = _descriptor(entry)
    data, sha = compiled_part(desc.name)
    try:
        return build_cpc_part(desc, data, sha, device_id, serial, children)
    except CpcBuildError as exc:
        raise entry.error("part", str(exc)) from None


def calibrated(assembly: Assembly, calibration, stored: bool = True) -> tuple[Assembly, list[str], list[str]]:
    """The assembly with every part a calibration (devices.calibration.Calibration) names built anew from its
    calibrated descriptor: the part then stores the calibrated numbers, as a part that keeps its own
    calibration does (the modular-robot reference's self-description), and its sensor firmware measures with them.

    ``stored`` False: the parts *measure* with the numbers but their CPC block keeps the descriptor they had, as a
    real part whose catalog numbers are off does (``hil sim --hidden``: the stand-in for a real robot that
    calibration and ``hil calibrate check`` are tested against).

    Returns (assembly, what was applied, warnings): an entry that matches no part of this robot is a warning,
    not applied (a calibration for a part that is not on the bus)."""
    from hil.devices.calibration import apply
    from hil.devices.descriptor import descriptor_sha256, encode_descriptor

    from .world.tree import port_children

    parts, applied, used = [], [], set()
    for part in assembly.parts:
        desc = getattr(part, "descriptor", None)
        entries = calibration.for_part(desc, part.serial_number) if desc is not None else ()
        if not entries:
            parts.append(part)
            continue
        new = apply(desc, entries)
        data = encode_descriptor(new if stored else desc)
        parts.append(build_cpc_part(new, data, descriptor_sha256(data), part.id, part.serial_number,
                                    port_children(part, desc)))
        used.update(id(e) for e in entries)
        applied += [f"part {part.id} ({desc.name}) sensor {e.sensor}: {', '.join(sorted(e.params))}" for e in entries]
    warnings = [f"{calibration.source}:{e.line}: calibration for {e.part}"
                f"{'' if e.serial is None else f' serial {e.serial}'} matches no part of {assembly.name}; not applied"
                for e in calibration.entries if id(e) not in used]
    return Assembly(assembly.name, assembly.source, tuple(parts)), applied, warnings
