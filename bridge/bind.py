"""A server's socket, bound: one place for what every hil server does before it answers anyone.

LINGER 0 (a closing server never waits on a peer), an optional cap on a message's size (ZeroMQ drops a bigger
one and the connection with it, before any of it is read), CURVE when keys are given, and no socket left behind
when the bind fails (a bad endpoint, a taken port, bad keys). The endpoint returned is the one bound, a ``*``
port resolved, so the caller can print where it answers.
"""
from __future__ import annotations

from typing import Any

import zmq


def bind_server(kind: int, endpoint: str, security: Any = None, max_message_bytes: int | None = None,
                context: zmq.Context | None = None) -> tuple[zmq.Socket, str]:
    """(socket, bound endpoint) of a ``kind`` (zmq.REP, zmq.ROUTER, ...) server at ``endpoint``."""
    socket = (context or zmq.Context.instance()).socket(kind)
    socket.setsockopt(zmq.LINGER, 0)
    if max_message_bytes is not None:
        socket.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    try:
        if security is not None:  # bad keys raise SecurityError here, before anything is bound
            security.apply_server(socket)
        socket.bind(endpoint)
    except BaseException:
        socket.close(0)
        raise
    return socket, socket.getsockopt_string(zmq.LAST_ENDPOINT)


def send_within(socket: zmq.Socket, data: bytes, timeout_s: float) -> bool:
    """Send ``data`` on a REQ (or DEALER) socket within ``timeout_s``; False if there was no connection to send on.

    A REQ socket whose only connection failed its handshake (a plain client at a CURVE server) has no pipe while
    it reconnects, and a plain ``send`` then blocks for ever; the pipe POLLOUT saw can also vanish again before
    the send. So: wait for POLLOUT and send without blocking, again until the time is up."""
    from time import monotonic

    deadline = monotonic() + timeout_s
    while True:
        left_ms = int(max(0.0, deadline - monotonic()) * 1000)
        if left_ms <= 0 or not socket.poll(left_ms, zmq.POLLOUT):
            return False
        try:
            socket.send(data, zmq.NOBLOCK)
            return True
        except zmq.Again:
            continue
