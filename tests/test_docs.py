"""The docs stand on their own: what a reader of the repository can follow, and nothing else.

Every Markdown page a user meets (README.md, CONTRIBUTING.md, docs/*.md) is checked for
- a link or image whose relative target does not exist in the repository (or whose #anchor names no heading of
  the Markdown page it points to);
- a link outside the repository (http, https: the docs must be readable offline and not rot with other sites);
- what a reader cannot look up: the design notes outside the repository (``../shared``), the project's issue
  numbers ("(issue 12)", "issue 12"), the references' file numbers ("reference 003") and their figure numbers
  ("FIG. 11"); docs/REFERENCES.md names the references instead;
and docs/ARCHITECTURE.md stays a map (at most 450 lines). Pure text checks: no subprocess, well under a second.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE_MAX_LINES = 450

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FORBIDDEN = {
    "a path outside the repository (../shared)": re.compile(r"\.\./shared"),
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE),
    "a reference's file number (name it as docs/REFERENCES.md does)": re.compile(r"\breferences?\s+00\d",
                                                                                   re.IGNORECASE),
    "a figure number of a reference (show or describe it)": re.compile(r"\bFIGS?\.\s*\d+", re.IGNORECASE),
}


def pages() -> list[Path]:
    """The Markdown pages a user meets: the README, CONTRIBUTING and every page in docs/."""
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if p.exists()]


def strip_code(text: str) -> str:
    """The text with fenced code blocks and inline code blanked (line numbers kept): links there are not links."""
    def blank(match: re.Match) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", blank, text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`]*`", blank, text)  # a code span may run over a line break


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor the headings of a Markdown page define (repeated headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for line in strip_code(page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def problems(page: Path, text: str | None = None, root: Path = ROOT) -> list[str]:
    """Every broken link, outside link and forbidden phrase of a page under ``root``, as ``file:line: what``."""
    text = page.read_text(encoding="utf-8") if text is None else text
    name = page.relative_to(root)
    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    found = []
    for what, pattern in FORBIDDEN.items():  # in code too: a command or a comment is read as well
        found += [(line_of(hit.start()), f"{what}: {hit.group(0)!r}") for hit in pattern.finditer(text)]
    for link in LINK.finditer(strip_code(text)):  # a link's text may run over a line break
        target = link.group(1)
        found += [(line_of(link.start()), f"{why}: {target}") for why in link_problems(page, target, root)]
    return [f"{name}:{number}: {what}" for number, what in sorted(found, key=lambda item: item[0])]


def link_problems(page: Path, target: str, root: Path) -> list[str]:
    """Why a link target of ``page`` does not hold (none when it does)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return ["a link outside the repository"]
    path_part, _, anchor = target.partition("#")
    dest = (page.parent / path_part).resolve() if path_part else page
    if not dest.exists():
        return ["a link to a path that does not exist"]
    if not dest.is_relative_to(root):
        return ["a link outside the repository"]
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return [f"no heading of {dest.name} has the anchor #{anchor}"]
    return []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_stands_on_its_own(page):
    found = problems(page)
    assert not found, "\n".join(found)


def test_architecture_is_a_map():
    lines = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").count("\n")
    assert lines <= ARCHITECTURE_MAX_LINES, f"docs/ARCHITECTURE.md has {lines} lines; the map keeps to " \
                                            f"{ARCHITECTURE_MAX_LINES}: move detail to the subsystem's page"


def test_the_checks_find_what_they_look_for(tmp_path):
    """The checker itself: each kind of fault in a page is found, and a clean page passes."""
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    bad = ("see [gone](nothere.md) and [anchor](there.md#no-such) and [web](https://example.org)\n"
           "as ../shared/DESIGN.md says (issue 12), reference 003, FIG. 11\n"
           "```\n[in code](nothere.md)\n```\n"
           "an issue\n12 over a line break\n")
    found = problems(page, bad, tmp_path)
    assert [f.split(": ", 1)[1].split(":")[0] for f in found] == [
        "a link to a path that does not exist", "no heading of there.md has the anchor #no-such",
        "a link outside the repository", "a path outside the repository (../shared)", "an issue number",
        "a reference's file number (name it as docs/REFERENCES.md does)",
        "a figure number of a reference (show or describe it)", "an issue number"]
    assert found[-1].startswith("page.md:6:")  # the line is named, across a link's line break too
    clean = "see [there](there.md#a-heading) and `[code](nothere.md)`, [a link over\na line](there.md)\n"
    assert problems(page, clean, tmp_path) == []
