"""The bridge in real time: a crowd process paced to wall time (`hil crowd --serve EP --realtime`) streaming with a
world on the real clock (`sim://...&crowd_mode=realtime`); bad messages on every socket; a crowd killed and
restarted mid-run. Real sockets on loopback, real subprocesses, real pybullet. No assertion on timing: every wait
is for a condition, with a generous deadline."""
from __future__ import annotations

import logging
import os
import selectors
import socket
import subprocess
import tempfile
import threading
import time

import msgpack
import pytest
import zmq
from conftest import hil_command
from waiting import wait_for as shared_wait_for

from hil.bridge.envelope import pack, unpack
from hil.bridge.process import spawn
from hil.bridge.realtime import (
    CONNECTED,
    LOST,
    REPLAY_WINDOW,
    Freshness,
    LinkError,
    RealtimeCrowdLink,
    ask,
    reachable,
    stream_endpoints,
)
from hil.runtime.transports import TransportError, open_transport

POSE = (-18.0, 0.0, 0.0)  # the arcade's west end, where the guide robot starts
CROWD_ARGS = ("--map", "arcade", "--seed", "3", "--start", "sat 14:00")  # people appear about 1 s in
DEADLINE_S = 15.0
TIMEOUT_S = 1.5  # silence (wall time) before the world counts the crowd as lost


def free_endpoint() -> str:
    """A loopback TCP endpoint nobody uses: a restarted crowd must be able to bind the same one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


class CrowdProcess:
    """``hil crowd ... --serve EP --realtime`` as a subprocess (like trial/task.py CrowdProcess)."""

    def __init__(self, endpoint: str, *args: str):
        self._stderr = tempfile.TemporaryFile()
        # spawn: the crowd dies with whoever started it (a killed background build left two serving, once)
        self.proc = spawn([*hil_command(), "crowd", *CROWD_ARGS, "--serve", endpoint, "--realtime", *args],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr)
        try:
            line = self._first_line().split()
            assert len(line) == 2 and line[0] == "crowd", (line, self.stderr())
            self.endpoint = line[1]
        except BaseException:
            self.stop()
            raise

    def _first_line(self) -> str:
        fd, buf = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + DEADLINE_S
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf and time.monotonic() < deadline:
                if sel.select(0.1):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    buf += chunk
        return buf.decode().split("\n")[0]

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(DEADLINE_S)

    def wait(self) -> int:
        return self.proc.wait(DEADLINE_S)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.proc.stdout.close()


def wait_for(condition, step=lambda: time.sleep(0.01), what: str = "the condition"):
    """Call ``step`` until ``condition()`` holds; fail (naming ``what``) after a generous deadline."""
    shared_wait_for(condition, what, DEADLINE_S, step)


def realtime_world(endpoint: str, clock: str = "real"):
    return open_transport(f"sim://commbot?clock={clock}&map=arcade&pose={POSE[0]:g},{POSE[1]:g},{POSE[2]:g}"
                          f"&crowd={endpoint}&crowd_mode=realtime&crowd_timeout={TIMEOUT_S:g}")


def stepping(transport):
    """One turn of a world on the real clock: step it up to now (what every bus instruction does)."""
    def step():
        transport.device.tick()
        time.sleep(0.005)
    return step


def test_streams_flow_both_ways_between_the_world_and_a_crowd_process():
    crowd = CrowdProcess(free_endpoint())
    try:
        transport = realtime_world(crowd.endpoint)
        try:
            bridge = transport.embodied.crowd
            assert bridge.link.state == CONNECTED
            wait_for(lambda: bridge.pedestrians.bodies, stepping(transport), "pedestrians from the crowd's intents")
            assert set(bridge.people) == set(bridge.pedestrians.bodies)

            # the control channel answers between the crowd's steps; the crowd's people may reach the world before
            # the world's first message reaches the crowd (a subscription joins late on a loaded machine): wait
            status: dict = {}
            wait_for(lambda: status.update(ask(crowd.endpoint).payload) or status["worlds"] > 0, stepping(transport),
                     "the crowd to apply a message of the world's stream")
            assert status["world"] == CONNECTED
            assert status["robot"]["x"] == pytest.approx(POSE[0], abs=0.05)  # the pose the world published
            assert status["robot"]["y"] == pytest.approx(POSE[1], abs=0.05)
            counters = bridge.counters()
            assert counters["state"] == CONNECTED and counters["dropped"] == 0 and counters["intents"] > 0
        finally:
            transport.close()  # says bye: the crowd stops serving
        assert crowd.wait() == 0, crowd.stderr()
        assert "steps in real time" in crowd.stderr()
    finally:
        crowd.stop()


BAD = {"garbage": b"\x93garbage", "version": msgpack.packb({"v": 7, "type": "hello", "seq": 1, "t": 0.0}),
       "type": pack("teleport", {})}
REASONS = {"garbage": "not msgpack", "version": "version 7", "type": "unknown message type 'teleport'"}


def test_bad_messages_to_the_crowd_are_dropped_logged_and_it_goes_on():
    crowd = CrowdProcess(free_endpoint())
    context = zmq.Context.instance()
    control, world = context.socket(zmq.REQ), context.socket(zmq.PUB)
    try:
        for sock in (control, world):
            sock.setsockopt(zmq.LINGER, 0)
        control.connect(crowd.endpoint)
        for data in BAD.values():  # the control channel answers every bad request with an error
            control.send(data)
            assert control.poll(int(DEADLINE_S * 1000))
            assert unpack(control.recv(), ("error",)).type == "error"
        welcome = ask(crowd.endpoint, "hello").payload
        world.connect(reachable(welcome["world_endpoint"], crowd.endpoint))

        def robot_at(x: float, seq: int) -> bytes:
            return pack("world", {"session": "test", "t": 0.0, "robot": {"x": x, "y": -1.25}, "people": []}, seq=seq)

        def heard_robot_at(x: float) -> bool:
            return (ask(crowd.endpoint).payload["robot"] or {}).get("x") == x

        # a new PUB's first messages may be lost before it is connected: send until the crowd has heard one
        wait_for(lambda: world.send(robot_at(3.5, 1)) or heard_robot_at(3.5), what="the crowd to hear the test")
        bad_world = pack("world", {"session": "test", "t": 0.0, "robot": {"x": "left"}, "people": []}, seq=2)
        for data in (*BAD.values(), bad_world):  # each once, and wait: the stream keeps only the newest message
            dropped = ask(crowd.endpoint).payload["dropped"]
            world.send(data)
            wait_for(lambda dropped=dropped: ask(crowd.endpoint).payload["dropped"] == dropped + 1,
                     what=f"the crowd to drop {data[:20]!r}")
        world.send(robot_at(4.5, 3))
        wait_for(lambda: heard_robot_at(4.5), what="the crowd to take a good world message after the bad ones")
        assert ask(crowd.endpoint, "bye").type == "bye"
        assert crowd.wait() == 0
        lines = crowd.stderr().splitlines()
        for reason in REASONS.values():  # each logged once, with where it came from and why it was dropped
            for where in ("crowd control", "crowd world stream"):
                assert sum(where in line and f"dropped a message: {reason}" in line for line in lines) == 1, lines
        # the malformed robot, refused with the path of the bad value (bridge/schema.py)
        assert any("world stream" in line and "$.payload.robot.x" in line for line in lines), lines
    finally:
        control.close(0)
        world.close(0)
        crowd.stop()


class FakeCrowd:
    """A crowd that misbehaves on purpose: raw sockets, so the test decides every byte the world receives."""

    def __init__(self):
        context = zmq.Context.instance()
        self.control, self.state, self.world = (context.socket(k) for k in (zmq.REP, zmq.PUB, zmq.SUB))
        for sock in (self.control, self.state, self.world):
            sock.setsockopt(zmq.LINGER, 0)
        self.control.bind("tcp://127.0.0.1:*")
        self.state.bind("tcp://127.0.0.1:*")
        self.world.setsockopt(zmq.SUBSCRIBE, b"")
        self.world.bind("tcp://127.0.0.1:*")
        self.endpoint = self.control.getsockopt_string(zmq.LAST_ENDPOINT)

    def answer_hellos(self, link: RealtimeCrowdLink, reply: bytes, reacted) -> None:
        """Answer every hello with ``reply`` until ``reacted()``: a world whose hello went unanswered too long
        may have asked again on a fresh socket (lazy pirate), so more than one answer may be needed."""
        def step():
            if self.control.poll(0):
                assert unpack(self.control.recv(), ("hello",)).type == "hello"
                self.control.send(reply)
            time.sleep(0.005)
            link.poll()
        wait_for(reacted, step, f"the world to take {reply[:20]!r}")

    def welcome(self) -> bytes:
        return pack("welcome", {"session": "fake", "state_endpoint": self.state.getsockopt_string(zmq.LAST_ENDPOINT),
                                "world_endpoint": self.world.getsockopt_string(zmq.LAST_ENDPOINT), "dt": 0.1,
                                "t": 0.0})

    def close(self) -> None:
        for sock in (self.control, self.state, self.world):
            sock.close(0)


def test_bad_messages_to_the_world_are_dropped_logged_and_the_link_goes_on(caplog):
    caplog.set_level(logging.INFO, logger="hil.bridge")
    fake = FakeCrowd()
    link = RealtimeCrowdLink(fake.endpoint, timeout_s=DEADLINE_S, hello_interval_s=0.2)
    try:
        for reply in (*BAD.values(), pack("error", {"reason": "no"})):  # bad answers to hello
            dropped = link.counters.dropped
            fake.answer_hellos(link, reply, lambda dropped=dropped: link.counters.dropped > dropped)
        assert link.state != CONNECTED
        fake.answer_hellos(link, fake.welcome(), lambda: link.state == CONNECTED)

        intents = {"session": "fake", "t": 0.5, "people": [], "spawned": [], "removed": []}
        # a new SUB may miss the first messages: send (each newer than the last) until the world has taken one
        seqs = iter(range(1, 1_000_000))
        wait_for(lambda: fake.state.send(pack("intents", intents, seq=next(seqs))) or link.poll() is not None,
                 what="the world to take the fake crowd's intents")
        for data in (*BAD.values(), pack("intents", {"t": 0.5}), pack("intents", intents, seq=0)):
            refused = link.counters.dropped + link.counters.stale  # each once, and wait: see above

            def seen(refused=refused) -> bool:
                link.poll()
                return link.counters.dropped + link.counters.stale > refused

            fake.state.send(data)
            wait_for(seen, what=f"the world to refuse {data[:20]!r}")
            assert link.counters.dropped + link.counters.stale == refused + 1
        assert link.counters.stale == 1  # seq 0 after a newer one: stale, not taken
        fake.state.send(pack("intents", {**intents, "t": 0.7}, seq=next(seqs)))
        got = []
        wait_for(lambda: got.append(link.poll()) or got[-1] is not None, what="good intents after the bad ones")
        assert got[-1]["t"] == 0.7 and link.state == CONNECTED
        messages = [r.getMessage() for r in caplog.records if r.name == "hil.bridge"]
        for reason in REASONS.values():
            assert sum(reason in m for m in messages) == 2, messages  # once from control, once from the stream
        assert any("'session'" in m for m in messages)
    finally:
        link.close()
        fake.close()


def test_the_crowd_dies_the_world_goes_on_and_takes_a_new_crowd_on_the_same_endpoint(caplog):
    caplog.set_level(logging.INFO, logger="hil.bridge")
    endpoint = free_endpoint()
    crowd = CrowdProcess(endpoint)
    try:
        transport = realtime_world(endpoint)
        try:
            bridge, world = transport.embodied.crowd, transport.embodied.world
            step = stepping(transport)
            wait_for(lambda: len(bridge.pedestrians.bodies) >= 1, step, "the first crowd's people")
            first_session = bridge.link.session

            crowd.kill()
            t_killed = world.time_s
            wait_for(lambda: bridge.link.state == LOST, step, "the link to report the crowd lost")
            old_people = dict(bridge.pedestrians.bodies)
            lost = [m for m in (r.getMessage() for r in caplog.records) if "lost the crowd" in m]
            assert len(lost) == 1 and endpoint in lost[0] and "nothing heard for" in lost[0], lost
            t_lost = world.time_s
            wait_for(lambda: world.time_s > t_lost + 0.5, step, "the world to keep stepping while the crowd is gone")
            assert world.time_s > t_killed and bridge.link.state == LOST
            assert all(v == (0.0, 0.0) for v in bridge.pedestrians.intended.values()), "people stand while lost"
            assert set(bridge.pedestrians.bodies) == set(old_people), "nobody new while nobody decides"

            crowd = CrowdProcess(endpoint)  # a new process on the same control endpoint: new session, new ports
            wait_for(lambda: bridge.link.state == CONNECTED, step, "the link to reconnect")
            assert bridge.link.reconnects == 1 and bridge.link.session != first_session
            assert bridge.cleared == len(old_people), "the first crowd's people were removed"
            wait_for(lambda: bridge.pedestrians.bodies, step, "the new crowd's people")
            events = [e["event"] for e in bridge.take_link_events()]
            assert events == ["connected", "lost", "reconnected"]
            assert sum("is back after" in r.getMessage() for r in caplog.records) == 1
            assert bridge.counters()["losses"] == 1
        finally:
            transport.close()
        assert crowd.wait() == 0
    finally:
        crowd.stop()


def test_a_realtime_crowd_beside_a_sim_clock_world_is_refused():
    with pytest.raises(ValueError, match="crowd_mode=realtime needs clock=real.*deterministic only .*lockstep"):
        realtime_world("tcp://127.0.0.1:1", clock="sim")
    with pytest.raises(TransportError, match="crowd_mode='fast' is not one of lockstep, realtime"):
        open_transport("sim://commbot?crowd=tcp://127.0.0.1:1&crowd_mode=fast")  # refused before a world is built


def test_no_crowd_at_the_endpoint_is_named_at_once():
    from hil.bridge.crowd_link import CrowdLinkError

    endpoint = free_endpoint()
    with pytest.raises(CrowdLinkError, match=f"no crowd answered hello at {endpoint}"):
        realtime_world(endpoint)
    with pytest.raises(LinkError, match=f"the crowd at {endpoint} did not answer 'status'"):
        ask(endpoint, timeout_s=0.2)


def test_in_process_crowd_stops_on_request_and_sees_the_published_robot():
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.serve_realtime import serve_realtime
    from hil.crowd.sim import CrowdSim

    sim, stop, ready = CrowdSim(load_crowd_map("arcade"), seed=1), threading.Event(), []
    thread = threading.Thread(target=serve_realtime, args=(sim, "tcp://127.0.0.1:*"),
                              kwargs={"ready": ready.append, "stop": stop})
    thread.start()
    try:
        wait_for(lambda: ready, what="the crowd to bind")
        link = RealtimeCrowdLink(ready[0].split()[1], timeout_s=DEADLINE_S)
        link.connect(DEADLINE_S)

        def robot_seen():
            link.publish(0.1, {"x": 2.0, "y": 1.0, "yaw": 0.0, "vx": 0.0, "vy": 0.0, "radius": 0.3}, [])
            return link.poll() is not None and sim.robot is not None

        wait_for(robot_seen, what="the crowd to see the robot")
        assert (sim.robot.x, sim.robot.y) == (2.0, 1.0)
        link.close()  # bye: serve_realtime returns
        thread.join(DEADLINE_S)
        assert not thread.is_alive()
    finally:
        stop.set()
        thread.join(DEADLINE_S)


def test_with_keys_the_streams_are_encrypted_and_a_world_without_them_is_not_answered(tmp_path):
    from hil.bridge.security import Security, create_keys
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.serve_realtime import serve_realtime
    from hil.crowd.sim import CrowdSim

    create_keys(tmp_path / "keys")
    security = Security.load(tmp_path / "keys")
    sim, stop, ready = CrowdSim(load_crowd_map("arcade"), seed=1), threading.Event(), []
    thread = threading.Thread(target=serve_realtime, args=(sim, "tcp://127.0.0.1:*"),
                              kwargs={"ready": ready.append, "stop": stop, "security": security})
    thread.start()
    try:
        wait_for(lambda: ready, what="the crowd to bind")
        endpoint = ready[0].split()[1]
        plain = RealtimeCrowdLink(endpoint)
        with pytest.raises(LinkError, match="ignores a world without its keys"):
            plain.connect(0.3)
        plain.close()
        link = RealtimeCrowdLink(endpoint, timeout_s=DEADLINE_S, security=security)
        link.connect(DEADLINE_S)

        def robot_seen():
            link.publish(0.1, {"x": -2.0, "y": 0.5}, [])
            return link.poll() is not None and sim.robot is not None

        wait_for(robot_seen, what="the crowd to see the robot over CURVE")
        assert (sim.robot.x, sim.robot.y) == (-2.0, 0.5)
        link.close()
    finally:
        stop.set()
        thread.join(DEADLINE_S)


def test_stream_endpoints_and_freshness():
    assert stream_endpoints("tcp://127.0.0.1:5760") == ("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
    assert stream_endpoints("ipc:///tmp/crowd") == ("ipc:///tmp/crowd.state", "ipc:///tmp/crowd.world")
    assert reachable("tcp://0.0.0.0:6001", "tcp://10.0.0.5:5760") == "tcp://10.0.0.5:6001"
    assert reachable("tcp://127.0.0.1:6001", "tcp://127.0.0.1:5760") == "tcp://127.0.0.1:6001"
    fresh = Freshness()
    assert [fresh.accept("a", s) for s in (1, 3, 2, 3)] == [True, True, False, False]
    assert fresh.accept("b", 1), "a restarted peer counts again from 1"
    # one forged or corrupted message with an absurd seq does not silence the real sender for ever
    assert fresh.accept("b", 2 ** 62) and not fresh.accept("b", 2 ** 62 - 1)
    assert fresh.accept("b", 2) and fresh.accept("b", 3), "the sender's own seq is its word again"
    assert fresh.accept("b", 3 + REPLAY_WINDOW) and not any(fresh.accept("b", s) for s in (4, 10, 3 + REPLAY_WINDOW))
