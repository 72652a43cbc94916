"""Versioned msgpack envelopes: every message on every socket is ``{v, type, seq, t, payload}``.

Decoding never trusts the bytes: garbage, a wrong version or an unknown type raise :class:`EnvelopeError` with
the reason, which receivers log and drop. msgpack only: no pickle on any wire.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import msgpack
import msgspec

VERSION = 2  # 2: intents carry people as columns (bridge/crowd_link.py)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class EnvelopeError(ValueError):
    """A message that cannot be accepted; the text says why."""


@dataclass(frozen=True)
class Envelope:
    type: str
    seq: int
    t: float
    payload: Any


_ENCODER = msgspec.msgpack.Encoder()


def pack(kind: str, payload: Any = None, seq: int = 0, t: float = 0.0) -> bytes:
    """The envelope's bytes. msgspec's encoder writes the same msgpack as ``msgpack.packb(use_bin_type=True)``
    (smallest int and length forms, 64-bit floats, str as str, bytes as bin: tests/test_bridge_codec_speed.py
    compares them) in about half the time, which is most of a tick's packing; whatever it does not take (a type
    it does not know) goes through msgpack as before."""
    doc = {"v": VERSION, "type": kind, "seq": seq, "t": float(t), "payload": payload}
    try:
        return _ENCODER.encode(doc)
    except (TypeError, OverflowError):
        return msgpack.packb(doc, use_bin_type=True)


def unpack(data: bytes, allowed: Iterable[str]) -> Envelope:
    """The envelope in ``data`` if it is well-formed, of this version and of an allowed type."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise EnvelopeError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise EnvelopeError(f"not msgpack ({len(data)} bytes): {type(exc).__name__}") from None
    if not isinstance(doc, dict):
        raise EnvelopeError(f"not an envelope: a {type(doc).__name__}, not a map")
    if doc.get("v") != VERSION:
        raise EnvelopeError(f"version {doc.get('v')!r}, this side speaks {VERSION}")
    kind = doc.get("type")
    allowed = tuple(allowed)
    if kind not in allowed:
        raise EnvelopeError(f"unknown message type {kind!r}; expected one of {', '.join(allowed)}")
    seq, t = doc.get("seq", 0), doc.get("t", 0.0)
    if not isinstance(seq, int) or not isinstance(t, (int, float)):
        raise EnvelopeError(f"{kind}: seq must be an int and t a number")
    return Envelope(kind, seq, float(t), doc.get("payload"))
