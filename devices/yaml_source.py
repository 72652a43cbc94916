"""YAML that remembers where each value came from, so every config error can say file:line.

Mappings load as :class:`SourceDict` and sequences as :class:`SourceList`; both know their own line and the
line of each key or item. :class:`ConfigError` formats "file:line: what is wrong".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    def __init__(self, source: str, line: int | None, message: str):
        self.source, self.line, self.message = source, line, message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")


class SourceDict(dict):
    source: str = "<string>"
    line: int = 0
    key_lines: dict

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)

    def error(self, key: str | None, message: str) -> ConfigError:
        return ConfigError(self.source, self.line_of(key) if key is not None else self.line, message)


class SourceList(list):
    source: str = "<string>"
    line: int = 0
    item_lines: list

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


# libyaml's C parser when PyYAML was built with it (the wheels are): ~6x faster on the catalog, same nodes and marks
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _loader_for(source: str) -> type:
    class Loader(_SAFE_LOADER):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> SourceDict:
        out = SourceDict()
        out.source, out.line, out.key_lines = source, node.start_mark.line + 1, {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                raise ConfigError(source, key_node.start_mark.line + 1, f"key {key!r} appears twice")
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out

    def sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> SourceList:
        out = SourceList(loader.construct_object(child, deep=True) for child in node.value)
        out.source, out.line = source, node.start_mark.line + 1
        out.item_lines = [child.start_mark.line + 1 for child in node.value]
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, sequence)
    return Loader


def load_yaml_text(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; syntax errors become ConfigError with the line."""
    try:
        return yaml.load(text, Loader=_loader_for(source))  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ConfigError(source, line, f"YAML syntax: {exc.problem}") from None


def load_yaml_file(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    return load_yaml_text(text, str(path))


def require(mapping: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``mapping[key]`` checked for presence and type, else a ConfigError naming file:line."""
    if not isinstance(mapping, SourceDict):
        raise ConfigError(getattr(mapping, "source", "<config>"), getattr(mapping, "line", None),
                          f"{what} must be a mapping")
    if key not in mapping:
        raise mapping.error(None, f"{what}: missing field {key!r}")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise mapping.error(key, f"{what}: {key} must be {names}, not {type(value).__name__} {value!r}")
    return value
