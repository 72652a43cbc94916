"""Robot assemblies (config/robots/*.yaml) turned into the firmware of their parts.

An assembly names parts by model and bus ID. For now the models are the servo control tables of devices/;
self-describing parts and their port tables arrive with the part catalog.

    name: servo_chain
    parts:
      - {id: 1, model: XM430-W350}
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from devices.control_table import XL430_W250, XM430_W350
from devices.yaml_source import ConfigError, load_yaml_file, require

from .part import PartFirmware
from .servo import ServoFirmware

ROBOTS_DIR = Path(__file__).resolve().parent.parent / "config" / "robots"
SERVO_MODELS = {t.model_name: t for t in (XM430_W350, XL430_W250)}


@dataclass(frozen=True)
class Assembly:
    name: str
    source: str
    parts: tuple[PartFirmware, ...]


def resolve_assembly_path(name_or_path: str) -> Path:
    """A name under config/robots/ (``servo_chain``) or a path to a YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    path = ROBOTS_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in ROBOTS_DIR.glob("*.yaml"))
        raise ConfigError(name_or_path, None, f"no assembly of that name; known: {', '.join(known)}")
    return path


def load_assembly(name_or_path: str) -> Assembly:
    path = resolve_assembly_path(name_or_path)
    doc = load_yaml_file(path)
    name = require(doc, "name", str, "assembly")
    entries = require(doc, "parts", list, "assembly")
    parts: list[PartFirmware] = []
    seen: dict[int, int] = {}
    for index, entry in enumerate(entries):
        what = f"part #{index + 1}"
        device_id = require(entry, "id", int, what)
        model = require(entry, "model", str, what)
        if not 0 <= device_id <= 252:
            raise entry.error("id", f"{what}: id {device_id} is outside 0..252")
        if device_id in seen:
            raise entry.error("id", f"{what}: id {device_id} is already used by the part on line {seen[device_id]}")
        seen[device_id] = entry.line
        table = SERVO_MODELS.get(model)
        if table is None:
            raise entry.error("model", f"{what}: unknown model {model!r}; known: {', '.join(sorted(SERVO_MODELS))}")
        serial = entry.get("serial", (table.model_number << 32) | device_id)
        parts.append(ServoFirmware(table, device_id, serial_number=serial))
    return Assembly(name=name, source=str(path), parts=tuple(parts))
