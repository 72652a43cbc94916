"""The bridge's cheaper codec puts the same bytes on the wire and builds the same people.

``envelope.pack`` encodes with msgspec instead of msgpack-python: compared here byte for byte with
``msgpack.packb(use_bin_type=True)`` on the messages the links send and on the awkward values (big and negative
ints, bytes, long strings, nested tuples, numpy scalars that only the fallback takes). ``parse_people`` builds
Person tuples in C: the same values and type as ``Person(...)`` field by field. The lockstep client reads an
intents reply in one typed pass (``read_intents``): the same time, people and payload as the general path
(``unpack`` + ``parse_people``), and anything that path would refuse or keep otherwise goes to it, over a real
socket.
"""
from __future__ import annotations

import math

import threading

import msgpack
import numpy as np
import pytest
import zmq

from hil.bridge.crowd_link import (REPLIES, CrowdClient, CrowdLinkError, Person, intents_payload, intents_time,
                                   parse_people, read_intents, tick_payload)
from hil.bridge.envelope import VERSION, pack, unpack

PEOPLE = [Person(i, "child" if i % 3 else "adult", 0.5 * i, -1.25 * i, 0.1, -0.2, math.cos(i), math.sin(i), 0.2,
                 1.1 + 0.01 * i) for i in range(60)]
STATES = [(i, 1.0 * i, 2.0 - i, 0.01 * i, -0.3) for i in range(60)]
ROBOT = {"x": 1.0, "y": -2.0, "yaw": 0.5, "vx": 0.2, "vy": 0.0, "radius": 0.3}


def _reference(kind, payload, seq=0, t=0.0) -> bytes:
    return msgpack.packb({"v": VERSION, "type": kind, "seq": seq, "t": float(t), "payload": payload},
                         use_bin_type=True)


@pytest.mark.parametrize("kind,payload,seq,t", [
    ("tick", tick_payload(12.5, ROBOT, STATES), 1000, 12.5),
    ("tick", tick_payload(0.0, None, []), 0, 0),
    ("intents", intents_payload(3.0, PEOPLE, [1, 2], [70000]), 2 ** 33, 3.0),
    ("intents", {**intents_payload(3.0, PEOPLE[:2], [], []), "doing": ["walking", "queueing"], "names": ["", "ann"]},
     7, 3.0),
    ("world", {"ints": [0, -1, 127, 128, -33, 2 ** 31, -2 ** 63, 2 ** 64 - 1], "blob": b"\x00\xff" * 300,
               "text": "é" * 70000, "nested": ((1, 2), [3.5, None, True, False]), "empty": {}}, 5, -1.0),
])
def test_pack_writes_the_bytes_msgpack_writes(kind, payload, seq, t):
    assert pack(kind, payload, seq=seq, t=t) == _reference(kind, payload, seq, t)


def test_pack_hands_what_msgspec_does_not_take_to_msgpack():
    payload = {"x": np.float64(1.5), "values": [np.float64(-2.0)]}  # a float subclass msgspec refuses
    assert pack("tick", payload, seq=1, t=1.0) == _reference("tick", payload, 1, 1.0)
    with pytest.raises(TypeError):
        pack("tick", {"x": np.int64(3)})  # neither encoder takes it: refused as before


def test_parse_people_builds_the_same_person_tuples():
    parsed = parse_people(intents_payload(1.0, PEOPLE, [], []))
    assert parsed == PEOPLE
    assert all(type(p) is Person and p.height == q.height for p, q in zip(parsed, PEOPLE))
    short = intents_payload(1.0, PEOPLE[:3], [], [])
    for name in ("gaze_x", "gaze_y", "radius", "height"):
        del short["people"][name]
    assert parse_people(short) == [Person(p.id, p.type, p.x, p.y, p.vx, p.vy) for p in PEOPLE[:3]]


def test_columns_go_out_as_the_lists_they_stand_for():
    rows = unpack(pack("tick", tick_payload(1.0, ROBOT, STATES)), ("tick",)).payload["people"]
    assert rows == {name: [row[k] for row in STATES] for k, name in enumerate(("id", "x", "y", "vx", "vy"))}
    maps = [dict(zip(("id", "x", "y", "vx", "vy"), row)) for row in STATES]
    assert pack("tick", tick_payload(1.0, ROBOT, maps)) == pack("tick", tick_payload(1.0, ROBOT, STATES))
    assert unpack(pack("tick", tick_payload(1.0, None, [])), ("tick",)).payload["people"] == \
        {"id": [], "x": [], "y": [], "vx": [], "vy": []}
    sent = unpack(pack("intents", intents_payload(2.0, PEOPLE, [3], [])), ("intents",)).payload["people"]
    assert sent == {name: [getattr(p, name) for p in PEOPLE] for name in Person._fields if name != "surface"}


SCRIPTED = {**intents_payload(4.5, PEOPLE[:5], [7], [1, 2]), "doing": ["walking"] * 5, "names": ["", "ann", "", "", ""],
            "script": [{"t": 4.4, "line": 3, "text": "place ann 1 2"}], "script_state": "failed",
            "script_end_t": None, "script_error": "line 3: no such place", "script_error_line": 3}


def _general(data: bytes):
    payload = unpack(data, REPLIES).payload
    return intents_time(payload), parse_people(payload), payload


@pytest.mark.parametrize("payload", [intents_payload(4.5, PEOPLE, [], []), SCRIPTED, intents_payload(0, [], [], []),
                                     {**intents_payload(4.5, PEOPLE[:2], [], []), "t": 4}])
def test_the_typed_read_gives_what_the_general_path_gives(payload):
    data = pack("intents", payload, seq=9, t=4.5)
    t, people, reply = read_intents(data)
    assert (t, people, reply) == _general(data)
    assert type(t) is float and all(type(p) is Person for p in people)


def _with(**changes) -> dict:
    return {**intents_payload(1.0, PEOPLE[:2], [], []), **changes}


@pytest.mark.parametrize("data", [
    pack("intents", _with(future_key=1)),  # a key it does not know: the general path keeps it
    pack("intents", _with(script=[{"t": 1.0, "nested": {1: 2}}])),  # a map with an int key: msgpack refuses it
    pack("intents", _with(doing=["walking", 3])),  # labels of another shape: dropped there, not refused
    pack("intents", _with(t=math.nan)),
    pack("intents", _with(t=True)),
    pack("intents", {"t": 1.0}),
    pack("error", {"reason": "no"}),
    msgpack.packb({"v": VERSION + 1, "type": "intents", "seq": 0, "t": 0.0, "payload": _with()}),
    msgpack.packb({"v": VERSION, "type": "intents", "seq": -1, "t": 0.0, "payload": _with()}),
    b"\xc1garbage",
])
def test_the_typed_read_leaves_everything_else_to_the_general_path(data):
    assert read_intents(data) is None


def _answering(replies: list[bytes]):
    """A REP socket on loopback that answers each request with the next of ``replies``, in a thread."""
    rep = zmq.Context.instance().socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind("tcp://127.0.0.1:*")

    def serve():
        for reply in replies:
            rep.recv()
            rep.send(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return rep, thread


def test_the_client_takes_both_paths_over_a_socket():
    replies = [pack("intents", SCRIPTED, seq=1, t=4.5), pack("intents", _with(future_key=[1, 2]), seq=2, t=1.0),
               pack("intents", _with(people={**_with()["people"], "x": [0.0, math.inf]}), seq=3, t=1.0)]
    rep, thread = _answering(replies)
    client = CrowdClient(rep.getsockopt_string(zmq.LAST_ENDPOINT), timeout_s=10.0)
    try:
        assert client.tick(4.5, ROBOT, STATES[:5]) == _general(replies[0])
        t, people, reply = client.tick(4.6, ROBOT, STATES[:5])
        assert (t, reply["future_key"], people) == (1.0, [1, 2], PEOPLE[:2]), "the unknown key is kept"
        with pytest.raises(CrowdLinkError, match=r"bad reply to tick 3: IntentColumns: .*\$\.x\[1\]"):
            client.tick(4.7, ROBOT, STATES[:5])
        thread.join(10.0)
    finally:
        client.close()
        rep.close(0)
