"""YAML that remembers where each value came from, so every config error can say file:line.

Mappings load as :class:`SourceDict` and sequences as :class:`SourceList`; both know their own line and the
line of each key or item. :class:`ConfigError` formats "file:line: what is wrong".

This is the one YAML loader of every file hil reads (trial, sweep, map, rates, profile, robot/assembly, semantics,
descriptor sources, calibration, trust list; scenarios are read as text through :func:`read_text`). It lives in
``devices/`` because ``devices`` imports nothing of ours and every layer above may use it. What it refuses, before
any value is built (docs/ARCHITECTURE.md, "Config files: size and YAML rules"):

- a file larger than its kind's limit (:data:`SIZE_LIMITS`), checked before a byte is parsed;
- a document whose aliases would add more than :data:`ALIAS_BUDGET` values once expanded (an alias bomb: nine
  levels of ``&a [*b, *b, ...]`` is 90 nodes for the parser and 10^9 values for anything that walks it), named at
  the anchor's line; an alias inside its own anchor (a recursive structure);
- nesting deeper than :data:`MAX_DEPTH` (the constructors recurse; a thousand ``[`` would be a RecursionError).
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


KIB = 1024
MIB = 1024 * KIB

# the largest file of each kind hil reads, checked before parsing: far above the largest real one (the arcade map
# is 6 KB; a large building's map with a thousand places ~50 KB; the commbot's assembly 5 KB). libyaml's parser plus
# our line-keeping constructors read ~0.5-1 MB/s on this loaded 2-core machine, so 1 MiB bounds a load to a few
# seconds and ~100 MB; a scenario is text (no YAML) and cheap
SIZE_LIMITS: dict[str, int] = {
    "trial": 256 * KIB, "sweep": 256 * KIB, "map": 1 * MIB, "rates": 256 * KIB, "profile": 256 * KIB,
    "robot": 1 * MIB, "semantics": 256 * KIB, "descriptor": 256 * KIB, "scenario": 1 * MIB,
    "calibration": 1 * MIB, "rig": 256 * KIB, "trust": 256 * KIB, "param": 64 * KIB, "config": 1 * MIB,
    "surfaces": 256 * KIB,
}
ALIAS_BUDGET = 10_000  # values that aliases may add to one document once expanded (anchors for shared params: tens)
MAX_DEPTH = 64  # levels of nesting (the deepest real config is 6)
MAX_NUMBER_CHARS = 100  # an integer longer than this is a mistake (Python refuses to parse 4300 digits anyway)


def size_limit(kind: str) -> int:
    """The byte limit of a kind of config file (``config`` for a kind not in :data:`SIZE_LIMITS`)."""
    return SIZE_LIMITS.get(kind, SIZE_LIMITS["config"])


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


INT_TAG = "tag:yaml.org,2002:int"


def check_nodes(root: yaml.Node, source: str) -> None:
    """Refuse a composed document whose expansion is too large or too deep, or that contains itself.

    The parser shares an anchored node among its aliases, so the node graph stays small; this walk (iterative,
    memoised per node: linear in the nodes the parser made) counts the values the document *expands* to, which is
    what every constructor, ``plain`` or JSON encoder would walk."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    refs: dict[int, int] = {}
    kids_of: dict[int, list] = {}
    nodes: dict[int, yaml.Node] = {}
    ancestors: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    scalar = yaml.ScalarNode
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            ancestors.discard(key)
            kids = kids_of.pop(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            tallest = 1 + max((height[id(k)] for k in kids), default=0)
            height[key] = tallest
            if tallest > MAX_DEPTH:
                raise ConfigError(source, node.start_mark.line + 1,
                                  f"YAML nested deeper than {MAX_DEPTH} levels (a config needs a handful)")
            continue
        if type(node) is scalar:  # a leaf: most nodes; no bookkeeping beyond its count
            if key in size:
                refs[key] = refs.get(key, 1) + 1
                continue
            if node.tag == INT_TAG and len(node.value) > MAX_NUMBER_CHARS:
                raise ConfigError(source, node.start_mark.line + 1,
                                  f"a number of {len(node.value):,} characters (at most {MAX_NUMBER_CHARS})")
            size[key], height[key], nodes[key] = 1, 1, node
            continue
        if key in size:
            refs[key] = refs.get(key, 1) + 1
            continue
        if key in ancestors:
            raise ConfigError(source, node.start_mark.line + 1,
                              "YAML alias inside its own anchor (a recursive structure hil cannot use)")
        ancestors.add(key)
        nodes[key] = node
        kids = kids_of[key] = _children(node)
        stack.append((node, True))
        stack.extend((kid, False) for kid in reversed(kids))
    added = size[id(root)] - len(size)
    if added > ALIAS_BUDGET:
        culprit = max(refs, key=lambda k: size[k] * (refs[k] - 1))
        raise ConfigError(source, nodes[culprit].start_mark.line + 1,
                          f"YAML aliases expand this document by {added:,} values, over the budget of "
                          f"{ALIAS_BUDGET:,} (an alias bomb?): the anchor here is repeated {refs[culprit] - 1} "
                          f"times, {size[culprit]:,} values each")


def plain(value: Any) -> Any:
    """A loaded value with its SourceDicts and SourceLists as plain dicts and lists (to compare, print or send)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def load_yaml_text(text: str, source: str = "<string>", kind: str = "config") -> Any:
    """Parse YAML text; syntax errors (and keys YAML cannot use, such as a list as a key), text over the kind's
    size limit, alias bombs and deep nesting (:func:`check_nodes`) become ConfigError with the line."""
    if len(text) > size_limit(kind):
        raise ConfigError(source, None, f"{len(text):,} characters is over the {size_limit(kind):,} a {kind} "
                                        f"may have")
    try:
        loader = _loader_for(source)(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            check_nodes(node, source)
            try:
                return loader.construct_document(node)
            except ConfigError:  # a key that appears twice (ours, already file:line)
                raise
            except ValueError as exc:  # a scalar its constructor cannot take (a date like 2024-13-45)
                raise ConfigError(source, None, f"YAML value: {exc}") from None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(source, mark.line + 1 if mark else None, f"YAML syntax: {exc.problem}") from None
    except yaml.YAMLError as exc:  # the reader's errors (control characters) carry a position, not a mark
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        raise ConfigError(source, line, f"not YAML text: {getattr(exc, 'reason', exc)}") from None
    except TypeError as exc:  # an unhashable key: ``? [1, 2]: x``
        raise ConfigError(source, None, f"YAML: {exc}") from None


def read_text(path: str | Path, kind: str = "config") -> str:
    """A config file's text (UTF-8); a file over its kind's size limit is refused before it is read whole (at most
    limit + 1 bytes are read, so a 50 MB map or /dev/zero costs nothing), a binary or mis-encoded one at the line
    of its first bad byte."""
    path = Path(path)
    limit = size_limit(kind)
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    if len(data) > limit:
        try:
            size = f"{path.stat().st_size:,} bytes"
        except OSError:
            size = "more bytes"
        raise ConfigError(str(path), None, f"{size} is over the {limit:,} a {kind} file may have "
                                           f"(devices/yaml_source.py SIZE_LIMITS): is this the right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(str(path), line, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
                                           f"is this a binary file?") from None


def load_yaml_file(path: str | Path, kind: str = "config") -> Any:
    """A YAML config file of a kind (a key of :data:`SIZE_LIMITS`), loaded with lines and the limits above."""
    return load_yaml_text(read_text(path, kind), str(path), kind)


def load_yaml_mapping(path: str | Path, what: str, kind: str = "config") -> SourceDict:
    """A YAML file that must hold a mapping: an empty file or another kind of document is an error at line 1."""
    doc = load_yaml_file(path, kind)
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
