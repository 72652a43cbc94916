"""Serial ports through pyserial: ``/dev/ttyUSB0``, ``/dev/pts/N``, ``serial:///dev/ttyUSB0?baud=4000000``.

pyserial opens and configures the port (raw 8N1, exclusive lock, low-latency mode where the driver has it);
I/O then runs on the file descriptor directly.
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import os
import stat
import warnings
from pathlib import Path

import serial

from .base import PEER_PROCESS_LATENCY_S, FdTransport, TransportError

DEFAULT_BAUD = 1_000_000


class SerialTransport(FdTransport):
    def __init__(self, url: str, baud: int | None = None):
        path, query_baud = _parse(url)
        self.baud = baud or query_baud or DEFAULT_BAUD
        try:
            self._serial = serial.Serial(path, baudrate=self.baud, timeout=0, exclusive=True)
        except (serial.SerialException, ValueError) as exc:
            raise TransportError(0, f"{url}: cannot open serial port: {exc}") from None
        try:
            self._serial.set_low_latency_mode(True)
        except (ValueError, AttributeError, OSError):
            pass  # ptys and some drivers have no ASYNC_LOW_LATENCY; the adapter's latency timer still applies
        super().__init__(self._serial.fileno(), url)
        if is_pty(self._serial.fileno()):
            self.peer_latency_s = PEER_PROCESS_LATENCY_S  # a process answers, not a part on a wire
        self.notes = check_latency_timer(path)  # an FTDI adapter's 16 ms default costs every reply 16 ms

    def close(self) -> None:
        self._serial.close()


def check_latency_timer(path: str, sysfs_root: Path = Path("/sys")) -> list[str]:
    """An FTDI latency timer above 1 ms is set to 1 ms where the sysfs file may be written; else a warning with the
    fix. Returns what was done or warned (also issued as a RuntimeWarning)."""
    from ..ports import MAX_GOOD_LATENCY_MS, latency_timer_path, read_latency_timer

    latency = read_latency_timer(os.path.realpath(path), sysfs_root)
    if latency is None or latency <= MAX_GOOD_LATENCY_MS:
        return []
    timer = latency_timer_path(os.path.realpath(path), sysfs_root)
    try:
        timer.write_text(f"{MAX_GOOD_LATENCY_MS}\n")
        note = f"{path}: latency timer was {latency} ms; set to {MAX_GOOD_LATENCY_MS} ms ({timer})"
    except OSError:
        note = (f"{path}: latency timer is {latency} ms (> {MAX_GOOD_LATENCY_MS} ms): every reply waits for it. "
                f"Fix: echo {MAX_GOOD_LATENCY_MS} | sudo tee {timer}")
    warnings.warn(note, RuntimeWarning, stacklevel=3)
    return [note]


def _unused_close(self) -> None:

    def close(self) -> None:
        self._serial.close()


UNIX98_PTY_SLAVE_MAJORS = range(136, 144)  # Linux devices.txt: /dev/pts/*


def is_pty(fd: int) -> bool:
    """True when ``fd`` is the slave side of a pseudo-terminal (its peer is a process, e.g. ``hil sim --pty``)."""
    st = os.fstat(fd)
    if not stat.S_ISCHR(st.st_mode):
        return False
    if os.major(st.st_rdev) in UNIX98_PTY_SLAVE_MAJORS:
        return True
    try:
        return os.ttyname(fd).startswith(("/dev/pts/", "/dev/ttys"))  # other systems: by name
    except OSError:
        return False


def _parse(url: str) -> tuple[str, int | None]:
    if not url.startswith("serial://"):
        return url, None
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    baud = int(query["baud"][0]) if "baud" in query else None
    return parts.path, baud


def open_transport(url: str, **options) -> SerialTransport:
    return SerialTransport(url, baud=options.get("baud"))
