"""Descriptors cached on disk by SHA-256, so a warm scan reads only the 66-byte CPC headers.

Files are named by the hash of their content and re-checked when read: a corrupted cache entry is dropped and
read again from the part, never trusted. Writes are atomic (temporary file + rename).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..paths import user_path


def default_cache_dir() -> Path:
    return user_path("HIL_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "hil", "descriptors")


class DescriptorCache:
    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, sha256_hex: str) -> Path:
        return self.directory / f"{sha256_hex}.msgpack"

    def get(self, sha256: bytes) -> bytes | None:
        path = self._path(sha256.hex())
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).digest() != sha256:
            path.unlink(missing_ok=True)  # corrupted entry: forget it, the part will be read again
            return None
        return data

    def put(self, sha256: bytes, data: bytes) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self._path(sha256.hex()))
        except OSError:
            pass  # a read-only or full disk makes scans cold, not wrong


class NoCache(DescriptorCache):
    def __init__(self) -> None:
        super().__init__(Path(os.devnull))

    def get(self, sha256: bytes) -> bytes | None:
        return None

    def put(self, sha256: bytes, data: bytes) -> None:
        pass
