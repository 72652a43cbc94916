"""A trial's saved states and trials started from them: real pybullet DIRECT worlds, a real crowd
process over ZeroMQ, real trial runs through the command line's code."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hil.trial.record.log import read_log
from hil.trial.run import Trial
from hil.trial.state.resume import ResumeError

CONTROLLER = '''
def main(robot):
    cruise = robot.params.get("cruise_m_s", 0.3)
    for tick in robot.loop(hz=10):
        ring = [r for r in robot.sensors["ring"].ranges if r is not None]
        near = min(ring) if ring else 9.0
        robot.base.drive(cruise if near > 0.8 else 0.0, 0.15 if near < 1.5 else 0.0)
        robot.mode = "go" if near > 0.8 else "wait"
'''
KEYS = dict(map="arcade", scenario="guide_meets_child", start=(-18.0, 0.0, 0.0), seed=1, duration=7.0,
            state_every=2.0)


def messages(folder: Path, after: float, upto: float = 1e9) -> dict[str, list]:
    log = read_log(folder / "trial.mcap")
    return {topic: [(m.t, m.data if isinstance(m.data, bytes) else json.dumps(m.data, sort_keys=True))
                    for m in ms if after + 1e-9 < m.t <= upto + 1e-9]
            for topic, ms in log.messages.items() if topic != "/trial/meta"}


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("states")
    controller = root / "stateless.py"
    controller.write_text(CONTROLLER)
    result = Trial(controller, **KEYS).run(root / "a")
    result.raise_for_status()
    return controller, root / "a"


def resumed(controller: Path, folder: Path, out: Path, t: float, **keys) -> Path:
    spec = {**KEYS, **keys, "from": f"{folder}@{t:g}"}
    Trial(controller, **spec).run(out).raise_for_status()
    return out


def test_states_are_saved_at_the_interval(original):
    _, folder = original
    index = json.loads((folder / "states" / "index.json").read_text())
    assert [e["t"] for e in index["states"]] == [0.0, 2.0, 4.0, 6.0]
    assert {"robot", "map", "crowd", "hil", "merge_fixed"} <= set(index["fingerprint"])
    assert index["log_end_s"] == pytest.approx(6.9)


def test_from_a_saved_state_gives_the_same_messages_after_it(original, tmp_path):
    controller, folder = original
    out = resumed(controller, folder, tmp_path / "b", 4.0)
    after = messages(out, 4.0)
    assert after == messages(folder, 4.0)
    assert len(after["/robot/state"]) == 29
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from"]["t"] == 4.0 and metrics["resumed_from"]["state_t"] == 4.0


def test_from_twice_gives_the_same_bytes(original, tmp_path):
    controller, folder = original
    one = messages(resumed(controller, folder, tmp_path / "b", 4.0), 0.0)
    two = messages(resumed(controller, folder, tmp_path / "c", 4.0), 0.0)
    assert one == two


def test_a_time_between_states_is_re_simulated_from_the_journal(original, tmp_path):
    controller, folder = original
    out = resumed(controller, folder, tmp_path / "b", 5.0)  # the state at 4 s, then 10 cycles re-simulated
    assert json.loads((out / "metrics.json").read_text())["resumed_from"]["state_t"] == 4.0
    assert messages(out, 5.0) == messages(folder, 5.0)


def test_a_changed_param_changes_the_run_only_after_the_time(original, tmp_path):
    controller, folder = original
    out = resumed(controller, folder, tmp_path / "b", 4.0, params={"cruise_m_s": 0.6})
    at = {k: v for k, v in messages(out, 3.95, 4.0).items() if v}
    assert at["/robot/state"] == messages(folder, 3.95, 4.0)["/robot/state"]  # the restored world
    assert messages(out, 4.0)["/robot/state"] != messages(folder, 4.0)["/robot/state"]


def test_another_map_or_seed_is_refused_naming_what_differs(original, tmp_path):
    controller, folder = original
    with pytest.raises(ResumeError, match=r"crowd \(seed"):
        resumed(controller, folder, tmp_path / "b", 4.0, seed=2)
    with pytest.raises(ResumeError, match="map"):
        resumed(controller, folder, tmp_path / "c", 4.0, map="lab", scenario=None, start=(0.0, 0.0, 0.0))


def test_a_time_outside_the_log_is_refused_with_its_range(original, tmp_path):
    controller, folder = original
    with pytest.raises(ResumeError, match=r"covers 0 \.\. 6\.9 s"):
        resumed(controller, folder, tmp_path / "b", 30.0)


def test_restoring_puts_bodies_and_registers_back(tmp_path):
    """Without the trial: a world stepped, saved, and put into a fresh one (bodies 1e-9, registers exactly)."""
    from hil.firmware_sim import load_assembly
    from hil.firmware_sim.embodied import embody
    from hil.firmware_sim.embodied.state import bodies_state, registers_state, restore_world, save_world

    def world():
        return embody(load_assembly("commbot"), clock="sim", map_name="arcade", base_xy_yaw=(-18, 0, 0), seed=3)

    a = world()
    wheels = [s for s in a.parts if getattr(getattr(s, "descriptor", None), "kind", "") == "wheel"]
    for servo in wheels:
        servo.write(servo.table["torque_enable"].address, b"\x01")
        servo.write(servo.table["goal_velocity"].address, (120).to_bytes(4, "little"))
    a.world.advance_to(1.5)
    state = save_world(a, str(tmp_path / "s.bullet"))
    b = world()
    restore_world(b, state, str(tmp_path / "s.bullet"))
    for name, values in bodies_state(a).items():
        assert bodies_state(b)[name] == pytest.approx(values, abs=1e-9)
    assert registers_state(b) == registers_state(a)
    a.world.advance_to(2.5)
    b.world.advance_to(2.5)
    assert bodies_state(b) == bodies_state(a)  # bit for bit: the original went through the same restore
    a.close()
    b.close()


def test_a_scripted_child_waiting_at_the_time_still_waits_then_goes_on(original, tmp_path):
    """guide_meets_child: 'wait kid arrived' (line 11) is running from 5 s until the child reaches the plaza
    (12.4 s); from the state at 10 s the child still waits, then the script goes on with line 12 as it did."""
    controller, _ = original
    keys = {**KEYS, "duration": 13.5, "state_every": 5.0, "params": {"cruise_m_s": 0.0}}
    Trial(controller, **keys).run(tmp_path / "a").raise_for_status()
    script = messages(tmp_path / "a", 10.0)["/crowd/script"]
    lines = [json.loads(data)["line"] for _, data in script]
    assert lines[:2] == [11, 12]  # the wait ends after 10 s, then the next line
    Trial(controller, **{**keys, "from": f"{tmp_path / 'a'}@10"}).run(tmp_path / "b").raise_for_status()
    assert messages(tmp_path / "b", 10.0)["/crowd/script"] == script
    assert messages(tmp_path / "b", 10.0)["/pedestrians"] == messages(tmp_path / "a", 10.0)["/pedestrians"]


def test_a_sweep_from_a_state_starts_every_condition_there(original, tmp_path):
    import textwrap

    from hil.trial.sweep.spec import load_sweep

    controller, folder = original
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(f'''\
        controller: {controller}
        map: arcade
        scenario: guide_meets_child
        start: [-18, 0, 0]
        duration: 5
        from: {folder}@4
        grid:
          params: {{cruise_m_s: [0.3, 0.6]}}
        seeds: [1]
    '''))
    sweep = load_sweep(path)
    assert {job.spec.resume_from for job in sweep.jobs} == {f"{folder}@4"}
    firsts, afters = [], []
    for job in sweep.jobs:
        out = tmp_path / job.folder
        Trial(spec=job.spec).run(out).raise_for_status()
        firsts.append(messages(out, 3.95, 4.0)["/robot/state"])
        afters.append(messages(out, 4.0, 4.95)["/robot/state"])
    assert firsts[0] == firsts[1] == messages(folder, 3.95, 4.0)["/robot/state"]
    assert afters[0] == messages(folder, 4.0, 4.95)["/robot/state"] and afters[1] != afters[0]


def test_retry_from_here_writes_the_trial_file_for_from(original, tmp_path):
    from browser import need_viser

    need_viser()
    from hil.trial.spec import load_trial_file
    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    controller, folder = original
    viewer = Viewer(port=0, out_root=tmp_path)
    try:
        viewer.show_replay(Timeline.from_log(folder), None, folder=folder)
        assert not viewer.b_retry.disabled
        viewer.replay_t = 4.0
        path, live = viewer.retry_from_here()
        assert live is None  # no run-from-the-page: the file and the command are the result
        assert f"--from {folder}@4" in viewer.retry_html.content
    finally:
        viewer.close()
    spec = load_trial_file(path)
    assert spec.resume_from == f"{folder.resolve()}@4" and spec.seed == 1
    Trial(spec=spec).run(tmp_path / "r").raise_for_status()
    assert messages(tmp_path / "r", 4.0) == messages(folder, 4.0)


def test_report_lists_the_retry_line_before_the_first_failure(tmp_path):
    from hil.trial.state import files
    from hil.trial.state.retry import retry_before_failure

    states = tmp_path / "t" / files.STATES
    states.mkdir(parents=True)
    files.write_index(states, {"trial": {"controller": "c.py"}, "states": [
        {"t": 0.0, "why": "start", "file": "s0"}, {"t": 27.8, "why": "intrusion", "file": "s1"},
        {"t": 31.0, "why": "collision", "file": "s2"}]})
    assert retry_before_failure(tmp_path / "t") == f"hil trial c.py --from {tmp_path / 't'}@17.8"
    assert retry_before_failure(tmp_path / "none") is None


def test_the_crowd_refuses_a_bad_replay_and_goes_on(tmp_path):
    """The crowd process's new requests over a real socket: a replay into a crowd that has moved on, one that
    would step it for hours, garbage in a tick: each answered with an error naming it; the crowd still ticks."""
    import subprocess
    import sys

    from hil.bridge.crowd_link import CrowdClient, CrowdLinkError
    from hil.bridge.crowd_state import crowd_state, replay
    from hil.bridge.envelope import pack, unpack
    from hil.bridge.process import spawn

    proc = spawn([sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve", "tcp://127.0.0.1:*",
                  "--seed", "3"], stdout=subprocess.PIPE, text=True)
    try:
        endpoint = proc.stdout.readline().split()[1]
        client = CrowdClient(endpoint, timeout_s=30.0)
        first = crowd_state(client)
        assert first["t"] == 0.0 and len(first["digest"]) == 64
        done = replay(client, [[0.1 * k, None, []] for k in range(1, 11)])
        assert done["t"] == pytest.approx(1.0) and done["digest"] != first["digest"]
        assert crowd_state(client)["digest"] == done["digest"]
        with pytest.raises(CrowdLinkError, match="from_t=0 s but the crowd is at 1 s"):
            replay(client, [[1.1, None, []]])
        client.seq += 1
        client._socket.send(pack("crowd_replay", {"from_t": 1.0, "ticks": [{"t": 5000.0, "robot": None}]}))
        assert client._socket.poll(30000)
        answer = unpack(client._socket.recv(), ("error",))
        assert "MAX_REPLAY_SPAN_S" in answer.payload["reason"]
        client.seq += 1
        client._socket.send(pack("crowd_replay", {"from_t": 1.0, "ticks": [{"t": "soon"}]}))
        assert client._socket.poll(30000)
        assert "ticks" in unpack(client._socket.recv(), ("error",)).payload["reason"]
        t, _, _ = client.tick(1.1, None, [])
        assert t == pytest.approx(1.1)
        client.close()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
