"""The file under the trial log's MCAP writer: whole records or nothing, and a clean end when the disk is full.

The ``mcap`` Writer writes record by record into a stream. On a full disk (or a file-size limit) a buffered file
takes part of a chunk and then raises, and the log ends in half a record that no MCAP reader gets past
(``RecordLengthLimitExceeded``). Here the Writer's bytes collect in memory and reach the file only at
:meth:`LogFile.flush` (the recorder flushes once per second of log time; memory is bounded by the chunk size), with
``pwrite`` at the offset where the last flush ended. When the kernel refuses them (ENOSPC, EDQUOT, EFBIG: short
writes are retried until it does), :meth:`LogFile.cut` puts the file back to the end of the last flush and writes
an *end marker* there: a DataEnd and a Footer with no summary (MCAP's own records, ~50 bytes), so the default
reader of any MCAP tool reads every message up to the last whole chunk, linearly. Room for the marker is kept
allocated past the end of the file after every flush (``fallocate`` with FALLOC_FL_KEEP_SIZE, where the kernel
has it), so it can be written even on a disk that is full to the last byte; without it the file is cut at the
last flush, still readable by hil's reader and repairable (``hil log repair --out`` onto another disk).

Only a full disk takes this path: a SIGKILLed trial leaves the file as it was at its last flush (trial/record/log.py
reads it, ``hil log repair`` completes it), as before.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import sys
from pathlib import Path

from mcap.data_stream import RecordBuilder
from mcap.records import DataEnd, Footer

from .log import MAGIC

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
RESERVE_BYTES = 4096  # kept allocated past the end of the file: the end marker needs ~50
FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>


def end_marker() -> bytes:
    """DataEnd + a Footer without a summary + the magic: the smallest complete ending an MCAP file can have."""
    builder = RecordBuilder()
    DataEnd(data_section_crc=0).write(builder)
    Footer(summary_start=0, summary_offset_start=0, summary_crc=0).write(builder)
    return builder.end() + MAGIC


def _libc_fallocate():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fallocate = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    return fallocate


_FALLOCATE = _libc_fallocate()


class LogFile:
    """A write-only binary stream for the mcap Writer (``write``, ``tell``, ``flush``, ``close``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._pending = bytearray()
        self.flushed = 0  # bytes of the file that are whole records (all there at the last flush)

    def write(self, data: bytes) -> int:
        self._pending += data
        return len(data)

    def tell(self) -> int:
        return self.flushed + len(self._pending)

    def flush(self) -> None:
        """Everything written so far into the file; OSError (the file unchanged past :attr:`flushed` but for what
        :meth:`cut` removes) when the kernel refuses part of it."""
        done = 0
        with memoryview(self._pending) as view:
            while done < len(view):
                done += os.pwrite(self._fd, view[done:], self.flushed + done)
        self.flushed += done
        self._pending.clear()
        self._reserve()

    def fileno(self) -> int:
        return self._fd

    def _reserve(self) -> None:
        if _FALLOCATE is not None:  # best effort: a filesystem without it (or at its limit) simply gets none
            _FALLOCATE(self._fd, FALLOC_FL_KEEP_SIZE, self.flushed, RESERVE_BYTES)

    def cut(self) -> bool:
        """After a refused flush: drop what did not fit, end the file at :attr:`flushed` with the end marker.
        True when the marker is there (any MCAP reader reads the file), False when even that did not fit (the
        file ends at the last flush: hil's reader reads it, ``hil log repair`` completes it)."""
        self._pending.clear()
        marker = end_marker()
        try:
            os.ftruncate(self._fd, self.flushed + len(marker))  # keeps the blocks the marker goes into
            if os.pwrite(self._fd, marker, self.flushed) == len(marker):
                return True
        except OSError:
            pass
        os.ftruncate(self._fd, self.flushed)  # shrinking never needs room
        return False

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def describe_full(path: Path, exc: OSError) -> str:
    """What refused the write, naming the disk: its mount point and free bytes, or the file-size limit."""
    if exc.errno == errno.EFBIG:
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        limit = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft:,} bytes"
        return f"the file-size limit (RLIMIT_FSIZE, ulimit -f) of {limit} is reached"
    mount = path.resolve().parent
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    try:
        st = os.statvfs(mount)
        room = f"{st.f_bavail * st.f_frsize:,} bytes free of {st.f_blocks * st.f_frsize:,}"
    except OSError:
        room = "free space unknown"
    what = "the disk quota is exceeded" if exc.errno == errno.EDQUOT else "the disk is full"
    return f"{what} (the filesystem mounted at {mount}: {room})"
