"""The part catalog: descriptor sources (YAML) for every part this project knows, compiled to stored bytes.

``parts/``     self-describing (CPC) parts; the virtual device stores the compiled bytes in their CPC block.
``dynamixel/`` plain Dynamixel servos, which carry no descriptor: the host takes theirs from here, keyed by
               model number.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..descriptor import (DescriptorError, PartDescriptor, descriptor_from_dict, descriptor_sha256,
                          encode_descriptor)
from ..yaml_source import load_yaml_mapping

CATALOG_DIR = Path(__file__).resolve().parent
PARTS_DIR = CATALOG_DIR / "parts"
DYNAMIXEL_DIR = CATALOG_DIR / "dynamixel"


def part_names() -> list[str]:
    return sorted(p.stem for p in PARTS_DIR.glob("*.yaml"))


def load_source(path: Path, name_is_stem: bool = True) -> PartDescriptor:
    """Validate one YAML source; errors carry file:line, the part and the field."""
    doc = load_yaml_mapping(path, "part descriptor", "descriptor")
    desc = descriptor_from_dict(doc, part=path.stem)
    if name_is_stem and desc.name != path.stem:
        raise DescriptorError(path.stem, "name", f"{desc.name!r} differs from the file name {path.name}",
                              f"{path}:{doc.line_of('name')}")
    return desc


@lru_cache(maxsize=None)
def load_part(name: str) -> PartDescriptor:
    path = PARTS_DIR / f"{name}.yaml"
    if not path.exists():
        raise KeyError(f"no catalog part {name!r}; known: {', '.join(part_names())}")
    return load_source(path)


@lru_cache(maxsize=None)
def compiled_part(name: str) -> tuple[bytes, bytes]:
    """(msgpack bytes, SHA-256) that a part of this catalog entry stores."""
    data = encode_descriptor(load_part(name))
    return data, descriptor_sha256(data)


@lru_cache(maxsize=None)
def plain_servos() -> dict[int, PartDescriptor]:
    """Descriptors of plain Dynamixel servos by model number."""
    out = {}
    for path in sorted(DYNAMIXEL_DIR.glob("*.yaml")):
        desc = load_source(path, name_is_stem=False)
        out[desc.model_number] = desc
    return out


def plain_servo(model_number: int) -> PartDescriptor | None:
    return plain_servos().get(model_number)
