"""`hil crowd --serve`: the crowd as the world's partner over ZeroMQ, played here by a test client that is the
world: it sends ticks (robot state, people's actual states) and takes the crowd's intents."""
from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest
import zmq

from bridge.crowd_link import CrowdClient, CrowdLinkError
from bridge.envelope import pack, unpack
from crowd.maps import load_crowd_map
from crowd.script import Scenario
from crowd.sim import CrowdSim
from crowd.population import load_rates, parse_start
from crowd.serve import apply_tick, intents

ROBOT = {"x": 7.0, "y": 0.0, "yaw": 3.14159, "vx": 0.0, "vy": 0.0, "radius": 0.3}


def served_crowd(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "runtime.cli", "crowd", "--map", "arcade", "--serve",
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
