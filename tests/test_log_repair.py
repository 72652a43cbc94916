"""``hil log repair DIR``: a trial killed with SIGKILL leaves a log our reader reads but other MCAP
tools do not; the repair writes a complete, indexed copy that the ``mcap`` library's default reader reads message
for message as ours did.

A real ``hil trial`` subprocess on the sim clock is killed mid-run (after its progress says a few seconds were
logged); the repairs go through the real command (``hil.cli.main``). No timing assertions: the kill waits for a
progress line, with a generous deadline.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import hil_command
from waiting import HangGuard

from hil.trial.record.log import read_log

ROOT = Path(__file__).resolve().parent.parent
KILL_AFTER_S = 3.0  # trial time logged before the kill: a few flushed chunks (the recorder flushes every second)
DEADLINE_S = 120.0


def killed_trial(out: Path) -> bytes:
    """Run ``hil trial`` on the sim clock, SIGKILL it once its progress passed KILL_AFTER_S; the log's bytes."""
    proc = subprocess.Popen([*hil_command(), "trial", str(ROOT / "examples" / "wander_avoid.py"), "--map", "arcade",
                             "--duration", "60", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=ROOT)
    seen = b""
    try:
        guard = HangGuard(DEADLINE_S)
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not _logged_past(seen, KILL_AFTER_S):
                guard.check(lambda: f"progress past {KILL_AFTER_S:g} s: {seen.decode(errors='replace')[-2000:]}")
                assert proc.poll() is None, seen.decode(errors="replace")[-2000:]
                if sel.select(1.0):
                    seen += os.read(proc.stdout.fileno(), 65536)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stdout.close()
    return (out / "trial.mcap").read_bytes()


def _logged_past(output: bytes, t_s: float) -> bool:
    """A progress line ``[###....] t=   6.0/60 s ...`` at or past ``t_s``."""
    for line in output.decode(errors="replace").splitlines():
        if line.startswith("[") and "t=" in line:
            if float(line.split("t=", 1)[1].split("/", 1)[0]) >= t_s:
                return True
    return False


def library_messages(path: Path) -> tuple[list[tuple[str, float, object]], Exception | None]:
    """What the ``mcap`` library's default reader gives: (topic, t, payload) per message (JSON decoded; the
    Foxglove channels' protobuf kept as bytes, as our reader keeps them), and how it failed."""
    from mcap.reader import make_reader

    got, failure = [], None
    try:
        with open(path, "rb") as f:
            for _, channel, message in make_reader(f).iter_messages():
                data = json.loads(message.data) if channel.message_encoding == "json" else bytes(message.data)
                got.append((channel.topic, message.log_time / 1e9, data))
    except Exception as exc:  # noqa: BLE001 - whatever the library raises on a file without a footer
        failure = exc
    return got, failure


def in_order(messages: list[tuple[str, float, object]]) -> list[tuple[str, float, object]]:
    return sorted(messages, key=lambda m: (m[1], m[0], m[2].hex() if isinstance(m[2], bytes)
                                          else json.dumps(m[2], sort_keys=True)))


def ours(path: Path) -> list[tuple[str, float, object]]:
    log = read_log(path)
    return in_order([(topic, m.t, m.data) for topic, msgs in log.messages.items() for m in msgs])


def hil(capsys, *argv: str) -> str:
    from hil.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> bytes:
    return killed_trial(tmp_path_factory.mktemp("killed"))


def test_a_killed_trial_is_repaired_and_the_mcap_library_reads_every_message_ours_read(killed, tmp_path, capsys):
    folder = tmp_path / "trial"
    folder.mkdir()
    log = folder / "trial.mcap"
    log.write_bytes(killed)
    before = read_log(log)
    assert not before.complete and before.count() > 0, before.stopped
    read = ours(log)
    assert max(t for _, t, _ in read) >= KILL_AFTER_S - 1.0, "the log holds what was flushed before the kill"
    lib, failure = library_messages(log)
    assert len(lib) < len(read) and failure is not None, "the problem being repaired: no footer, no messages"

    said = hil(capsys, "log", "repair", str(folder))
    assert said.startswith(f"repaired {log}: {len(read)} messages") and "trial.mcap.broken" in said, said
    assert (folder / "trial.mcap.broken").read_bytes() == killed, "the original is kept as it was"
    lib, failure = library_messages(log)
    assert failure is None and in_order(lib) == read
    assert any(isinstance(data, bytes) for _, _, data in read), "the Foxglove channels came through too"
    from mcap.reader import make_reader

    with open(log, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics.message_count == len(read) and summary.chunk_indexes
    after = read_log(log)
    assert after.complete and ours(log) == read and after.repaired["messages"] == str(len(read))
    assert after.repaired["stopped"] == before.stopped
    assert "nothing to repair" in hil(capsys, "log", "repair", str(folder))


def test_a_torn_last_record_is_dropped_and_the_rest_kept(killed, tmp_path, capsys):
    """A kill in the middle of a write leaves half a record: the repair keeps every record before it."""
    torn = tmp_path / "torn.mcap"
    torn.write_bytes(killed + b"\x06" + (10 ** 6).to_bytes(8, "little") + b"half a chunk")
    out = tmp_path / "whole.mcap"
    said = hil(capsys, "log", "repair", str(torn), "--out", str(out))
    assert f"repaired {out}" in said and "incomplete record (opcode 0x6" in said, said
    assert torn.read_bytes().endswith(b"half a chunk"), "--out leaves the original as it is"
    lib, failure = library_messages(out)
    assert failure is None and len(lib) == read_log(torn).count() == len(ours(out)) > 0


def test_hil_report_repairs_a_cut_short_log_and_says_so(killed, tmp_path, capsys):
    folder = tmp_path / "trial"
    folder.mkdir()
    (folder / "trial.mcap").write_bytes(killed)
    said = hil(capsys, "report", str(folder))
    assert said.startswith(f"repaired {folder / 'trial.mcap'}") and "repaired: complete and indexed" in said, said
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["log"]["complete"] and metrics["log"]["repaired"]["stopped"].startswith("file ends")
    assert library_messages(folder / "trial.mcap")[1] is None
    # --no-repair leaves the log as it was, and the report still says how far it goes
    other = tmp_path / "other"
    other.mkdir()
    (other / "trial.mcap").write_bytes(killed)
    said = hil(capsys, "report", str(other), "--no-repair")
    assert "cut short at" in said and not (other / "trial.mcap.broken").exists()
    assert (other / "trial.mcap").read_bytes() == killed


def test_what_cannot_be_repaired_is_one_clean_error(killed, tmp_path, capsys):
    from hil.cli import main

    def refused(*argv: str) -> str:
        assert main(["log", "repair", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("hil: error: ") and "Traceback" not in err and len(err.splitlines()) == 1, err
        return err

    garbage = tmp_path / "not.mcap"
    garbage.write_bytes(b"no mcap here")
    assert "not an MCAP file" in refused(str(garbage))
    assert "no trial log there" in refused(str(tmp_path / "nowhere"))
    header_only = tmp_path / "cut.mcap"
    header_only.write_bytes(bytes([137, 77, 67, 65, 80, 48, 13, 10]) + b"\x01")
    assert "nothing to repair: the file holds no complete record" in refused(str(header_only))
    folder = tmp_path / "twice"
    folder.mkdir()
    (folder / "trial.mcap").write_bytes(killed)
    (folder / "trial.mcap.broken").write_bytes(b"an earlier repair's original")
    assert "trial.mcap.broken is already there" in refused(str(folder))
    assert (folder / "trial.mcap").read_bytes() == killed, "nothing was half-done"
