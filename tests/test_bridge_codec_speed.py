"""The bridge's cheaper codec puts the same bytes on the wire and builds the same people.

``envelope.pack`` encodes with msgspec instead of msgpack-python: compared here byte for byte with
``msgpack.packb(use_bin_type=True)`` on the messages the links send and on the awkward values (big and negative
ints, bytes, long strings, nested tuples, numpy scalars that only the fallback takes). ``parse_people`` builds
Person tuples in C: the same values and type as ``Person(...)`` field by field.
"""
from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest

from hil.bridge.crowd_link import Person, intents_payload, parse_people, tick_payload
from hil.bridge.envelope import VERSION, pack

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
