"""Reading a trial log, complete or cut short by a crash.

A complete MCAP file ends with a summary and a footer; a trial killed mid-run leaves the header and the chunks
flushed so far, possibly followed by half a record. ``read_log`` therefore does not trust the summary: it walks
the data section record by record (opcode, 8-byte length, body), stops cleanly at the first record that is not
all there (or does not parse, or fails its CRC), and keeps everything before it. The record bodies are parsed
with the ``mcap`` package's own record classes, so only the framing is ours.
"""
from __future__ import annotations

import io
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mcap.data_stream import ReadDataStream
from mcap.opcode import Opcode
from mcap.records import Channel, Chunk, Message, Schema
from mcap.stream_reader import breakup_chunk

MAGIC = bytes([137, 77, 67, 65, 80, 48, 13, 10])
_RECORD_HEAD = struct.Struct("<BQ")


class LogMessage(NamedTuple):
    """One decoded message: trial time in seconds and the JSON payload (raw bytes for non-JSON channels)."""

    t: float
    data: Any


@dataclass
class TrialLog:
    """What was read: messages by topic in time order, and whether the file was complete."""

    messages: dict[str, list[LogMessage]] = field(default_factory=dict)
    complete: bool = False  # the footer was reached
    stopped: str | None = None  # why reading stopped early (None when complete)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic -> JSON schema

    def count(self) -> int:
        return sum(len(v) for v in self.messages.values())


def read_log(path: str | os.PathLike[str]) -> TrialLog:
    """Read every message of a trial log that is there; never raises on a truncated or damaged tail.

    Raises ValueError only when the file is not an MCAP file at all (wrong magic).
    """
    with open(path, "rb") as f:
        data = f.read()
    return parse_log(data, source=str(path))


def parse_log(data: bytes, source: str = "<bytes>") -> TrialLog:
    """``read_log`` on bytes in memory (see there)."""
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError(f"{source}: not an MCAP file (magic {data[:8]!r})")
    log = TrialLog()
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    collected: list[tuple[int, int, str, Any]] = []  # (log_time, order, topic, payload)

    def on_message(message: Message) -> None:
        channel = channels.get(message.channel_id)
        if channel is None:
            raise ValueError(f"message on unknown channel {message.channel_id}")
        payload: Any = message.data
        if channel.message_encoding == "json":
            payload = json.loads(message.data)
        collected.append((message.log_time, len(collected), channel.topic, payload))

    def on_definition(record: Schema | Channel) -> None:
        if isinstance(record, Schema):
            schemas[record.id] = record
        else:
            channels[record.id] = record

    pos, end = len(MAGIC), len(data)
    while True:
        if pos + _RECORD_HEAD.size > end:
            log.stopped = f"file ends inside a record header at byte {pos}" if pos < end else f"file ends at byte {pos}"
            break
        opcode, length = _RECORD_HEAD.unpack_from(data, pos)
        body_start = pos + _RECORD_HEAD.size
        if length > end - body_start:
            log.stopped = f"incomplete record (opcode {opcode:#x}, {length} bytes) at byte {pos}"
            break
        body = data[body_start:body_start + length]
        try:
            stop = _record(opcode, body, on_definition, on_message)
        except Exception as exc:  # noqa: BLE001 - zstd, lz4, struct, JSON, CRC: each its own exception type
            # A complete record that does not parse, decompress or pass its CRC: a torn write or garbage after
            # the last good record. Keep what came before; ``stopped`` says where and why.
            log.stopped = f"unreadable record (opcode {opcode:#x}) at byte {pos}: {exc}"
            break
        pos = body_start + length
        if stop:
            log.complete = True
            break

    collected.sort(key=lambda item: (item[0], item[1]))
    for log_time, _, topic, payload in collected:
        log.messages.setdefault(topic, []).append(LogMessage(log_time / 1e9, payload))
    for channel in channels.values():
        schema = schemas.get(channel.schema_id)
        if schema is not None and schema.encoding == "jsonschema":
            log.schemas[channel.topic] = json.loads(schema.data)
    return log


def _record(opcode: int, body: bytes, on_definition, on_message) -> bool:
    """Handle one complete record; True when it is the footer (or the end of the data section)."""
    stream = ReadDataStream(io.BytesIO(body))
    if opcode == Opcode.CHUNK:
        for inner in breakup_chunk(Chunk.read(stream), validate_crc=True):
            if isinstance(inner, Message):
                on_message(inner)
            else:
                on_definition(inner)
    elif opcode == Opcode.SCHEMA:
        on_definition(Schema.read(stream))
    elif opcode == Opcode.CHANNEL:
        on_definition(Channel.read(stream))
    elif opcode == Opcode.MESSAGE:
        on_message(Message.read(stream, len(body)))
    elif opcode in (Opcode.DATA_END, Opcode.FOOTER):
        # The summary that follows repeats what the data section said; the data section is the truth.
        return True
    return False  # header, message indexes and anything unknown carry no messages
