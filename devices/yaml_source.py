"""YAML that remembers where each value came from, so every config error can say file:line.

Mappings load as :class:`SourceDict` and sequences as :class:`SourceList`; both know their own line and the
line of each key or item. :class:`ConfigError` formats "file:line: what is wrong".
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Iterable

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


# YAML 1.1 reads 1e9 and 1.5e3 as strings (its floats need a dot and a signed exponent); users mean the numbers,
# so every exponent form resolves as a float (YAML 1.1's other float forms are unchanged)
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def _loader_for(source: str) -> type:
    class Loader(_SAFE_LOADER):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+.0123456789"))

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


def plain(value: Any) -> Any:
    """A loaded value with its SourceDicts and SourceLists as plain dicts and lists (to compare, print or send)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def load_yaml_text(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; syntax errors (and keys YAML cannot use, such as a list as a key) become ConfigError with
    the line."""
    try:
        return yaml.load(text, Loader=_loader_for(source))  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(source, mark.line + 1 if mark else None, f"YAML syntax: {exc.problem}") from None
    except yaml.YAMLError as exc:  # the reader's errors (control characters) carry a position, not a mark
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        raise ConfigError(source, line, f"not YAML text: {getattr(exc, 'reason', exc)}") from None
    except TypeError as exc:  # an unhashable key: ``? [1, 2]: x``
        raise ConfigError(source, None, f"YAML: {exc}") from None


def read_text(path: str | Path) -> str:
    """A config file's text (UTF-8); a binary or mis-encoded file is refused at the line of its first bad byte."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(str(path), line, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
                                           f"is this a binary file?") from None


def load_yaml_file(path: str | Path) -> Any:
    return load_yaml_text(read_text(path), str(path))


def load_yaml_mapping(path: str | Path, what: str) -> SourceDict:
    """A YAML file that must hold a mapping: an empty file or another kind of document is an error at line 1."""
    doc = load_yaml_file(path)
    if doc is None:
        raise ConfigError(str(path), 1, f"the {what} file is empty")
    if not isinstance(doc, SourceDict):
        raise ConfigError(str(path), getattr(doc, "line", 1), f"{what} must be a mapping, not {type(doc).__name__}")
    return doc


def check_keys(mapping: Any, known: Iterable[str], what: str, noun: str = "key") -> None:
    """Refuse keys that are not in ``known`` with file:line and the closest known key (a typo would otherwise be
    silently ignored, and its value with it)."""
    known = tuple(known)
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
            message = f"{what}: unknown {noun} {key!r}; {hint}"
            if isinstance(mapping, SourceDict):
                raise mapping.error(key, message)
            raise ConfigError(getattr(mapping, "source", "<config>"), None, message)


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
