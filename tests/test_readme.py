"""Every example of the README is a test: each shell and Python block runs as written, as a user would run it.

The blocks run with the wheel built from this checkout (``pip wheel``, as .ci/wheel_smoke builds it), installed
without its dependencies into a venv of its own that borrows the test venv's installed packages (a ``.pth`` line:
the install takes seconds), from a folder outside the checkout, so that nothing of the checkout's config/ or
examples/ is found by accident. What a block names comes from an earlier block of its section or from the
README's ``hil examples --copy mybot`` (the first line of a block), run first in every section that names mybot/. The rules:

- a ``sh`` block runs in bash with ``-e -o pipefail``: any line that fails fails the block;
- a ``python`` block is fed to the venv's ``python -`` (the folder on sys.path, as for a reader who pastes it),
  unless its first line is ``# PATH.py``: then it is a file the
  reader is told to save, written to PATH for the blocks after it;
- each section (``## heading``) runs in a folder of its own, its blocks in order, so sections run in parallel;
- docs/*.md blocks run only when marked with ``<!-- run -->`` on the line before the fence;
- a block that cannot run here is in :data:`SKIP`, with the reason; every entry must name a block that exists.

The README's own test time is printed by ``pytest --durations``; it must stay well under a minute of test time.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from once import once_per_run

ROOT = Path(__file__).resolve().parents[1]
RUN_MARK = "<!-- run -->"
SETUP = "hil examples --copy mybot"  # the README's block that every section naming mybot/ starts from
BLOCK_TIMEOUT_S = 300.0  # a block that hangs fails the test; a healthy block takes seconds

# The blocks that do not run here, by their first line, each with the reason.
SKIP = {
    "make demo": "the checkout's Makefile: make test is this suite, and the demo's trial is tests/test_trial_demo.py",
    "pip install .": "installs hil and its extras: this test installs the built wheel itself",
    "hil demo --view": "serves the viewer's page until Ctrl-C: tests/test_view_live.py and test_view_run.py drive it",
}


@dataclass(frozen=True)
class Block:
    page: str  # README.md, docs/X.md
    line: int  # of the opening fence
    lang: str
    text: str
    section: str

    @property
    def first(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    @property
    def saved_as(self) -> str | None:
        """The path a Python block is saved to (its first line ``# PATH.py``), or None when it runs."""
        match = re.fullmatch(r"#\s*([\w./-]+\.py)", self.first)
        return match.group(1) if self.lang == "python" and match else None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(text: str, page: str, *, marked_only: bool) -> list[Block]:
    """The sh and python blocks of a Markdown page (only those after ``<!-- run -->`` when ``marked_only``)."""
    found, section, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^```(\w*)\s*$", line)
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        lang = fence.group(1)
        if lang in ("sh", "python") and (not marked_only or before == RUN_MARK):
            found.append(Block(page, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n", section))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    found = blocks_of((ROOT / "README.md").read_text(encoding="utf-8"), "README.md", marked_only=False)
    for page in sorted((ROOT / "docs").glob("*.md")):
        found += blocks_of(page.read_text(encoding="utf-8"), f"docs/{page.name}", marked_only=True)
    return found


def skip_reason(block: Block) -> str | None:
    return next((why for first, why in SKIP.items() if block.first.startswith(first)), None)


def sections() -> dict[str, list[Block]]:
    grouped: dict[str, list[Block]] = {}
    for block in all_blocks():
        grouped.setdefault(f"{block.page} {block.section}".strip(), []).append(block)
    return grouped


# ---- the wheel, installed once per run of the suite --------------------------------------------------------------

def build_venv(folder: Path) -> None:
    """The wheel of this checkout in a venv of its own that reuses this venv's packages (no download, no minutes)."""
    quiet = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder / "dist"),
                    str(ROOT)], **quiet)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], **quiet)
    python = folder / "venv" / "bin" / "python"
    wheel = next((folder / "dist").glob("hil-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], **quiet)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # after the venv's own site-packages: the wheel's hil wins over this venv's editable one (whose .pth, like
    # every .pth of a folder added this way, is not run)
    borrowed = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zz_borrowed_test_venv.pth").write_text("".join(f"{p}\n" for p in borrowed))
    (folder / "venv" / "bin" / "pytest").write_text(f"#!{python}\nimport sys\nimport pytest\n"
                                                    "sys.exit(pytest.console_main())\n")
    (folder / "venv" / "bin" / "pytest").chmod(0o755)
    prime_crowd_cache(site / "hil" / "crowd")


def prime_crowd_cache(installed: Path) -> None:
    """The crowd's compiled step, taken from the checkout's numba cache (this session compiled or loaded it:
    tests/conftest.py): the same source, interpreter and machine, so the installed copy loads it instead of spending
    ~15 s compiling. numba keys its cache on the source file's mtime and size, hence the mtime copied."""
    source = ROOT / "crowd"
    cache = installed / "__pycache__"
    cache.mkdir(exist_ok=True)
    for path in (source / "__pycache__").glob("kernel.*.nb[ic]"):
        shutil.copy2(path, cache / path.name)
    stat = (source / "kernel.py").stat()
    os.utime(installed / "kernel.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory) -> Path:
    return once_per_run(tmp_path_factory, "readme-wheel", build_venv) / "venv"


def user_env(venv: Path, tmp: Path) -> dict[str, str]:
    """A user's shell with the wheel's venv active: its bin first on PATH, nothing of the checkout on it, and a
    temporary folder of its own (a README's pytest keeps its numbered folders there, not beside this run's)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HIL_PATH", "PYTHONHOME") and not k.startswith("PYTEST_")}
    ours = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours]
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *path]), VIRTUAL_ENV=str(venv), TMPDIR=str(tmp))
    return env


def run_block(block: Block, folder: Path, env: dict[str, str]) -> str | None:
    """Run (or save) one block in ``folder``; None when it worked, else what went wrong with its output."""
    if block.saved_as:
        target = folder / block.saved_as
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")
        return None
    if block.lang == "sh":  # from a file: the block's commands get no stdin, as in a terminal where none is typed
        script = folder.parent / f"{folder.name}-block-{block.line}.sh"
        script.write_text(block.text, encoding="utf-8")
        command, stdin = ["bash", "-e", "-o", "pipefail", str(script)], ""
    else:  # pasted into python: the current folder is on sys.path, as for the reader
        command, stdin = ["python", "-"], block.text
    try:
        done = subprocess.run(command, cwd=folder, env=env, input=stdin, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return f"{block}: still running after {BLOCK_TIMEOUT_S:g} s\n{exc.stdout or ''}{exc.stderr or ''}"
    if done.returncode != 0:
        return (f"{block}: exit status {done.returncode}\n--- block ---\n{block.text}--- stdout ---\n"
                f"{done.stdout[-3000:]}--- stderr ---\n{done.stderr[-3000:]}")
    return None


def run_section(blocks: list[Block], folder: Path, env: dict[str, str]) -> list[str]:
    """Every block of a section in order, in ``folder``; the failures, each naming its page and line."""
    folder.mkdir(parents=True, exist_ok=True)
    if any("mybot/" in b.text for b in blocks) and not any(b.first.startswith(SETUP) for b in blocks):
        setup = next(b for b in all_blocks() if b.first.startswith(SETUP))  # its first line alone: the copy
        blocks = [Block(setup.page, setup.line, "sh", SETUP + "\n", setup.section), *blocks]
    failures = []
    for block in blocks:
        if skip_reason(block) is None:
            failure = run_block(block, folder, env)
            if failure:
                failures.append(failure)
    return failures


# ---- the tests ---------------------------------------------------------------------------------------------------

def test_every_skipped_block_exists_and_says_why():
    firsts = [b.first for b in all_blocks()]
    for first, why in SKIP.items():
        assert sum(f.startswith(first) for f in firsts) == 1, f"SKIP {first!r} names no block (or several)"
        assert len(why) > 20, f"SKIP {first!r}: say why"
    assert any(b.first.startswith(SETUP) for b in all_blocks()), f"the README has no {SETUP!r} block"


@pytest.mark.parametrize("name", sorted(sections()))
def test_readme_section_runs_as_written(name, wheel_venv, tmp_path):
    failures = run_section(sections()[name], tmp_path / "user", user_env(wheel_venv, tmp_path / "tmp"))
    assert not failures, "\n\n".join(failures)


def test_a_broken_block_fails_the_readme_test(wheel_venv, tmp_path):
    """The runner fails a block whose command fails, a Python block that raises, and a later line of a block whose
    earlier lines worked; it passes a block that works."""
    page = ("## A section\n```sh\nhil --version\n```\n"
            "```sh\ntrue\nhil trial nowhere.py --duration 1\ntrue\n```\n"
            "```python\n# helper.py\nVALUE = 3\n```\n"
            "```python\nfrom helper import VALUE\nassert VALUE == 4, 'a broken example'\n```\n"
            "```sh\necho something | grep -q '^nothing like this'\n```\n")
    blocks = blocks_of(page, "BROKEN.md", marked_only=False)
    failures = run_section(blocks, tmp_path / "user", user_env(wheel_venv, tmp_path / "tmp"))
    assert [f.split(":", 2)[1] for f in failures] == ["5", "14", "18"], failures
    assert "nowhere.py" in failures[0] and "a broken example" in failures[1]


def test_docs_blocks_run_only_when_marked():
    page = "## S\n```sh\nfalse\n```\n<!-- run -->\n```sh\ntrue\n```\n```python\nprint(1)\n```\n"
    assert [(b.line, b.first) for b in blocks_of(page, "docs/X.md", marked_only=True)] == [(6, "true")]
    assert len(blocks_of(page, "README.md", marked_only=False)) == 3


def test_examples_copy_holds_every_shipped_example(wheel_venv, tmp_path):
    """hil examples --copy from the installed wheel: every file of the checkout's examples/ (controllers, trial
    files, the calibration rig, native/ and ros/ sources, the scenario tests)."""
    tracked = subprocess.run(["git", "ls-files", "examples"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: the shipped examples cannot be listed")
    expected = {Path(p).relative_to("examples").as_posix() for p in tracked.stdout.split()}
    subprocess.run(["hil", "examples", "--copy", "ex"], cwd=tmp_path, env=user_env(wheel_venv, tmp_path / "tmp"),
                   check=True, capture_output=True)
    copied = {p.relative_to(tmp_path / "ex").as_posix() for p in (tmp_path / "ex").rglob("*") if p.is_file()}
    assert copied == expected
