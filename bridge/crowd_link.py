"""The world <-> crowd link in lockstep (DESIGN "The bridge"; the crowd-simulation reference): at every crowd tick the
world sends the robot's state and the people's *actual* states (after physics), and the crowd answers with its
*intents*: each person's desired velocity and gaze, who appeared, who left.

The world owns time: it calls :meth:`CrowdClient.tick` once per crowd period, and the crowd steps up to the time
it is given. Messages are msgpack envelopes (``tick`` -> ``intents``, ``bye``); a crowd that does not answer
within the timeout is reported by name and endpoint, never waited for forever. Plain on loopback; given a
:class:`bridge.security.Security` the link is CURVE-encrypted and the crowd admits only authorized world keys.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

import msgspec
import zmq

from .envelope import MAX_MESSAGE_BYTES, VERSION, EnvelopeError, pack, unpack
from .schema import IntentColumns, IntentsMessage, IntentsReply, convert

if TYPE_CHECKING:
    from .security import Security

REQUESTS = ("tick", "bye")
REPLIES = ("intents", "error")
LIVENESS_EVERY_S = 0.1  # while waiting for a reply, how often the crowd process (when we started it) is checked


class CrowdLinkError(RuntimeError):
    pass


class Person(NamedTuple):
    """One person as the crowd intends it: where it is, the velocity it wants, where it looks, its body.
    (A NamedTuple: 50 of them are built per tick, four times faster than frozen dataclasses, bench/bridge.py.)"""

    id: int
    type: str
    x: float
    y: float
    vx: float
    vy: float
    gaze_x: float = 1.0
    gaze_y: float = 0.0
    radius: float = 0.25
    height: float = 1.7
    surface: str = ""  # what the range sensors see of them (their clothing, devices/surfaces.py); "": the default


STATE_FIELDS = ("id", "x", "y", "vx", "vy")  # a person's actual state, as the world measured it
_STATE_OF_MAP = itemgetter(*STATE_FIELDS)  # {id, x, y, vx, vy} -> (id, x, y, vx, vy), in C


def state_columns(people: Sequence[Sequence[float] | Mapping[str, float]]) -> dict:
    """People's actual states as columns {id: (...), x: (...), ...}; rows are (id, x, y, vx, vy) tuples or maps
    with those keys. Columns, as for intents: fewer bytes and far cheaper to decode than a map per person. The
    columns are the tuples ``zip`` makes, not lists: they pack to the same msgpack arrays without a copy."""
    if not people:
        return {name: () for name in STATE_FIELDS}
    if isinstance(people[0], Mapping):
        people = list(map(_STATE_OF_MAP, people))
    return dict(zip(STATE_FIELDS, zip(*people)))


def tick_payload(t_s: float, robot: dict | None, people) -> dict:
    """robot: {x, y, yaw, vx, vy, radius} or None; people: (id, x, y, vx, vy) rows or {id, x, y, vx, vy} maps,
    as the world measured them (sent as columns, see :func:`state_columns`)."""
    return {"t": float(t_s), "robot": robot, "people": state_columns(people)}


def intents_payload(t_s: float, people: list[Person], spawned: list[int], removed: list[int]) -> dict:
    """The crowd's answer. ``people`` goes as columns ({field: [value per person]}), not one map per person: for
    the 50 people of a busy tick that is 35 % fewer bytes and a third of the decoding time (bench/bridge.py). The
    columns are ``zip``'s tuples, packed as the same arrays lists would be."""
    out = dict(zip(PERSON_FIELDS, zip(*people))) if people else {name: () for name in PERSON_FIELDS}
    if not any(out["surface"]):
        del out["surface"]  # nobody names a surface: the message is what it was before surfaces
    return {"t": float(t_s), "people": out, "spawned": spawned, "removed": removed}


PERSON_FIELDS = Person._fields


def parse_people(payload: dict) -> list[Person]:
    """The people of an ``intents`` payload, checked by bridge/schema.py's IntentColumns: every column a list of
    one length, ids non-negative integers, types strings, the rest finite numbers within bounds; a field left out
    takes Person's default (gaze, radius, height, surface). EnvelopeError says what is wrong, with its path; nothing is
    half-parsed."""
    columns = payload.get("people") if isinstance(payload, dict) else None
    if not isinstance(columns, dict):
        raise EnvelopeError("intents: people must be a map of columns with at least id, type, x, y, vx, vy")
    return people_of(convert(columns, IntentColumns))


_DEFAULTS = Person._field_defaults


def people_of(columns: IntentColumns) -> list[Person]:
    """Checked columns as Person tuples. Each is made in C by ``tuple.__new__(Person, row)`` over ``zip``'s rows:
    no Python frame and no argument parsing per person (``Person(...)`` and ``Person._make`` have both), the same
    NamedTuple values; a column left out repeats Person's default."""
    n = len(columns.id)
    fields = [column if (column := getattr(columns, name)) is not None else repeat(_DEFAULTS[name], n)
              for name in PERSON_FIELDS]
    return list(map(tuple.__new__, repeat(Person, n), zip(*fields)))


INTENTS_DECODER = msgspec.msgpack.Decoder(IntentsMessage)


def read_intents(data: bytes) -> tuple[float, list[Person], dict] | None:
    """An ``intents`` reply decoded and checked in one pass from its bytes (bridge/schema.py IntentsMessage:
    msgspec validates while it decodes, so the people's columns are never built twice), as (crowd time, people,
    payload as a map); None for anything else (an ``error`` reply, another version, a key it does not know, any
    fault), which the general path (``unpack``, :func:`intents_time`, :func:`parse_people`) then takes and names
    exactly as it always has. The payload map has the keys the crowd sent, people as {field: column}."""
    if len(data) > MAX_MESSAGE_BYTES:
        return None
    try:
        msg = INTENTS_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if msg.v != VERSION or not math.isfinite(msg.payload.t):
        return None
    return intents_of(msg.payload)


def intents_of(reply: IntentsReply) -> tuple[float, list[Person], dict]:
    """(crowd time, people, payload as a map) of a checked intents payload."""
    columns = reply.people
    payload = {name: value for name in reply.__struct_fields__ if (value := getattr(reply, name)) is not msgspec.UNSET}
    payload["people"] = {name: column for name in PERSON_FIELDS if (column := getattr(columns, name)) is not None}
    return reply.t, people_of(columns), payload


def intents_time(payload) -> float:
    """The crowd time ``t`` of an intents payload, checked (EnvelopeError)."""
    t = payload.get("t") if isinstance(payload, dict) else None
    if type(t) not in (int, float) or not math.isfinite(t):
        raise EnvelopeError(f"intents: t must be a finite number, not {t!r}"[:120])
    return float(t)


class CrowdClient:
    """The world's end of the link (REQ); with ``security`` it is CURVE-encrypted (the crowd must have
    authorized the client key), and a refused handshake is named in the timeout error instead of a silent crowd."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0, security: Security | None = None):
        self.endpoint, self.timeout_s = endpoint, timeout_s
        from .security import connect_client

        self._socket, self._watch = connect_client(zmq.REQ, endpoint, security)
        self._socket.setsockopt(zmq.RCVTIMEO, max(1, int(timeout_s * 1000)))
        # a REQ socket with no pipe (its handshake failed: a plain world at a CURVE crowd) blocks in send for ever
        self._socket.setsockopt(zmq.SNDTIMEO, max(1, int(timeout_s * 1000)))
        self.seq = 0
        self.last_t = 0.0  # the time of the last tick sent (what a state request's errors are stamped with)
        self._pending_t: float | None = None  # the time of a tick sent and not yet answered
        # set by whoever started the crowd process (trial/task.py CrowdProcess.watch): None while it runs, else how
        # it died (exit status or signal, its last stderr lines), so a dead crowd is reported at once, not after
        # the whole timeout as "did not answer"
        self.liveness: Callable[[], str | None] | None = None

    def tick(self, t_s: float, robot: dict | None, people: list[dict]) -> tuple[float, list[Person], dict]:
        """Send one tick; returns (crowd time, people, the whole reply payload)."""
        self.send_tick(t_s, robot, people)
        return self.await_intents()

    def send_tick(self, t_s: float, robot: dict | None, people) -> None:
        """The first half of :meth:`tick`: the request goes out and the crowd starts on it; the world may step
        meanwhile (a pipelined bridge, firmware_sim/embodied/crowd_bridge.py) and take the answer later."""
        self.seq += 1
        self._pending_t = self.last_t = t_s
        try:
            self._socket.send(pack("tick", tick_payload(t_s, robot, people), seq=self.seq, t=t_s))
        except zmq.Again:
            self._pending_t = None
            why = self._watch.reason() if self._watch is not None else ""
            raise CrowdLinkError(f"the crowd at {self.endpoint} took no tick {self.seq} (t={t_s:.3f} s) within "
                                 f"{self.timeout_s:g} s: no connection to send on ({why or 'refused or gone'})") \
                from None

    @property
    def pending(self) -> bool:
        """A tick was sent and its answer not taken yet."""
        return self._pending_t is not None

    def await_intents(self) -> tuple[float, list[Person], dict]:
        """The second half of :meth:`tick`: the answer to the tick sent last, waited for up to ``timeout_s``
        (a blocking receive with the socket's own timeout: no poller built per tick)."""
        t_s, self._pending_t = self._pending_t, None
        if self.liveness is not None:  # a crowd process we started: its death is named at once (await_reply)
            self.await_reply(t_s)
        try:
            data = self._socket.recv()
        except zmq.Again:
            why = self._watch.reason() if self._watch is not None else ""
            raise CrowdLinkError(f"the crowd at {self.endpoint} did not answer tick {self.seq} (t={t_s:.3f} s) within "
                                 f"{self.timeout_s:g} s: {why or 'stopped, crashed or stalled'}") from None
        intents = read_intents(data)
        if intents is not None:
            return intents
        try:
            reply = unpack(data, REPLIES)
        except EnvelopeError as exc:
            raise CrowdLinkError(f"the crowd at {self.endpoint} sent a bad reply: {exc}") from None
        if reply.type == "error":
            raise CrowdLinkError(f"the crowd at {self.endpoint} refused tick {self.seq}: {reply.payload}")
        try:
            return intents_time(reply.payload), parse_people(reply.payload), reply.payload
        except EnvelopeError as exc:
            raise CrowdLinkError(f"the crowd at {self.endpoint} sent a bad reply to tick {self.seq}: {exc}") from None

    def request(self, kind: str, payload: dict, t_s: float, timeout_s: float) -> bytes:
        """One request beside ``tick`` (a saved state's ``crowd_state`` and ``crowd_replay``,
        bridge/crowd_state.py), sent with the next ``seq``; the reply's bytes, for the caller to read. A crowd that
        takes no request, dies or stays silent for ``timeout_s`` is a CrowdLinkError stamped with ``t_s``."""
        self.seq += 1
        try:
            self._socket.send(pack(kind, payload, seq=self.seq))
        except zmq.Again:
            raise CrowdLinkError(f"the crowd at {self.endpoint} took no {kind} request (t={t_s:.3f} s): no "
                                 "connection to send on") from None
        self.await_reply(t_s, kind, timeout_s)
        return self._socket.recv()

    def await_reply(self, t_s: float, what: str | None = None, timeout_s: float | None = None) -> None:
        """Wait up to ``timeout_s`` (the link's) for the answer to ``what`` (tick ``seq``), checking
        :attr:`liveness` every LIVENESS_EVERY_S: CrowdLinkError saying how the crowd died, or that it did not
        answer in time."""
        what = what or f"tick {self.seq}"
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        slices = max(1, math.ceil(timeout_s / LIVENESS_EVERY_S)) if self.liveness is not None else 1
        slice_ms = int(timeout_s * 1000 / slices)
        waiting = [(self._socket, zmq.POLLIN)]
        for _ in range(slices):
            # zmq_poll itself: Socket.poll builds a Poller (a Python object, a dict) on every call, twice the cost
            if zmq.zmq_poll(waiting, slice_ms):
                return
            death = self.liveness() if self.liveness is not None else None
            if death:
                raise CrowdLinkError(f"the crowd at {self.endpoint} died while the world waited for {what} "
                                     f"(t={t_s:.3f} s): {death}")
        why = self._watch.reason() if self._watch is not None else ""
        raise CrowdLinkError(f"the crowd at {self.endpoint} did not answer {what} (t={t_s:.3f} s) within "
                             f"{timeout_s:g} s: {why or 'stopped, crashed or stalled'}")

    def close(self) -> None:
        """Say bye when the socket still can (after an unanswered tick a REQ socket cannot send), then release it."""
        try:
            if self._pending_t is not None and self._socket.poll(500):  # a pipelined tick's answer first
                self._socket.recv()
                self._pending_t = None
            self._socket.send(pack("bye", {}, seq=self.seq + 1), zmq.NOBLOCK)
            self._socket.poll(500)
        except zmq.ZMQError:
            pass
        finally:
            if self._watch is not None:
                self._watch.close()
            self._socket.close(0)


MAX_LABEL_CHARS = 40


def people_labels(reply: dict, key: str, people: list) -> dict[int, str]:
    """``reply[key]`` (the crowd's ``doing`` or ``names``: a list of short strings in the people's order) as
    id -> label; anything else a peer sends (another length, not strings) is dropped whole: labels are for
    display and the record, never worth failing a tick."""
    labels = reply.get(key)
    if not isinstance(labels, list) or len(labels) != len(people) or not all(isinstance(v, str) for v in labels):
        return {}
    return {person.id: label[:MAX_LABEL_CHARS] for person, label in zip(people, labels)}
