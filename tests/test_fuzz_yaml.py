"""Every kind of config file hil reads, fed hostile YAML: alias bombs, recursive anchors, deep
nesting, huge scalars, binary, unsafe tags, several documents, and ``FUZZ_YAML_N`` seeded mutations of the
shipped file of that kind (40 per kind by default; ``make fuzz`` runs 5,000).

Each case is either loaded or refused with a ValueError (ConfigError, ScriptError) that names the file: never
another exception (a TypeError or AttributeError deep in a checker is a bug), never a hang or runaway memory. The
bounds, hang guards and not speed checks: SIGALRM after CASE_HANG_S per case, and this process's peak RSS may
grow by at most MAX_GROWTH_MB over the whole test.
"""
from __future__ import annotations

import os
import random
import resource
import shutil
import signal
from pathlib import Path

import pytest

from hil.devices.yaml_source import ALIAS_BUDGET, MAX_DEPTH, size_limit

ROOT = Path(__file__).resolve().parent.parent
FUZZ_YAML_N = int(os.environ.get("FUZZ_YAML_N", "40"))
SEED = int(os.environ.get("FUZZ_SEED", "29"))
CASE_HANG_S = 60
MAX_GROWTH_MB = 512


def _trial(path: Path):
    from hil.trial.spec import load_trial_file
    from hil.trial.task import make_task

    return make_task(load_trial_file(path))


def _kinds() -> dict:
    """kind -> (SIZE_LIMITS key, a shipped file of that kind, file suffix, its loader)."""
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.population import load_rates
    from hil.devices.calibration import load_calibration
    from hil.trial.calibrate.rig import load_rig
    from hil.crowd.script import load_script
    from hil.devices.catalog import load_source
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.world.maps import load_map
    from hil.runtime.drivers.trust import TrustStore
    from hil.runtime.robot import load_profile
    from hil.runtime.robot.semantics import load_semantics
    from hil.trial.record.tick_log import map_message
    from hil.trial.sweep.spec import load_sweep

    c = ROOT / "config"
    return {
        "trial": ("trial", None, ".yaml", _trial),
        "sweep": ("sweep", c / "sweeps/guide.yaml", ".yaml", load_sweep),
        "world map": ("map", c / "maps/lab.yaml", ".yaml", load_map),
        "crowd map": ("map", c / "maps/arcade.yaml", ".yaml", load_crowd_map),
        "log map": ("map", c / "maps/lab.yaml", ".yaml", lambda p: map_message(str(p))),
        "rates": ("rates", c / "crowd/weekday.yaml", ".yaml", load_rates),
        "profile": ("profile", c / "profiles/two_buses.yaml", ".yaml", load_profile),
        "robot": ("robot", c / "robots/left_arm.yaml", ".yaml", lambda p: load_assembly(str(p))),
        "semantics": ("semantics", c / "semantics/commbot.yaml", ".yaml", load_semantics),
        "descriptor": ("descriptor", ROOT / "devices/catalog/parts/upper_arm.yaml", ".yaml", load_source),
        "scenario": ("scenario", c / "scenarios/guide_meets_child.scn", ".scn", load_script),
        "trust": ("trust", None, ".yaml", TrustStore.load),
        "calibration": ("calibration", ROOT / "tests/data/cal_ring.yaml", ".yaml", load_calibration),
        "rig": ("rig", ROOT / "examples/rig_corridor.yaml", ".yaml", load_rig),
    }


TRIAL_TEXT = "controller: still.py\nmap: arcade\ngoal: fountain\nduration: 5\nparams: {speed: 0.3}\n"
TRUST_TEXT = "sha256: [" + "0" * 64 + "]\nkeys: {}\n"


def bomb(levels: int = 9) -> str:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(rows) + "\n"


def fixed_cases(limit: int) -> list[tuple[str, bytes]]:
    """The named hostile inputs (name, bytes)."""
    deep_block = "".join(" " * i + "k:\n" for i in range(200)) + " " * 200 + "k: 1\n"
    return [
        ("alias bomb", bomb().encode()),
        ("alias bomb in a value", ("name: x\nparts: " + bomb().replace("\n", "\n  ").rstrip() + "\n").encode()),
        ("just over the alias budget", ("a: &a [" + ", ".join(["x"] * 100) + "]\nb: ["
                                        + ", ".join(["*a"] * (ALIAS_BUDGET // 100 + 2)) + "]\n").encode()),
        ("recursive anchor", b"a: &a [1, *a]\n"),
        ("recursive mapping", b"&m {self: *m}\n"),
        ("deep flow nesting", ("x: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n").encode()),
        ("libyaml's nesting cap", ("x: " + "{a: " * 1200 + "1" + "}" * 1200 + "\n").encode()),
        ("deep block nesting", deep_block.encode()),
        ("huge scalar under the limit", b"name: " + b"x" * (limit - 100) + b"\n"),
        ("huge scalar over the limit", b"name: " + b"x" * (limit + 10) + b"\n"),
        ("huge key", b"x" * 70000 + b": 1\n"),
        ("binary", bytes(random.Random(1).getrandbits(8) for _ in range(4096))),
        ("jpeg head", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
        ("NUL bytes", b"name: a\x00b\n"),
        ("control characters", b"name: \x07\x1b[31m\n"),
        ("UTF-16", "name: x\n".encode("utf-16")),
        ("python tag", b"name: !!python/object/apply:os.system ['true']\n"),
        ("unknown tag", b"name: !secret x\n"),
        ("two documents", b"name: a\n---\nname: b\n"),
        ("merge key", b"base: &b {x: 1}\nname: {<<: *b}\n"),
        ("list as key", b"? [1, 2]\n: x\n"),
        ("empty", b""),
        ("only a comment", b"# nothing\n"),
        ("a scalar", b"42\n"),
        ("a list", b"- 1\n- 2\n"),
        ("null", b"~\n"),
        ("huge integer", b"name: " + b"9" * 5000 + b"\n"),
        ("many keys", "".join(f"k{i}: {i}\n" for i in range(20000)).encode()),
    ]


def mutations(rng: random.Random, text: bytes, n: int) -> list[tuple[str, bytes]]:
    """The shipped file with lines dropped, duplicated, swapped, cut, or bytes and YAML punctuation injected."""
    lines = text.splitlines(keepends=True) or [b"\n"]
    tokens = [b"&a ", b"*a", b"[", b"]", b"{", b"}", b": ", b"- ", b"!!binary ", b"? ", b"'", b'"', b"\t", b"nan",
              b"1e999", b"-1", b"null", b"[]", b"{}", b"\xff", b"\x00", b"---\n", b"|\n", b">"]
    out = []
    for k in range(n):
        rows = list(lines)
        for _ in range(rng.randrange(1, 5)):
            i = rng.randrange(len(rows))
            op = rng.random()
            if op < 0.2 and len(rows) > 1:
                del rows[i]
            elif op < 0.35:
                rows.insert(i, rows[rng.randrange(len(rows))])
            elif op < 0.5:
                j = rng.randrange(len(rows))
                rows[i], rows[j] = rows[j], rows[i]
            elif op < 0.65:
                rows[i] = rows[i][:rng.randrange(len(rows[i]) + 1)]
            else:
                at = rng.randrange(len(rows[i]) + 1)
                rows[i] = rows[i][:at] + rng.choice(tokens) + rows[i][at:]
        out.append((f"mutation {k}", b"".join(rows)))
    return out


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def check_case(load, path: Path, name: str) -> None:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_HANG_S)
    try:
        load(path)
    except _Hang:
        pytest.fail(f"{name}: still loading after {CASE_HANG_S} s (a hang, not a timing check)")
    except ValueError as exc:  # ConfigError, ScriptError, a refused value: must say which file
        assert str(path) in str(exc) or path.name in str(exc), f"{name}: {exc!r} does not name {path}"
    except RecursionError:
        pytest.fail(f"{name}: RecursionError (nesting must be refused with file:line)")
    except Exception as exc:  # noqa: BLE001 - anything else is a bug in a checker
        pytest.fail(f"{name}: {type(exc).__name__}: {exc} (expected a ConfigError naming {path})")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", list(_kinds()))
def test_every_config_kind_refuses_hostile_yaml_with_its_file(kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative names (still.py, a profile's semantics) resolve here
    size_kind, shipped, suffix, load = _kinds()[kind]
    if shipped is not None:
        for sibling in shipped.parent.iterdir():  # what the file names beside it (a profile's semantics file)
            if sibling.is_file():
                shutil.copy(sibling, tmp_path / sibling.name)
        base = shipped.read_bytes()
    else:
        base = (TRIAL_TEXT if kind == "trial" else TRUST_TEXT).encode()
    (tmp_path / "still.py").write_text("def main(robot):\n    pass\n")
    rng = random.Random(f"{SEED}:{kind}")
    start_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cases = fixed_cases(size_limit(size_kind)) + mutations(rng, base, FUZZ_YAML_N)
    for n, (name, data) in enumerate(cases):
        path = tmp_path / f"case{n}{suffix}"
        path.write_bytes(data)
        check_case(load, path, f"{kind}, {name}")
        path.unlink()
    grown_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - start_mb
    assert grown_mb < MAX_GROWTH_MB, f"peak memory grew by {grown_mb:.0f} MB over {len(cases)} cases"
