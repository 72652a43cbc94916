"""Reading a trial log, complete or cut short by a crash.

A complete MCAP file ends with a summary and a footer; a trial killed mid-run leaves the header and the chunks
flushed so far, possibly followed by half a record. ``read_log`` therefore does not trust the summary: it walks
the data section record by record (opcode, 8-byte length, body), stops cleanly at the first record that is not
all there (or does not parse, or fails its CRC), and keeps everything before it. The record bodies are parsed
with the ``mcap`` package's own record classes, so only the framing is ours. ``walk_records`` is that walk on its
own (trial/record/repair.py writes a complete, indexed copy from it).
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
from mcap.records import Attachment, Channel, Chunk, Header, Message, Metadata, Schema
from mcap.stream_reader import breakup_chunk

MAGIC = bytes([137, 77, 67, 65, 80, 48, 13, 10])
REPAIR_METADATA = "hil.repair"  # the metadata record a repaired log carries (trial/record/repair.py)
_RECORD_HEAD = struct.Struct("<BQ")
_FOOTER_RECORD = _RECORD_HEAD.size + 8 + 8 + 4  # opcode, length, summary start, summary offset start, summary crc


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
    repaired: dict[str, str] | None = None  # `hil log repair` wrote this file from a cut-short one: what it said

    def count(self) -> int:
        return sum(len(v) for v in self.messages.values())


def read_log(path: str | os.PathLike[str]) -> TrialLog:
    """Read every message of a trial log that is there; never raises on a truncated or damaged tail.

    Raises ValueError only when the file is not an MCAP file at all (wrong magic).
    """
    with open(path, "rb") as f:
        data = f.read()
    return parse_log(data, source=str(path))


@dataclass
class RecordWalk:
    """The records of an MCAP file's data section in file order (chunks opened), as far as they are all there."""

    records: list[Any] = field(default_factory=list)  # Header, Schema, Channel, Message, Metadata, Attachment
    complete: bool = False  # the end of the data section (or the footer) was reached
    stopped: str | None = None  # why the walk stopped early (None when complete)
    end: int = 0  # byte offset just past the last good record


def walk_records(data: bytes, source: str = "<bytes>") -> RecordWalk:
    """Every record of the data section that is all there and parses, in file order; stops cleanly at the first
    record that is cut short, does not parse or fails its CRC (``stopped`` says where and why). Raises ValueError
    only when the bytes are not an MCAP file at all (wrong magic)."""
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError(f"{source}: not an MCAP file (magic {data[:8]!r})")
    walk = RecordWalk(end=len(MAGIC))
    pos, end = len(MAGIC), len(data)
    while True:
        if pos + _RECORD_HEAD.size > end:
            walk.stopped = f"file ends inside a record header at byte {pos}" if pos < end else f"file ends at byte {pos}"
            break
        opcode, length = _RECORD_HEAD.unpack_from(data, pos)
        body_start = pos + _RECORD_HEAD.size
        if length > end - body_start:
            walk.stopped = f"incomplete record (opcode {opcode:#x}, {length} bytes) at byte {pos}"
            break
        try:
            records, last = _record(opcode, data[body_start:body_start + length])
        except Exception as exc:  # noqa: BLE001 - zstd, lz4, struct, CRC: each its own exception type
            # A complete record that does not parse, decompress or pass its CRC: a torn write or garbage after
            # the last good record. Keep what came before; ``stopped`` says where and why.
            walk.stopped = f"unreadable record (opcode {opcode:#x}) at byte {pos}: {exc}"
            break
        walk.records += records
        pos = walk.end = body_start + length
        if last:
            walk.complete = not _unindexed(data)
            if not walk.complete:
                walk.stopped = (f"the log ends at byte {pos} without its index: the recorder closed it early "
                                "(a full disk); every message before is there")
            break
    return walk


def _unindexed(data: bytes) -> bool:
    """Whether the file ends with a Footer that points at no summary: the recorder's end marker after a full disk
    (trial/record/logfile.py), where the mcap Writer always writes a summary."""
    footer = data[-(len(MAGIC) + _FOOTER_RECORD):-len(MAGIC)] if len(data) >= 2 * len(MAGIC) + _FOOTER_RECORD else b""
    if len(footer) != _FOOTER_RECORD or footer[0] != Opcode.FOOTER:
        return False
    return struct.unpack_from("<Q", footer, _RECORD_HEAD.size)[0] == 0


def parse_log(data: bytes, source: str = "<bytes>") -> TrialLog:
    """``read_log`` on bytes in memory (see there)."""
    walk = walk_records(data, source)
    log = TrialLog(complete=walk.complete, stopped=walk.stopped)
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    collected: list[tuple[int, int, str, Any]] = []  # (log_time, order, topic, payload)
    for record in walk.records:
        if isinstance(record, Message):
            channel = channels.get(record.channel_id)
            if channel is None:
                log.stopped = f"message on unknown channel {record.channel_id}"
                log.complete = False
                break
            payload: Any = record.data
            if channel.message_encoding == "json":
                payload = json.loads(record.data)
            collected.append((record.log_time, len(collected), channel.topic, payload))
        elif isinstance(record, Schema):
            schemas[record.id] = record
        elif isinstance(record, Channel):
            channels[record.id] = record
        elif isinstance(record, Metadata) and record.name == REPAIR_METADATA:
            log.repaired = dict(record.metadata)

    collected.sort(key=lambda item: (item[0], item[1]))
    for log_time, _, topic, payload in collected:
        log.messages.setdefault(topic, []).append(LogMessage(log_time / 1e9, payload))
    for channel in channels.values():
        schema = schemas.get(channel.schema_id)
        if schema is not None and schema.encoding == "jsonschema":
            log.schemas[channel.topic] = json.loads(schema.data)
    return log


def _record(opcode: int, body: bytes) -> tuple[list[Any], bool]:
    """The records one complete top-level record holds (a chunk's, opened and CRC-checked), and whether it ends
    the data section."""
    stream = ReadDataStream(io.BytesIO(body))
    if opcode == Opcode.CHUNK:
        return breakup_chunk(Chunk.read(stream), validate_crc=True), False
    reader = {Opcode.HEADER: Header.read, Opcode.SCHEMA: Schema.read, Opcode.CHANNEL: Channel.read,
              Opcode.METADATA: Metadata.read, Opcode.ATTACHMENT: Attachment.read}.get(opcode)
    if reader is not None:
        return [reader(stream)], False
    if opcode == Opcode.MESSAGE:
        return [Message.read(stream, len(body))], False
    # The summary after DATA_END repeats what the data section said; the data section is the truth. Message
    # indexes, chunk indexes and anything unknown carry no messages.
    return [], opcode in (Opcode.DATA_END, Opcode.FOOTER)
