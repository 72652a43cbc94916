"""The trial file's keys (trial/spec.py KEY_TABLE): ``hil trial --keys`` and docs/TRIALS.md list exactly the keys
the loader accepts, and a controller's declared ``PARAMS`` are the only parameters a trial may give it.

What ``--keys`` prints is checked against the loader itself: a trial file with each listed key (its listed
example) loads, a key it does not list is refused, and every field a spec has is reachable through a listed key.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import hil_command
from hil.devices.yaml_source import ConfigError

ROOT = Path(__file__).resolve().parent.parent
INTERNAL_FIELDS = {"source", "lines"}  # a spec's bookkeeping, not keys


def hil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*hil_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def listed(tmp_path_factory) -> dict[str, str]:
    """``hil trial --keys`` as key -> the example line it prints (``e.g. KEY: VALUE``)."""
    proc = hil("trial", "--keys", cwd=tmp_path_factory.mktemp("keys"))
    assert proc.returncode == 0, proc.stderr
    keys, current = {}, None
    for line in proc.stdout.splitlines():
        if line and not line.startswith(" ") and ": " in line and "(default: " in line:
            current = line.split(":")[0]
        elif line.strip().startswith("e.g. ") and current is not None:
            keys[current] = line.strip()[len("e.g. "):]
    return keys


def test_every_listed_key_loads_with_its_example_and_no_other_key_does(listed, tmp_path):
    from hil.trial.spec import TrialSpec, load_trial_file

    (tmp_path / "my_controller.py").write_text("def main(robot):\n    pass\n")
    needs = {"bus": "profile: virtual\n"}  # bus: replaces a profile's bus, so it comes with one
    defaults = TrialSpec(controller=None)
    for key, example in listed.items():
        if key == "controller":
            continue
        path = tmp_path / f"{key}.yaml"
        path.write_text(f"controller: my_controller.py\n{needs.get(key, '')}{example}\n")
        spec = load_trial_file(path)
        field = "resume_from" if key == "from" else key
        assert getattr(spec, field) != getattr(defaults, field), f"{key}: the example changed nothing"
    fields = {f.name for f in dataclasses.fields(TrialSpec)} - INTERNAL_FIELDS
    assert fields == {"resume_from" if k == "from" else k for k in listed}, "every key of a spec is listed"
    (tmp_path / "odd.yaml").write_text("controller: my_controller.py\nstart_pose: [0, 0, 0]\n")
    with pytest.raises(ConfigError, match="unknown trial key 'start_pose'"):
        load_trial_file(tmp_path / "odd.yaml")


def test_docs_trials_md_shows_the_keys_the_loader_checks(listed):
    from hil.trial.spec_doc import BEGIN, END, keys_markdown

    page = (ROOT / "docs" / "TRIALS.md").read_text()
    table = page.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == keys_markdown(), "docs/TRIALS.md is stale: python -m hil.trial.spec_doc docs/TRIALS.md"
    documented = [row.split("|")[1].strip().strip("`") for row in table.splitlines()[2:]]
    assert documented == list(listed)


# --- the parameters a controller declares -------------------------------------------------------------------------
TUNED = textwrap.dedent('''\
    """Writes the parameters it was given to params.json, then stops."""
    import json

    CRUISE = 0.4
    PARAMS = {"cruise_m_s": CRUISE, "avoid_m": 0.5, "route": [[1, 0], [2, 0]]}

    def main(robot):
        with open("params.json", "w") as f:
            json.dump(dict(robot.params), f)
''')


def test_an_undeclared_param_is_refused_naming_the_declared_ones(tmp_path):
    (tmp_path / "tuned.py").write_text(TUNED)
    refused = hil("trial", "tuned.py", "--map", "lab", "--duration", "1", "--param", "cruise=0.3", "--out", "a",
                  cwd=tmp_path)
    assert refused.returncode == 2 and not (tmp_path / "a").exists()
    assert refused.stderr.strip().splitlines()[-1] == \
        "hil: error: hil trial: params: tuned.py declares no parameter 'cruise'; did you mean 'cruise_m_s'? it " \
        "declares cruise_m_s, avoid_m, route (its PARAMS)"

    taken = hil("trial", "tuned.py", "--map", "lab", "--duration", "1", "--param", "cruise_m_s=0.3", "--out", "b",
                "--quiet", cwd=tmp_path)
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert json.loads((tmp_path / "params.json").read_text()) == \
        {"cruise_m_s": 0.3, "avoid_m": 0.5, "route": [[1, 0], [2, 0]]}, "given, and the declared defaults"


def test_a_controller_without_params_takes_any_and_says_they_are_unchecked(tmp_path):
    (tmp_path / "plain.py").write_text(TUNED.replace("PARAMS = ", "DEFAULTS = "))
    proc = hil("trial", "plain.py", "--map", "lab", "--duration", "1", "--param", "anything=1", "--out", "a",
               "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "note: plain.py declares no PARAMS: params anything are passed unchecked" in proc.stderr
    assert json.loads((tmp_path / "params.json").read_text()) == {"anything": 1}


def test_the_guide_declares_its_params_and_a_sweep_axis_it_lacks_is_refused_at_its_line(tmp_path):
    from hil.trial.sweep import load_sweep

    guide = ROOT / "examples" / "guide_robot.py"
    (tmp_path / "s.yaml").write_text(f"controller: {guide}\nmap: arcade\ngrid:\n  params: {{cruise: [0.3, 0.4]}}\n")
    with pytest.raises(ConfigError, match="declares no parameter 'cruise'; did you mean 'cruise_m_s'") as caught:
        load_sweep(tmp_path / "s.yaml")
    assert caught.value.line == 4 and "start, waypoints, cruise_m_s" in caught.value.message
