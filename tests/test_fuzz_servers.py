"""Nothing a peer sends crashes, hangs or poisons a hil server.

Each server runs for real (a `hil sim` subprocess on a pty, `hil crowd --serve` subprocesses in lockstep and in real
time, the lockstep clock's ROUTER) and is sent every case below plus ``FUZZ_N`` seeded random messages
(10,000 by default; ``make fuzz`` sends 1,000,000). Afterwards it must answer a valid request correctly, still be
running, and its memory must not have grown without bound.
"""
from __future__ import annotations

import math
import os
import random
import select
import subprocess
import tempfile
import time

import msgpack
import pytest
import zmq
from conftest import SimProcess, hil_command
from waiting import HangGuard

from hil.bridge.crowd_link import CrowdClient, tick_payload
from hil.bridge.envelope import VERSION, pack, unpack
from hil.bridge.lockstep import ClockServer, LockstepCore, LockstepError, RemoteParticipant
from hil.bridge.process import spawn
from hil.bridge.realtime import ask, reachable
from hil.devices.protocol import BROADCAST_ID, Ping, Read, StreamDecoder, SyncRead, encode_request

FUZZ_N = int(os.environ.get("FUZZ_N", "10000"))
SEED = int(os.environ.get("FUZZ_SEED", "18"))
DEADLINE_S = 30.0
MAX_GROWTH_KB = 64 * 1024  # a server may cache and warm up, but 10k (or 1M) messages must not pile up


def rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A valid message with a few bytes changed, cut, or extended; or plain random bytes."""
    kind = rng.random()
    if kind < 0.2:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        if out and rng.random() < 0.7:
            out[rng.randrange(len(out))] = rng.getrandbits(8)
        elif out:
            del out[rng.randrange(len(out)):]
        else:
            out += bytes(rng.getrandbits(8) for _ in range(8))
    return bytes(out)


def mutate_value(rng: random.Random, value):
    """A structurally plausible but wrong value: the types and magnitudes once found accepted."""
    return rng.choice([math.nan, math.inf, -math.inf, 1e300, -1, 1.9, True, "1e3", "x", None, [], {}, [1], 2 ** 70,
                       value])


def mutate_doc(rng: random.Random, doc):
    """``doc`` (nested maps and lists) with one leaf or key replaced."""
    if isinstance(doc, dict) and doc:
        doc = dict(doc)
        key = rng.choice(list(doc))
        if rng.random() < 0.1:
            doc[rng.choice(["zz", 1, ""])] = doc.pop(key)
        else:
            doc[key] = mutate_doc(rng, doc[key]) if rng.random() < 0.6 else mutate_value(rng, doc[key])
        return doc
    if isinstance(doc, list) and doc:
        doc = list(doc)
        i = rng.randrange(len(doc))
        doc[i] = mutate_doc(rng, doc[i]) if rng.random() < 0.6 else mutate_value(rng, doc[i])
        return doc
    return mutate_value(rng, doc)


def fuzz_messages(rng: random.Random, valid: list[dict], n: int):
    """n messages: mutated documents (packed), mutated bytes, garbage."""
    for _ in range(n):
        doc = rng.choice(valid)
        if rng.random() < 0.6:
            try:
                yield msgpack.packb(mutate_doc(rng, doc), use_bin_type=True)
            except (TypeError, ValueError, OverflowError):
                yield b"\xc1"
        else:
            yield mutate(rng, msgpack.packb(doc, use_bin_type=True))


def _send_or_reconnect(client, frame, url: str):
    """(client, sent?): a fuzzed frame to a Foxglove server; a client the server dropped for flooding it is
    replaced by a new connection (the frame counts as not sent)."""
    from foxglove_client import FoxgloveClient

    try:
        client.send(frame)
        return client, True
    except Exception:  # noqa: BLE001 - the server may drop a client that floods it; connect again
        client.close()
        return FoxgloveClient(url), False


def envelope(kind: str, payload, seq: int = 1, t: float = 0.0) -> dict:
    return {"v": VERSION, "type": kind, "seq": seq, "t": t, "payload": payload}


# --- the virtual device over a pty -------------------------------------------------------------------------------

def _pty_exchange(fd: int, data: bytes, decoder: StreamDecoder) -> list:
    os.write(fd, data)
    events, deadline = [], time.monotonic() + 0.05
    while time.monotonic() < deadline:
        if select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            events += decoder.feed(os.read(fd, 65536))
    return events


def _write_draining(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the non-blocking pty, reading (and dropping) the device's replies meanwhile: when
    the device is slower than we are (a loaded machine) the pty fills up both ways, and the device only reads on
    once its replies are taken."""
    view = memoryview(data)
    guard = HangGuard(DEADLINE_S)
    while view:
        readable, writable, _ = select.select([fd], [fd], [], 0.1)
        if readable:
            os.read(fd, 65536)
        if writable:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                pass
            guard.renew()
        guard.check("the device to read its line")
    while select.select([fd], [], [], 0.002)[0]:  # keep the pty from filling up with replies
        os.read(fd, 65536)


def _ping_answered(fd: int) -> bool:
    decoder = StreamDecoder()
    os.write(fd, encode_request(Ping(1)))
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            for event in decoder.feed(os.read(fd, 65536)):
                if getattr(event, "id", None) == 1 and event.is_status:
                    return event.error == 0
    return False


def test_virtual_device_survives_oversized_reads_and_random_frames():
    device = SimProcess("--pty")
    fd = os.open(device.where, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        import tty

        tty.setraw(fd)
        assert _ping_answered(fd)
        decoder = StreamDecoder()
        frames_sent = [bytes.fromhex("fffffd00fe08008a0000ffff0147bc"),  # Fast Sync Read of 65535 bytes
                       encode_request(SyncRead(0, 65535, (1, 2))), encode_request(Read(1, 0, 65535)),
                       encode_request(SyncRead(0, 4000, (1, 2, 3), fast=True))]
        for frame in frames_sent:
            replies = [e for e in _pty_exchange(fd, frame, decoder) if hasattr(e, "params")]
            assert replies and all(r.params[0] & 0x7F == 5 for r in replies if r.id != BROADCAST_ID), replies
        before = rss_kb(device.proc.pid)
        rng = random.Random(SEED)
        valid = [encode_request(r) for r in (Ping(1), Read(2, 132, 4), SyncRead(132, 4, (1, 2, 3), fast=True),
                                             SyncRead(0, 2, (4, 5)))]
        batch = bytearray()
        for k in range(FUZZ_N):
            batch += mutate(rng, rng.choice(valid))
            if len(batch) > 2048 or k == FUZZ_N - 1:
                _write_draining(fd, bytes(batch))
                batch.clear()
        time.sleep(0.05)  # let a partial frame at the end be dropped as the line goes quiet
        while select.select([fd], [], [], 0.02)[0]:
            os.read(fd, 65536)
        assert device.alive, device.stderr()
        assert _ping_answered(fd), "the device answers a valid ping after the fuzz"
        assert rss_kb(device.proc.pid) - before < MAX_GROWTH_KB
        assert "Traceback" not in device.stderr()
    finally:
        os.close(fd)
        device.stop()


# --- the crowd, lockstep and real time ---------------------------------------------------------------------------

class Crowd:
    def __init__(self, *args: str):
        self._stderr = tempfile.TemporaryFile()
        self.proc = spawn([*hil_command(), "crowd", "--map", "arcade", "--seed", "1", "--serve",  # dies with us
                           "tcp://127.0.0.1:*", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=self._stderr)
        line = self.proc.stdout.readline().split()
        assert len(line) == 2 and line[0] == b"crowd", (line, self.stderr())
        self.endpoint = line[1].decode()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _request(sock: zmq.Socket, frames: list[bytes]):
    sock.send_multipart(frames)
    assert sock.poll(int(DEADLINE_S * 1000)), "the crowd answers every request"
    return unpack(sock.recv(), ("intents", "error"))


PEOPLE = {"id": [1], "x": [0.0], "y": [0.0], "vx": [0.0], "vy": [0.0]}
ROBOT = {"x": 1.0, "y": 2.0, "yaw": 0.0, "vx": 0.0, "vy": 0.0, "radius": 0.3}


def test_lockstep_crowd_refuses_bad_ticks_unchanged_and_keeps_answering():
    crowd = Crowd()
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(crowd.endpoint)
    try:
        first = _request(sock, [pack("tick", tick_payload(1.0, ROBOT, []), seq=1)])
        for t in (30.0, 60.0, 90.0):  # until someone has come in
            if first.payload["people"]["id"]:
                break
            first = _request(sock, [pack("tick", tick_payload(t, ROBOT, []), seq=1)])
        start = first.payload["t"]
        assert first.type == "intents" and first.payload["people"]["id"], "a busy arcade: people to poison"
        known = first.payload["people"]["id"][0]
        nan_person = {**PEOPLE, "id": [known], "x": [math.nan]}
        bad_frames = {  # each answered with an error naming what is wrong
            "2 frames": [pack("tick", tick_payload(2.0, ROBOT, [])), b"more"],
            "t=1e9": [pack("tick", {"t": 1e9, "robot": ROBOT, "people": {}})],
            "NaN person": [pack("tick", {"t": 1.1, "robot": ROBOT, "people": nan_person})],
            "NaN robot": [pack("tick", {"t": 1.1, "robot": {**ROBOT, "x": math.nan}, "people": {}})],
            "id 1.9": [pack("tick", {"t": 1.1, "robot": ROBOT, "people": {**PEOPLE, "id": [1.9]}})],
            "'1e3'": [pack("tick", {"t": 1.1, "robot": {**ROBOT, "x": "1e3"}, "people": {}})],
            "no t": [pack("tick", {"robot": ROBOT})],
        }
        for case, frames in bad_frames.items():
            assert _request(sock, frames).type == "error", case
        before = rss_kb(crowd.proc.pid)
        rng = random.Random(SEED)
        valid = [envelope("tick", tick_payload(1.0, ROBOT, [(known, 0.0, 0.0, 0.0, 0.0)])),
                 envelope("tick", {"t": 1.0, "robot": None, "people": PEOPLE})]
        for data in fuzz_messages(rng, valid, FUZZ_N):
            _request(sock, [data])  # error or intents (a mutation may still be valid), never silence
        after = _request(sock, [pack("tick", tick_payload(start + 0.2, ROBOT, []), seq=2)])
        assert after.type == "intents" and all(math.isfinite(x) for x in after.payload["people"]["x"])
        assert after.payload["t"] >= start + 0.2 - 1e-9, "valid ticks still step the crowd"
        assert rss_kb(crowd.proc.pid) - before < MAX_GROWTH_KB
        assert "dropped a message" in crowd.stderr() and "Traceback" not in crowd.stderr()
    finally:
        sock.close(0)
        crowd.stop()


def test_lockstep_world_side_refuses_a_reply_without_t():
    """A reply without ``t`` raised KeyError in crowd_link; now a CrowdLinkError naming the crowd."""
    rep = zmq.Context.instance().socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind("tcp://127.0.0.1:*")
    client = CrowdClient(rep.getsockopt_string(zmq.LAST_ENDPOINT), timeout_s=DEADLINE_S)
    try:
        import threading

        def answer():
            rep.recv()
            rep.send(pack("intents", {"people": {"id": [], "type": [], "x": [], "y": [], "vx": [], "vy": []}}))

        thread = threading.Thread(target=answer)
        thread.start()
        from hil.bridge.crowd_link import CrowdLinkError

        with pytest.raises(CrowdLinkError, match="intents: t must be a finite number"):
            client.tick(0.1, None, [])
        thread.join()
    finally:
        client.close()
        rep.close(0)


def test_realtime_crowd_survives_multipart_and_random_world_messages():
    # A step of 0.02 s, not the default 0.1 s: the crowd takes the world stream once a step, and at 0.1 s the
    # queued fuzz reached it over some 20 s of waiting; at 0.02 s the same messages arrive (the same drop count)
    # within a second or two. The server code is the same at any step.
    crowd = Crowd("--realtime", "--dt", "0.02")
    context = zmq.Context.instance()
    pub, control = context.socket(zmq.PUB), context.socket(zmq.REQ)
    for sock in (pub, control):
        sock.setsockopt(zmq.LINGER, 0)
    try:
        welcome = ask(crowd.endpoint, "hello").payload
        world = reachable(welcome["world_endpoint"], crowd.endpoint)
        pub.connect(world)
        control.connect(crowd.endpoint)

        def heard_robot_at(x: float) -> bool:
            return (ask(crowd.endpoint).payload["robot"] or {}).get("x") == x

        good = {"session": "fuzz", "t": 0.0, "robot": {"x": 3.5, "y": -1.0}, "people": []}
        guard = HangGuard(DEADLINE_S)
        seq = 1
        while not heard_robot_at(3.5):  # a new PUB's first messages may be lost before it is connected
            guard.check("the crowd to hear the test's first world message")
            pub.send(pack("world", good, seq=seq))
            seq += 1
            time.sleep(0.02)
        # five bytes that libzmq reads as a multipart message aborted a CONFLATE SUB
        pub.send_multipart([b"\x01\x00", b"\x02\x01A"])
        pub.send_multipart([pack("world", good, seq=seq), b"tail"])
        # a malformed request on the control channel: a 2-frame request
        control.send_multipart([pack("status"), b"x"])
        assert control.poll(int(DEADLINE_S * 1000)) and unpack(control.recv(), ("error",)).type == "error"
        # NaN over the world stream, for a person and for the robot
        pub.send(pack("world", {**good, "robot": {"x": math.nan, "y": 0.0}}, seq=seq + 1))
        pub.send(pack("world", {**good, "people": {**PEOPLE, "x": [math.nan]}}, seq=seq + 2))
        seq += 3
        before = rss_kb(crowd.proc.pid)
        rng = random.Random(SEED)
        valid = [envelope("world", good, seq=seq), envelope("world", {**good, "people": PEOPLE}, seq=seq)]
        for k, data in enumerate(fuzz_messages(rng, valid, FUZZ_N)):
            pub.send(data)
            if k % 500 == 0:
                time.sleep(0.001)  # let the crowd drain (a PUB drops what a slow SUB cannot take; so be it)
        # The fuzz is still queued (the PUB's queue, the kernel's socket buffers) and the crowd works through it
        # at its own pace, at most DRAIN_LIMIT messages a step; on a loaded machine that takes a while. So the
        # deadline runs from the crowd's last refusal: while it is still dropping the fuzz it is making progress.
        # Our valid messages are never dropped, so a crowd that took the fuzz but ignores the world still fails.
        guard, dropped = HangGuard(DEADLINE_S), -1
        while not heard_robot_at(4.5):
            status = ask(crowd.endpoint).payload
            if status["dropped"] != dropped:
                guard.renew()
                dropped = status["dropped"]
            guard.check(f"the crowd to take a valid world message after the fuzz ({status})")
            assert crowd.proc.poll() is None, crowd.stderr()[-3000:]
            seq += 10 ** 7  # newer than anything the fuzz may have sent as seq
            pub.send(pack("world", {**good, "robot": {"x": 4.5, "y": -1.0}}, seq=seq))
            time.sleep(0.02)
        status = ask(crowd.endpoint).payload
        assert status["dropped"] > 0 and crowd.proc.poll() is None
        assert all(math.isfinite(v) for v in status["robot"].values())
        assert rss_kb(crowd.proc.pid) - before < MAX_GROWTH_KB
        assert ask(crowd.endpoint, "bye").type == "bye"
        assert crowd.proc.wait(10) == 0, crowd.stderr()
    finally:
        pub.close(0)
        control.close(0)
        crowd.stop()


# --- the lockstep clock ------------------------------------------------------------------------------------------

def test_clock_survives_bad_frames_and_values_and_binds_names_to_connections():
    # The victim and the intruder sit idle while the fuzz runs, and a fuzzed hello + sleep_until makes someone
    # wait for them: with a stall timeout shorter than the fuzz (1M messages take minutes) the clock would rightly
    # call them stalled. This test is about poisoning, not stalls (tests/test_clock.py has those).
    core = LockstepCore(advance=lambda t: None, stall_timeout_s=3600.0)
    server = ClockServer(core, "tcp://127.0.0.1:*")
    context = zmq.Context.instance()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(server.endpoint)
    victim = intruder = None
    try:
        victim = RemoteParticipant(server.endpoint, "victim", timeout_s=DEADLINE_S)
        intruder = RemoteParticipant(server.endpoint, "intruder", timeout_s=DEADLINE_S)
        # 1- and 3-frame DEALER messages, raw garbage, bad t; NaN, 1e9
        dealer.send(pack("hello", {"name": "d"}))  # no empty delimiter: not a REQ request
        dealer.send_multipart([b"", pack("hello", {"name": "d"}), b"extra"])
        dealer.send_multipart([b"", b"\x00garbage"])
        for bad_t in ("soon", [1], math.nan, 1e9):
            with pytest.raises(LockstepError, match=r"\$\.payload\.t"):  # raw, as a foreign client sends it
                intruder._call("sleep_until", {"t": bad_t})
        # a bye (or a sleep) with another participant's name is refused; the victim stays in
        with pytest.raises(LockstepError, match="joined as 'intruder'"):
            intruder._call("bye", {"name": "victim"})
        with pytest.raises(LockstepError, match="joined as 'intruder'"):
            intruder._call("sleep_until", {"name": "victim", "t": 5.0})
        assert "victim" in core.participants
        rng = random.Random(SEED)
        valid = [envelope("sleep_until", {"name": "d", "t": 1.0}), envelope("hello", {"name": "d"})]
        for k, data in enumerate(fuzz_messages(rng, valid, FUZZ_N)):
            dealer.send_multipart([b"", data] if k % 3 else [data])
            if k % 200 == 0:
                while dealer.poll(0):
                    dealer.recv_multipart()
        intruder.close()
        intruder = None
        for name in [n for n in core.participants if n not in ("victim",)]:
            core.leave(name)  # fuzzed hellos that joined; the clock waits for everyone who did
        assert victim.sleep_until(0.5)[0] == pytest.approx(0.5), "the clock still serves a valid participant"
        assert server.counters.dropped > 0 and server._thread.is_alive()
    finally:
        for participant in (victim, intruder):
            if participant is not None:
                participant.close()
        dealer.close(0)
        server.close()


def test_a_long_sleep_advances_in_slices_without_holding_the_lock():
    """t=1e7 made the world step under the device lock; now it advances a slice at a time."""
    import threading

    lock = threading.RLock()
    steps: list[float] = []
    core = LockstepCore(advance=steps.append)
    server = ClockServer(core, "tcp://127.0.0.1:*", lock=lock)
    participant = RemoteParticipant(server.endpoint, "long", timeout_s=DEADLINE_S)
    try:
        result: list = []
        thread = threading.Thread(target=lambda: result.append(participant.sleep_until(50.0)))
        thread.start()
        thread.join(DEADLINE_S)
        assert result and result[0][0] == 50.0
        assert len(steps) >= 50 and max(b - a for a, b in zip([0.0] + steps, steps)) <= 1.0 + 1e-9
        with lock:  # the lock is free between slices: the device could take it
            pass
    finally:
        participant.close()
        server.close()


# --- property tests of the typed codecs --------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hil.bridge.envelope import EnvelopeError  # noqa: E402
from hil.bridge.schema import MAX_COORDINATE_M, TickPayload, TypedDecoder  # noqa: E402

DECODER = TypedDecoder({"tick": TickPayload, "bye": object})
finite = st.floats(-MAX_COORDINATE_M, MAX_COORDINATE_M, allow_nan=False)
leaf = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 64 - 1), st.floats(), st.text(max_size=8),
                 st.binary(max_size=8))
docs = st.recursive(leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids,
                                                                                    max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_typed_decoding_of_any_bytes_gives_an_envelope_or_an_envelope_error(data):
    try:
        DECODER.decode(data)
    except EnvelopeError:
        pass


@settings(max_examples=300, deadline=None)
@given(docs)
def test_typed_decoding_of_any_document_gives_an_envelope_or_an_envelope_error(doc):
    try:
        DECODER.decode(msgpack.packb(envelope("tick", doc), use_bin_type=True))
    except EnvelopeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e7, allow_nan=False), st.lists(st.tuples(st.integers(0, 2 ** 31 - 1), finite, finite,
                                                               st.floats(-100, 100), st.floats(-100, 100)),
                                                     max_size=20))
def test_a_valid_tick_decodes_to_exactly_what_was_sent(t, rows):
    msg = DECODER.decode(pack("tick", tick_payload(t, {"x": 1.0, "y": 2.0}, rows), seq=3, t=t))
    assert msg.type == "tick" and msg.seq == 3 and msg.payload.t == t
    assert msg.payload.rows() == [tuple(float(v) if k else v for k, v in enumerate(r)) for r in rows]


# --- the live Foxglove server ------------------------------------------------------------------------------------
FOXGLOVE_TUNED = '''\
def main(robot):
    robot.declare_changeable(speed=0.2)
    for tick in robot.loop(hz=10):
        robot.base.drive(robot.params["speed"], 0.0)
'''


def _foxglove_valid(rng: random.Random) -> list:
    """Valid client messages of every kind the live server handles (JSON ops and binary frames)."""
    import struct

    seek = struct.pack("<fBQI", 1.0, 1, rng.randrange(0, 2 ** 63), 0)
    return [{"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 1}]},
            {"op": "unsubscribe", "subscriptionIds": [1]},
            {"op": "getParameters", "parameterNames": ["speed"], "id": "g"},
            {"op": "setParameters", "parameters": [{"name": "speed", "value": 0.3}], "id": "s"},
            {"op": "subscribeParameterUpdates", "parameterNames": ["speed"]},
            bytes([3, 0]) + struct.pack("<fBQI", 1.0, 0, 0, 0),  # play
            bytes([3, 0]) + seek,  # a seek anywhere (backwards, far ahead)
            bytes([2]) + struct.pack("<III", 1, 1, 4) + b'json{"note": "x"}']  # a mark


def test_live_foxglove_server_refuses_bad_frames_params_and_seeks_and_the_trial_goes_on(tmp_path):
    """Malformed frames, unknown channel ids, wrong-typed parameters, seeks backwards or out of range: refused
    (the SDK's status to the client, our refusals in the log), and the trial still runs to its end. FUZZ_N // 10
    messages (a WebSocket frame each: 1,000 by default, 100,000 under make fuzz)."""
    import json
    import threading

    from foxglove_client import PAUSE, PLAY, FoxgloveClient
    from waiting import wait_for

    from hil.trial import Trial
    from hil.trial.foxglove_live.live import LiveServer
    from hil.trial.record.log import read_log

    rng = random.Random(SEED)
    (tmp_path / "tuned.py").write_text(FOXGLOVE_TUNED)
    server = LiveServer("127.0.0.1", 0, duration_s=20.0)
    box = {}
    trial = Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=20.0)
    runner = threading.Thread(target=lambda: box.update(r=trial.run(tmp_path / "t", taps=server.taps,
                                                                    hooks=server.hooks)), daemon=True)
    runner.start()
    valid = _foxglove_valid(rng)
    sent = reconnects = 0
    client = FoxgloveClient(server.url)
    try:
        while sent < max(1000, FUZZ_N // 10):
            doc = rng.choice(valid)
            if isinstance(doc, bytes):
                frame = mutate(rng, doc)
            else:
                frame = json.dumps(mutate_doc(rng, doc)) if rng.random() < 0.7 else \
                    mutate(rng, json.dumps(doc).encode()).decode("latin-1")
            client, ok = _send_or_reconnect(client, frame, server.url)
            sent, reconnects = sent + ok, reconnects + (not ok)
            assert reconnects < 100, "the server keeps dropping the connection"
        client.close()
        with FoxgloveClient(server.url) as good:  # afterwards a valid client is served and steers the trial
            good.playback(PLAY)
            t0 = wait_for(lambda: good.last_time(), what="a Time message after the fuzzing")
            wait_for(lambda: (good.last_time() or 0) > t0, what="sim time going on after the fuzzing")
            good.send({"op": "getParameters", "parameterNames": ["speed"], "id": "after"})
            values = wait_for(lambda: [d for d in good.op("parameterValues") if d.get("id") == "after"],
                              what="the parameters after the fuzzing")
            assert values[0]["parameters"][0]["name"] == "speed"
            good.playback(PLAY, seek_ns=None)
        runner.join(timeout=600)
    finally:
        server.close()
    assert not runner.is_alive() and box["r"].ok, box.get("r") and box["r"].error
    log = read_log(tmp_path / "t" / "trial.mcap")
    assert log.complete and log.messages["/clock"][-1].t >= 19.9, "the trial ran to its end"
    assert log.messages.get("/trial/refused"), "refusals are in the log"


# --- the camera endpoint of `hil sim` (firmware_sim/camera_server.py) ----------------------------------------------

def test_camera_endpoint_answers_every_fuzzed_request_and_still_serves_frames():
    import numpy as np

    from hil.bridge.camera_wire import RemoteCameraError, encode_request, parse_reply
    from hil.firmware_sim import load_assembly

    camera_part = next(p.id for p in load_assembly("commbot").parts
                       if any(s.kind == "camera" for s in p.descriptor.sensors))
    # on the simulator's clock with nobody stepping it: the world's time, and so its frame, stays where it is
    device = SimProcess("--pty", "--clock", "sim", "--clock-endpoint", "tcp://127.0.0.1:*", "--camera-endpoint",
                        "tcp://127.0.0.1:*", assembly="commbot")
    context = zmq.Context.instance()
    sock = None
    try:
        device.next_line()  # clock tcp://...
        endpoint = device.next_line().split()[1]
        sock = context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)

        def ask(frames):
            sock.send_multipart(frames)
            assert sock.poll(int(DEADLINE_S * 1000)), f"no answer to {frames!r:.200}"
            return sock.recv_multipart(copy=False)

        first = parse_reply(ask([encode_request(camera_part, None)]))
        assert first["rgb"].shape == (240, 320, 3)
        before = rss_kb(device.proc.pid)
        rng = random.Random(SEED)
        valid = [{"v": 1, "part": 1, "sensor": None, "have": None}, {"v": 1, "part": 2, "sensor": "camera"}]
        refused = 0
        for k, data in enumerate(fuzz_messages(rng, valid, FUZZ_N)):
            try:
                parse_reply(ask([data] if k % 5 else [data, b"x"]))  # an answer in the format, every time
            except RemoteCameraError:
                refused += 1
        assert refused >= 0.99 * FUZZ_N, f"only {refused} of {FUZZ_N} fuzzed requests refused"
        again = parse_reply(ask([encode_request(camera_part, None)]))
        assert np.array_equal(again["rgb"], first["rgb"]), "the server serves another frame after the fuzz"
        assert device.alive, device.stderr()
        assert rss_kb(device.proc.pid) - before < MAX_GROWTH_KB
    finally:
        if sock is not None:
            sock.close(0)
        device.stop()


# --- hil sim's live fault control --------------------------------------------------------------------------------
def test_the_fault_control_answers_every_request_and_keeps_serving():
    """Every message to ``hil sim --control`` gets a reply (done or error naming the field), never silence or a
    crash, and afterwards a valid request still works. The device is the servo chain without a world, in process."""
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.bus_device import VirtualBusDevice
    from hil.firmware_sim.control import FaultControl
    from hil.firmware_sim.fault_plan import assembly_resolver

    device = VirtualBusDevice(load_assembly("servo_chain").parts)
    control = FaultControl(device, "tcp://127.0.0.1:*", assembly_resolver)
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(control.endpoint)

    def ask_control(data: bytes):
        sock.send(data)
        assert sock.poll(int(DEADLINE_S * 1000)), "the control answers every request"
        return unpack(sock.recv(), ("done", "error"))

    try:
        valid = [envelope("unplug", {"part": 3}), envelope("plug", {"part": 3}), envelope("reboot", {"part": 4}),
                 envelope("swap", {"part": 5, "with": "cpc_servo"}), envelope("noise", {"bitflip": 1e-6, "for_s": 1}),
                 envelope("plug", {"part": 60, "new": "speaker", "parent": 1, "port": "x"}), envelope("status", {})]
        rng = random.Random(SEED)
        kinds = {"done": 0, "error": 0}
        for data in fuzz_messages(rng, valid, FUZZ_N):
            reply = ask_control(data)
            kinds[reply.type] += 1
            if reply.type == "error":
                assert isinstance(reply.payload["reason"], str) and reply.payload["reason"]
        assert kinds["error"] > 0 and kinds["done"] > 0, kinds
        status = ask_control(pack("status", {}))
        assert status.type == "done" and status.payload["refused"] == kinds["error"]
        assert control._thread.is_alive()
        silent = set(status.payload["unplugged"])
        target = next(i for i in range(1, 18) if i not in silent)
        assert ask_control(pack("unplug", {"part": target})).type == "done"
        assert target in ask_control(pack("status", {})).payload["unplugged"]
    finally:
        sock.close(0)
        control.close()


def test_replay_foxglove_server_refuses_bad_frames_and_seeks_out_of_range_and_keeps_serving(tmp_path):
    """``hil view DIR --foxglove``: malformed frames, unknown channels, playback requests with any speed and seeks
    anywhere (before the log's start, past its end, 2**64 - 1): a seek out of range is refused and playback stays
    where it was, and afterwards a valid client seeks to a time in range and gets the log's own bytes from there.
    FUZZ_N // 10 messages (1,000 by default, 100,000 under make fuzz)."""
    import json
    import struct

    from foxglove_client import PAUSE, PLAY, FoxgloveClient
    from waiting import wait_for

    from hil.trial import Trial
    from hil.trial.foxglove_live.replay import ReplayServer

    rng = random.Random(SEED + 1)
    (tmp_path / "tuned.py").write_text(FOXGLOVE_TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=3.0).run(tmp_path / "t").ok
    errors = tmp_path / "refused.txt"
    with open(errors, "w") as err:
        server = ReplayServer(tmp_path / "t", "127.0.0.1", 0, err=err)
        end = server.end_ns

        def playback(command: int, speed: float, seek: int | None) -> bytes:
            return bytes([3, command]) + struct.pack("<fBQI", speed, seek is not None, seek or 0, 0)

        valid = [{"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 1}]},
                 {"op": "unsubscribe", "subscriptionIds": [1]}, playback(PLAY, 1.0, None),
                 playback(PAUSE, 1.0, end // 2)]
        sent = reconnects = 0
        client = FoxgloveClient(server.url)
        try:
            while sent < max(1000, FUZZ_N // 10):
                pick = rng.random()
                if pick < 0.3:  # a playback request with any speed and a seek anywhere, well-formed
                    frame = playback(rng.choice([PLAY, PAUSE, 7]), rng.choice([1.0, 0.0, -1.0, math.nan, math.inf,
                                                                                1e30, 4.0]),
                                     rng.choice([None, 0, end, end + 1, 2 ** 64 - 1, rng.randrange(0, 2 ** 64)]))
                else:
                    doc = rng.choice(valid)
                    frame = mutate(rng, doc) if isinstance(doc, bytes) else json.dumps(mutate_doc(rng, doc)) \
                        if rng.random() < 0.7 else mutate(rng, json.dumps(doc).encode()).decode("latin-1")
                client, ok = _send_or_reconnect(client, frame, server.url)
                sent, reconnects = sent + ok, reconnects + (not ok)
                assert reconnects < 100, "the server keeps dropping the connection"
            client.close()
            with FoxgloveClient(server.url) as good:
                channels = good.channels(wait_for_topics=("/clock",))
                sub = good.subscribe({"/clock": channels["/clock"]})["/clock"]
                time.sleep(0.3)  # the subscription reaches the server before the seek
                good.playback(PAUSE, seek_ns=end + 10 ** 9, request_id="too far")
                good.playback(PAUSE, seek_ns=1_000_000_000, request_id="seek")
                state = wait_for(lambda: [s for s in good.states if s["request_id"] == "seek"], what="the seek")[0]
                refused = wait_for(lambda: [s for s in good.states if s["request_id"] == "too far"],
                                   what="the refused seek's answer")[0]
                assert not refused["did_seek"] and state["did_seek"] and state["time"] == 1_000_000_000
                good.playback(PLAY, speed=4.0, request_id="play")
                wait_for(lambda: any(s["status"] == "ended" for s in good.states), what="the end of the log")
                clocks = [m for m in good.received(sub) if m[0] > 0]
                assert clocks and clocks[0][0] >= 1_000_000_000 and clocks[-1][0] == end
        finally:
            server.close()
    assert "refused" in errors.read_text(), "the refusals are said"


# --- the Foxglove servers' door and their hostile control requests -------------------------------------------------
def _gate_junk(rng: random.Random, port: int) -> bytes:
    """One connection's worth of junk for the gate: random bytes, a cut or mutated upgrade request, a head over the
    limit, a page from elsewhere, a request that never ends; sent, and the answer (if any) read."""
    import base64
    import socket

    key = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(16))).decode()
    good = (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n")
    pick = rng.random()
    if pick < 0.25:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 512)))
    elif pick < 0.5:
        data = mutate(rng, (good + "\r\n").encode())
    elif pick < 0.6:
        data = (good + "X-Pad: " + "a" * 20000 + "\r\n\r\n").encode()
    elif pick < 0.75:
        data = (good + f"Origin: {rng.choice(['https://evil.example', 'null', 'file:///x', chr(0) * 3])}\r\n"
                + rng.choice(["", "Origin: https://app.foxglove.dev\r\n"]) + "\r\n").encode("latin-1")
    else:
        data = good.replace("foxglove.sdk.v1", rng.choice(["", "chat", "foxglove.websocket.v2, x"])).encode() + b"\r\n"
    never_ends = rng.random() < 0.03  # no more bytes, the socket left open: the gate gives up after HANDSHAKE_S
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        try:
            sock.sendall(data[:len(data) // 2] if never_ends else data)
            if not never_ends:
                sock.shutdown(socket.SHUT_WR)
            return sock.recv(4096)
        except OSError:
            return b""


def test_foxglove_gate_and_control_requests_refuse_everything_hostile_and_keep_serving(tmp_path):
    """The door in front of the Foxglove servers (gate.py) gets junk connections: random bytes, mutated and
    over-long upgrade requests, pages from other sites, missing subprotocols, requests that never end. The
    ``hil/retry`` and ``hil/mark`` services get mutated JSON and hostile controllers (/dev/zero, paths outside,
    long, not strings) on a server that lets clients name controllers. Every call is answered, nothing is started,
    and afterwards a valid client is served. max(200, FUZZ_N // 100) of each (10,000 under make fuzz)."""
    import json
    from concurrent.futures import ThreadPoolExecutor, wait

    from foxglove_client import FoxgloveClient
    from waiting import wait_for

    from hil.trial import Trial
    from hil.trial.foxglove_live.replay import ReplayServer

    rng = random.Random(SEED + 2)
    n = max(200, FUZZ_N // 100)
    (tmp_path / "tuned.py").write_text(FOXGLOVE_TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=1.0,
                 state_every=0).run(tmp_path / "t").ok  # no states: a retry that passes every check still starts none
    with open(tmp_path / "said.txt", "w") as err:
        server = ReplayServer(tmp_path / "t", "127.0.0.1", 0, err=err, allow_controller=True)
        try:
            # junk j seeded as when eight threads took every eighth; 32 threads, so that the few that never end
            # (each held HANDSHAKE_S by the gate) are held side by side rather than one after another on a thread
            with ThreadPoolExecutor(32) as pool:
                junk = [pool.submit(_gate_junk, random.Random(SEED + (j % 8) * 7919 + j), server.port)
                        for j in range(n)]
                _, held = wait(junk, timeout=600)
            assert not held, "the gate holds a junk connection"
            valid = [{"controller": str(tmp_path / "tuned.py"), "run": True}, {"run": True}, {},
                     {"controller": "/dev/zero", "run": True}, {"controller": "../" * 40 + "etc/passwd.py"},
                     {"controller": "x" * 5000 + ".py", "run": True}, {"note": "mark"}]
            client = FoxgloveClient(server.url)
            retry = wait_for(lambda: next((s for d in client.op("advertiseServices") for s in d["services"]
                                           if s["name"] == "hil/retry"), None), what="the retry service")
            for call in range(1, n + 1):
                doc = rng.choice(valid)
                payload = json.dumps(mutate_doc(rng, doc)).encode() if rng.random() < 0.7 else \
                    mutate(rng, json.dumps(doc).encode())
                client.call_service(retry["id"], call, payload)
            answered = wait_for(lambda: (lambda got: got if len(got) == n else None)(
                {r["call"] for r in client.responses} | {d["callId"] for d in client.op("serviceCallFailure")}),
                what="an answer to every retry call")
            client.close()
            assert answered == set(range(1, n + 1))
            assert not server.retries.children, "a hostile request started a process"
            with FoxgloveClient(server.url) as good:
                assert wait_for(lambda: good.op("serverInfo"), what="serverInfo after the junk")[0]["name"]
        finally:
            server.close()
    assert server.gate.refused > n // 4 and "refused a connection" in (tmp_path / "said.txt").read_text()
