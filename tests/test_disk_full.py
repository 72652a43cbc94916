"""A full disk while recording. The trial ends as a failed result naming the file and the disk,
with its summary line and what could be written; the log ends at its last whole chunk, readable by the ``mcap``
package's default reader (``make_reader``: no half-made record); ``hil log repair`` in place says where to write
instead while there is no room, and works once there is.

The disk: a tmpfs of 64 KiB mounted by the test where it may (root with CAP_SYS_ADMIN), else a file-size limit
(``RLIMIT_FSIZE`` of 64 KiB on the trial's process; Python ignores SIGXFSZ, so the write raises EFBIG); the
second test always takes the limit. Real ``hil demo`` subprocesses; their wait is a hang guard (HANG_S), not a
timing check. A demo writes ~8 KB of log per simulated second, so 64 KiB fills about half-way through a 15 s one.
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 300.0
DISK_BYTES = 64 * 1024
DEMO_S = "15"


def hil(*argv: str, cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess:
    def preexec() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    try:
        return subprocess.run([sys.executable, "-m", "hil", *argv], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=HANG_S, preexec_fn=preexec,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hil {' '.join(argv)} still running after {HANG_S:g} s (a hang, not a timing check)")


def _mount_tmpfs(where: Path, size: int) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """(folder, RLIMIT_FSIZE to give the trial or None): a 256 KiB tmpfs where it can be mounted, else a plain
    folder and the file-size limit."""
    mount = tmp_path / "disk"
    mounted = os.geteuid() == 0 and _mount_tmpfs(mount, DISK_BYTES)
    try:
        yield (mount, None) if mounted else (tmp_path, DISK_BYTES)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def default_reader_messages(path: Path) -> tuple[int, float, bool]:
    """(messages, last log time s, whether it has a summary) through mcap's default reader."""
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        reader = make_reader(f)
        times = [message.log_time for _, _, message in reader.iter_messages()]
        return len(times), max(times) / 1e9, reader.get_summary() is not None


def check_failed_demo(done: subprocess.CompletedProcess, log: Path, cause: str) -> float:
    """The summary line says failed, names the log and the cause; returns up to when the log holds messages."""
    summary = next((line for line in done.stdout.splitlines() if line.startswith("demo: ")), None)
    assert summary is not None, (done.stdout[-2000:], done.stderr[-2000:])
    found = re.match(rf"demo: failed after [\d.]+ s: LogDiskFull: {re.escape(str(log))}: {cause}.*: the trial log "
                     r"was closed at its last whole chunk; it holds every message before t=([\d.]+) s \(([\d,]+) "
                     r"bytes\), readable by any MCAP reader", summary)
    assert found, summary
    assert done.returncode == 1 and "hil: error" not in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # the summary says it all: no traceback follows
    assert f"wrote {log}" in done.stdout  # what could be written, said (and, on a full disk, what could not)
    assert log.stat().st_size == int(found.group(2).replace(",", "")) + 50  # the last whole chunk + the end marker
    return float(found.group(1))


def test_a_full_disk_ends_the_trial_with_a_readable_log_and_repair_waits_for_room(small_disk):
    folder, limit = small_disk
    out = folder / "demo"
    done = hil("demo", "--duration", DEMO_S, "--out", str(out), cwd=folder.parent, limit=limit)
    log = out / "trial.mcap"
    cause = "the disk is full \\(the filesystem mounted at " + re.escape(str(folder)) if limit is None else \
        f"the file-size limit \\(RLIMIT_FSIZE, ulimit -f\\) of {DISK_BYTES:,} bytes is reached"
    through_s = check_failed_demo(done, log, cause)
    count, last_s, indexed = default_reader_messages(log)
    assert count > 100 and last_s < through_s and not indexed
    assert not list(out.glob(".*.part"))  # no half-written report file
    if limit is None:  # the disk is still full: the repair says where to write instead, and changes nothing
        before = log.read_bytes()
        refused = hil("log", "repair", str(out), cwd=folder.parent)
        assert refused.returncode == 2 and "cannot write the repaired copy" in refused.stderr, refused.stderr
        assert "--out OTHER_DISK/trial.mcap" in refused.stderr and log.read_bytes() == before
        grown = subprocess.run(["mount", "-o", "remount,size=4m", str(folder)], capture_output=True)
        assert grown.returncode == 0, grown.stderr
    repaired = hil("log", "repair", str(out), cwd=folder.parent)  # in place, now that there is room
    assert repaired.returncode == 0 and repaired.stdout.startswith(f"repaired {log}"), repaired.stderr
    assert "without its index" in repaired.stdout
    assert default_reader_messages(log) == (count, last_s, True)


def test_a_file_size_limit_ends_the_trial_the_same_way(tmp_path):
    out = tmp_path / "demo"
    done = hil("demo", "--duration", DEMO_S, "--out", str(out), cwd=tmp_path, limit=DISK_BYTES)
    log = out / "trial.mcap"
    through_s = check_failed_demo(done, log,
                                  f"the file-size limit \\(RLIMIT_FSIZE, ulimit -f\\) of {DISK_BYTES:,} bytes")
    count, last_s, indexed = default_reader_messages(log)
    assert count > 100 and last_s < through_s and not indexed
    metrics = (out / "metrics.json").read_text()
    assert '"complete":false' in metrics.replace(" ", "") and "without its index" in metrics
    report = hil("report", str(out), "--no-repair", cwd=tmp_path)
    assert report.returncode == 0 and "cut short" in report.stdout, report.stderr
