"""The door in front of foxglove-sdk's WebSocket server: which web pages may connect, both protocol names, a close
that a client cannot hold up.

foxglove-sdk 0.30's server checks nothing of a connection but its subprotocol, and only ``foxglove.sdk.v1``. Any
web page open in the user's browser may open a WebSocket to ``ws://127.0.0.1:8765`` (browsers let pages do so and
tell the server only through the ``Origin`` header), and a trial's server can start processes (``hil/retry``).
So the SDK's server listens on a private loopback address (a random ``127.x.y.z`` on Linux, which routes all of
127/8 to the loopback device: a page cannot guess it; ``127.0.0.1`` elsewhere) and :class:`OriginGate` listens
where the user asked. For each connection the gate reads the HTTP upgrade request (at most :data:`MAX_HEAD_BYTES`
within :data:`HANDSHAKE_S`), and:

- refuses (HTTP 403, one line on stderr naming the origin and ``--foxglove-origin``) a browser whose ``Origin`` is
  not allowed: by default Foxglove's web app, the desktop apps (which load from ``file://``; a browser sends
  ``null`` for a local file) and ``hil view``'s page on its default port. A request without ``Origin`` is not from
  a browser page and is let through (Foxglove's own clients, scripts, ``ssh -L``);
- accepts ``foxglove.websocket.v1``, the protocol's original name that ``@foxglove/ws-protocol`` clients,
  Lichtblick and older Foxglove offer, as well as ``foxglove.sdk.v1``: a client offering only the old name is
  passed to the SDK as offering the new one and told the old one back (the messages are the same);
- then copies bytes both ways, 64 KiB at a time with no queue of its own, so a client that stops reading holds
  back only its own connection (the SDK drops that client's oldest messages). A client that takes nothing for
  :data:`STALL_S` is dropped; at most :data:`MAX_CONNECTIONS` at once.

:func:`stop_bounded` stops the SDK's server within a bounded time whatever clients do: the SDK's ``stop`` waits for
every client's socket to take its close frame, forever for a client that never reads; after :data:`CLOSE_S` the
gate resets its connections, which ends the SDK's wait at once.
"""
from __future__ import annotations

import secrets
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from hil.runtime.clock.base import WALL, WALL_SLEEP  # the wall clock: a trial on the sim clock patches time

FOXGLOVE_APP = "https://app.foxglove.dev"
VIEW_PAGES = ("http://127.0.0.1:8080", "http://localhost:8080")  # hil view's page on its default port
DESKTOP = "file://"  # Electron apps (Foxglove, Lichtblick desktop) load their page from a file
DEFAULT_ORIGINS = (FOXGLOVE_APP, DESKTOP, *VIEW_PAGES)
SUBPROTOCOL = "foxglove.sdk.v1"  # the one foxglove-sdk's server accepts
LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"  # the protocol's original name (@foxglove/ws-protocol, Lichtblick)
MAX_HEAD_BYTES = 16 * 1024
HANDSHAKE_S = 5.0  # wall seconds a client has to send its upgrade request, the SDK to answer it
STALL_S = 60.0  # a client that takes no bytes for this long is dropped
LINGER_S = 5.0  # after one side of a connection has closed, the other has this long to finish
MAX_CONNECTIONS = 32
CLOSE_S = 1.0  # wall seconds the SDK's stop gets before the gate resets its connections (twice: <= 2 s)
CHUNK = 1 << 16
SAID_REFUSALS = 10  # refusals said on stderr one by one; after that every 100th (all are counted)


class Refused(Exception):
    """A connection the gate answers with an HTTP error and closes."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


def normalized_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def private_loopback() -> str:
    """A loopback address a web page cannot guess (Linux routes 127/8 to lo), else 127.0.0.1."""
    if not sys.platform.startswith("linux"):
        return "127.0.0.1"
    return f"127.{secrets.randbelow(254) + 1}.{secrets.randbelow(256)}.{secrets.randbelow(253) + 2}"


def start_behind_gate(start: Callable[[str, int], Any], host: str, port: int, origins: Iterable[str] = (),
                      err: Any = None) -> tuple[Any, OriginGate]:
    """``start(host, port)`` foxglove-sdk's server on a private loopback address, and the gate on ``host:port``."""
    private = private_loopback()
    try:
        server = start(private, 0)
    except Exception:  # noqa: BLE001 - a system without 127/8 on loopback: the usual address
        private = "127.0.0.1"
        server = start(private, 0)
    try:
        gate = OriginGate(host, port, (private, server.port), origins, err)
    except BaseException:
        server.stop()
        raise
    return server, gate


def stop_bounded(server: Any, gate: OriginGate, err: Any = None) -> bool:
    """Stop the SDK's server and the gate within ~2 * :data:`CLOSE_S` whatever clients do; True when the SDK's
    stop returned (else it is left to finish on its own thread and that is said)."""
    stopper = threading.Thread(target=server.stop, name="hil-foxglove-stop", daemon=True)
    stopper.start()
    stopper.join(CLOSE_S)
    if stopper.is_alive():  # a client that does not read its close frame: reset every connection
        gate.abort_all()
        stopper.join(CLOSE_S)
    gate.close()
    if stopper.is_alive():
        print("foxglove: the server did not stop within its time; leaving it", file=err or sys.stderr, flush=True)
        return False
    return True


class OriginGate:
    """Listens on ``host:port``; each accepted connection checked, then spliced to ``upstream`` (the SDK's server)."""

    def __init__(self, host: str, port: int, upstream: tuple[str, int], origins: Iterable[str] = (),
                 err: Any = None):
        self.upstream = upstream
        self.origins = frozenset(normalized_origin(o) for o in (*DEFAULT_ORIGINS, *origins))
        self.err = err if err is not None else sys.stderr
        self.refused = 0
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
        self._listener = socket.create_server(address[:2], family=family)  # SO_REUSEADDR: a port opened again
        self._listener.settimeout(0.25)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="hil-foxglove-gate", daemon=True)
        self._thread.start()

    # --- accepting ---------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._closed.is_set():
                    return
                WALL_SLEEP(0.05)  # e.g. out of file descriptors: try again shortly
                continue
            with self._lock:
                busy = len(self._pairs) >= MAX_CONNECTIONS
                pair = None if busy else _Pair(conn)
                if pair is not None:
                    self._pairs.add(pair)
            if pair is None:
                self._refuse(conn, peer, Refused(503, f"{MAX_CONNECTIONS} connections are open already"))
                continue
            threading.Thread(target=self._serve, args=(pair, peer), name="hil-foxglove-gate-conn",
                             daemon=True).start()

    def _serve(self, pair: _Pair, peer: Any) -> None:
        try:
            self._connect(pair)
            pair.splice()
        except Refused as exc:
            self._refuse(pair.client, peer, exc)
            if pair.upstream is not None:
                pair.upstream.close()
        except OSError:  # the client or the SDK went away during the handshake, or the gate closed
            pair.abort()
        finally:
            with self._lock:
                self._pairs.discard(pair)

    def _connect(self, pair: _Pair) -> None:
        """The upgrade request checked and passed on, the SDK's answer passed back (subprotocols renamed)."""
        head, rest = _read_head(pair.client, WALL() + HANDSHAKE_S)
        forward, legacy = self.check(head)
        pair.upstream = upstream = socket.create_connection(self.upstream, timeout=HANDSHAKE_S)
        if self._closed.is_set():
            raise OSError("the gate is closed")
        upstream.sendall(forward + rest)
        answer, more = _read_head(upstream, WALL() + HANDSHAKE_S)
        if legacy:
            answer = _renamed(answer, LEGACY_SUBPROTOCOL)
        pair.client.settimeout(STALL_S)
        pair.client.sendall(answer + more)
        upstream.settimeout(None)

    def check(self, head: bytes) -> tuple[bytes, bool]:
        """(the request head to pass on, whether the client offered only the old subprotocol); Refused if not."""
        lines = head.decode("latin-1").split("\r\n")
        method, _, _ = lines[0].partition(" ")
        if method != "GET":
            raise Refused(400, f"a WebSocket upgrade is a GET request, not {lines[0][:60]!r}")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise Refused(400, f"a malformed header line {line[:60]!r}")
            headers.append((name.strip().lower(), value.strip()))
        origins = [value for name, value in headers if name == "origin"]
        if len(origins) > 1:
            raise Refused(403, "more than one Origin header")
        if origins and normalized_origin(origins[0]) not in self.origins:
            raise Refused(403, f"a web page from {origins[0][:100]!r} may not connect (allowed: "
                               f"{', '.join(sorted(self.origins))}; --foxglove-origin ORIGIN allows another)")
        offered = [p.strip() for name, value in headers if name == "sec-websocket-protocol"
                   for p in value.split(",") if p.strip()]
        if SUBPROTOCOL in offered or LEGACY_SUBPROTOCOL not in offered:
            if SUBPROTOCOL not in offered:
                raise Refused(400, f"offer the subprotocol {SUBPROTOCOL} or {LEGACY_SUBPROTOCOL} (offered: "
                                   f"{', '.join(offered)[:100] or 'none'})")
            return head, False
        kept = [line for line in lines[1:] if line and not line.lower().startswith("sec-websocket-protocol:")]
        forward = "\r\n".join([lines[0], *kept, f"Sec-WebSocket-Protocol: {SUBPROTOCOL}", "", ""])
        return forward.encode("latin-1"), True

    def _refuse(self, conn: socket.socket, peer: Any, exc: Refused) -> None:
        self.refused += 1
        if self.refused <= SAID_REFUSALS or self.refused % 100 == 0:
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            print(f"foxglove: refused a connection from {where}: {exc} ({self.refused} refused so far)",
                  file=self.err, flush=True)
        body = f"hil refused this connection: {exc}\n".encode()
        reason = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
                  503: "Service Unavailable"}.get(exc.status, "Error")
        try:
            conn.settimeout(1.0)
            conn.sendall(f"HTTP/1.1 {exc.status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        except OSError:
            pass
        finally:
            conn.close()

    # --- closing -----------------------------------------------------------------------------------------------
    def abort_all(self) -> None:
        """Reset every connection (the client and the SDK's side): nothing waits on a client any longer."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.abort()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=2.0)
        self._listener.close()
        end = WALL() + CLOSE_S  # connections the SDK closed finish passing on its last bytes
        while WALL() < end:
            with self._lock:
                if not self._pairs:
                    break
            WALL_SLEEP(0.02)
        self.abort_all()


class _Pair:
    """One client's connection and the gate's connection to the SDK for it."""

    def __init__(self, client: socket.socket):
        self.client = client
        self.upstream: socket.socket | None = None
        self._aborted = False

    def splice(self) -> None:
        """Copy both ways until both sides have closed (or one has and the other lingers past LINGER_S)."""
        upstream = self.upstream
        to_sdk = threading.Thread(target=_copy, args=(self.client, upstream), name="hil-foxglove-gate-in",
                                  daemon=True)
        to_sdk.start()
        _copy(upstream, self.client)
        to_sdk.join(LINGER_S)
        if to_sdk.is_alive():
            self.abort()
        else:
            self.close()

    def abort(self) -> None:
        if self._aborted:
            return
        self._aborted = True
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            try:  # a reset, not a FIN: nothing is left to send, and a blocked send or receive returns at once
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                sock.close()


def _copy(src: socket.socket, dst: socket.socket) -> None:
    """Bytes from ``src`` to ``dst`` until ``src`` ends (then ``dst`` is told: FIN) or either fails."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            try:
                n = src.recv_into(buf)
            except TimeoutError:  # a quiet client (only the client's socket has a timeout: STALL_S for sends)
                continue
            if not n:
                break
            dst.sendall(view[:n])
        dst.shutdown(socket.SHUT_WR)
    except OSError:  # a reset, a stalled client (TimeoutError), the gate closing
        try:
            src.shutdown(socket.SHUT_RDWR)
            dst.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _read_head(sock: socket.socket, deadline: float) -> tuple[bytes, bytes]:
    """An HTTP head (through its blank line) and any bytes after it, within ``deadline``; Refused or OSError."""
    buf = bytearray()
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(buf[:end + 4]), bytes(buf[end + 4:])
        if len(buf) > MAX_HEAD_BYTES:
            raise Refused(431, f"the request's head is over {MAX_HEAD_BYTES} bytes")
        left = deadline - WALL()
        if left <= 0:
            raise Refused(400, f"no complete upgrade request within {HANDSHAKE_S:g} s")
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        if not chunk:
            raise OSError("closed before its request was complete")
        buf += chunk


def _renamed(answer: bytes, subprotocol: str) -> bytes:
    """The SDK's 101 answer with its Sec-WebSocket-Protocol line naming ``subprotocol``."""
    lines = answer.decode("latin-1").split("\r\n")
    out = [f"Sec-WebSocket-Protocol: {subprotocol}" if line.lower().startswith("sec-websocket-protocol:") else line
           for line in lines]
    return "\r\n".join(out).encode("latin-1")
