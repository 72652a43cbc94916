"""An external pose source for mixed trials: a localization system (motion capture, a SLAM node, a beacon
tracker) publishes the robot's pose in the map frame, and the runtime uses it instead of wheel odometry.

Wire: a ZeroMQ PUB the source binds (or connects), messages ``pose`` envelopes (bridge/envelope.py) with payload
``{x, y, yaw}`` (m, m, rad, map frame) and the source's own time in the envelope's ``t``. The runtime's
:class:`PoseSubscriber` keeps only the newest message (CONFLATE: a pose is a whole state, an old one is worth
nothing), never waits, and drops garbage, other versions and other types with a logged reason.
:class:`PosePublisher` is the other end, for sources written in Python and for tests.
"""
from __future__ import annotations

import logging
import math
from typing import NamedTuple

import zmq

from .envelope import EnvelopeError, pack, unpack

log = logging.getLogger("hil.bridge")
POSE = ("pose",)


class Pose(NamedTuple):
    """A pose in the map frame: metres, metres, radians; ``t`` is the source's time stamp."""

    x: float
    y: float
    yaw: float
    t: float


class PoseSubscriber:
    """The newest pose from ``endpoint`` (a source's PUB); :meth:`latest` returns it, or None until one came."""

    def __init__(self, endpoint: str, security=None, bind: bool = False):
        self.endpoint = endpoint
        self.received = 0
        self.dropped = 0
        self._pose: Pose | None = None
        self._socket = zmq.Context.instance().socket(zmq.SUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.CONFLATE, 1)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        if security is not None:
            (security.apply_server if bind else security.apply_client)(self._socket)
        (self._socket.bind if bind else self._socket.connect)(endpoint)

    def latest(self) -> Pose | None:
        """Take what arrived (never waits); the newest valid pose so far."""
        while self._socket.poll(0):
            data = self._socket.recv()
            try:
                self._pose = parse_pose(unpack(data, POSE))
                self.received += 1
            except EnvelopeError as exc:
                self.dropped += 1
                log.warning("pose source %s: dropped a message: %s", self.endpoint, exc)
        return self._pose

    def close(self) -> None:
        self._socket.close(0)


def parse_pose(msg) -> Pose:
    """A ``pose`` envelope's payload, checked: three finite numbers."""
    payload = msg.payload
    try:
        x, y, yaw = (float(payload[k]) for k in ("x", "y", "yaw"))
    except (KeyError, TypeError, ValueError) as exc:
        raise EnvelopeError(f"pose: needs numbers x, y, yaw ({type(exc).__name__}: {exc})") from None
    if not all(math.isfinite(v) for v in (x, y, yaw)):
        raise EnvelopeError(f"pose: x, y, yaw must be finite, not {x!r}, {y!r}, {yaw!r}")
    return Pose(x, y, yaw, msg.t)


class PosePublisher:
    """A pose source's end: binds ``endpoint`` (loopback by default) and publishes poses."""

    def __init__(self, endpoint: str = "tcp://127.0.0.1:*", security=None):
        self._socket = zmq.Context.instance().socket(zmq.PUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        if security is not None:
            security.apply_server(self._socket)
        self._socket.bind(endpoint)
        self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.seq = 0

    def publish(self, x: float, y: float, yaw: float, t: float = 0.0) -> None:
        self.seq += 1
        self._socket.send(pack("pose", {"x": float(x), "y": float(y), "yaw": float(yaw)}, seq=self.seq, t=t))

    def close(self) -> None:
        self._socket.close(0)
