"""``hil calibrate check`` on a mixed run: the real ring and the twin's (the mixed trial's shadow ring,
reading the rig's walls: ``crowd: {walls: echo}``) recorded side by side at the same poses, compared per sensor
and 5-degree bin.

The "real" robot is the commbot served by another process on a real pty, on the real clock, standing in the rig
(`hil sim commbot --pty --map RIG --hidden HIDDEN.yaml`): its ring measures with hidden numbers while its
descriptor still says the catalog's, as a real part whose catalog numbers are off does. The crowd is a real
`hil crowd --serve EP --realtime` process with nobody in it. The twin given the hidden numbers (the profile's
`calibration:`) passes; the catalog twin fails. No timing assertions.

The three runs the tests check (the twin's and the catalog's calibration, a mixed trial) are recorded once per run
of the suite, two side by side: on the real clock each mostly waits for its turn's ~55 s, so two take about as
long as one (three at once starved a loaded 2-core machine's bus). A turn cannot be shortened: a 5-degree bin of
one sensor is judged from 20 readings, and half a turn fills only ~10 % of the bins that far.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SimProcess
from test_bridge_realtime import CrowdProcess, free_endpoint
from test_calibration import RIG, hil  # the wall rig and the command of the virtual calibration tests

from hil.trial.calibrate.log import CalibrationLogError, mixed_sides, read_log
from hil.trial.calibrate.rig import load_rig, rig_map_text

HIDDEN = {"dropout_angle50_deg": 40.0, "dropout_width_deg": 4.0, "noise_sigma_m": [0.01, 0.02]}
RUN_HANG_S = 600.0
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "calibration_turn.py"


def assert_agrees(run: subprocess.CompletedProcess) -> None:
    """``hil calibrate check`` says the two sides agree. On the real clock a loaded machine lags a reading's pose
    by a tick now and then, which can move a bin on the dropout's steep side past its tolerance: the sides must
    agree everywhere but in at most 2 % of the bins there (the catalog twin fails by its whole transition and by
    its noise: test_the_catalog_twin_fails...)."""
    assert " bins judged" in run.stdout, (run.stdout[-3000:], run.stderr[-2000:])
    judged = int(run.stdout.rsplit(" bins judged", 1)[0].split()[-1])
    failed = [line for line in run.stdout.splitlines() if line.startswith("sensor") and line.endswith("FAIL")]
    # on the real clock a busy machine records fewer readings a bin (33 bins judged at a load of 11)
    assert judged >= 30, run.stdout[-2000:]
    assert "noise: virtual / real = " in run.stdout and "FAIL" not in run.stdout.split("noise: virtual / real")[1]\
        .splitlines()[0], run.stdout[-1000:]
    assert run.returncode == 0 or (len(failed) <= 0.02 * judged and
                                   all(float(line.split()[2].split("-")[0]) >= 40 for line in failed)), \
        "\n".join(failed) or run.stdout[-3000:]


def profile_text(folder: Path, sim: SimProcess, crowd: CrowdProcess, calibration: str | None) -> str:
    text = (f"bus: {sim.where}\nclock: real\nsemantics: commbot\ncache_dir: {folder / 'cache'}\n"
            f"start_pose: [0.0, 0.0, 0.0]\n"
            f"crowd: {{endpoint: '{crowd.endpoint}', mode: realtime, seed: 5, map: rig_map.yaml, walls: echo}}\n")
    return text + (f"calibration: {calibration}\n" if calibration else "")


def write_rig(folder: Path) -> None:
    """The rig, its map, the hidden numbers the "real" ring measures with, and an empty crowd script."""
    (folder / "rig.yaml").write_text(RIG)
    (folder / "rig_map.yaml").write_text(rig_map_text(load_rig(folder / "rig.yaml")))
    (folder / "hidden.yaml").write_text(yaml.safe_dump(
        {"schema": 1, "parts": [{"part": "range_ring", "sensor": "ring", "params": HIDDEN}]}))
    (folder / "empty.scn").write_text("run 30min\n")


class MixedRun:
    """One mixed run started in ``folder``: a "real" robot of its own (one that has turned once no longer stands on
    the rig's start), served on a pty on the real clock, an empty real-time crowd, and ``hil ARGV`` on them with
    the profile mixed.yaml (the twin's numbers from ``calibration``); :meth:`wait` ends it."""

    def __init__(self, folder: Path, calibration: str | None, *argv: str):
        from hil.bridge.process import spawn

        folder.mkdir(parents=True)
        write_rig(folder)
        self.folder = folder
        self.sim = SimProcess("--pty", "--clock", "real", "--map", str(folder / "rig_map.yaml"), "--pose=0,0,0",
                              "--hidden", str(folder / "hidden.yaml"), assembly="commbot")
        self.crowd = self.proc = None
        try:
            self.crowd = CrowdProcess(free_endpoint(), "--script", str(folder / "empty.scn"))
            (folder / "mixed.yaml").write_text(profile_text(folder, self.sim, self.crowd, calibration))
            with open(folder / "hil.stdout", "w") as out, open(folder / "hil.stderr", "w") as err:
                self.proc = spawn([sys.executable, "-m", "hil", *argv, "--profile", "mixed.yaml"], cwd=folder,
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        except BaseException:
            self.stop()
            raise

    def wait(self) -> None:
        """Until the command ends (killed after RUN_HANG_S: a hang guard, not a timing check); its exit code in
        folder/hil.rc, what it printed in folder/hil.stdout and hil.stderr."""
        try:
            code = self.proc.wait(RUN_HANG_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = f"still running after {RUN_HANG_S:g} s: killed"
        (self.folder / "hil.rc").write_text(str(code))
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.crowd is not None:
            self.crowd.stop()
        self.sim.stop()


SIDE_BY_SIDE = 2  # runs at a time: three at once starved a loaded 2-core machine (a bus read timed out)


def record_runs(root: Path) -> None:
    """The three runs the tests check, SIDE_BY_SIDE at a time (each mostly waits for the real clock): root/twin (the
    twin given the hidden numbers) and root/catalog (the catalog twin) calibrating, then root/trial the mixed trial."""
    plans = [(root / "twin", "hidden.yaml", "calibrate", "ring", "--rig", "rig.yaml", "--out", "twin"),
             (root / "catalog", None, "calibrate", "ring", "--rig", "rig.yaml", "--out", "catalog"),
             (root / "trial", "hidden.yaml", "run", str(EXAMPLE), "--record", "trial")]
    for k in range(0, len(plans), SIDE_BY_SIDE):
        runs: list[MixedRun] = []
        try:
            for plan in plans[k:k + SIDE_BY_SIDE]:
                runs.append(MixedRun(*plan))
            for run in runs:
                run.wait()
        finally:
            for run in runs:
                run.stop()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The folder of the three runs, recorded once per run of the suite (tests/once.py); each test asserts that its
    own run succeeded, so one run that fails fails one test. A session that runs this file starts the recording in
    the background when it starts (conftest.py BACKGROUND_BUILDS): this waits for what is left of it."""
    from once import once_per_run

    return once_per_run(tmp_path_factory, "calibrate-mixed", record_runs)


def ran(folder: Path) -> Path:
    rc = (folder / "hil.rc").read_text()
    assert rc == "0", f"exit {rc}: " + (folder / "hil.stderr").read_text()[-3000:]
    return folder


def test_the_twin_with_the_real_numbers_agrees_bin_by_bin(recorded):
    folder = ran(recorded / "twin")
    log = read_log(folder / "twin" / "calibration.mcap")
    real, virtual = mixed_sides(log, "twin")
    assert len(real.samples) == len(virtual.samples) > 300
    assert log.meta["ring"]["params"]["dropout_angle50_deg"] == 55.0, "the part describes the catalog's numbers"
    run = hil("calibrate", "check", "twin/calibration.mcap", "--rig", "rig.yaml", cwd=folder)
    assert_agrees(run)
    assert " real " in run.stdout and " virtual " in run.stdout and "noise (virtual)" in run.stdout
    ratio = float(run.stdout.split("noise: virtual / real = ")[1].split()[0])
    assert abs(ratio - 1) <= 0.25, run.stdout[-1000:]
    # the real side fits to the hidden numbers, not to what the part's descriptor says
    cal = yaml.safe_load((folder / "twin" / "CAL.yaml").read_text())["parts"][0]["params"]
    assert abs(cal["dropout_angle50_deg"] - 40.0) <= 2.0, cal


def test_the_catalog_twin_fails_and_a_log_without_a_virtual_side_is_named(recorded, tmp_path):
    folder = ran(recorded / "catalog")
    run = hil("calibrate", "check", "catalog/calibration.mcap", "--rig", "rig.yaml", cwd=folder)
    assert run.returncode == 1 and "FAIL" in run.stdout, run.stdout[-3000:]
    failed = [line for line in run.stdout.splitlines() if line.endswith("FAIL") and line.startswith("sensor")]
    # the bins that fail lie in the dropout's transition (the catalog's 55 deg against the hidden 40); how many
    # bins the real-clock run fills there depends on the machine's load (a loaded run once filled none past
    # 55 deg), so the noise, judged over every reading below 30 deg, is what always tells the catalog twin apart
    assert all(float(line.split()[2].split("-")[0]) >= 40 for line in failed), failed
    assert "noise: virtual / real = " in run.stdout and "  FAIL" in run.stdout.split("noise: virtual / real")[1]
    from hil.trial.calibrate.log import CalibrationWriter, META, RING

    path = tmp_path / "plain.mcap"
    writer = CalibrationWriter(path)
    writer.write(META, 0.0, read_log(folder / "catalog" / "calibration.mcap").meta)
    writer.write(RING, 0.0, {"t": 0.0, "x": 0.0, "y": 0.0, "yaw": 0.0, "ranges": [None] * 12})
    writer.close()
    with pytest.raises(CalibrationLogError, match="not a mixed run"):
        mixed_sides(read_log(path), path)
    run = hil("calibrate", "check", str(path), "--rig", str(folder / "rig.yaml"), cwd=tmp_path)
    assert run.returncode == 2 and "not a mixed run" in run.stderr.strip().splitlines()[-1], run.stderr


def test_a_mixed_trial_log_is_checked_real_against_virtual(recorded):
    """The same check on a mixed *trial* (`hil run examples/calibration_turn.py --record`): its trial.mcap carries
    the ring's real and virtual readings, the odometry pose and the ring's model, and nothing else is needed."""
    folder = ran(recorded / "trial")
    check = hil("calibrate", "check", "trial/trial.mcap", "--rig", "rig.yaml", cwd=folder)
    assert_agrees(check)
    from hil.trial.calibrate.log import mixed_trial_sides

    real, virtual = mixed_trial_sides(folder / "trial" / "trial.mcap", (0.0, 0.0, 0.0))
    assert len(real.samples) == len(virtual.samples) > 300 and real.meta["ring"]["params"]["max_range_m"] == 4.0


def test_walls_echo_needs_the_map_and_a_known_word(tmp_path):
    from hil.devices.yaml_source import ConfigError
    from hil.runtime.robot import load_profile

    path = tmp_path / "p.yaml"
    for crowd, message in (("{endpoint: 'tcp://127.0.0.1:5760', mode: realtime, walls: echo}", "needs map"),
                           ("{endpoint: 'tcp://127.0.0.1:5760', mode: realtime, map: arcade, walls: bounce}",
                            "walls must be hide")):
        path.write_text(f"bus: /dev/null\nclock: real\nsemantics: commbot\ncrowd: {crowd}\n")
        with pytest.raises(ConfigError, match=rf"p.yaml:4: .*{message}"):
            load_profile(path)
