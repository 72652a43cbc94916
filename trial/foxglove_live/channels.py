"""The log's channels as foxglove-sdk channels of one server's own context: same topics, encodings, schemas, bytes.

Each server has its own :class:`foxglove.Context`, so its channels reach only its clients (never the SDK's
global context, which another server or an MCAP writer in the same process might use). A channel is made the
first time its topic is served, from the schema the log registered for it; the bytes logged are the log's own,
so a client receives exactly what the MCAP file holds for that topic and time.
"""
from __future__ import annotations

import threading
from typing import Any


class ServedChannels:
    """topic -> SDK channel, made on first use from the log's channel description (thread-safe)."""

    def __init__(self, context: Any):
        self.context = context
        self._channels: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, topic: str, message_encoding: str, schema_name: str, schema_encoding: str,
            schema_data: bytes) -> Any:
        channel = self._channels.get(topic)
        if channel is not None:
            return channel
        import foxglove

        with self._lock:
            channel = self._channels.get(topic)
            if channel is None:
                schema = foxglove.Schema(name=schema_name, encoding=schema_encoding, data=bytes(schema_data))
                channel = foxglove.Channel(topic, schema=schema, message_encoding=message_encoding,
                                           context=self.context)
                self._channels[topic] = channel
        return channel

    def get_existing(self, topic: str) -> Any:
        return self._channels[topic]

    def by_id(self, channel_id: int) -> Any:
        return next((c for c in list(self._channels.values()) if c.id() == channel_id), None)

    @property
    def topics(self) -> list[str]:
        return sorted(self._channels)

    def close(self) -> None:
        for channel in list(self._channels.values()):
            channel.close()
        self._channels.clear()
