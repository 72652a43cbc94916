"""A damaged ``states/`` folder never resumes wrongly: ``FUZZ_STATES_N`` seeded mutations of a recorded trial's
``states/`` (4 by default; ``make fuzz`` runs 300), each resumed at a time of its log.

A mutation flips bytes in a file, cuts it, swaps two files, deletes one, appends to one, points one at /dev/zero,
or edits a field of index.json or manifest.json (some edits with the manifest's checksum made right again, as a
careful forger would). Every case either resumes right (its log from the time on is the original's, message for
message) or is refused with a ResumeError naming the file in ``states/`` (a forged manifest: any ResumeError);
never another exception, never a different log. SIGALRM after CASE_HANG_S is a hang guard, not a timing check.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
from pathlib import Path

import pytest

from hil.trial.run import Trial
from hil.trial.state.resume import ResumeError
from test_state import CONTROLLER, messages

FUZZ_STATES_N = int(os.environ.get("FUZZ_STATES_N", "4"))
SEED = int(os.environ.get("FUZZ_SEED", "41"))
CASE_HANG_S = 300
KEYS = dict(map="arcade", scenario="guide_meets_child", start=(-18.0, 0.0, 0.0), seed=1, duration=3.0,
            state_every=1.0)
TIMES = (0.0, 0.5, 1.0, 1.7, 2.0, 2.9)
VALUES = (None, -1, 1e308, "../../x", "", [], {}, "state_000001000", 0.5, True, "f" * 64)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("fuzz_states")
    controller = root / "stateless.py"
    controller.write_text(CONTROLLER)
    Trial(controller, **KEYS).run(root / "a").raise_for_status()
    return controller, root / "a", {t: messages(root / "a", t) for t in TIMES}


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _leaves(value, path + (key,))
    elif isinstance(doc, list) and doc:
        for k, value in enumerate(doc):
            yield from _leaves(value, path + (k,))
    else:
        yield path


def _edit_json(rng: random.Random, path: Path, forge: bool) -> str | None:
    """A field of ``path`` set to a hostile value (None: it is no longer a JSON object with fields)."""
    from hil.trial.state.manifest import _checksum

    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return None
    leaves = [p for p in _leaves(doc) if p and p != ("checksum",)]
    if not isinstance(doc, dict) or not leaves:
        return None
    where = rng.choice(leaves)
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = rng.choice(VALUES)
    if forge:
        doc["checksum"] = _checksum(doc)
    path.write_text(json.dumps(doc))
    return f"{path.name}: {'/'.join(map(str, where))} = {parent[where[-1]]!r}{' (checksum forged)' if forge else ''}"


def mutate(rng: random.Random, states: Path) -> tuple[str, bool]:
    """One mutation of ``states``; (what was done, whether the manifest was forged)."""
    names = sorted(p.name for p in states.iterdir() if p.is_file() and not p.is_symlink())  # (not one made a device)
    if not names:
        return "nothing left to damage", False
    name = rng.choice(names)
    path = states / name
    kind = rng.choice(["flip", "cut", "swap", "delete", "append", "device", "json", "json", "forge"])
    if kind in ("json", "forge"):
        target = "manifest.json" if kind == "forge" or rng.random() < 0.5 else "index.json"
        edited = _edit_json(rng, states / target, kind == "forge") if target in names else None
        if edited is not None:
            return edited, kind == "forge"
        kind = "flip"
    data = bytearray(path.read_bytes())
    if kind == "flip" and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
    elif kind == "cut":
        path.write_bytes(bytes(data[:rng.randrange(len(data) + 1)]))
    elif kind == "swap" and len(names) > 1:
        other = states / rng.choice([n for n in names if n != name])
        swap = states.parent / "swap"
        path.rename(swap)
        other.rename(path)
        swap.rename(other)
        return f"swap {name} {other.name}", False
    elif kind == "delete":
        path.unlink()
    elif kind == "append":
        path.write_bytes(bytes(data) + rng.randbytes(rng.randint(1, 64)))
    elif kind == "device":
        path.unlink()
        path.symlink_to("/dev/zero")
    return f"{kind} {name}", False


def _hang(signum, frame):
    raise TimeoutError(f"a case still running after {CASE_HANG_S} s (a hang guard, not a timing check)")


def test_a_mutated_states_folder_resumes_right_or_is_refused_naming_the_file(original, tmp_path):
    controller, folder, expected = original
    rng = random.Random(SEED)
    outcomes = {"resumed": 0, "refused": 0}
    previous = signal.signal(signal.SIGALRM, _hang)
    try:
        for case in range(FUZZ_STATES_N):
            here = tmp_path / f"case{case}"
            states = here / "states"
            shutil.copytree(folder / "states", states)
            done = [mutate(rng, states) for _ in range(rng.choice((1, 1, 2)))]
            forged = any(f for _, f in done)
            t = rng.choice(TIMES)
            print(f"case {case}: {done} from {t:g} s", flush=True)  # (a crash of the process names its case)
            signal.alarm(CASE_HANG_S)
            try:
                Trial(controller, **{**KEYS, "from": f"{here}@{t:g}"}).run(here / "r").raise_for_status()
            except ResumeError as exc:
                assert forged or str(states) in str(exc), (case, done, t, str(exc))
                assert "\n" not in str(exc), (case, done, str(exc))
                outcomes["refused"] += 1
            else:
                assert messages(here / "r", t) == expected[t], (case, done, t)
                outcomes["resumed"] += 1
            finally:
                signal.alarm(0)
            shutil.rmtree(here)
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(f"{FUZZ_STATES_N} mutated states folders: {outcomes}")
