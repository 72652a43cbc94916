"""The wire between the time shim (hiltime.c) and its relay: fixed little-endian structs, one datagram each.

    request  {u32 op, u32 flags, i64 t_ns, i64 pid}
    reply    {u32 kind, u32 text_len, i64 now_ns, i64 epoch} + text (UTF-8, for ERROR)

Over a SOCK_SEQPACKET socket pair, so datagrams keep their boundaries, arrive in order and a closed end is seen at
once. Times are integer nanoseconds of simulated time, which C reads without rounding; the lockstep clock's float
seconds convert both ways exactly for any trial shorter than a century.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

REQUEST = struct.Struct("<IIqq")
REPLY = struct.Struct("<IIqq")
MAX_TEXT = 1023  # the shim's buffer

OP_HELLO, OP_SLEEP, OP_COMMIT = 1, 2, 3
OPS = {OP_HELLO: "hello", OP_SLEEP: "sleep", OP_COMMIT: "commit"}
FLAG_FD_WAITERS = 1  # some thread waits on descriptors: answer QUIET first, the shim checks them, then COMMITs
WELCOME, WAKE, QUIET, ERROR = 1, 2, 3, 4

EXIT_CLOCK_FAILED = 70  # the shim's exit status when the clock or the relay went away


class ProtocolError(ValueError):
    """A datagram the relay cannot accept; the text says why (it goes back to the shim as ERROR)."""


@dataclass(frozen=True)
class Request:
    op: int
    flags: int
    t_ns: int
    pid: int

    @property
    def name(self) -> str:
        return OPS[self.op]


def unpack_request(data: bytes) -> Request:
    if len(data) != REQUEST.size:
        raise ProtocolError(f"a request is {REQUEST.size} bytes, not {len(data)}")
    request = Request(*REQUEST.unpack(data))
    if request.op not in OPS:
        raise ProtocolError(f"unknown request op {request.op}; expected one of {sorted(OPS)}")
    if request.t_ns < 0:
        raise ProtocolError(f"{request.name}: negative time {request.t_ns} ns")
    return request


def pack_request(op: int, t_ns: int = 0, pid: int = 0, flags: int = 0) -> bytes:
    return REQUEST.pack(op, flags, t_ns, pid)


def pack_reply(kind: int, now_ns: int = 0, epoch: int = 0, text: str = "") -> bytes:
    body = text.encode("utf-8", "replace")[:MAX_TEXT]
    return REPLY.pack(kind, len(body), now_ns, epoch) + body


def unpack_reply(data: bytes) -> tuple[int, int, int, str]:
    """(kind, now_ns, epoch, text): the shim's side, for tests."""
    kind, length, now_ns, epoch = REPLY.unpack_from(data)
    return kind, now_ns, epoch, data[REPLY.size:REPLY.size + length].decode("utf-8", "replace")


def to_ns(t_s: float) -> int:
    return round(t_s * 1e9)


def to_s(t_ns: int) -> float:
    return t_ns / 1e9
