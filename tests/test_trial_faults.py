"""``faults:`` in a trial: the virtual commbot's parts unplugged, plugged, rebooted and swapped at
simulated times; the run goes on, the log records /robot/parts and the metrics count them; bad input is refused
at file:line before the trial starts."""
from __future__ import annotations

import pytest

from hil.devices.yaml_source import ConfigError
from hil.trial import Trial
from hil.trial.record.log import read_log
from hil.trial.spec import load_trial_file

HZ = 50.0


def elbow_controller(robot):
    robot.params_seen = []
    elbow = robot.joints["right_arm.elbow"]
    trace = robot.trace = []
    for tick in robot.loop(hz=HZ):
        elbow.target = 0.5
        trace.append((tick.time, elbow.available))


def test_an_elbow_unplugged_and_plugged_in_a_trial_goes_on_and_is_logged_and_counted(tmp_path):
    seen = {}

    def controller(robot):
        elbow_controller(robot)
        seen["trace"] = robot.trace
        seen["torque"] = robot.bus.transport.device.part(26).memory.get("torque_enable")

    result = Trial(controller, robot="commbot", duration=10,
                   faults=[{"at": 5, "unplug": "right_arm.elbow"}, {"at": 8, "plug": "right_arm.elbow"}]).run(
        tmp_path / "t")
    assert result.ok and result.stopped == "duration", result.error
    trace = seen["trace"]
    lost_at = next(t for t, available in trace if not available)
    back_at = next(t for t, available in trace if t > lost_at and available)
    assert 5.0 <= lost_at <= 5.0 + 3 / HZ + 0.01
    assert 8.0 <= back_at <= 9.0
    assert seen["torque"] == 1
    log = read_log(tmp_path / "t" / "trial.mcap")
    kinds = [m.data["kind"] for m in log.messages["/robot/parts"]]
    assert kinds == ["lost", "back"]
    import json
    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    assert metrics["parts"] == {"lost": 1, "back": 1, "new": 0, "changed": 0, "quarantined": 0}


def test_a_swap_in_a_trial_file_changes_the_model(tmp_path):
    seen = {}

    def controller(robot):
        for _ in robot.loop(hz=HZ):
            pass
        seen["name"] = robot.virtual.parts[28].descriptor.name
        seen["missing"] = robot.blueprint.missing_joints

    result = Trial(controller, robot="commbot", duration=3,
                   faults=[{"at": 1, "unplug": 28}, {"at": 1.5, "swap": 28, "with": "camera"}]).run(tmp_path / "s")
    assert result.ok, result.error
    assert seen["name"] == "camera"
    assert "right_arm.hand" in seen["missing"]
    log = read_log(tmp_path / "s" / "trial.mcap")
    assert [m.data["kind"] for m in log.messages["/robot/parts"]] == ["lost", "changed"]
    assert len(log.messages["/robot/model"]) == 2


@pytest.mark.parametrize("faults, what", [
    ("[{at: 50, unplug: right_arm.elbow}]", "past the trial's duration"),
    ("[{at: 2, plug: right_arm.elbow}]", "not unplugged before"),
    ("[{at: 2, swap: 28, with: nothing}]", "no catalog part 'nothing'"),
    ("[{at: 2, reboot: 28, wobble: 1}]", "unknown key 'wobble'"),
])
def test_bad_faults_are_refused_at_file_and_line(tmp_path, faults, what):
    path = tmp_path / "t.yaml"
    path.write_text(f"controller: x.py\nduration: 10\nfaults:\n  {faults}\n")
    (tmp_path / "x.py").write_text("")
    with pytest.raises(ConfigError) as caught:
        load_trial_file(path)
    assert what in str(caught.value) and f"{path}:" in str(caught.value)


def test_a_part_the_robot_lacks_is_refused_before_the_first_tick(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("controller: x.py\nduration: 10\nfaults:\n  - {at: 2, unplug: left_arm.tail}\n")
    (tmp_path / "x.py").write_text("for _ in robot.loop(hz=50):\n    raise SystemExit('must not run')\n")
    with pytest.raises(ConfigError) as caught:
        Trial(spec=load_trial_file(path)).run(tmp_path / "out")
    assert f"{path}:4" in str(caught.value) and "no such part" in str(caught.value)


def test_hil_sim_runs_a_fault_file_on_its_world(tmp_path):
    """``hil sim commbot --pty --faults FILE``: the right elbow (by blueprint name) stops answering at 1 s."""
    import subprocess

    from conftest import SimProcess
    from hil.runtime.bus import BusHost
    from hil.runtime.transports import open_transport
    from waiting import wait_for

    from hil.devices.config_path import resolve as resolve_config

    faults = tmp_path / "faults.yaml"
    faults.write_text("- {at: 1.0, unplug: right_arm.elbow}\n")
    semantics = resolve_config("commbot", "semantics", "semantics")
    sim = SimProcess("--pty", "--faults", str(faults), "--semantics", str(semantics), assembly="commbot")
    try:
        with BusHost(open_transport(sim.where), retries=0) as bus:
            def elbow_silent():
                try:
                    bus.ping(26)
                    return False
                except Exception:  # noqa: BLE001 - BusTimeout: unplugged
                    return True
            wait_for(elbow_silent, what="id 26 unplugged by the fault file")
            assert bus.ping(30)[0] == 1020, "the others still answer"
    finally:
        sim.stop()
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {at: 1.0, plug: 26}\n")
    from conftest import hil_command
    done = subprocess.run([*hil_command(), "sim", "commbot", "--pty", "--faults", str(bad)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and f"{bad}:1" in done.stderr and "not unplugged" in done.stderr


def test_noise_for_two_seconds_garbles_replies_and_the_run_goes_on(tmp_path):
    seen = {}

    def controller(robot):
        for _ in robot.loop(hz=HZ):
            robot.joints["head.neck_yaw"].target = 0.2
        seen["crc"] = robot.stats.crc_errors
        seen["lost"] = list(robot.parts_lost)
        seen["yaw"] = robot.joints["head.neck_yaw"].position

    result = Trial(controller, robot="commbot", duration=5, seed=3,
                   faults=[{"at": 1, "noise": {"bitflip": 1e-4, "for_s": 2}}]).run(tmp_path / "n")
    assert result.ok, result.error
    assert seen["crc"] > 0, "the noise reached the host"
    assert seen["yaw"] == pytest.approx(0.2, abs=0.05)


def test_faults_as_sweep_cases(tmp_path):
    from hil.trial.sweep.spec import load_sweep

    (tmp_path / "c.py").write_text("")
    path = tmp_path / "s.yaml"
    path.write_text("controller: c.py\nduration: 20\ncases:\n"
                    "  - {faults: []}\n"
                    "  - {faults: [{at: 5, unplug: right_arm.elbow}, {at: 8, plug: right_arm.elbow}]}\n")
    sweep = load_sweep(path)
    assert [len(job.spec.faults) for job in sweep.jobs] == [0, 2]
    assert sweep.jobs[1].spec.faults[0]["unplug"] == "right_arm.elbow"
    bad = tmp_path / "bad.yaml"
    bad.write_text("controller: c.py\nduration: 20\ncases:\n  - {faults: [{at: 50, reboot: 32}]}\n")
    with pytest.raises(ConfigError, match="past the trial's duration"):
        load_sweep(bad)


@pytest.mark.parametrize("body, line, what", [
    # a block list in a case: the entry's own line, not the case's
    ("cases:\n  - {faults: []}\n  - faults:\n      - {at: 5, unplug: right_arm.elbow}\n      - {at: 50, reboot: 32}\n",
     7, "past the trial's duration (20 s) (in condition faults="),
    # fine in one condition of the grid, past the duration in the other
    ("grid:\n  duration: [10, 30]\nfaults:\n  - {at: 5, unplug: right_arm.elbow}\n  - {at: 25, plug: right_arm.elbow}\n",
     7, "(in condition duration=10)"),
    # a part the condition's robot lacks: refused at load, not when each of its trials starts
    ("cases:\n  - {faults: []}\n  - faults:\n      - {at: 5, unplug: right_arm.elbow}\n"
     "      - {at: 6, reboot: left_arm.tail}\n", 7, "reboot 'left_arm.tail': the robot has no such part"),
    ("grid:\n  faults:\n    - [{at: 1, unplug: 26}]\n    - [{at: 1, plug: 61, part: speaker, parent: 99, port: x}]\n",
     6, "no parent part 99"),
])
def test_a_sweeps_faults_are_checked_per_condition_at_load_with_the_entrys_line(tmp_path, body, line, what):
    from hil.trial.sweep.spec import load_sweep

    (tmp_path / "c.py").write_text("")
    path = tmp_path / "s.yaml"
    path.write_text("controller: c.py\nduration: 20\n" + body)
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    assert f"{path}:{line}:" in str(caught.value) and what in str(caught.value), str(caught.value)


def test_a_sweeps_faults_by_default_joint_name_and_tree_path_load(tmp_path):
    from hil.trial.sweep.spec import load_sweep

    (tmp_path / "c.py").write_text("")
    path = tmp_path / "s.yaml"
    path.write_text("controller: c.py\nduration: 20\ncases:\n  - {faults: []}\n  - faults:\n"
                    "      - {at: 5, unplug: 'torso/neck:horn'}\n      - {at: 6, reboot: torso/shoulder_right}\n")
    sweep = load_sweep(path)
    assert [f.get("line") for f in sweep.jobs[-1].spec.faults] == [6, 7], "entries keep their own lines"


def test_the_survive_unplug_example_runs_its_faults(tmp_path):
    """examples/survive_unplug.yaml: the controller holds its target through an unplug, a plug and a reboot."""
    from pathlib import Path

    from hil.trial.record.log import read_log

    path = Path(__file__).resolve().parents[1] / "examples" / "survive_unplug.yaml"
    result = Trial(spec=load_trial_file(path)).run(tmp_path / "t")
    assert result.ok and result.stopped == "duration", result.error
    kinds = [m.data["kind"] for m in read_log(tmp_path / "t" / "trial.mcap").messages["/robot/parts"]]
    assert kinds == ["lost", "back", "lost", "back"]
