"""Trial recording: one MCAP file per trial, JSON messages, readable after a crash.

The file format is MCAP and the writer is the ``mcap`` package from PyPI, Foxglove's own Python library for the
format (maintained with the spec, used by the ROS 2 and Foxglove tooling). MCAP is self-describing (every channel
carries its schema), indexed for random access when complete, and still readable record by record when the
writer died before the footer; that last property is what crash survival relies on.

Crash survival: messages go into a compressed chunk in memory; every ``flush_every_s`` of *log* time (not wall
time, so a trial that runs 50x faster than real time still loses at most one simulated second) the chunk is
closed, written and the file object flushed to the kernel. A SIGKILL after that loses only the open chunk: the
log is readable up to the last flush boundary (``flushed_through_s``). ``fsync=True`` adds an ``os.fsync`` per
flush for power loss; a killed process does not need it (the kernel keeps what was written), so it is off.

Determinism: nothing of the wall clock goes into the file (message times are the caller's, publish time = log
time, JSON with sorted keys), so the same trial gives the same bytes with the same library versions.
"""
from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from mcap.writer import CompressionType, Writer

from .logfile import DISK_FULL_ERRNOS, LogFile, describe_full
from .topics import check_payload, schema_for

LOG_NAME = "trial.mcap"
PROFILE = ""  # no ROS profile: plain JSON channels


def _plain(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become null (JSON has no NaN), numpy scalars and tuples plain values.

    The built-in types are told apart by ``type(...) is`` first (a crowded trial's log copies ~400 people's
    fields every tick); anything else (subclasses, numpy) goes by :func:`_plain_other`, with the same result."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        out = {}
        for k, v in value.items():  # a leaf in line: one call a person, not one a field
            leaf = type(v)
            out[k if type(k) is str else str(k)] = (
                (v if math.isfinite(v) else None) if leaf is float
                else v if leaf is str or leaf is int or leaf is bool or v is None else _plain(v))
        return out
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    return _plain_other(value)


def _plain_other(value: Any) -> Any:
    """:func:`_plain` of anything but an exact built-in type: subclasses of them, numpy arrays and scalars."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _plain(value.tolist())
    raise TypeError(f"cannot record a {type(value).__name__} ({value!r}) as JSON")


class LogDiskFull(RuntimeError):
    """The disk (or the file-size limit) refused the log: it was closed at its last whole chunk; says which file,
    which disk, and what the file still holds."""


def encode_json(payload: Any) -> bytes:
    """The canonical JSON bytes of a message or schema: sorted keys, no spaces, no NaN."""
    return json.dumps(_plain(payload), sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


class ChannelInfo(NamedTuple):
    """A log channel as a tap sees it: how its messages are encoded and the schema they follow."""

    message_encoding: str  # "json" or "protobuf"
    schema_name: str
    schema_encoding: str  # "jsonschema" or "protobuf"
    schema_data: bytes


class TrialRecorder:
    """Writes ``out_dir/trial.mcap``: ``write(topic, t_s, payload)`` per message, ``close()`` for the footer.

    One channel per topic, registered on first use with its JSON schema (``topics.SCHEMAS``); known topics are
    checked for their required keys. ``t_s`` is the trial time in seconds (>= 0); messages may come in any order,
    the reader sorts them (``flushed_through_s`` assumes they come roughly in time order). Use as a context
    manager so an exception still writes a complete file. Thread-safe: the robot loop and the crowd bridge may
    record from their own threads.
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, flush_every_s: float = 1.0, fsync: bool = False,
                 chunk_size: int = 1 << 20):
        if not flush_every_s > 0:
            raise ValueError(f"flush_every_s must be > 0, not {flush_every_s!r}")
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / LOG_NAME
        self.flush_every_s = float(flush_every_s)
        self._fsync = fsync
        self._file = LogFile(self.path)  # whole records or nothing (trial/record/logfile.py)
        # chunk_size only bounds memory; the flush timer is what bounds the loss on a crash.
        self._writer = Writer(self._file, chunk_size=chunk_size, compression=CompressionType.ZSTD)
        self._writer.start(profile=PROFILE)
        self._channels: dict[str, int] = {}
        self._sequence: dict[str, int] = {}
        self._next_flush_s = self.flush_every_s
        self._flushed_through_s = 0.0
        self._closed = False
        self._lock = threading.Lock()
        self._schemas: dict[str, int] = {}  # schema name -> id, for channels in another encoding (write_encoded)
        # called with (topic, t_s, payload) after every write(): the Foxglove channels (foxglove.py) and a live
        # viewer (trial/view) see exactly what the log gets; they must not change the payload
        self.listeners: list[Any] = []
        # called with (topic, t_s, data, channel) after every message of either kind, with the bytes the file
        # got and the channel's encoding and schema (ChannelInfo): a live Foxglove server (trial/foxglove_live)
        # serves exactly the log's channels and bytes; add them with add_tap (before the first message)
        self.taps: list[Any] = []
        self.channel_info: dict[str, ChannelInfo] = {}
        self.flush()  # the header is on disk before the first message

    def add_tap(self, tap: Any) -> None:
        """``tap(topic, t_s, data, channel)`` after every message from now on; ``tap.bind(self)`` first when the tap
        has it (a live server that writes its own events into the log)."""
        bind = getattr(tap, "bind", None)
        if bind is not None:
            bind(self)
        self.taps.append(tap)

    @property
    def flushed_through_s(self) -> float:
        """Every message with a time below this is in the file (survives a SIGKILL of this process)."""
        return self._flushed_through_s

    def write(self, topic: str, t_s: float, payload: dict[str, Any]) -> None:
        """Record one message. Flushes first when ``t_s`` crossed a flush boundary (see the module docstring)."""
        if self._closed:
            raise ValueError(f"{self.path}: recorder is closed")
        if not isinstance(topic, str) or not topic.startswith("/"):
            raise ValueError(f"topic must be a string starting with '/', not {topic!r}")
        if not isinstance(payload, dict):
            raise TypeError(f"{topic}: payload must be a dict, not {type(payload).__name__}")
        t_s = float(t_s)
        if not (math.isfinite(t_s) and t_s >= 0.0):
            raise ValueError(f"{topic}: time must be finite and >= 0 s, not {t_s!r}")
        check_payload(topic, payload)
        self._add(topic, t_s, encode_json(payload), lambda: self._register(topic))
        for listener in self.listeners:
            listener(topic, t_s, payload)

    def write_encoded(self, topic: str, t_s: float, data: bytes, schema: Any, message_encoding: str) -> None:
        """Record one message already encoded (the Foxglove channels' protobuf): ``schema`` has ``name``,
        ``encoding`` and ``data`` (a foxglove-sdk Schema), registered once per name. Listeners are not called."""

        def register() -> int:
            schema_id = self._schemas.get(schema.name)
            if schema_id is None:
                schema_id = self._schemas[schema.name] = self._writer.register_schema(
                    name=schema.name, encoding=schema.encoding, data=bytes(schema.data))
            self.channel_info[topic] = ChannelInfo(message_encoding, schema.name, schema.encoding, bytes(schema.data))
            return self._new_channel(topic, message_encoding, schema_id)

        self._add(topic, float(t_s), data, register)

    def _add(self, topic: str, t_s: float, data: bytes, register: Any) -> None:
        """Under the lock: flush at a boundary, the topic's channel (``register()`` on first use), the message."""
        log_time = round(t_s * 1e9)
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: recorder is closed")
            if t_s >= self._next_flush_s:
                self._flush_to(math.floor(t_s / self.flush_every_s) * self.flush_every_s)
            channel = self._channels.get(topic)
            if channel is None:
                channel = register()
            sequence = self._sequence[topic]
            self._sequence[topic] = sequence + 1
            self._writer.add_message(channel, log_time=log_time, data=data, publish_time=log_time, sequence=sequence)
        if self.taps:
            info = self.channel_info[topic]
            for tap in self.taps:
                tap(topic, t_s, data, info)

    def flush(self) -> None:
        """Close the open chunk and push everything written so far to the kernel (and disk with ``fsync``)."""
        with self._lock:
            if not self._closed:
                self._flush()

    def _flush(self) -> None:
        try:
            self._writer.flush()  # mcap >= 1.6: ends the open chunk, writes it, flushes the stream
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError as exc:
            if exc.errno not in DISK_FULL_ERRNOS:
                raise
            self._stop_full(exc)

    def _stop_full(self, exc: OSError) -> None:
        """The disk is full: end the file at its last whole chunk (readable by any MCAP reader when the end marker
        fit), close it, and raise LogDiskFull saying where, why and what the log holds."""
        self._closed = True
        readable = self._file.cut()
        self._file.close()
        holds = (f"it holds every message before t={self._flushed_through_s:g} s ({self._file.flushed:,} bytes), "
                 + ("readable by any MCAP reader; `hil log repair` indexes it once there is room"
                    if readable else "readable by hil report; `hil log repair --out FILE` on another disk "
                                     "completes it"))
        raise LogDiskFull(f"{self.path}: {describe_full(self.path, exc)} ({exc.strerror}): the trial log was "
                          f"closed at its last whole chunk; {holds}") from None

    def _flush_to(self, boundary_s: float) -> None:
        self._flush()
        self._flushed_through_s = boundary_s
        self._next_flush_s = boundary_s + self.flush_every_s

    def _register(self, topic: str) -> int:
        schema = schema_for(topic)
        name, data = schema.get("title", topic), encode_json(schema)
        schema_id = self._writer.register_schema(name=name, encoding="jsonschema", data=data)
        self.channel_info[topic] = ChannelInfo("json", name, "jsonschema", data)
        return self._new_channel(topic, "json", schema_id)

    def _new_channel(self, topic: str, message_encoding: str, schema_id: int) -> int:
        channel = self._writer.register_channel(topic=topic, message_encoding=message_encoding, schema_id=schema_id)
        self._channels[topic] = channel
        self._sequence[topic] = 0
        return channel

    def close(self) -> None:
        """Write the last chunk, the summary (schemas, channels, statistics, indexes) and the footer."""
        with self._lock:
            if self._closed:
                return
            try:
                self._writer.finish()
                self._flush()  # the summary and the footer; a full disk here ends the file at its last chunk
            finally:
                self._closed = True
                self._file.close()

    def __enter__(self) -> TrialRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
