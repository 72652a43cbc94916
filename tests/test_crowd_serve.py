"""`hil crowd --serve`: the crowd as the world's partner over ZeroMQ, played here by a test client that is the
world: it sends ticks (robot state, people's actual states) and takes the crowd's intents."""
from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest
import zmq

from hil.bridge.crowd_link import CrowdClient, CrowdLinkError
from hil.bridge.envelope import pack, unpack
from hil.crowd.maps import load_crowd_map
from hil.crowd.script import Scenario
from hil.crowd.sim import CrowdSim
from hil.crowd.population import load_rates, parse_start
from hil.crowd.serve import apply_tick, intents

ROBOT = {"x": 7.0, "y": 0.0, "yaw": 3.14159, "vx": 0.0, "vy": 0.0, "radius": 0.3}


def served_crowd(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve",
                             "tcp://127.0.0.1:*", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    assert line and line[0] == "crowd", proc.stderr.read() if proc.poll() is not None else line
    return proc, line[1]


def world_loop(client: CrowdClient, seconds: float, dt: float = 0.1) -> list:
    """A world without physics: what the crowd intends is what happens (actual = intended)."""
    people: list[dict] = []
    log = []
    for k in range(1, round(seconds / dt) + 1):
        t, intended, payload = client.tick(k * dt, ROBOT, people)
        people = [{"id": p.id, "x": p.x, "y": p.y, "vx": p.vx, "vy": p.vy} for p in intended]
        log.append((round(t, 6), [(p.id, round(p.x, 6), round(p.y, 6)) for p in intended],
                    payload["spawned"], payload["removed"]))
    return log


def test_served_crowd_answers_ticks_like_the_in_process_crowd():
    proc, endpoint = served_crowd("--seed", "4", "--start", "sat 14:00")
    try:
        client = CrowdClient(endpoint, timeout_s=30)
        served = world_loop(client, 60.0)
        client.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any(spawned for *_, spawned, _ in served), "people arrived by the weekend rates"
    appeared = {pid for _, _, spawned, _ in served for pid in spawned}
    seen = {pid for _, people, _, _ in served for pid, *_ in people}
    assert seen == appeared, "every person the world hears of was announced as spawned"

    sim = CrowdSim(load_crowd_map("arcade"), seed=4)
    Scenario(sim, rates=[load_rates("weekday"), load_rates("weekend")], start_s=parse_start("sat 14:00"),
             generate=True)
    local = []
    for k in range(1, 601):
        spawned, removed = apply_tick(sim, {"t": k * 0.1, "robot": ROBOT, "people": []})
        local.append((round(sim.time_s, 6), [(p.id, round(p.x, 6), round(p.y, 6)) for p in intents(sim)],
                      spawned, removed))
    assert served == local, "over the bridge, a world that lets everyone walk as intended sees the crowd unchanged"


def test_bad_messages_get_an_error_and_the_crowd_goes_on():
    proc, endpoint = served_crowd("--seed", "1")
    try:
        socket = zmq.Context.instance().socket(zmq.REQ)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(endpoint)
        for data in (b"garbage", msgpack.packb({"v": 7, "type": "tick"}), pack("teleport", {}),
                     pack("tick", {"robot": None})):
            socket.send(data)
            assert socket.poll(10000)
            assert unpack(socket.recv(), ("error",)).type == "error"
        socket.close(0)
        client = CrowdClient(endpoint, timeout_s=10)
        t, _, _ = client.tick(0.5, ROBOT, [])
        assert t == pytest.approx(0.5)
        client.close()
        assert proc.wait(30) == 0
        assert proc.stderr.read().count("dropped a message") == 4
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_dead_crowd_is_reported_by_name_not_waited_for():
    proc, endpoint = served_crowd()
    proc.kill()
    proc.wait()
    client = CrowdClient(endpoint, timeout_s=0.5)
    with pytest.raises(CrowdLinkError, match=f"the crowd at {endpoint} did not answer"):
        client.tick(0.1, ROBOT, [])


# --- a script played on the world's time (the child scene served) -----------------------------------------------------
STAGED_ROBOT = {"x": 7.0, "y": 0.0, "yaw": 3.1416, "vx": 0.0, "vy": 0.0, "radius": 0.3}  # where the script's robot line puts it


def test_a_served_script_plays_on_the_worlds_ticks_exactly_as_it_runs_alone():
    proc, endpoint = served_crowd("--seed", "2", "--script", "child_interacts")
    events = []
    try:
        client = CrowdClient(endpoint, timeout_s=30)
        served = []
        people: list[dict] = []
        for k in range(1, 401):
            t, intended, payload = client.tick(k * 0.1, STAGED_ROBOT, people)
            people = [{"id": p.id, "x": p.x, "y": p.y, "vx": p.vx, "vy": p.vy} for p in intended]
            served.append((round(t, 6), [(p.id, round(p.x, 6), round(p.y, 6)) for p in intended]))
            events += payload["script"]
            assert payload["script_state"] == "playing"
        client.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [e["line"] for e in events]
    assert [e["text"].split()[0] for e in events] == ["run", "spawn", "place", "move", "wait", "move", "objective"], \
        "the world places the robot: the script's robot line is skipped"
    assert lines == sorted(lines)
    assert [e["t"] for e in events][:2] == [5.0, 5.0], "run 5s ended at 5 s of the world's time, then the kid came"
    assert served[60][1], "the kid is on the map after 5 s"
    kids = [p for p in intended if p.type == "boy02"]
    assert kids and all(p.height == pytest.approx(1.2) for p in kids), "the script's boy02 is a child's height"

    sim = CrowdSim(load_crowd_map("arcade"), seed=2)
    scenario = Scenario(sim, rates=[load_rates("weekday"), load_rates("weekend")])
    from hil.crowd.script import load_script

    alone = []
    player = scenario.play(load_script("child_interacts"))
    for _ in range(400):
        next(player)
        sim.step()
        alone.append((round(sim.time_s, 6), [(p.id, round(p.x, 6), round(p.y, 6)) for p in intents(sim)]))
    assert served == alone, "served or standalone, the staged scene is the same"


def test_a_served_script_that_fails_names_its_line_and_the_crowd_goes_on():
    from hil.crowd.stepper import Stepper

    sim = CrowdSim(load_crowd_map("arcade"), seed=0)
    scenario = Scenario(sim)
    stepper, logged = Stepper(sim, log=lambda text: logged.append(text)), []
    script = "spawn a = boy01 at west_gate\nmove a to east_gate\nwait a arrived timeout 2s\nspawn b = boy02 at plaza"
    stepper.start(scenario.play(script, "r.scn", on_line=stepper.line_ran, world_robot=True))
    apply_tick(sim, {"t": 5.0, "robot": None, "people": []}, stepper.step)
    report = stepper.drain()
    assert report["script_state"] == "failed"
    assert report["script_error"] == "r.scn:3: wait: a did not arrive within 2 s of simulated time"
    assert [e["line"] for e in report["script"]] == [1, 2]
    assert "b" not in scenario.ids and sim.time_s == pytest.approx(5.0), "the crowd stepped on to the world's time"
    assert any("script stopped" in text for text in logged)
    apply_tick(sim, {"t": 6.0, "robot": None, "people": []}, stepper.step)
    assert stepper.drain() == {"script": [], "script_state": "failed", "script_error": report["script_error"],
                               "script_error_line": 3}


def test_a_bad_served_script_stops_the_crowd_before_it_binds():
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".scn", delete=False) as fh:
        fh.write("run 5s\nmove nobody to plaza\n")
    proc = subprocess.run([sys.executable, "-m", "hil", "crowd", "--map", "arcade", "--serve",
                           "tcp://127.0.0.1:*", "--script", fh.name], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{fh.name}:2:" in proc.stderr and "nobody" in proc.stderr
