"""``hil sim ... --pty --pty-link PATH``: a stable name for the virtual bus's pty, kept while it serves.

A pty's path (/dev/pts/N) changes every run, so a ros2_control URDF's ``port_name`` or a udev-style name cannot
point at it; a symlink can. The link is made when the pty exists and removed when serving ends. A path that
already exists is refused unless it is a link a killed ``hil sim`` left behind (one into /dev/pts whose pty is
gone); nothing else is ever replaced or removed.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

PTY_DIR = "/dev/pts/"


def _stale(path: str) -> bool:
    """A dangling link into /dev/pts: what a ``hil sim`` that could not clean up leaves."""
    return os.path.islink(path) and os.readlink(path).startswith(PTY_DIR) and not os.path.exists(path)


def check_link_path(path: str) -> None:
    """Refuse (ValueError, one line) a link path that is taken or whose folder does not exist, before anything
    is built."""
    if os.path.lexists(path) and not _stale(path):
        what = "a link to " + os.readlink(path) if os.path.islink(path) else "a file or folder"
        raise ValueError(f"--pty-link {path}: the path exists ({what}) and is not a link this command left; "
                         "remove it or choose another path")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--pty-link {path}: folder {folder} does not exist")


@contextmanager
def pty_link(path: str | None, pty_path: str) -> Iterator[None]:
    """Link ``path`` to ``pty_path`` for the duration of the block (nothing when ``path`` is None)."""
    if path is None:
        yield
        return
    check_link_path(path)
    if _stale(path):
        os.unlink(path)
    os.symlink(pty_path, path)  # refuses a path taken since the check (FileExistsError, an OSError)
    try:
        yield
    finally:
        try:
            if os.readlink(path) == pty_path:  # still ours: remove it, and only it
                os.unlink(path)
        except OSError:
            pass
