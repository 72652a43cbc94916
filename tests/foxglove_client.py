"""A Foxglove WebSocket client for the tests: the real protocol over a real socket (the ``websockets`` package),
the subprotocol the installed foxglove-sdk advertises (``foxglove.sdk.v1``) unless told another (the protocol's
original name ``foxglove.websocket.v1``), a browser's ``Origin`` if given; only what the tests need.

A reader thread keeps everything the server sends: JSON ops by kind, message data by subscription, the Time
messages, playback states, service responses. Binary layouts are the protocol's (little endian):
message data ``0x01 u32 subscription, u64 log time, payload``; time ``0x02 u64 ns``; service call response
``0x03 u32 service, u32 call, u32 len, encoding, payload``; playback state ``0x05 u8 status, u64 time, f32 speed,
u8 did_seek, u32 len, request id``. Client playback control request ``0x03 u8 command (0 play, 1 pause), f32
speed, u8 had_seek, u64 seek time, u32 len, request id``; service call request ``0x02 u32 service, u32 call,
u32 len, encoding, payload``.
"""
from __future__ import annotations

import json
import struct
import threading
from collections import defaultdict
from typing import Any

from waiting import wait_for
from websockets.sync.client import connect

SUBPROTOCOL = "foxglove.sdk.v1"
PLAY, PAUSE = 0, 1
STATUS = {0: "playing", 1: "paused", 2: "buffering", 3: "ended"}


class FoxgloveClient:
    def __init__(self, url: str, *, subprotocols: tuple[str, ...] = (SUBPROTOCOL,), origin: str | None = None):
        self.ws = connect(url, subprotocols=list(subprotocols), origin=origin, max_size=None, open_timeout=30)
        self.ops: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.data: dict[int, list[tuple[int, bytes]]] = defaultdict(list)  # subscription -> (log time, payload)
        self.times: list[int] = []
        self.states: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.closed = False
        self._next_sub = 1
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for frame in self.ws:
                with self._lock:
                    if isinstance(frame, str):
                        doc = json.loads(frame)
                        self.ops[doc["op"]].append(doc)
                    else:
                        self._binary(frame)
        except Exception:  # noqa: BLE001 - the connection closed
            pass
        self.closed = True

    def _binary(self, frame: bytes) -> None:
        op = frame[0]
        if op == 1:
            sub, log_time = struct.unpack_from("<IQ", frame, 1)
            self.data[sub].append((log_time, bytes(frame[13:])))
        elif op == 2:
            self.times.append(struct.unpack_from("<Q", frame, 1)[0])
        elif op == 3:
            service, call, n = struct.unpack_from("<III", frame, 1)
            self.responses.append({"service": service, "call": call, "payload": bytes(frame[13 + n:])})
        elif op == 5:
            status, t, speed, did_seek, n = struct.unpack_from("<BQfBI", frame, 1)
            self.states.append({"status": STATUS.get(status, status), "time": t, "speed": speed,
                                "did_seek": bool(did_seek), "request_id": frame[19:19 + n].decode()})

    # --- asking ------------------------------------------------------------------------------------------------
    def send(self, doc: dict[str, Any] | bytes | str) -> None:
        self.ws.send(json.dumps(doc) if isinstance(doc, dict) else doc)

    def channels(self, *, wait_for_topics: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
        def have():
            with self._lock:
                out = {c["topic"]: c for doc in self.ops["advertise"] for c in doc["channels"]}
                for doc in self.ops["unadvertise"]:
                    for cid in doc["channelIds"]:
                        out = {t: c for t, c in out.items() if c["id"] != cid}
            return out if all(t in out for t in wait_for_topics) else None

        return wait_for(have, what=f"the server to advertise {wait_for_topics}")

    def subscribe(self, channels: dict[str, dict[str, Any]]) -> dict[str, int]:
        """Subscribe to every channel given; topic -> subscription id (ids never reused on this connection)."""
        subs = {topic: self._next_sub + k for k, topic in enumerate(sorted(channels))}
        self._next_sub += len(subs)
        self.send({"op": "subscribe", "subscriptions": [{"id": subs[t], "channelId": channels[t]["id"]}
                                                        for t in sorted(channels)]})
        return subs

    def playback(self, command: int, *, speed: float = 1.0, seek_ns: int | None = None, request_id: str = "") -> None:
        rid = request_id.encode()
        self.send(bytes([3, command]) + struct.pack("<fBQI", speed, seek_ns is not None, seek_ns or 0, len(rid))
                  + rid)

    def call_service(self, service_id: int, call_id: int, payload: bytes, encoding: str = "json") -> None:
        enc = encoding.encode()
        self.send(bytes([2]) + struct.pack("<III", service_id, call_id, len(enc)) + enc + payload)

    def last_time(self) -> int | None:
        with self._lock:
            return self.times[-1] if self.times else None

    def received(self, sub: int) -> list[tuple[int, bytes]]:
        with self._lock:
            return list(self.data.get(sub, ()))

    def op(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.ops.get(name, ()))

    def close(self) -> None:
        self.ws.close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FoxgloveClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
