"""The trial file's keys as people read them: ``hil trial --keys`` (text) and docs/TRIALS.md (a Markdown table),
both made from :data:`trial.spec.KEY_TABLE`, the table the loader checks against, so neither can drift from it.

    python -m hil.trial.spec_doc docs/TRIALS.md     # rewrite the page's table after a key changes
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from .spec import KEY_TABLE

BEGIN = "<!-- the keys: made by `python -m hil.trial.spec_doc docs/TRIALS.md` from trial/spec.py; do not edit -->"
END = "<!-- end of the keys -->"
WIDTH = 116


def example_text(value: Any) -> str:
    """A key's example as it is written in a trial file (YAML flow style)."""
    if isinstance(value, str):
        return value if value and not any(c in value for c in ":#{}[],") else json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(example_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {example_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def keys_text() -> str:
    """Every key: its name, type and default on one line, its meaning and an example below."""
    out = [*textwrap.wrap("The keys of a trial file (YAML; paths relative to the file; docs/TRIALS.md). On the "
                          "command line: --KEY with - for _ (--crowd-scale), --param NAME=VALUE for params, "
                          "--success once per criterion.", WIDTH), ""]
    for name, key in KEY_TABLE.items():
        out.append(f"{name}: {key.type}  (default: {key.default})")
        out.extend(textwrap.wrap(key.meaning, WIDTH, initial_indent="    ", subsequent_indent="    "))
        out.append(f"    e.g. {name}: {example_text(key.example)}")
    return "\n".join(out)


def keys_markdown() -> str:
    """The keys as a Markdown table (docs/TRIALS.md, between BEGIN and END)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| key | type | default | meaning | example |", "|---|---|---|---|---|"]
    for name, key in KEY_TABLE.items():
        rows.append(f"| `{name}` | {cell(key.type)} | {cell(key.default)} | {cell(key.meaning)} | "
                    f"`{cell(example_text(key.example))}` |")
    return "\n".join(rows)


def page_with_keys(page: str) -> str:
    """``page`` with the text between BEGIN and END replaced by the table."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} to put the keys between")
    return f"{head}{BEGIN}\n{keys_markdown()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hil.trial.spec_doc docs/TRIALS.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(page_with_keys(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
