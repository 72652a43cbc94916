"""Typed schemas of what servers receive from peers, decoded and checked in one pass by msgspec.

A peer's bytes go straight from the socket into these Structs: wrong types (an id of 1.9, a type of 123, "1e3"
for a number), NaN or infinite values, absurd magnitudes and missing fields are refused with the path of the
offending value (``$.payload.people.x[3]``) before any of it reaches the crowd, the clock or the world. Nothing is
coerced, nothing is half-applied. The wire format is the envelope's (bridge/envelope.py: a msgpack map ``{v,
type, seq, t, payload}``): these schemas only describe it, so peers that pack plain maps still interoperate.

Why msgspec (a core dependency): it validates while it decodes, in C, so a typed tick of 50 people decodes
faster than ``msgpack.unpackb`` followed by hand-written checks (bench/bridge.py "typed decode"), and its errors
name the path. Bounds are named in the errors through ``Meta`` (ge/le), which also rejects NaN.
"""
from __future__ import annotations

from typing import Annotated, Any, Union

import msgspec
from msgspec import Meta, Struct

from .envelope import VERSION, Envelope, EnvelopeError, unpack

MAX_COORDINATE_M = 1e5  # 100 km from the map origin: farther is no place a person or a robot can be
MAX_SPEED_M_S = 100.0  # a person or a robot moving faster than this is a broken measurement
MAX_TIME_S = 1e7  # ~116 days of simulated time; also bounds how far one message can ask time to jump
MAX_NAME_CHARS = 200

Coordinate = Annotated[float, Meta(ge=-MAX_COORDINATE_M, le=MAX_COORDINATE_M)]
Speed = Annotated[float, Meta(ge=-MAX_SPEED_M_S, le=MAX_SPEED_M_S)]
Angle = Annotated[float, Meta(ge=-1e3, le=1e3)]  # radians; any finite heading, but not 1e300
Radius = Annotated[float, Meta(gt=0.0, le=10.0)]
Time = Annotated[float, Meta(ge=0.0, le=MAX_TIME_S)]
EnvelopeTime = Annotated[float, Meta(ge=-MAX_TIME_S, le=MAX_TIME_S)]
Seq = Annotated[int, Meta(ge=0, le=2 ** 63 - 1)]
PersonId = Annotated[int, Meta(ge=0, le=2 ** 31 - 1)]
Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]


class RobotState(Struct, frozen=True):
    """The robot as the world reports it (map frame)."""

    x: Coordinate
    y: Coordinate
    yaw: Angle = 0.0
    vx: Speed = 0.0
    vy: Speed = 0.0
    radius: Radius = 0.3


class StateColumns(Struct, frozen=True):
    """People's actual states as columns of one length (an empty map: nobody)."""

    id: list[PersonId] = []
    x: list[Coordinate] = []
    y: list[Coordinate] = []
    vx: list[Speed] = []
    vy: list[Speed] = []

    def __post_init__(self) -> None:
        lengths = {len(self.id), len(self.x), len(self.y), len(self.vx), len(self.vy)}
        if len(lengths) != 1:
            raise ValueError(f"people columns differ in length ({sorted(lengths)})")

    def rows(self) -> list[tuple[int, float, float, float, float]]:
        return list(zip(self.id, self.x, self.y, self.vx, self.vy))


def _nobody(people: Any) -> None:
    if isinstance(people, list) and people:
        raise ValueError("people must be a map of columns id, x, y, vx, vy (an empty list or map: nobody)")


class _PeopleStates(Struct, frozen=True):
    """What the world's two messages (a lockstep tick, a real-time world message) share: the people's states,
    checked for nobody at all the same way, read as rows."""

    def __post_init__(self) -> None:
        _nobody(self.people)  # type: ignore[attr-defined] - each message has its people field

    def rows(self) -> list[tuple[int, float, float, float, float]]:
        people = self.people  # type: ignore[attr-defined]
        return people.rows() if isinstance(people, StateColumns) else []


class TickPayload(_PeopleStates, frozen=True):
    """The world's lockstep tick: step the crowd to ``t`` after taking the robot and the people's states."""

    t: Time
    robot: Union[RobotState, None] = None
    people: Union[StateColumns, list, None] = None


class WorldPayload(_PeopleStates, frozen=True):
    """The world's real-time stream message (``t`` is the world's own clock, echoed back as ``world_t``)."""

    session: Annotated[str, Meta(max_length=MAX_NAME_CHARS)]
    t: EnvelopeTime = 0.0
    robot: Union[RobotState, None] = None
    people: Union[StateColumns, list, None] = None


Height = Annotated[float, Meta(gt=0.0, le=10.0)]
PersonType = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
SurfaceName = Annotated[str, Meta(max_length=MAX_NAME_CHARS, pattern=r"^\w*$")]  # "": the default surface


class IntentColumns(Struct, frozen=True):
    """The crowd's people as columns of one length; gaze, radius, height and surface may be left out (defaults)."""

    id: list[PersonId]
    type: list[PersonType]
    x: list[Coordinate]
    y: list[Coordinate]
    vx: list[Speed]
    vy: list[Speed]
    gaze_x: Union[list[Angle], None] = None
    gaze_y: Union[list[Angle], None] = None
    radius: Union[list[Radius], None] = None
    height: Union[list[Height], None] = None
    surface: Union[list[SurfaceName], None] = None

    def __post_init__(self) -> None:
        n = len(self.id)
        for name in self.__struct_fields__:
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise ValueError(f"people column {name!r} has {len(column)} values, 'id' has {n}")


Scalar = Union[str, int, float, bool, None]  # no nested maps or arrays: what the crowd sends beside the people


class IntentsReply(Struct, frozen=True, forbid_unknown_fields=True):
    """An ``intents`` payload as the world's lockstep client reads it in one pass, straight from the bytes
    (bridge/crowd_link.py ``read_intents``): ``t`` and the people checked as :class:`IntentColumns`, the other keys
    the crowd sends (crowd/serve.py: ids, labels, the script's lines and state) in the shapes it sends them. A key
    not listed here, or another shape, fails this decode, and the client then takes the general path (``unpack`` +
    ``parse_people``), which keeps every key and refuses what it always refused: nothing is dropped and nothing
    passes here that the general path would refuse; a new key only costs that path's time."""

    t: float
    people: IntentColumns
    spawned: list[int] = msgspec.UNSET  # type: ignore[assignment] - UNSET: the crowd left it out
    removed: list[int] = msgspec.UNSET  # type: ignore[assignment]
    doing: list[str] = msgspec.UNSET  # type: ignore[assignment]
    names: list[str] = msgspec.UNSET  # type: ignore[assignment]
    script: list[dict[str, Scalar]] = msgspec.UNSET  # type: ignore[assignment]
    script_state: Scalar = msgspec.UNSET
    script_end_t: Scalar = msgspec.UNSET
    script_error: Scalar = msgspec.UNSET
    script_error_line: Scalar = msgspec.UNSET


class ClockRequest(Struct, frozen=True):
    """hello / sleep_until / bye on the lockstep clock: who asks, and (sleep_until) until when."""

    name: Name
    t: Time = 0.0


class _Message(Struct, frozen=True, tag_field="type"):
    v: int
    seq: Seq = 0
    t: EnvelopeTime = 0.0


class TypedDecoder:
    """Decode envelopes of the given ``{type: payload schema}`` from bytes in one pass.

    :meth:`decode` returns an :class:`bridge.envelope.Envelope` whose payload is the schema's Struct (``Any``
    leaves it as decoded), or raises :class:`EnvelopeError`: envelope-level faults (garbage, another version, an
    unknown type) with the same words as :func:`bridge.envelope.unpack`, payload faults with msgspec's path."""

    def __init__(self, schemas: dict[str, Any]):
        self.kinds = tuple(schemas)
        types = [msgspec.defstruct(f"{kind.title().replace('_', '')}Message",
                                   [("payload", schema, None) if schema is Any else ("payload", schema)],
                                   bases=(_Message,), tag=kind, frozen=True, kw_only=True)
                 for kind, schema in schemas.items()]
        self._decoder = msgspec.msgpack.Decoder(Union[tuple(types)] if len(types) > 1 else types[0])

    def decode(self, data: bytes) -> Envelope:
        try:
            msg = self._decoder.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            unpack(data, self.kinds)  # garbage, version, type: its words (raises EnvelopeError)
            kind = _kind_of(data)
            raise EnvelopeError(f"{kind}: {exc}") from None
        if msg.v != VERSION:
            raise EnvelopeError(f"version {msg.v!r}, this side speaks {VERSION}")
        return Envelope(type(msg).__struct_config__.tag, msg.seq, msg.t, msg.payload)


class IntentsMessage(_Message, frozen=True, kw_only=True, tag="intents"):
    """The whole ``intents`` envelope of a lockstep reply (:class:`IntentsReply`)."""

    payload: IntentsReply


def _kind_of(data: bytes) -> str:
    try:
        return str(msgspec.msgpack.decode(data).get("type"))[:40]
    except Exception:  # unpack accepted it, so this does not happen; never let a reason raise
        return "message"


def convert(payload: Any, schema: type) -> Any:
    """A payload given as Python objects (tests, in-process callers) checked by the same schema; EnvelopeError."""
    if isinstance(payload, schema):
        return payload
    try:
        return msgspec.convert(payload, schema)
    except msgspec.ValidationError as exc:
        raise EnvelopeError(f"{schema.__name__}: {exc}") from None


# --- a trial's saved state: the crowd's part (bridge/crowd_state.py) ----------------------------------------
MAX_REPLAY_TICKS = 2000  # ticks per crowd_replay message (200 s at 0.1 s); a longer history goes in several


class CrowdReplayPayload(Struct, frozen=True):
    """``crowd_replay``: the world's ticks since trial time 0 (or since ``from_t``, where the crowd must be), to be
    taken again silently: the crowd comes back to where it was when they were first sent."""

    from_t: Time
    ticks: Annotated[list[TickPayload], Meta(max_length=MAX_REPLAY_TICKS)]


class CrowdStatePayload(Struct, frozen=True):
    """``crowd_state``: asks for the crowd's time, its digest and its people's states (nothing to give)."""
