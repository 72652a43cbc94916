"""A damaged ``states/`` folder is refused, naming the file, never resumed from wrongly; a resume before the first
periodic state of a crowd trial works; a full disk says in the summary that states were not saved.

One trial is recorded per module (real pybullet, a real crowd process, the stateless controller of
tests/test_state.py); each test copies its ``states/`` and damages the copy. Resumes that must refuse run through
``Trial.run`` (the refusal comes before anything starts) or, where the old failure was a crash of the process
(pybullet's C++ abort, MemoryError), through ``hil trial`` in a subprocess whose exit status and stderr are checked.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.trial.run import Trial
from hil.trial.state.resume import ResumeError
from test_disk_full import _mount_tmpfs
from test_state import CONTROLLER, messages

ROOT = Path(__file__).resolve().parent.parent
KEYS = dict(map="arcade", scenario="guide_meets_child", crowd=("weekday",), crowd_scale=20.0, start=(-18.0, 0.0, 0.0),
            seed=1, duration=4.0, state_every=2.0)  # people come in from 2.6 s on
HANG_S = 300.0
MEMORY_LIMIT = 6 << 30  # address space of the resume subprocesses: a runaway read fails there, not on the machine


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("manifest")
    controller = root / "stateless.py"
    controller.write_text(CONTROLLER)
    Trial(controller, **KEYS).run(root / "a").raise_for_status()
    return controller, root / "a"


def copy_states(folder: Path, to: Path) -> Path:
    shutil.copytree(folder / "states", to / "states")
    return to / "states"


def resume(controller: Path, folder: Path, out: Path, t: float, **keys) -> None:
    Trial(controller, **{**KEYS, **keys, "from": f"{folder}@{t:g}"}).run(out).raise_for_status()


def hil(*argv: str, cwd: Path, limit_fsize: int | None = None) -> subprocess.CompletedProcess:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    try:
        return subprocess.run([sys.executable, "-m", "hil", *argv], cwd=cwd, capture_output=True, text=True,
                              timeout=HANG_S, preexec_fn=preexec, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        pytest.fail(f"hil {' '.join(argv)} still running after {HANG_S:g} s (a hang, not a timing check)")


def refused_in_one_line(done: subprocess.CompletedProcess, *names: str) -> str:
    """The command exited 2 with one ``hil: error:`` line naming every one of ``names``, and no traceback."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("hil: error:")]
    assert done.returncode == 2 and len(errors) == 1, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


def test_swapped_state_files_are_refused_naming_the_file(original, tmp_path):
    controller, folder = original
    states = copy_states(folder, tmp_path / "c")
    for suffix in (".msgpack", ".bullet"):  # the state of 0 s where the one of 2 s was, and back
        a, b = states / f"state_000000000{suffix}", states / f"state_000002000{suffix}"
        a.rename(tmp_path / "swap")
        b.rename(a)
        (tmp_path / "swap").rename(b)
    with pytest.raises(ResumeError, match=r"state_000002000\.msgpack does not match the manifest \("):
        resume(controller, tmp_path / "c", tmp_path / "r", 2.5)


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_cut_or_missing_journal_of_commands_is_refused(original, tmp_path, damage):
    controller, folder = original
    journal = copy_states(folder, tmp_path / "c") / "commands.msgpack"
    if damage == "missing":
        journal.unlink()
        match = r"commands\.msgpack is missing"
    else:
        journal.write_bytes(journal.read_bytes()[:len(journal.read_bytes()) // 2])
        match = r"commands\.msgpack does not match the manifest \([\d,]+ bytes where the manifest says"
    with pytest.raises(ResumeError, match=match):
        resume(controller, tmp_path / "c", tmp_path / "r", 3.0)


def test_a_corrupt_bullet_is_refused_before_pybullet_reads_it(original, tmp_path):
    controller, folder = original
    bullet = copy_states(folder, tmp_path / "c") / "state_000002000.bullet"
    data = bytearray(bullet.read_bytes())
    for k in range(64, len(data), 97):  # pybullet's reader aborts the process on this (C++ abort, no message)
        data[k] ^= 0xA5
    bullet.write_bytes(bytes(data))
    done = hil("trial", str(controller), "--from", f"{tmp_path / 'c'}@2", "--out", str(tmp_path / "r"),
               cwd=tmp_path)
    refused_in_one_line(done, str(bullet), "does not match the manifest")


def test_a_state_file_that_is_a_device_is_refused_unread(original, tmp_path):
    controller, folder = original
    state = copy_states(folder, tmp_path / "c") / "state_000002000.msgpack"
    state.unlink()
    state.symlink_to("/dev/zero")
    done = hil("trial", str(controller), "--from", f"{tmp_path / 'c'}@2", "--out", str(tmp_path / "r"),
               cwd=tmp_path)
    refused_in_one_line(done, str(state), "not a regular file (a character device)")


def test_a_state_named_outside_states_is_refused(original, tmp_path):
    """index.json and the manifest naming ``../../x`` (with a real state there, so reading it would resume)."""
    controller, folder = original
    states = copy_states(folder, tmp_path / "c")
    for suffix in (".msgpack", ".bullet"):
        shutil.copy(states / f"state_000002000{suffix}", tmp_path / f"x{suffix}")
    for name in ("index.json", "manifest.json"):
        if not (states / name).exists():  # (a hil that read the index alone)
            continue
        doc = json.loads((states / name).read_text())
        doc["states"][1]["file"] = "../../x"
        if name == "manifest.json":  # a consistent manifest: the name is what is refused
            from hil.trial.state.manifest import _checksum

            doc["checksum"] = _checksum(doc)
        (states / name).write_text(json.dumps(doc))
    with pytest.raises(ResumeError, match=r"manifest\.json: field states\[1\]\.file: expected a state's name"):
        resume(controller, tmp_path / "c", tmp_path / "r", 2.0)


def test_a_bad_index_is_one_error_naming_the_field(original, tmp_path):
    """index.json is read for report.html's retry lines and the viewer's retry trial file, not by a resume."""
    from hil.trial.state.retry import retry_trial_file

    _, folder = original
    states = copy_states(folder, tmp_path / "c")
    index = json.loads((states / "index.json").read_text())
    for field, value, match in (("states", "all", r"field states: expected a list"),
                                ("states", [{"t": "soon", "file": "s", "why": "start"}], r"field states\[0\]\.t"),
                                ("trial", ["x"], r"field trial: expected an object")):
        (states / "index.json").write_text(json.dumps({**index, field: value}))
        with pytest.raises(ValueError, match=rf"{states / 'index.json'}: {match}"):  # one line, not a KeyError
            retry_trial_file(tmp_path / "c", 2.0, tmp_path / "retry.yaml")


def test_states_saved_without_a_manifest_are_refused_with_how_to_record_again(original, tmp_path):
    controller, folder = original
    states = copy_states(folder, tmp_path / "c")
    (states / "manifest.json").unlink()
    with pytest.raises(ResumeError, match=r"manifest\.json is missing: .*record the trial again"):
        resume(controller, tmp_path / "c", tmp_path / "r", 2.0)


@pytest.mark.parametrize("t", [0.0, 1.0])
def test_a_crowd_trial_resumes_before_its_first_periodic_state(original, tmp_path, t):
    """At 0 the crowd has had no tick: it starts fresh, and the log from there is the original's."""
    controller, folder = original
    resume(controller, folder, tmp_path / "r", t)
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["resumed_from"]["state_t"] == 0.0
    again = messages(tmp_path / "r", t)
    assert any(json.loads(data)["people"] for _, data in again["/pedestrians"])
    assert again == messages(folder, t)


def test_a_time_that_is_no_number_says_what_is_expected(original, tmp_path):
    controller, folder = original
    done = hil("trial", str(controller), "--from", f"{folder}@abc", "--out", str(tmp_path / "r"), cwd=tmp_path)
    line = refused_in_one_line(done, f"--from {folder}@abc", "DIR@SECONDS", f"{folder}@7.5")
    assert "convert" not in line


@pytest.fixture
def small_disk(tmp_path):
    """(folder, RLIMIT_FSIZE or None): a 512 KiB tmpfs where it can be mounted, else a folder and that file-size
    limit. Both leave room for a 6 s trial's log and none for a state."""
    mount = tmp_path / "disk"
    mounted = os.geteuid() == 0 and _mount_tmpfs(mount, 512 * 1024)
    try:
        yield (mount, None) if mounted else (tmp_path, 512 * 1024)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_disk_with_no_room_for_any_state_is_said_in_the_summary(small_disk):
    folder, limit = small_disk
    out = folder / "demo"
    done = hil("demo", "--duration", "6", "--out", str(out), "--quiet", cwd=folder.parent, limit_fsize=limit)
    summary = next((line for line in done.stdout.splitlines() if line.startswith("demo: ")), "")
    assert "states NOT saved (no room for saved states in" in summary, (summary, done.stderr[-2000:])
    assert "--from cannot start from this trial" in summary and "Traceback" not in done.stderr
    refused = hil("trial", str(ROOT / "examples/guide_robot.py"), "--from", f"{out}@2", cwd=folder.parent)
    refused_in_one_line(refused, "no saved states in")
