"""A sweep's trial folders and their done markers: what makes a sweep resumable and its retries harmless.

A trial runs into a fresh attempt folder beside its final one (``.NAME.attempt-HOST-PID-XXXX``); when it is over,
its record goes into ``done.json`` there (with the trial's hash, trial/sweep/spec.py ``trial_hash``) and the
folder is renamed into place. So a final folder with a ``done.json`` of the same hash holds a finished trial
(resume skips it), a worker killed mid-trial leaves only an attempt folder (its retry starts a new one), and two
attempts of one trial (Dask may run a task twice when it believes a worker lost) cannot mix their files: the
first to finish wins and the other is dropped.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

DONE_NAME = "done.json"
NOT_DONE = ("interrupted",)  # a record with this status is not kept: the trial runs again next time


def read_done(folder: Path, trial_hash: str) -> dict[str, Any] | None:
    """The record of a finished trial in ``folder`` whose hash is ``trial_hash``, else None (absent, another
    spec's, unreadable)."""
    try:
        marker = json.loads((folder / DONE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("hash") != trial_hash or not isinstance(marker.get("record"), dict):
        return None
    return marker["record"]


def attempt_folder(final: Path) -> Path:
    return final.parent / f".{final.name}.attempt-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def commit(attempt: Path, final: Path, trial_hash: str, record: dict[str, Any], *,
           replace: bool = False) -> dict[str, Any]:
    """Mark ``attempt`` done and move it to ``final``; the record kept there (another attempt's, if it won).
    ``replace``: a trial run again on purpose (``--retry-failed``) replaces the one there."""
    attempt.mkdir(parents=True, exist_ok=True)
    marker = attempt / DONE_NAME
    partial = attempt / f"{DONE_NAME}.partial"
    partial.write_text(json.dumps({"hash": trial_hash, "record": record}, indent=1, default=str) + "\n",
                       encoding="utf-8")
    os.replace(partial, marker)
    for _ in range(3):
        kept = None if replace else read_done(final, trial_hash)
        if kept is not None:  # another attempt of this trial finished first
            shutil.rmtree(attempt, ignore_errors=True)
            return kept
        if final.exists():  # another spec's trial, or a folder left unfinished
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(attempt, final)
            return record
        except OSError:  # it appeared meanwhile: look again
            continue
    raise OSError(f"cannot move the trial folder {attempt} to {final}")


def discard(attempt: Path) -> None:
    shutil.rmtree(attempt, ignore_errors=True)


def remove_stale_attempts(trials_root: Path) -> int:
    """Attempt folders left by killed workers (called when no trial of the sweep runs any more)."""
    count = 0
    if trials_root.is_dir():
        for path in trials_root.glob("*/.*.attempt-*"):
            shutil.rmtree(path, ignore_errors=True)
            count += 1
    return count
