"""``states/manifest.json``: what a resume trusts of a ``states/`` folder.

The manifest lists every file a resume reads with its size and SHA-256, each state kept (its time, file and why),
the log's end, the trial's fingerprint (its seed and the SHA-256 of its spec and of its controller, beside the
world's fingerprint), the original trial's keys, and its own checksum. A journal is listed by the length it had
when the manifest was written and the hash of those bytes: it is appended to between saves, and a resume reads
that many bytes of it and no more.

The saver rewrites the manifest atomically as the last write of every save, and retires old states only after it:
so a trial killed at any moment leaves a manifest whose every file is whole. A resume reads nothing of
``states/`` that the manifest does not vouch for: each file is checked (a regular file, its size, its hash)
before it is parsed, and before pybullet is handed a ``.bullet`` (a damaged one aborts pybullet's process), so a
state swapped for another, a cut journal or a flipped byte is refused naming the file, never resumed from.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import files
from .files import StatesError

MANIFEST = "manifest.json"
FORMAT = 1
MAX_FILE_BYTES = 1 << 30  # a state's file or a journal (a commbot state is ~200 kB; a day's journal ~100 MB)
FILE_NAME = re.compile(r"[A-Za-z0-9_]{1,64}\.msgpack|[A-Za-z0-9_]{1,64}\.bullet")
HEX = re.compile(r"[0-9a-f]{64}")
JOURNALS = (files.COMMANDS, files.CROWD_TICKS)
RECORD_AGAIN = "record the trial again to resume from it"


def trial_fingerprint(spec: Any) -> dict[str, Any]:
    """The trial a folder belongs to: its seed, and SHA-256s of its spec (as logged in /trial/meta) and of its
    controller's file (of its name when it is not a file)."""
    controller = spec.controller
    digest = None
    if isinstance(controller, (str, Path)) and Path(str(controller)).is_file():
        digest = hashlib.sha256(Path(str(controller)).read_bytes()).hexdigest()
    elif controller is not None:
        name = controller if isinstance(controller, str) else getattr(controller, "__qualname__", repr(controller))
        digest = hashlib.sha256(str(name).encode()).hexdigest()
    described = json.dumps(spec.describe(), sort_keys=True, default=str)
    return {"seed": spec.seed, "spec_sha256": hashlib.sha256(described.encode()).hexdigest(),
            "controller_sha256": digest}


def _entry(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _checksum(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ManifestWriter:
    """Kept by the saver: the files written and the journals' running hashes; :meth:`write` after each save."""

    def __init__(self, folder: Path, trial: dict[str, Any]):
        self.folder, self.trial = folder, trial
        self.files: dict[str, dict[str, Any]] = {}
        self._journals = {name: hashlib.sha256() for name in JOURNALS}
        self._sizes = dict.fromkeys(JOURNALS, 0)

    def wrote(self, name: str, data: bytes) -> None:
        self.files[name] = _entry(data)

    def dropped(self, name: str) -> None:
        self.files.pop(name, None)

    def appended(self, journal: str, data: bytes) -> None:
        self._journals[journal].update(data)
        self._sizes[journal] += len(data)

    def write(self, index: dict[str, Any]) -> None:
        doc = {"format": FORMAT, "trial": self.trial, "fingerprint": index["fingerprint"],
               "states": index["states"], "log_end_s": index.get("log_end_s"), "keys": index.get("trial"),
               "files": dict(sorted(self.files.items())),
               "journals": {name: {"size": self._sizes[name], "sha256": self._journals[name].hexdigest()}
                            for name in JOURNALS}}
        doc["checksum"] = _checksum(doc)
        files.write_atomic(self.folder / MANIFEST, json.dumps(doc, indent=1, sort_keys=True).encode("utf-8"))


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: :meth:`read` and :meth:`journal` give only bytes it vouches for."""

    folder: Path  # the states/ folder
    doc: dict[str, Any]

    @property
    def path(self) -> Path:
        return self.folder / MANIFEST

    @property
    def states(self) -> list[dict[str, Any]]:
        return self.doc["states"]

    @classmethod
    def load(cls, folder: Path) -> Manifest:
        """``folder/manifest.json``, checked: its checksum, then every field (StatesError naming the field)."""
        path = folder / MANIFEST
        if not path.exists() and not path.is_symlink():
            if not (folder / files.INDEX).exists():
                raise StatesError(f"no saved states in {folder.parent} ({path} is missing; a trial saves them when "
                                  "recorded, unless --state-every is 0 or the disk had no room)")
            raise StatesError(f"{path} is missing: these states were saved without a manifest (by a hil from before "
                              "states carried one, or it was removed), so nothing vouches for them; record the trial "
                              f"again with this hil (its hil trial or hil demo command, --out {folder.parent}) to "
                              "resume from it")
        doc = files.read_json(path)
        if not isinstance(doc, dict):
            raise StatesError(f"{path}: expected a JSON object, not {type(doc).__name__}")
        if doc.get("format") != FORMAT:
            raise StatesError(f"{path}: format {doc.get('format')!r:.40}; this hil reads format {FORMAT}")
        if doc.get("checksum") != _checksum(doc):
            raise StatesError(f"{path}: its checksum does not match its contents (edited or damaged since it was "
                              f"written); {RECORD_AGAIN}")
        _check_fields(doc, path)
        return cls(folder, doc)

    def read(self, name: str) -> bytes:
        """A state's file, checked against its size and SHA-256 before anything parses it."""
        entry = self.doc["files"].get(name)
        path = self.folder / name
        if entry is None:
            raise StatesError(f"{path} is not in {self.path} (a state's files are listed there when it is saved)")
        data = files.read_regular(path, entry["size"] + 1, prefix=True)
        self._match(path, data, entry)
        return data

    def journal(self, name: str) -> bytes:
        """A journal's first ``size`` bytes (what was whole when the manifest was written), checked."""
        entry = self.doc["journals"][name]
        path = self.folder / name
        if entry["size"] == 0:
            return b""
        data = files.read_regular(path, entry["size"], prefix=True)
        self._match(path, data, entry)
        return data

    def _match(self, path: Path, data: bytes, entry: dict[str, Any]) -> None:
        if len(data) < entry["size"]:
            detail = f"{len(data):,} bytes where the manifest says {entry['size']:,}"
        elif len(data) > entry["size"]:
            detail = f"more than the manifest's {entry['size']:,} bytes"
        elif hashlib.sha256(data).hexdigest() != entry["sha256"]:
            detail = "its SHA-256 differs"
        else:
            return
        raise StatesError(f"{path} does not match the manifest ({detail}: changed, swapped with another file, cut "
                          f"short or damaged since it was saved); {RECORD_AGAIN}")


def _check_fields(doc: dict[str, Any], path: Path) -> None:
    files.check_states(doc.get("states"), path, "states")
    files.seconds(doc.get("log_end_s"), path, "log_end_s", allow_none=True)
    for key in ("trial", "fingerprint"):
        if not isinstance(doc.get(key), dict):
            raise StatesError(f"{path}: field {key}: expected an object, not {doc.get(key)!r:.60}")
    if doc.get("keys") is not None and not isinstance(doc["keys"], dict):
        raise StatesError(f"{path}: field keys: expected an object, not {doc['keys']!r:.60}")
    listed = doc.get("files")
    if not isinstance(listed, dict):
        raise StatesError(f"{path}: field files: expected an object, not {listed!r:.60}")
    for name, entry in listed.items():
        if not FILE_NAME.fullmatch(name):
            raise StatesError(f"{path}: field files: {name!r:.60} is not a state's file in states/")
        _check_entry(entry, path, f"files.{name}")
    journals = doc.get("journals")
    if not isinstance(journals, dict) or set(journals) != set(JOURNALS):
        raise StatesError(f"{path}: field journals: expected {', '.join(JOURNALS)}")
    for name in JOURNALS:
        _check_entry(journals[name], path, f"journals.{name}")


def _check_entry(entry: Any, path: Path, field: str) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not HEX.fullmatch(entry["sha256"]):
        raise StatesError(f"{path}: field {field}: expected {{size, sha256}}, not {entry!r:.80}")
    size = entry.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_FILE_BYTES:
        raise StatesError(f"{path}: field {field}.size: expected bytes (0 .. {MAX_FILE_BYTES:,}), not {size!r:.40}")
