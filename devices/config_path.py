"""Where named config files are found: the user's folders first, then the ones shipped with hil.

Robots, maps, crowd rates, scenarios, profiles, semantics and sweeps are named by file stem (``commbot``, ``arcade``,
``weekday``). A name is looked up in this order, and the first folder holding it wins:

1. ``./config/<kind>/`` under the current directory (a project of one's own, laid out like hil's config/);
2. each folder of ``$HIL_PATH`` (``os.pathsep``-separated), as ``<folder>/<kind>/`` (shared team folders);
3. the built-in files, shipped in the wheel as package data of ``hil`` (``hil/config``, read with
   importlib.resources; in a source checkout it is a link to the top-level config/).

A path (anything with a suffix or a separator, or an existing file) is taken as it is. An unknown name is a
ConfigError listing every name the search path really holds. The built-in data is anchored at the ``hil``
package because the data belongs to the distribution, not to one layer; no code of ``hil`` is used.
"""
from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .yaml_source import ConfigError

ENV_PATH = "HIL_PATH"
KINDS = ("robots", "maps", "crowd", "scenarios", "profiles", "semantics", "sweeps", "surfaces")


@lru_cache(maxsize=1)
def builtin_root() -> Path:
    """hil's own config folder (package data). A real directory in a wheel install and in a source checkout."""
    root = resources.files("hil") / "config"
    return Path(str(root)).resolve()  # a checkout's link resolved: one path per file in messages and comparisons


def builtin_examples() -> Path:
    """hil's example controllers (package data, next to the built-in config)."""
    return Path(str(resources.files("hil") / "examples")).resolve()


def search_dirs(kind: str) -> list[Path]:
    """The folders searched for ``kind`` files, in order (some may not exist)."""
    if kind not in KINDS:
        raise ValueError(f"unknown config kind {kind!r}; known: {', '.join(KINDS)}")
    dirs = [Path.cwd() / "config" / kind]
    dirs += [Path(p).expanduser() / kind for p in os.environ.get(ENV_PATH, "").split(os.pathsep) if p]
    dirs.append(builtin_root() / kind)
    unique: list[Path] = []
    for d in dirs:
        if not any(_same(d, u) for u in unique):
            unique.append(d)
    return unique


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def looks_like_path(name_or_path: str | Path, suffixes: tuple[str, ...]) -> bool:
    text = str(name_or_path)
    return Path(text).suffix in suffixes or os.sep in text or "/" in text or Path(text).is_file()


def find(name_or_path: str | Path, kind: str, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> Path | None:
    """The file a name stands for (first folder of the search path that has it), a path as given, or None."""
    if looks_like_path(name_or_path, suffixes):
        return Path(name_or_path)
    for folder in search_dirs(kind):
        for suffix in suffixes:
            candidate = folder / f"{name_or_path}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def known(kind: str, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> list[str]:
    """Every name the search path holds for ``kind``, sorted."""
    names: set[str] = set()
    for folder in search_dirs(kind):
        if folder.is_dir():
            names.update(p.stem for p in folder.iterdir() if p.suffix in suffixes and p.is_file())
    return sorted(names)


def resolve(name_or_path: str | Path, kind: str, what: str, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> Path:
    """Like :func:`find`, but an unknown name is a ConfigError listing the known ones and where they were looked
    for."""
    path = find(name_or_path, kind, suffixes)
    if path is not None:
        return path
    names = known(kind, suffixes)
    where = ", ".join(str(d) for d in search_dirs(kind))
    raise ConfigError(str(name_or_path), None, f"no {what} of that name; known: {', '.join(names) or '(none)'} "
                                               f"(searched {where}; ${ENV_PATH} adds folders)")
