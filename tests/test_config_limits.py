"""What an outside probe fed hil's config loaders.

1. A YAML alias bomb (nine levels of anchors under ``params:``, 10^9 leaves once expanded) is refused at the
   anchor's file:line instead of growing memory at ~50 MB/s forever.
2. A 50 MB map (1.2 M places) is refused by its size before a byte is parsed.
5. Three config errors that lacked file or line now name both.

The command-line cases run the real ``hil`` in a subprocess and bound it: a hang guard (HANG_S) on its wall time
and a bound on its peak memory (MAX_RSS_MB, the high-water mark of its own image: run_hil); neither is a speed check.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hil.devices.yaml_source import ALIAS_BUDGET, MAX_DEPTH, SIZE_LIMITS, ConfigError, load_yaml_file, load_yaml_text
from tests.waiting import HangGuard

ROOT = Path(__file__).resolve().parent.parent
MAX_RSS_MB = 1024  # the bound on the child's peak memory: hil trial's imports need ~200 MB; the bomb needed GBs


def bomb_text(levels: int = 9) -> str:
    """The probe's bomb: a trial file whose params hold nine levels of ten aliases each (10^9 leaves)."""
    rows = ["controller: still.py", "map: arcade", "params:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(rows) + "\n"


def run_hil(tmp_path: Path, *argv: str) -> tuple[int, str, int]:
    """``hil ARGV`` in a subprocess: (exit status, stderr, its peak RSS in MB), bounded by a hang guard.

    The peak is the kernel's high-water mark of the child's own address space (``VmHWM`` in /proc/PID/status,
    read while it runs), not ``ru_maxrss``: that one counts from the fork, when the child is still a copy of this
    worker (over 1 GB late in a suite run), and survives the exec."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "stderr.txt", "w+b") as err:
        child = subprocess.Popen([sys.executable, "-m", "hil", *argv], cwd=tmp_path, env=env,
                                 stdout=subprocess.DEVNULL, stderr=err)
        guard, reaped, peak_kb = HangGuard(), None, 0
        try:
            while reaped is None:
                peak_kb = max(peak_kb, _high_water_kb(child.pid))
                pid, status, _usage = os.wait4(child.pid, os.WNOHANG)
                if pid == child.pid:
                    reaped = os.waitstatus_to_exitcode(status)
                else:
                    guard.check(f"hil {' '.join(argv)} to exit")
                    time.sleep(0.02)
        finally:
            if reaped is None:
                child.kill()
                os.wait4(child.pid, 0)
            child.returncode = reaped if reaped is not None else -9
        err.seek(0)
        return reaped, err.read().decode(errors="replace"), peak_kb // 1024


def _high_water_kb(pid: int) -> int:
    """The peak resident size of a running process's current image (0 once it is a zombie or gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_error_line(text: str) -> str:
    lines = [row for row in text.splitlines() if row.strip() and not row.startswith("pybullet build time")]
    assert len(lines) == 1 and lines[0].startswith("hil: error: ") and "Traceback" not in text, text
    return lines[0]


# --- 1. the alias bomb ----------------------------------------------------------------------------------------
def test_the_alias_bomb_in_a_trial_file_is_refused_at_its_line_in_bounded_time_and_memory(tmp_path):
    (tmp_path / "still.py").write_text("def main(robot):\n    pass\n")
    (tmp_path / "bomb.yaml").write_text(bomb_text())
    status, err, rss_mb = run_hil(tmp_path, "trial", "bomb.yaml", "--duration", "1", "--out", str(tmp_path / "t"))
    line = one_error_line(err)
    assert status == 2
    # the anchor repeated most (a8, ten times inside a9) at its line; the budget named
    assert line.startswith("hil: error: bomb.yaml:12: YAML aliases expand this document by "), line
    assert f"over the budget of {ALIAS_BUDGET:,}" in line
    assert 0 < rss_mb < MAX_RSS_MB, rss_mb
    assert not (tmp_path / "t").exists()  # nothing half-made


@pytest.mark.parametrize("text, line, phrase", [
    ("a: &a [*a]\n", 1, "alias inside its own anchor"),
    ("x: 1\nb: &b {c: &c [*b]}\n", 2, "alias inside its own anchor"),
    ("deep: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n", 1, f"nested deeper than {MAX_DEPTH} levels"),
    ("deep: " + "[" * 999 + "]" * 999 + "\n", 1, f"nested deeper than {MAX_DEPTH} levels"),  # libyaml's own cap: 1000
])
def test_recursive_anchors_and_deep_nesting_are_refused_at_their_line(text, line, phrase):
    with pytest.raises(ConfigError) as info:
        load_yaml_text(text, "x.yaml")
    assert str(info.value).startswith(f"x.yaml:{line}: ") and phrase in str(info.value), info.value


def test_aliases_within_the_budget_load_as_copies_of_their_anchor():
    doc = load_yaml_text("base: &base {kp: 2.0, kd: 0.1}\nleft: *base\nright: [*base, *base]\n", "x.yaml")
    assert doc["left"] == {"kp": 2.0, "kd": 0.1} and doc["right"] == [doc["left"]] * 2
    near = "a: &a [" + ", ".join(["x"] * 100) + "]\nb: [" + ", ".join(["*a"] * (ALIAS_BUDGET // 101)) + "]\n"
    assert len(load_yaml_text(near, "x.yaml")["b"]) == ALIAS_BUDGET // 101


# --- 2. a 50 MB map -------------------------------------------------------------------------------------------
def write_huge_map(path: Path, places: int = 1_200_000) -> None:
    """The probe's map: the arcade's walls and 1.2 M places (~50 MB)."""
    with path.open("w") as out:
        out.write("name: huge\nwalls:\n  - {from: [0, 0], to: [100, 0]}\nplaces:\n")
        for start in range(0, places, 10_000):
            out.write("".join(f"  place_of_the_building_{k:07d}: [{k % 1000 * 0.1:.2f}, {k // 1000 * 0.1:.2f}]\n"
                              for k in range(start, min(places, start + 10_000))))


def test_a_50_mb_map_is_refused_by_its_size_before_parsing(tmp_path):
    huge = tmp_path / "huge.yaml"
    write_huge_map(huge)
    size = huge.stat().st_size
    assert size > 50_000_000
    (tmp_path / "still.py").write_text("def main(robot):\n    pass\n")
    (tmp_path / "t.yaml").write_text("controller: still.py\nmap: huge.yaml\n")
    status, err, rss_mb = run_hil(tmp_path, "trial", "t.yaml", "--duration", "1", "--out", str(tmp_path / "t"))
    line = one_error_line(err)
    assert status == 2
    assert line.endswith(f"huge.yaml: {size:,} bytes is over the {SIZE_LIMITS['map']:,} a map file may have "
                         "(devices/yaml_source.py SIZE_LIMITS): is this the right file?"), line
    assert 0 < rss_mb < MAX_RSS_MB, rss_mb  # the file was never read whole


def _loaders():
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.population import load_rates
    from hil.crowd.script import load_script
    from hil.devices.catalog import load_source
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.world.maps import load_map
    from hil.runtime.robot import load_profile
    from hil.runtime.robot.semantics import load_semantics
    from hil.trial.spec import load_trial_file
    from hil.trial.sweep.spec import load_sweep
    from hil.devices.calibration import load_calibration
    from hil.trial.calibrate.rig import load_rig

    return {"trial": load_trial_file, "sweep": load_sweep, "map": load_map, "crowd map": load_crowd_map,
            "rates": load_rates, "profile": load_profile, "robot": lambda p: load_assembly(str(p)),
            "semantics": load_semantics, "descriptor": load_source, "scenario": load_script,
            "calibration": load_calibration, "rig": load_rig}


KIND_OF = {"crowd map": "map"}


@pytest.mark.parametrize("kind", list(_loaders()))
def test_every_kind_refuses_a_file_over_its_limit_naming_the_file(tmp_path, kind):
    limit = SIZE_LIMITS[KIND_OF.get(kind, kind)]
    path = tmp_path / ("big.scn" if kind == "scenario" else "big.yaml")
    path.write_text("# padding\n" * (limit // 10 + 1))
    with pytest.raises(ValueError, match=rf"^{path}: [\d,]+ bytes is over the {limit:,} a"):
        _loaders()[kind](path)


def test_a_stream_that_never_ends_is_read_only_to_the_limit():
    with pytest.raises(ConfigError, match=r"^/dev/zero: .* is over the "):
        load_yaml_file("/dev/zero", "trial")


# --- 5. three errors that lacked file or line ---------------------------------------------------------------
def test_a_profile_bus_naming_no_robot_names_the_profile_and_line(tmp_path):
    from hil.runtime.robot import load_profile

    path = tmp_path / "p.yaml"
    path.write_text("clock: sim\nbus: sim://nosuchrobot\n")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:2: bus: sim://nosuchrobot: no assembly of that name; known: "), \
        info.value


@pytest.mark.parametrize("parts, line, how", [
    ("  - {id: 1, part: carriage}\n  - {id: 2, part: cpc_servo, parent: 2, port: horn}\n", 4, "mounts on itself"),
    ("  - {id: 1, part: carriage}\n  - {id: 2, part: cpc_servo, parent: 3, port: mount}\n"
     "  - {id: 3, part: bracket_l, parent: 2, port: horn}\n", 4, "comes back to it (2 -> 3 -> 2)"),
])
def test_a_part_mounted_on_itself_names_the_assembly_and_line(tmp_path, parts, line, how):
    from hil.firmware_sim.assembly import load_assembly

    path = tmp_path / "a.yaml"
    path.write_text("name: selfie\nparts:\n" + parts)
    with pytest.raises(ConfigError) as info:
        load_assembly(str(path))
    assert str(info.value).startswith(f"{path}:{line}: part id 2: mounts ") and how in str(info.value), info.value


def test_a_goal_that_is_no_place_names_the_trial_file_and_line(tmp_path):
    from hil.trial.spec import load_trial_file
    from hil.trial.task import make_task

    path = tmp_path / "t.yaml"
    path.write_text("controller: still.py\nmap: arcade\ngoal: narnia\n")
    with pytest.raises(ConfigError) as info:
        make_task(load_trial_file(path))
    assert str(info.value).startswith(f"{path}:3: goal: the map arcade has no place 'narnia'; it has "), info.value
    overridden = load_trial_file(path).but(goal="atlantis")  # a value not from the file has no line to name
    with pytest.raises(ConfigError, match=rf"^{path}: goal: the map arcade has no place 'atlantis'"):
        make_task(overridden)
