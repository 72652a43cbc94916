"""The ``hil trial --from`` line that retries a trial from shortly before it first went wrong: for a
sweep's worst trials in report.html and for the viewer's "Retry from here"."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from . import files

EVENTS = ("collision", "intrusion", "failure")
BEFORE_S = 10.0


def first_failure_s(folder: Path) -> float | None:
    """The trial time of the first collision, intimate intrusion or failure its states recorded (None: none)."""
    try:
        index = files.read_index(Path(folder) / files.STATES)
    except (OSError, ValueError):
        return None
    times = [entry["t"] for entry in index.get("states", ()) if entry.get("why") in EVENTS]
    return min(times) if times else None


def retry_command(folder: Path, t: float, controller: Any = None) -> str:
    """``hil trial CONTROLLER --from FOLDER@T`` (the trial's own controller unless another is given)."""
    if controller is None:
        try:
            controller = (files.read_index(Path(folder) / files.STATES).get("trial") or {}).get("controller")
        except (OSError, ValueError):
            controller = None
    return (f"hil trial {shlex.quote(str(controller or 'CONTROLLER.py'))} "
            f"--from {shlex.quote(f'{folder}@{max(0.0, t):g}')}")


def retry_before_failure(folder: Path, before_s: float = BEFORE_S) -> str | None:
    """The retry line ``before_s`` before the first failure, or None when the trial had none (or no states)."""
    t = first_failure_s(folder)
    return None if t is None else retry_command(folder, round(t - before_s, 1))


def retry_trial_file(folder: Path, t: float, out: Path, controller: Any = None) -> Path:
    """A trial file that starts from ``folder``'s state at ``t``: the original's keys, ``from:`` added."""
    import yaml

    index = files.read_index(Path(folder) / files.STATES)
    keys = dict(index.get("trial") or {})
    if controller is not None:
        keys["controller"] = str(controller)
    keys["from"] = f"{Path(folder).resolve()}@{t:g}"
    keys.pop("resume_from", None)
    out.write_text(yaml.safe_dump(keys, sort_keys=False), encoding="utf-8")
    return out
