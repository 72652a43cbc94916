"""The bridge in real time (DESIGN "The bridge"): state streams over PUB/SUB plus a REQ/REP control channel.

In lockstep the world waits for the crowd at every tick. Under the real clock nobody waits: the crowd steps at its
own ``dt`` of wall time and publishes every step, the world publishes the robot and the people's actual states at
its own period, and each side takes the newest message the other sent when it needs one. Sockets (all bound by
the crowd, so a restarted world or crowd only has to reconnect)::

    control  REP  at the given endpoint      hello -> welcome {session, state_endpoint, world_endpoint, dt, t}
                                              status -> status {...}, bye -> bye (the crowd stops serving)
    state    PUB  a port the crowd picks     ``intents`` each crowd step: the crowd's state (and its heartbeat)
    world    SUB  a port the crowd picks     ``world`` from the world: robot + people's actual states

Every message is an envelope (bridge/envelope.py) and is validated on receipt; garbage, another version, an
unknown type or a malformed payload is dropped, counted and logged (logger ``hil.bridge``), never raised. Stream
payloads carry their sender's ``session`` (a random id per process), so a restarted peer (whose ``seq`` starts
again at 1) is told apart from a stale message of the current one.

Liveness, on the world's side (:class:`RealtimeCrowdLink`): the crowd publishes every step, so silence for
``timeout_s`` of wall time means it is gone: the state becomes ``lost``, reported once (log + callback) with the
endpoint and how long it was silent. The link then says ``hello`` every ``hello_interval_s`` (lazy pirate: a REQ
socket that got no answer is closed and recreated, never left stuck); when the crowd answers (perhaps a new
process: a new ``session``, new stream ports) the state is ``connected`` again and a reconnect is reported.
Nothing here blocks except :meth:`RealtimeCrowdLink.connect` and ``close``'s short goodbye.

Only zmq, msgpack (through the envelope) and the standard library: the payloads' meaning belongs to the callers.
"""
from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from time import monotonic as wall_clock  # wall time, even under runtime.clock.patch
from time import sleep as wall_sleep
from typing import Any, Callable
from urllib.parse import urlsplit

import zmq

from .bind import send_within
from .envelope import MAX_MESSAGE_BYTES, EnvelopeError, pack, unpack
from .schema import TypedDecoder, WorldPayload

log = logging.getLogger("hil.bridge")

CONTROL_REQUESTS = ("hello", "status", "bye")
CONTROL_REPLIES = ("welcome", "status", "bye", "error")
CROWD_STREAM = ("intents",)  # crowd -> world, on the state endpoint
WORLD_STREAM = ("world",)  # world -> crowd, on the world endpoint
DEFAULT_TIMEOUT_S = 2.0  # silence before a peer counts as gone: 20 crowd steps at the default 0.1 s
HELLO_INTERVAL_S = 0.5  # how often a lost link asks again; also how long one hello may go unanswered
STREAM_HWM = 8  # a slow reader needs only the newest state, so queues stay short
DRAIN_LIMIT = 1000  # messages taken from one stream per call at most
RECONNECT_IVL_MS, RECONNECT_IVL_MAX_MS = 100, 1000
BYE_WAIT_S = 0.5
LOG_EACH_FIRST, LOG_EVERY = 10, 1000  # drops of one kind: log the first ten, then every thousandth
ANY_HOSTS = ("0.0.0.0", "*", "[::]", "::")

CONNECTING, CONNECTED, LOST = "connecting", "connected", "lost"


class LinkError(RuntimeError):
    """The real-time link cannot be set up (no crowd answered at all); the text names the endpoint."""


def new_session() -> str:
    """A random id for one process's stream: what tells a restarted peer from the one before."""
    return secrets.token_hex(8)


def stream_endpoints(control: str) -> tuple[str, str]:
    """Where the crowd binds its state PUB and world SUB, next to its control endpoint: same host and transport,
    ports the system picks (tcp), or sibling names (ipc, inproc)."""
    parts = urlsplit(control)
    if parts.scheme == "tcp":
        host = parts.netloc.rsplit(":", 1)[0]
        return f"tcp://{host}:*", f"tcp://{host}:*"
    if parts.scheme in ("ipc", "inproc"):
        return f"{control}.state", f"{control}.world"
    raise ValueError(f"{control}: real-time streams need a tcp://, ipc:// or inproc:// endpoint")


def reachable(advertised: str, control: str) -> str:
    """An endpoint the crowd advertised, as this side can reach it: a wildcard host (the crowd bound every
    interface) is replaced by the host this side already reaches the control channel on."""
    parts = urlsplit(advertised)
    if parts.scheme != "tcp":
        return advertised
    host, _, port = parts.netloc.rpartition(":")
    if host not in ANY_HOSTS:
        return advertised
    return f"tcp://{urlsplit(control).netloc.rpartition(':')[0]}:{port}"


REPLAY_WINDOW = 16  # a seq more than this below the newest is the sender's word again, not an old message


@dataclass
class Freshness:
    """The newest ``seq`` seen per sender session: a repeated message, or one a little older than the newest, is
    stale. A new session (a restarted peer) starts over, and so does a seq more than REPLAY_WINDOW below the
    newest: over one stream, messages arrive in order, so that is not an old message but a sender whose newest
    seq was a forged or corrupted one (a single message with seq 2**62 would otherwise silence the real sender
    for ever; now for at most REPLAY_WINDOW messages)."""

    session: str | None = None
    seq: int = -1

    def accept(self, session: str, seq: int) -> bool:
        if session == self.session and self.seq - REPLAY_WINDOW <= seq <= self.seq:
            return False
        self.session, self.seq = session, seq
        return True


@dataclass
class Counters:
    """What the link saw, for logs and trial records."""

    received: int = 0
    published: int = 0
    dropped: int = 0
    stale: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def drop(self, where: str, reason: str) -> None:
        """Count a refused message and log why; a flood of the same fault is logged sparsely, never silenced."""
        self.dropped += 1
        key = reason.split(":")[0][:60]
        n = self.reasons[key] = self.reasons.get(key, 0) + 1
        if n <= LOG_EACH_FIRST or n % LOG_EVERY == 0:
            log.warning("%s: dropped a message: %s%s", where, reason, f" ({n} so far)" if n > 1 else "")


def _stream_payload(envelope_payload: Any) -> tuple[str, dict]:
    """(session, payload) of a stream message, or EnvelopeError."""
    if not isinstance(envelope_payload, dict) or not isinstance(envelope_payload.get("session"), str):
        raise EnvelopeError("stream payload must be a map with a 'session' string")
    return envelope_payload["session"], envelope_payload


def _socket(kind: int, security=None, server: bool = False) -> zmq.Socket:
    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # a peer announcing more is disconnected by libzmq
    if kind == zmq.SUB:
        # Every message is a whole state, so only the newest matters; but not CONFLATE: it does not support
        # multipart messages (libzmq aborts the process on one, assertion !_more), so a short queue is drained
        # to its newest message by the reader instead (take_newest).
        sock.setsockopt(zmq.RCVHWM, STREAM_HWM)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
    elif kind == zmq.PUB:
        sock.setsockopt(zmq.SNDHWM, STREAM_HWM)
    if security is not None:
        (security.apply_server if server else security.apply_client)(sock)
    return sock


def take_all(sock: zmq.Socket, counters: Counters, where: str, limit: int = DRAIN_LIMIT) -> list[bytes]:
    """Every single-frame message queued on ``sock`` (at most ``limit``, so a flood cannot keep a reader here);
    a multipart message (no sender of ours makes one) is dropped whole, counted and logged."""
    out = []
    for _ in range(limit):
        try:
            frames = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            break
        if len(frames) == 1:
            out.append(frames[0])
        else:
            counters.drop(where, f"a message of {len(frames)} frames; every message here is one frame")
    return out


def recv_request(sock: zmq.Socket, counters: Counters, where: str) -> bytes | None:
    """One request from a REP socket: its only frame, or None when it had several (then the caller must still
    answer, so the REP socket can take the next request)."""
    frames = sock.recv_multipart()
    if len(frames) == 1:
        return frames[0]
    counters.drop(where, f"a request of {len(frames)} frames; a request is one frame")
    return None


# --- the crowd's side -------------------------------------------------------------------------------------------

WORLD_DECODER = TypedDecoder({"world": WorldPayload})


class RealtimeCrowdServer:
    """The crowd's sockets: control REP at ``endpoint``, the state PUB and world SUB on ports it picks. The
    caller (crowd/serve_realtime.py) owns the pacing; this owns the protocol."""

    def __init__(self, endpoint: str, dt: float, security=None, session: str | None = None,
                 world_timeout_s: float = DEFAULT_TIMEOUT_S):
        self.dt, self.world_timeout_s = float(dt), world_timeout_s
        self.session = session or new_session()
        self.counters = Counters()
        self.world_state = CONNECTING  # of the world stream: connecting (none yet), connected, lost (silent)
        self._fresh = Freshness()
        self._heard_s = wall_clock()
        self._seq = 0
        self._sockets: list[zmq.Socket] = []
        try:
            self._control = self._bind(zmq.REP, endpoint, security)
            state_at, world_at = stream_endpoints(self.control_endpoint)
            self._state = self._bind(zmq.PUB, state_at, security)
            self._world = self._bind(zmq.SUB, world_at, security)
        except BaseException:
            self.close()
            raise

    def _bind(self, kind: int, endpoint: str, security) -> zmq.Socket:
        sock = _socket(kind, security, server=True)
        self._sockets.append(sock)
        sock.bind(endpoint)
        return sock

    @property
    def control_endpoint(self) -> str:
        return self._control.getsockopt_string(zmq.LAST_ENDPOINT)

    @property
    def state_endpoint(self) -> str:
        return self._state.getsockopt_string(zmq.LAST_ENDPOINT)

    @property
    def world_endpoint(self) -> str:
        return self._world.getsockopt_string(zmq.LAST_ENDPOINT)

    def serve_control(self, wait_s: float, t_s: float, status: Callable[[], dict] | None = None) -> bool:
        """Answer control requests for up to ``wait_s``; False once a ``bye`` was answered (stop serving)."""
        if not self._control.poll(max(0, int(wait_s * 1000))):
            return True
        data = recv_request(self._control, self.counters, f"crowd control {self.control_endpoint}")
        try:
            if data is None:
                raise EnvelopeError("a request is one frame")
            msg = unpack(data, CONTROL_REQUESTS)
        except EnvelopeError as exc:
            self.counters.drop(f"crowd control {self.control_endpoint}", str(exc))
            self._control.send(pack("error", {"reason": str(exc)}, t=t_s))
            return True
        if msg.type == "hello":
            self._control.send(pack("welcome", self.welcome(t_s), seq=msg.seq, t=t_s))
            log.info("crowd %s: hello from %r", self.control_endpoint, msg.payload)
            return True
        if msg.type == "status":
            self._control.send(pack("status", {"session": self.session, **(status() if status else {})},
                                    seq=msg.seq, t=t_s))
            return True
        self._control.send(pack("bye", {"session": self.session}, seq=msg.seq, t=t_s))
        return False

    def welcome(self, t_s: float) -> dict:
        return {"session": self.session, "state_endpoint": self.state_endpoint,
                "world_endpoint": self.world_endpoint, "dt": self.dt, "t": float(t_s)}

    def latest_world(self) -> WorldPayload | None:
        """The newest valid ``world`` message since the last call (its payload, checked by
        bridge/schema.py's WorldPayload: types, finite values, bounds), or None; also notices a world
        that went silent (logged once; the crowd goes on with what it last heard)."""
        latest = None
        where = f"crowd world stream {self.world_endpoint}"
        for data in take_all(self._world, self.counters, where):
            try:
                msg = WORLD_DECODER.decode(data)
            except EnvelopeError as exc:
                self.counters.drop(where, str(exc))
                continue
            payload, session = msg.payload, msg.payload.session
            if not self._fresh.accept(session, msg.seq):
                self.counters.stale += 1
                continue
            self.counters.received += 1
            latest = payload
        self._world_liveness(latest is not None)
        return latest

    def _world_liveness(self, heard: bool) -> None:
        now = wall_clock()
        if heard:
            if self.world_state == LOST:
                log.warning("crowd %s: the world stream is back after %.1f s", self.control_endpoint,
                            now - self._heard_s)
            self.world_state, self._heard_s = CONNECTED, now
        elif self.world_state == CONNECTED and now - self._heard_s > self.world_timeout_s:
            self.world_state = LOST
            log.warning("crowd %s: the world has been silent for %.1f s; the crowd goes on with the last robot "
                        "state it heard", self.control_endpoint, now - self._heard_s)

    def publish(self, t_s: float, payload: dict) -> None:
        """One ``intents`` message on the state stream (the crowd's heartbeat too)."""
        self._seq += 1
        self._state.send(pack("intents", {**payload, "session": self.session}, seq=self._seq, t=t_s))
        self.counters.published += 1

    def close(self) -> None:
        for sock in self._sockets:
            sock.close(0)
        self._sockets.clear()


def ask(endpoint: str, kind: str = "status", payload: Any = None, timeout_s: float = 2.0, security=None):
    """One control request to a real-time crowd (``status`` by default), for tools and operators: the reply's
    envelope, or :class:`LinkError` naming the endpoint if none comes in time. A ``bye`` stops the crowd."""
    sock = _socket(zmq.REQ, security)
    try:
        sock.connect(endpoint)
        if not send_within(sock, pack(kind, payload if payload is not None else {}), timeout_s) or \
                not sock.poll(int(timeout_s * 1000)):
            raise LinkError(f"the crowd at {endpoint} did not answer {kind!r} within {timeout_s:g} s")
        try:
            return unpack(sock.recv(), CONTROL_REPLIES)
        except EnvelopeError as exc:
            raise LinkError(f"the crowd at {endpoint} answered {kind!r} with a bad message: {exc}") from None
    finally:
        sock.close(0)


# --- the world's side -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Welcome:
    session: str
    state_endpoint: str
    world_endpoint: str
    dt: float
    t: float

    @classmethod
    def parse(cls, payload: Any) -> "Welcome":
        try:
            welcome = cls(str(payload["session"]), str(payload["state_endpoint"]), str(payload["world_endpoint"]),
                          float(payload["dt"]), float(payload["t"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvelopeError(f"welcome: malformed ({type(exc).__name__}: {exc})") from None
        return welcome


EventCallback = Callable[[str, dict], None]


class RealtimeCrowdLink:
    """The world's end: control REQ (lazy pirate), state SUB, world PUB. Call :meth:`publish` and :meth:`poll`
    from the world's loop; both return at once. ``state`` is connecting, connected or lost; ``on_event(kind,
    info)`` hears "connected", "lost" and "reconnected" (with ``new_session``)."""

    def __init__(self, endpoint: str, timeout_s: float = DEFAULT_TIMEOUT_S, hello_interval_s: float = HELLO_INTERVAL_S,
                 security=None, on_event: EventCallback | None = None, name: str = "world"):
        if not timeout_s > 0 or not hello_interval_s > 0:
            raise ValueError(f"timeout ({timeout_s!r}) and hello interval ({hello_interval_s!r}) must be > 0 s")
        self.endpoint, self.timeout_s, self.hello_interval_s = endpoint, timeout_s, hello_interval_s
        self.security, self.on_event, self.name = security, on_event, name
        self.state = CONNECTING
        self.session: str | None = None  # the crowd's, from its last welcome
        self.own_session = new_session()
        self.crowd_dt_s: float | None = None
        self.reconnects = self.losses = 0
        self.counters = Counters()
        self._fresh = Freshness()
        self._heard_s = self._lost_at_s = wall_clock()
        self._seq = 0
        self._control: zmq.Socket | None = None
        self._pending_since: float | None = None  # a hello is out since then
        self._next_hello_s = 0.0
        self._streams: tuple[str, str] | None = None
        self._sub: zmq.Socket | None = None
        self._pub: zmq.Socket | None = None
        self._new_control()

    # -- sockets
    def _new_control(self) -> None:
        if self._control is not None:
            self._control.close(0)
        self._control = _socket(zmq.REQ, self.security)
        self._control.connect(self.endpoint)
        self._pending_since = None

    def _open_streams(self, welcome: Welcome) -> None:
        wanted = (reachable(welcome.state_endpoint, self.endpoint), reachable(welcome.world_endpoint, self.endpoint))
        if wanted == self._streams:
            return
        self._close_streams()
        self._sub = _socket(zmq.SUB, self.security)
        self._sub.connect(wanted[0])
        self._pub = _socket(zmq.PUB, self.security)
        self._pub.connect(wanted[1])
        self._streams = wanted

    def _close_streams(self) -> None:
        for sock in (self._sub, self._pub):
            if sock is not None:
                sock.close(0)
        self._sub = self._pub = None
        self._streams = None

    # -- the world's calls
    def connect(self, wait_s: float) -> None:
        """Block until the crowd has answered hello (at most ``wait_s``); :class:`LinkError` names it if not."""
        deadline = wall_clock() + wait_s
        while self.state != CONNECTED:
            self._service_control(wall_clock())
            if self.state == CONNECTED:
                return
            if wall_clock() >= deadline:
                keys = ("or it did not admit this side's key" if self.security is not None else
                        "a crowd served with --keys ignores a world without its keys")
                raise LinkError(f"no crowd answered hello at {self.endpoint} within {wait_s:g} s: is "
                                f"`hil crowd --serve {self.endpoint} --realtime` running? ({keys})")
            wall_sleep(0.005)

    def publish(self, t_s: float, robot: dict | None, people: list[dict]) -> None:
        """The robot's state and the people's actual states, on the world stream (dropped if nobody listens)."""
        if self._pub is None:
            return
        self._seq += 1
        from .crowd_link import state_columns

        payload = {"t": float(t_s), "robot": robot, "people": state_columns(people), "session": self.own_session}
        try:
            self._pub.send(pack("world", payload, seq=self._seq, t=t_s), zmq.NOBLOCK)
            self.counters.published += 1
        except zmq.Again:
            pass

    def poll(self) -> dict | None:
        """The newest intents payload since the last poll (None if nothing new); also keeps the link alive:
        answers to hello, loss of the crowd, hello retries."""
        now = wall_clock()
        self._service_control(now)
        latest = self._drain(now)
        if self.state == CONNECTED and now - self._heard_s > self.timeout_s:
            self._lose(now)
        return latest

    def drop(self, reason: str) -> None:
        """A message that passed the envelope but whose content the caller refuses: counted and logged here."""
        self.counters.drop(f"{self.name} from crowd {self.endpoint}", reason)

    def counters_dict(self) -> dict:
        c = self.counters
        return {"state": self.state, "session": self.session, "reconnects": self.reconnects, "losses": self.losses,
                "received": c.received, "published": c.published, "dropped": c.dropped, "stale": c.stale}

    # -- internals
    def _drain(self, now: float) -> dict | None:
        if self._sub is None:
            return None
        latest = None
        for data in take_all(self._sub, self.counters, f"{self.name} from crowd {self.endpoint}"):
            try:
                msg = unpack(data, CROWD_STREAM)
                session, payload = _stream_payload(msg.payload)
            except EnvelopeError as exc:
                self.drop(str(exc))
                continue
            if session != self.session or not self._fresh.accept(session, msg.seq):
                self.counters.stale += 1  # an old message, or one of a crowd this link has not said hello to
                continue
            self.counters.received += 1
            latest = payload
        if latest is not None:
            self._heard(now, same_session=True)
        return latest

    def _service_control(self, now: float) -> None:
        if self._pending_since is not None:
            if self._control.poll(0):
                self._pending_since = None
                data = recv_request(self._control, self.counters, f"{self.name} from crowd {self.endpoint}")
                if data is not None:
                    self._reply(data, now)
            elif now - self._pending_since > self.hello_interval_s:
                self._new_control()  # lazy pirate: a REQ without an answer is stuck; start a fresh one
        if self._pending_since is None and self.state != CONNECTED and now >= self._next_hello_s:
            try:  # never a blocking send: a REQ with no connection (reconnecting, a refused handshake) blocks for ever
                self._control.send(pack("hello", {"name": self.name, "session": self.own_session}, seq=self._seq),
                                   zmq.NOBLOCK)
            except zmq.Again:
                self._next_hello_s = now + self.hello_interval_s  # nothing to send on yet: at the next hello
            else:
                self._pending_since, self._next_hello_s = now, now + self.hello_interval_s

    def _reply(self, data: bytes, now: float) -> None:
        try:
            msg = unpack(data, CONTROL_REPLIES)
            if msg.type != "welcome":
                raise EnvelopeError(f"{msg.type} in answer to hello: {msg.payload!r}"[:200])
            welcome = Welcome.parse(msg.payload)
        except EnvelopeError as exc:
            self.drop(str(exc))
            return
        new_session = self.session is not None and welcome.session != self.session
        self._open_streams(welcome)
        self.session, self.crowd_dt_s = welcome.session, welcome.dt
        self._heard(now, same_session=not new_session)

    def _heard(self, now: float, same_session: bool) -> None:
        before, self.state, self._heard_s = self.state, CONNECTED, now
        if before == CONNECTING:
            log.info("%s: connected to the crowd at %s (session %s)", self.name, self.endpoint, self.session)
            self._report("connected", {"session": self.session})
        elif before == LOST:
            self.reconnects += 1
            down = now - self._lost_at_s
            log.warning("%s: the crowd at %s is back after %.1f s lost (%s session %s)", self.name, self.endpoint,
                        down, "same" if same_session else "new", self.session)
            self._report("reconnected", {"session": self.session, "new_session": not same_session, "down_s": down})

    def _lose(self, now: float) -> None:
        silent = now - self._heard_s
        self.state, self._lost_at_s, self._next_hello_s = LOST, now, now
        self.losses += 1
        log.warning("%s: lost the crowd at %s: nothing heard for %.1f s (timeout %g s); asking again every %g s",
                    self.name, self.endpoint, silent, self.timeout_s, self.hello_interval_s)
        self._report("lost", {"session": self.session, "silent_s": silent})

    def _report(self, kind: str, info: dict) -> None:
        if self.on_event is not None:
            self.on_event(kind, {"endpoint": self.endpoint, **info})

    def close(self) -> None:
        """Say bye if the crowd is there (a short wait), then close every socket."""
        if self._control is None:
            return
        try:
            if self.state == CONNECTED:
                if self._pending_since is not None:
                    self._new_control()
                try:
                    self._control.send(pack("bye", {"session": self.own_session}), zmq.NOBLOCK)
                    self._control.poll(int(BYE_WAIT_S * 1000))
                except zmq.Again:
                    pass  # no connection to say bye on: the crowd finds the world gone by its silence
        finally:
            self._control.close(0)
            self._control = None
            self._close_streams()
