"""Camera frames of a device served by ``hil sim`` in another process: the profile's ``camera_endpoint``.

    bus: socket://127.0.0.1:4000
    clock: sim
    clock_endpoint: tcp://127.0.0.1:5757
    camera_endpoint: tcp://127.0.0.1:5758      # hil sim ... --camera-endpoint tcp://127.0.0.1:5758

Each camera of the main bus gets a :class:`RemoteCameraSource`: a REQ socket asking the served world for the
camera's frame of the current period (bridge/camera_wire.py). It says which frame it holds, so a read between two
frames moves only a header and returns the same frame (the same Frame object: runtime/robot/camera.py). The arrays
wrap the received ZeroMQ buffers without a copy. A server that does not answer within ``timeout_s`` is named in the
error and the socket is made anew for the next read (a REQ socket that lost its reply is stuck otherwise). A
server secured with ``hil sim --keys`` admits only the profile's ``keys:``; a client refused, or without keys,
is told so by the CURVE handshake's monitor (bridge.security.HandshakeWatch), with the endpoint named.
"""
from __future__ import annotations

import threading
from typing import Any

import zmq

from hil.bridge.camera_wire import RemoteCameraError, WireError, encode_request, parse_reply

from ..clock.base import WALL

DEFAULT_TIMEOUT_S = 10.0  # a 640x480 render on a busy software renderer takes well under a second


class RemoteCameraSource:
    """``source()`` -> the camera dict firmware_sim's cameras give (t, rgb, depth, labels, legend, pose)."""

    def __init__(self, endpoint: str, part_id: int, sensor: str | None, *, security: Any = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self.endpoint, self.part_id, self.sensor = endpoint, int(part_id), sensor
        self.timeout_s = float(timeout_s)
        self._security = security
        self._socket: zmq.Socket | None = None
        self._watch: Any = None  # bridge.security.HandshakeWatch: why a server is silent (refused keys, none)
        self._lock = threading.Lock()
        self._last: dict[str, Any] | None = None
        self.received = 0  # frames whose pixels came over the wire (a 'same' reply does not count)

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            sock = self._socket or self._connect()
            have = self._last["t"] if self._last is not None else None
            deadline = WALL() + self.timeout_s
            self._send(sock, encode_request(self.part_id, self.sensor, have), deadline)
            if not sock.poll(max(0, int((deadline - WALL()) * 1000)), zmq.POLLIN):
                self._fail("did not answer")
            frames = sock.recv_multipart(copy=False)
            try:
                reply = parse_reply(frames)
            except WireError as exc:
                raise RemoteCameraError(f"the camera server at {self.endpoint} sent a bad reply: {exc}") from None
            except RemoteCameraError as exc:
                raise RemoteCameraError(f"the camera server at {self.endpoint}: {exc}") from None
            if reply.get("same") and self._last is not None and reply["t"] == self._last["t"]:
                return self._last
            if reply.get("same"):
                self._last = None  # a 'same' for a frame we do not hold: ask again for the pixels
                raise RemoteCameraError(f"the camera server at {self.endpoint} answered 'same' for a frame this "
                                        "client does not hold")
            self._last = reply
            self.received += 1
            return reply

    def _send(self, sock: zmq.Socket, data: bytes, deadline: float) -> None:
        """Send without blocking for ever: a REQ socket whose only connection failed its handshake (a client
        without keys at a CURVE server) has no pipe to send on, and a plain send would wait for one for good."""
        while True:
            left_ms = int((deadline - WALL()) * 1000)
            if left_ms <= 0 or not sock.poll(left_ms, zmq.POLLOUT):
                self._fail("took no request")
            try:
                sock.send(data, zmq.NOBLOCK)
                return
            except zmq.Again:  # the pipe POLLOUT saw went again (a handshake that failed just after)
                continue

    def _fail(self, what: str) -> None:
        """Raise the error of a silent server, with what the CURVE handshake says about it, and start over."""
        why = self._watch.reason() if self._watch is not None else ""
        self._reset()
        raise RemoteCameraError(f"the camera server at {self.endpoint} {what} within {self.timeout_s:g} s ("
                                + (why or f"is `hil sim ... --camera-endpoint {self.endpoint}` running?") + ")")

    def _connect(self) -> zmq.Socket:
        from hil.bridge.security import connect_client

        sock, self._watch = connect_client(zmq.REQ, self.endpoint, self._security, watch_plain=True)
        self._socket = sock
        return sock

    def _reset(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._socket is not None:
            self._socket.close(0)
            self._socket = None

    def close(self) -> None:
        with self._lock:
            self._reset()
