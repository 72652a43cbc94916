"""Config: every bad file a user can write is refused with file:line and the reason, naming the bound it
broke; unknown keys name the closest one; nothing is half-applied; the commands print one clean line.

Each case starts from a real shipped file (config/, the part catalog), changes one line, and checks that the
error names that file and that line. The command-line cases call the real ``hil`` entry point in-process
(``hil.cli.main``) and check for exit status 2 and one line without a traceback.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from hil.devices.yaml_source import ConfigError, load_yaml_text

ROOT = Path(__file__).resolve().parent.parent
WEEKDAY = (ROOT / "config" / "crowd" / "weekday.yaml").read_text()
LEFT_ARM = (ROOT / "config" / "robots" / "left_arm.yaml").read_text()
LAB = (ROOT / "config" / "maps" / "lab.yaml").read_text()
UPPER_ARM = (ROOT / "devices" / "catalog" / "parts" / "upper_arm.yaml").read_text()


def edited(tmp_path: Path, name: str, text: str, old: str, new: str) -> tuple[Path, int]:
    """``text`` with ``old`` replaced by ``new`` once, written to tmp_path/name; (path, line of the change)."""
    assert old in text, old
    changed = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(changed)
    line = next(i for i, row in enumerate(changed.splitlines(), 1) if new.splitlines()[0] in row)
    return path, line


def refused(call, path: Path, line: int, *phrases: str, error: type[Exception] = ValueError) -> str:
    """``call()`` raises ``error`` whose message starts with path:line: and holds every phrase."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), (message, line)
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    return message


# --- numbers: YAML 1.1 reads 1e9 as a string; we read the number users mean ---------------------------------------
def test_exponent_numbers_load_as_numbers_and_look_alikes_stay_strings():
    doc = load_yaml_text("a: 1e9\nb: 1.5e3\nc: -2E-3\nd: +4e+2\ne: 1e\nf: e9\ng: '1e9'\n", "x.yaml")
    assert doc == {"a": 1e9, "b": 1500.0, "c": -0.002, "d": 400.0, "e": "1e", "f": "e9", "g": "1e9"}
    assert all(isinstance(doc[k], float) for k in "abcd")


# --- bounds, each named in its error ------------------------------------------------------------------------------
RATES_CASES = [  # (old, new, phrases)
    ("adult_man: 150,", "adult_man: 1e9,", ("MAX_RATE_PER_H", "1000000000.0 is outside [0.0, 20000.0]")),
    ("{size: {2: 0.55, 3: 0.30, 4: 0.15}", "{size: {2: 0.55, 3: 0.30, 21: 0.15}", ("MAX_PARTY_SIZE=20", "not 21")),
    ("radius: {mean: 0.24, sd: 0.02, min: 0.19, max: 0.30}", "radius: {mean: 0.24, sd: 0.02, min: 0.19, max: 5}",
     ("adult_man.radius: max = 5 is outside [0.05, 1.0]",)),
    ("speed: {mean: 1.38, sd: 0.20, min: 0.70, max: 2.00}", "speed: {mean: 1.38, sd: 0.20, min: 0.70, max: 50}",
     ("adult_man.speed: max = 50 is outside [0.05, 10.0]",)),
    # unknown keys, with the closest one
    ("days: [mon", "dayz: [mon", ("unknown key 'dayz'; did you mean 'days'?",)),
    ("{name: lunch,        from:", "{nam: lunch,        from:", ("time_bands[2]: unknown key 'nam'; did you mean 'name'?",)),
    ("  by_type:", "  by_typo:", ("groups: unknown key 'by_typo'; did you mean 'by_type'?",)),
    ("adult_man:   {radius:", "adult_man:   {radios:", ("unknown key 'radios'; did you mean 'radius'?",)),
    ("radius: {mean: 0.24, sd: 0.02", "radius: {maen: 0.24, sd: 0.02", ("unknown key 'maen'; did you mean 'mean'?",)),
]


@pytest.mark.parametrize("old, new, phrases", RATES_CASES, ids=[c[1][:24] for c in RATES_CASES])
def test_a_rates_file_beyond_a_bound_or_with_an_unknown_key(tmp_path, old, new, phrases):
    from hil.crowd.population import load_rates

    path, line = edited(tmp_path, "rates.yaml", WEEKDAY, old, new)
    refused(lambda: load_rates(path), path, line, *phrases, error=ConfigError)


def test_at_most_max_people_are_present_whatever_the_rates_and_the_rest_are_counted(monkeypatch):
    """The bound on a crowd's size holds at the highest rates a file may ask for (scaled by the most --crowd-scale
    allows): the generator turns parties away instead of growing without end (12.9 GB at 1e9/h before)."""
    import hil.crowd.population as population
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.sim import CrowdSim

    monkeypatch.setattr(population, "MAX_PEOPLE", 12)  # the real check, with a cap a short test reaches
    table = population.load_rates("weekday")
    sim = CrowdSim(load_crowd_map("arcade"), seed=1, dt=0.1)
    generator = population.Generator(sim, table, rate_scale=population.MAX_RATE_SCALE)
    sim.hooks.append(generator)
    most = 0
    for _ in range(100):
        sim.step()
        most = max(most, len(sim.agents))
    assert 0 < most <= 12 and generator.turned_away > 0, (most, generator.turned_away)


DESCRIPTOR_CASES = [
    ("mass: 0.15", "mass: 5000", ("bodies[0].mass", "MAX_PART_MASS_KG=1000", "not 5000")),
    ("mass: 0.15", "mass: 1e300", ("bodies[0].mass", "beyond MAX_MAGNITUDE=1e+09")),
    ("{cylinder: [0.02, 0.003], xyz: [0, 0, 0.0015], rgba", "{cylinder: [500, 0.003], xyz: [0, 0, 0.0015], rgba",
     ("bodies[0].visuals[0].cylinder", "MAX_PART_SIZE_M=100")),
    ("com: [0.005, 0, 0.08]", "com: [1e300, 0, 0.08]", ("bodies[0].com", "MAX_PART_SIZE_M=100")),
    # unknown keys, with the closest one
    ("vendor: hil", "vendro: hil", ("vendro: unknown key; did you mean 'vendor'?",)),
    ("    mass: 0.15", "    mas: 0.15", ("bodies[0].mas: unknown key; did you mean 'mass'?",)),
    ("{name: horn, body: link, parent: true}", "{name: horn, bdy: link, parent: true}",
     ("ports[0].bdy: unknown key; did you mean 'body'?",)),
    ("ixx: 3.3500e-04,", "ixy2: 3.3500e-04,", ("inertia.ixy2: unknown key; did you mean 'ixy'?",)),
]


@pytest.mark.parametrize("old, new, phrases", DESCRIPTOR_CASES, ids=[c[1][:24] for c in DESCRIPTOR_CASES])
def test_a_part_descriptor_beyond_a_bound_or_with_an_unknown_key(tmp_path, old, new, phrases):
    from hil.devices.catalog import load_source
    from hil.devices.descriptor import DescriptorError

    path, line = edited(tmp_path, "upper_arm.yaml", UPPER_ARM, old, new)
    refused(lambda: load_source(path), path, line, "part 'upper_arm'", *phrases, error=DescriptorError)


ASSEMBLY_CASES = [
    ("name: left_arm", "nmae: left_arm", ("assembly: unknown key 'nmae'; did you mean 'name'?",)),
    ("{id: 2, part: bracket_l, parent: 1, port: horn}", "{id: 2, part: bracket_l, parnet: 1, port: horn}",
     ("part #2: unknown key 'parnet'; did you mean 'parent'?",)),
    ("{id: 4, part: bracket_j, parent: 3, port: horn}", "{id: 4, part: bracket_j, parent: 3, port: horn, "
                                                         "serial: 1e30}", ("part #4: serial must be int",)),
]


@pytest.mark.parametrize("old, new, phrases", ASSEMBLY_CASES, ids=[c[1][:24] for c in ASSEMBLY_CASES])
def test_an_assembly_with_an_unknown_key(tmp_path, old, new, phrases):
    from hil.firmware_sim.assembly import load_assembly

    path, line = edited(tmp_path, "arm.yaml", LEFT_ARM, old, new)
    refused(lambda: load_assembly(str(path)), path, line, *phrases, error=ConfigError)


MAP_CASES = [
    ("{name: south, from: [-4, -3], to: [4, -3]}", "{name: south, from: [-4, -3], to: [1e9, -3]}",
     ("wall #1: to", "beyond MAX_COORDINATE_M=100000")),
    ("defaults: {thickness: 0.1, height: 2.0}", "defaults: {thickness: 5000, height: 2.0}",
     ("thickness must be", "MAX_SIZE_M=1000, not 5000")),
    ("thickness: 0.08, height: 1.2}", "thickness: 0.08, height: 1e4}", ("wall #6: height", "MAX_SIZE_M=1000")),
    ("thickness: 0.08, height: 1.2}", "thickness: 0.08, height: 1.2, bottom: -0.5}",
     ("wall #6: bottom must be a number >= 0", "not -0.5")),
    ("centre: [0, 0]", "centre: [1e9, 0]", ("place 'centre'", "beyond MAX_COORDINATE_M=100000")),
    ("{name: south, from: [-4, -3], to: [4, -3]}", "{name: south, frm: [-4, -3], to: [4, -3]}",
     ("unknown field 'frm'; did you mean 'from'?",)),
]


@pytest.mark.parametrize("reader", ["world", "crowd"])
@pytest.mark.parametrize("old, new, phrases", MAP_CASES, ids=[c[1][:24] for c in MAP_CASES])
def test_a_map_beyond_a_bound_or_with_an_unknown_key_for_the_world_and_the_crowd(tmp_path, old, new, phrases,
                                                                                 reader):
    from hil.crowd.maps import load_crowd_map
    from hil.firmware_sim.world import load_map

    path, line = edited(tmp_path, "room.yaml", LAB, old, new)
    load = load_map if reader == "world" else load_crowd_map
    refused(lambda: load(str(path)), path, line, *phrases, error=ConfigError)


SCRIPT_CASES = [  # (text, line, phrases)
    ("spawn a = man01 at 0 0\nrun 200h\n", 2, ("200h is longer than MAX_DURATION_S=604800 s (a week)",)),
    ("spawn a = man01 at 0 0\nmove a to 1 0\nwait a arrived timeout 169h\n", 3, ("169h is longer than MAX_DURATION_S",)),
    ("# nothing but a comment\n", 1, ("the script has no commands (an empty scenario would be a 0 s run)",)),
]


@pytest.mark.parametrize("text, line, phrases", SCRIPT_CASES, ids=["run", "wait timeout", "empty"])
def test_a_script_beyond_a_bound_or_empty(tmp_path, text, line, phrases):
    from hil.crowd.script import ScriptError, load_script

    path = tmp_path / "s.scn"
    path.write_text(text)
    refused(lambda: load_script(path), path, line, *phrases, error=ScriptError)


# --- files that are not what they should be: binary, empty --------------------------------------------------------
def _loaders():
    from hil.crowd.population import load_rates
    from hil.crowd.script import load_script
    from hil.devices.catalog import load_source
    from hil.firmware_sim.assembly import load_assembly
    from hil.runtime.robot import load_profile

    return {"assembly": lambda p: load_assembly(str(p)), "part descriptor": load_source, "rates": load_rates,
            "script": load_script, "profile": load_profile}


@pytest.mark.parametrize("kind", ["assembly", "part descriptor", "rates", "script", "profile"])
def test_binary_and_empty_files_are_named_with_line_1(tmp_path, kind):
    load = _loaders()[kind]
    binary = tmp_path / ("b.scn" if kind == "script" else "b.yaml")
    binary.write_bytes(b"\xff\xd8\xff\xe0\x00JFIF binary")
    refused(lambda: load(binary), binary, 1, "not UTF-8 text (byte 0xff at offset 0)")
    empty = tmp_path / ("e.scn" if kind == "script" else "e.yaml")
    empty.write_text("# only a comment\n")
    with pytest.raises(ValueError, match=re.escape(f"{empty}:") + r"(1:)? .*(empty|no commands|needs)"):
        load(empty)


def test_an_assembly_with_no_parts_says_so_not_a_cycle(tmp_path):
    from hil.firmware_sim.assembly import load_assembly

    path = tmp_path / "none.yaml"
    path.write_text("name: none\nparts: []\n")
    refused(lambda: load_assembly(str(path)), path, 2, "parts is empty; an assembly needs at least one part",
            error=ConfigError)


# --- profiles: the bus URL's options and every number checked at load, with the profile's line -------------------
PROFILE_CASES = [  # (text, line, phrases)
    ("clock: sim\nbus: sim://commbot?seed=abc\n", 2, ("bus: sim://commbot?seed=abc: option seed='abc' is not an integer",)),
    ("clock: sim\nbus: sim://commbot?sed=1\n", 2, ("unknown option 'sed'; did you mean 'seed'?",)),
    ("clock: sim\nbus: sim://commbot?pose=nan,0\n", 2, ("pose='nan,0'", "finite numbers")),
    ("clock: sim\nbus: sim://commbot?drop=5\n", 2, ("drop=5.0 is a probability",)),
    ("clock: sim\nbus: sim://commbot?clock=fast\n", 2, ("clock='fast' is not one of real, sim",)),
    ("clock: sim\nbuses:\n  - {name: body, url: 'sim://commbot_body?seed=x'}\n", 3, ("option seed='x'",)),
    ("clock: sim\nbus: sim://commbot\nbus_timeout_ms: 1e9\n", 3, ("MAX_BUS_TIMEOUT_MS=10000",)),
    ("clock: sim\nbus: sim://commbot\nbus_retries: 1000000\n", 3, ("MAX_BUS_RETRIES=100",)),
    ("clock: sim\nbus: sim://commbot\nstall_timeout_s: .nan\n", 3, ("MAX_STALL_TIMEOUT_S=3600",)),
    ("clock: real\nbus: sim://commbot\ncrowd: {endpoint: 'tcp://127.0.0.1:1', timeout_s: 1e9}\n", 3,
     ("crowd: timeout_s", "MAX_TIMEOUT_S=3600",)),
    ("clock: real\nbus: sim://commbot\ncrowd: {endpoint: 'tcp://127.0.0.1:1', robot_radius_m: 1e3}\n", 3,
     ("MAX_ROBOT_RADIUS_M=10",)),
]


@pytest.mark.parametrize("text, line, phrases", PROFILE_CASES, ids=[c[0].splitlines()[-1][:30] for c in PROFILE_CASES])
def test_a_profile_names_its_line_for_a_bad_bus_option_or_number(tmp_path, text, line, phrases):
    from hil.runtime.robot import load_profile

    path = tmp_path / "p.yaml"
    path.write_text(text)
    refused(lambda: load_profile(path), path, line, *phrases, error=ConfigError)


def test_a_bus_given_on_the_command_line_is_checked_when_opened_and_says_what():
    from hil.runtime.robot import load_profile
    from hil.runtime.transports import TransportError, open_transport

    profile = load_profile("virtual", bus="sim://commbot?seed=abc")  # not in the file: nothing to name there
    with pytest.raises(TransportError, match=r"^sim://commbot\?seed=abc: option seed='abc' is not an integer$"):
        open_transport(profile.bus)


def test_a_trial_file_beyond_a_week_names_its_line(tmp_path):
    from hil.trial.spec import load_trial_file

    path = tmp_path / "t.yaml"
    path.write_text("controller: x.py\nmap: arcade\nduration: 1e9\n")
    refused(lambda: load_trial_file(path), path, 3, "MAX_DURATION_S=604800 (a week)", error=ConfigError)


# --- the commands: one clean line, exit 2 -------------------------------------------------------------------------
def hil(capsys, *argv: str) -> str:
    from hil.cli import main

    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("pybullet build time")]
    assert len(lines) == 1 and lines[0].startswith("hil: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def broken_catalog(tmp_path, monkeypatch):
    """The part catalog with one bad descriptor (upper_arm: a mass of 1e300 kg); yields (path, line)."""
    import shutil

    import hil.devices.catalog as catalog

    parts = tmp_path / "parts"
    shutil.copytree(catalog.PARTS_DIR, parts)
    path, line = edited(parts, "upper_arm.yaml", UPPER_ARM, "mass: 0.15", "mass: 1e300")
    for cached in (catalog.load_part, catalog.compiled_part):
        cached.cache_clear()
    monkeypatch.setattr(catalog, "PARTS_DIR", parts)
    yield path, line
    for cached in (catalog.load_part, catalog.compiled_part):
        cached.cache_clear()


@pytest.mark.parametrize("command", ["run", "trial", "demo", "sim", "scan"])
def test_a_bad_catalog_descriptor_is_one_clean_line_in_every_command(capsys, tmp_path, broken_catalog, command):
    controller = tmp_path / "still.py"
    controller.write_text("def main(robot):\n    pass\n")
    argv = {"run": ["run", str(controller), "--profile", "virtual", "--duration", "1"],
            "trial": ["trial", str(controller), "--duration", "1", "--out", str(tmp_path / "t")],
            "demo": ["demo", "--duration", "1", "--scenario", "none", "--out", str(tmp_path / "d")],
            "sim": ["sim", "commbot", "--pty"],
            "scan": ["scan", "--bus", "sim://commbot", "--no-cache"]}[command]
    path, line = broken_catalog
    message = hil(capsys, *argv)
    assert message == f"hil: error: {path}:{line}: part 'upper_arm': bodies[0].mass: 1e+300 is beyond " \
                      "MAX_MAGNITUDE=1e+09"


def test_a_crowd_that_does_not_answer_at_open_is_one_clean_line_in_run_and_trial(capsys, tmp_path):
    profile = tmp_path / "lonely.yaml"
    profile.write_text("bus: sim://commbot?clock=real\nclock: real\n"
                       "crowd: {endpoint: 'tcp://127.0.0.1:1', timeout_s: 0.2}\n")
    controller = tmp_path / "still.py"
    controller.write_text("def main(robot):\n    pass\n")
    for argv in (["run", str(controller), "--profile", str(profile)],
                 ["trial", str(controller), "--profile", str(profile), "--out", str(tmp_path / "t")]):
        assert "crowd: no crowd answered hello at tcp://127.0.0.1:1" in hil(capsys, *argv)


CLI_CASES = [  # (argv, phrase)
    (["crowd", "--map", "arcade", "--duration", "1e9"], "--duration must be > 0 and at most MAX_DURATION_S=604800"),
    (["crowd", "--map", "arcade", "--duration", "nan"], "--duration must be > 0"),
    (["crowd", "--map", "arcade", "--duration", "-1"], "--duration must be > 0"),
    (["crowd", "--map", "arcade", "--dt", "1e-9"], "--dt must be 0.001..1 s"),
    (["crowd", "--map", "arcade", "--sample", "nan"], "--sample must be a period > 0 s"),
    (["run", "x.py", "--profile", "virtual", "--duration", "1e9"], "hil run: duration must be"),
    (["trial", "x.py", "--duration", "1e9"], "hil trial: duration must be"),
    (["demo", "--duration", "1e9"], "hil demo: duration must be"),
    (["demo", "--servo-chain", "--duration", "1e9"], "--duration must be > 0 and at most MAX_DURATION_S"),
    (["sim", "servo_chain", "--pty", "--latency-ms", "1e9"], "MAX_LATENCY_MS=1000"),
    (["sim", "servo_chain", "--pty", "--baud", "0"], "MIN_BAUD..MAX_BAUD"),
    (["sim", "commbot", "--pty", "--pose=nan,0,0"], "--pose 'nan,0,0'"),
    (["sim", "commbot", "--pty", "--watchdog-ms", "1e12"], "--watchdog-ms must be 0..3.6e6 ms"),
]


@pytest.mark.parametrize("argv, phrase", CLI_CASES, ids=[" ".join(c[0][:1] + c[0][-2:]) for c in CLI_CASES])
def test_command_line_durations_and_sizes_are_bounded(capsys, argv, phrase):
    message = hil(capsys, *argv)
    assert phrase in message, message
    if "duration" in phrase and "1e9" in argv:
        assert "604800" in message and math.isfinite(float(argv[-1]))  # the bound is the week, named
