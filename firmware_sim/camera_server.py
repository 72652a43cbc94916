"""``hil sim --camera-endpoint EP``: the served world's camera frames for controllers in other processes.

A REP socket answered by one thread until :meth:`CameraServer.close`; each request names a camera part and sensor
(bridge/camera_wire.py) and is answered with that camera's frame of the current frame period, rendered on demand
as for a controller in the world's own process (``EmbodiedRobot.camera_frame``: under the device's lock, at most
once per period). Bad requests are answered with an error saying what was wrong, counted, and the server goes on:
nothing a peer sends ends it. Loopback unless secured: with ``--keys`` CURVE like the clock endpoint (the same key
directory: only clients whose key is in its ``authorized/`` are admitted; a client without keys is told, by
runtime/robot/camera_remote.py, that the endpoint wants them).
"""
from __future__ import annotations

import threading
from typing import Any

import zmq

from hil.bridge.camera_wire import MAX_REQUEST_B, WireError, encode_error, encode_reply, encode_same, parse_request
from hil.bridge.bind import bind_server
from hil.bridge.security import check_loopback_unless_secured

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5758"  # beside the clock's 5757
POLL_MS = 50


class CameraServer:
    """Serves ``embodied.camera_frame(part_id, sensor)`` on ``endpoint`` (``tcp://127.0.0.1:*``: a free port;
    :attr:`endpoint` is the one bound)."""

    def __init__(self, embodied: Any, endpoint: str = DEFAULT_ENDPOINT, security: Any = None):
        self.embodied = embodied
        check_loopback_unless_secured(endpoint, security, "hil sim --camera-endpoint", "the camera endpoint")
        # a peer's huge message is dropped by ZeroMQ
        self._socket, self.endpoint = bind_server(zmq.REP, endpoint, security, MAX_REQUEST_B)
        self.served = 0
        self.rejected: list[str] = []  # the latest bad requests' reasons (at most 100)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="camera-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            try:
                if not poller.poll(POLL_MS):
                    continue
                frames = self._socket.recv_multipart(copy=True)
            except zmq.ZMQError:
                if self._stop.is_set():
                    return
                continue
            self._socket.send_multipart(self._answer(frames), copy=False)

    def _answer(self, frames: list[bytes]) -> list[Any]:
        """The reply to one request; never raises (the peer gets the reason)."""
        try:
            if len(frames) != 1:
                raise WireError(f"a request is one frame, not {len(frames)}")
            part_id, sensor, have = parse_request(frames[0])
        except WireError as exc:
            self.rejected = (self.rejected + [str(exc)])[-100:]
            return encode_error(f"bad request: {exc}")
        try:
            frame = self.embodied.camera_frame(part_id, sensor)
            if have is not None and float(frame["t"]) == have:
                return encode_same(have)  # the client holds this period's frame already
            reply = encode_reply(frame)
        except Exception as exc:  # noqa: BLE001 - no such camera, a renderer that cannot start: the peer is told
            return encode_error(f"{type(exc).__name__}: {exc}")
        self.served += 1
        return reply

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._socket.close(0)
