"""Name lookups that help when they fail: an unknown name lists the close matches.

A controller written for one robot and run on another (or with a typo) should learn at once which names exist,
not just that one does not.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    """KeyError whose message prints as written (KeyError alone would show it quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NameMap(Mapping[str, T], Generic[T]):
    """Blueprint names -> handles. Iterates over the primary names; also answers to each handle's default
    name (its tree path), so a controller may use either."""

    def __init__(self, kind: str, items: dict[str, T], aliases: dict[str, str] | None = None,
                 missing: dict[str, str] | None = None):
        self.kind = kind
        self._items = dict(items)
        self._aliases = dict(aliases or {})
        self._missing = dict(missing or {})

    def __getitem__(self, name: str) -> T:
        item = self._items.get(name)
        if item is not None:
            return item
        primary = self._aliases.get(name)
        if primary is not None:
            return self._items[primary]
        raise self.unknown(name)

    def unknown(self, name: object) -> UnknownName:
        if name in self._missing:
            return UnknownName(f"{self.kind} {name!r} {self._missing[name]}")
        known = list(self._items) + list(self._aliases)
        close = difflib.get_close_matches(str(name), known, n=5, cutoff=0.6)
        if close:
            hint = f"did you mean {', '.join(repr(c) for c in close)}?"
        elif self._items:
            shown = list(self._items)[:8]
            hint = f"known: {', '.join(shown)}" + (f" and {len(self._items) - len(shown)} more" if len(self._items) > 8 else "")
        else:
            hint = f"this robot has no {self.kind}s"
        return UnknownName(f"no {self.kind} named {name!r}; {hint}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._aliases

    def aliases(self) -> dict[str, str]:
        """Default name -> primary name, for the handles that have a blueprint name."""
        return dict(self._aliases)

    def __repr__(self) -> str:
        return f"NameMap({self.kind}s: {', '.join(self._items)})"
