"""CURVE encryption and authentication for the bridge's ZeroMQ sockets (DESIGN "The bridge": loopback by default,
CURVE when it crosses a network).

Everything here is pyzmq's own machinery: key pairs in the certificate files ``zmq.auth.create_certificates``
writes, and a ZAP handler (``zmq.auth.thread.ThreadAuthenticator``) that admits a client only if its public key
is in the key directory's ``authorized/``. No cryptography of ours, and a socket without a :class:`Security`
stays plain, exactly as before.

A key directory (``hil keys DIR``) holds::

    server.key  server.key_secret      the serving side's pair (the secret stays on the serving machine)
    client.key  client.key_secret      a connecting side's pair
    authorized/client.key              public keys the server admits (add more *.key files for more clients)

A serving machine needs ``server.key``, ``server.key_secret`` and ``authorized/``; a connecting machine needs
``server.key`` (to know whom it talks to) and the client pair. :meth:`Security.load` checks every file that is
there and says which file is wrong and how; a role whose files are missing fails when it is asked for
(:meth:`Security.check_server`, :meth:`Security.check_client`), before anything binds or connects.

ZAP is per context (libzmq binds it at ``inproc://zeromq.zap.01``), so one authenticator per context is started
on first use and shared; every secured server socket gets a ZAP domain of its own key set, so servers with
different key directories in one process each admit only their own clients.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from .bind import send_within

log = logging.getLogger(__name__)

SERVER, CLIENT, AUTHORIZED = "server", "client", "authorized"
_Z85_KEY = re.compile(r"[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}")


class SecurityError(ValueError):
    """A key directory that cannot be used; the message names the file and what is wrong with it."""


def curve_available() -> bool:
    """True when this libzmq was built with CURVE (the pyzmq wheels are)."""
    return bool(zmq.has("curve"))


@dataclass(frozen=True)
class Security:
    """The keys of one key directory, validated, and how to put them on a socket.

    Secrets are not in the repr, so a Security can be logged.
    """

    keys_dir: Path
    server_public: bytes
    server_secret: bytes | None = field(default=None, repr=False)
    client_public: bytes | None = None
    client_secret: bytes | None = field(default=None, repr=False)
    authorized: frozenset[bytes] = frozenset()

    @classmethod
    def load(cls, keys_dir: str | Path) -> Security:
        """Read and check the key directory: a missing or corrupt file raises :class:`SecurityError` naming it."""
        keys_dir = Path(keys_dir)
        if not curve_available():
            raise SecurityError(f"{keys_dir}: this libzmq was built without CURVE, so the bridge cannot be secured")
        if not keys_dir.is_dir():
            raise SecurityError(f"{keys_dir}: no such key directory (create one with `hil keys {keys_dir}`)")
        server_public = _read_public(keys_dir / f"{SERVER}.key")
        server_secret = _read_pair(keys_dir / f"{SERVER}.key_secret", server_public)[1]
        client_public, client_secret = _read_pair(keys_dir / f"{CLIENT}.key_secret")
        if client_public is not None and (keys_dir / f"{CLIENT}.key").exists():
            _read_public(keys_dir / f"{CLIENT}.key", expected=client_public)
        if server_secret is None and client_secret is None:
            raise SecurityError(f"{keys_dir}: neither {SERVER}.key_secret nor {CLIENT}.key_secret is there: "
                                f"these keys can neither serve nor connect")
        authorized = _read_authorized(keys_dir / AUTHORIZED) if server_secret is not None else frozenset()
        return cls(keys_dir, server_public, server_secret, client_public, client_secret, authorized)

    def check_server(self) -> None:
        """Raise :class:`SecurityError` unless these keys can serve (call it early to fail before binding)."""
        if self.server_secret is None:
            raise SecurityError(f"{self.keys_dir / f'{SERVER}.key_secret'}: missing: these keys can connect "
                                f"but not serve")

    def check_client(self) -> None:
        """Raise :class:`SecurityError` unless these keys can connect."""
        if self.client_secret is None:
            raise SecurityError(f"{self.keys_dir / f'{CLIENT}.key_secret'}: missing: these keys can serve "
                                f"but not connect")

    @property
    def zap_domain(self) -> str:
        """The ZAP domain of this server key and client list: sockets sharing it admit the same clients."""
        digest = hashlib.sha256(self.server_public + b"".join(sorted(self.authorized))).hexdigest()
        return f"hil-{digest[:24]}"

    def apply_server(self, socket: zmq.Socket) -> None:
        """Before ``bind``: encrypt with the server's pair and admit only the authorized client keys."""
        self.check_server()
        _admit(socket.context, self.zap_domain, self.authorized)
        socket.zap_domain = self.zap_domain.encode()
        socket.curve_secretkey = self.server_secret
        socket.curve_publickey = self.server_public
        socket.curve_server = True

    def apply_client(self, socket: zmq.Socket) -> None:
        """Before ``connect``: talk only to the server holding ``server.key``'s secret, as the client pair."""
        self.check_client()
        socket.curve_serverkey = self.server_public
        socket.curve_publickey = self.client_public
        socket.curve_secretkey = self.client_secret


def create_keys(keys_dir: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write a server pair, a client pair and ``authorized/client.key`` (zmq.auth certificate files); returns
    the paths written. Existing keys are never replaced silently: ``overwrite=True`` is needed for that."""
    keys_dir = Path(keys_dir)
    names = [f"{SERVER}.key", f"{SERVER}.key_secret", f"{CLIENT}.key", f"{CLIENT}.key_secret"]
    targets = [keys_dir / name for name in names] + [keys_dir / AUTHORIZED / f"{CLIENT}.key"]
    existing = [path for path in targets if path.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{existing[0]}: exists; keys are not overwritten unless asked (--force)")
    if not keys_dir.is_dir():
        keys_dir.mkdir(parents=True, mode=0o700)
    (keys_dir / AUTHORIZED).mkdir(exist_ok=True)
    for role in (SERVER, CLIENT):
        _owner_only(keys_dir / f"{role}.key_secret")
        zmq.auth.create_certificates(keys_dir, role)
    shutil.copyfile(keys_dir / f"{CLIENT}.key", keys_dir / AUTHORIZED / f"{CLIENT}.key")
    return targets


class HandshakeWatch:
    """Why a secured client hears nothing: a socket monitor that remembers how the CURVE handshakes went.

    A refused key or a wrong server key looks, to a REQ socket, exactly like a server that is not there (no
    reply); the monitor tells them apart so that the timeout message can say which it was.
    """

    EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
              | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)

    def __init__(self, socket: zmq.Socket, security: Security | None):
        self._socket, self._security = socket, security  # None: a plain client, told when the server wants CURVE
        self._monitor = socket.get_monitor_socket(self.EVENTS)
        self._last: int | None = None

    def reason(self) -> str:
        """What the last handshake says about the silence ("" when it succeeded or none was tried)."""
        from zmq.utils.monitor import recv_monitor_message

        while self._monitor.poll(0):
            self._last = int(recv_monitor_message(self._monitor, zmq.NOBLOCK)["event"])
        if self._security is None:
            if self._last in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                              zmq.EVENT_HANDSHAKE_FAILED_AUTH):
                return ("the server is CURVE-secured and this client has no keys (give it the key directory "
                        "of `hil keys DIR`: a profile's keys:, a command's --keys)")
            return ""
        keys = self._security.keys_dir
        if self._last == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (f"the server refused this client's key ({keys / f'{CLIENT}.key'} is not in the server's "
                    f"{AUTHORIZED}/)")
        if self._last == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            return "the server does not speak CURVE (a plain server, or not ours)"
        if self._last == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            return (f"the CURVE handshake failed: the server there seems not to hold the secret of "
                    f"{keys / f'{SERVER}.key'} (another server, or other keys)")
        return ""

    def close(self) -> None:
        try:
            self._socket.disable_monitor()
        except zmq.ZMQError:  # the socket is already closed
            pass
        self._monitor.close(0)


def connect_client(kind: int, endpoint: str, security: Security | None, *,
                   watch_plain: bool = False) -> tuple[zmq.Socket, HandshakeWatch | None]:
    """A client socket of ``kind`` (LINGER 0) connected to ``endpoint``: plain, or CURVE with a HandshakeWatch so
    that a timeout can say why the server is silent (a plain one gets a watch too with ``watch_plain``, to say
    that the server wants keys). Nothing is left open when connecting fails."""
    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    watch = None
    try:
        if security is not None:
            security.apply_client(sock)
        if security is not None or watch_plain:
            watch = HandshakeWatch(sock, security)
        sock.connect(endpoint)
    except BaseException:
        if watch is not None:
            watch.close()
        sock.close(0)
        raise
    return sock, watch


def request_once(endpoint: str, data: bytes, timeout_s: float,
                 security: Security | None) -> tuple[bytes | None, str]:
    """One REQ round trip on a socket of its own (closed after): ``(reply, "")``, or ``(None, why)`` when nothing
    answered within ``timeout_s``, ``why`` being what the CURVE handshake says ("" when it says nothing)."""
    sock, watch = connect_client(zmq.REQ, endpoint, security)
    try:
        if not send_within(sock, data, timeout_s) or not sock.poll(int(timeout_s * 1000)):
            return None, watch.reason() if watch is not None else ""
        return sock.recv(), ""
    finally:
        if watch is not None:
            watch.close()
        sock.close(0)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def check_loopback_unless_secured(endpoint: str, security: Security | None, flag: str, subject: str) -> None:
    """A server binds loopback unless it is CURVE-secured: whoever reaches a plain socket off this machine may use
    it. ValueError naming the option (``flag``, e.g. ``hil sim --control``) and the endpoint otherwise; ipc:// and
    inproc:// stay on this machine."""
    if not endpoint.startswith("tcp://") or security is not None:
        return
    host = endpoint[len("tcp://"):].rsplit(":", 1)[0]
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"{flag} {endpoint}: off loopback {subject} needs --keys DIR (CURVE: only authorized "
                         "clients are admitted); bind tcp://127.0.0.1:* otherwise")


def stop_authenticator(context: zmq.Context | None = None) -> None:
    """Stop the ZAP handler of ``context`` (default: the global one), e.g. before ``context.term()``, which would
    otherwise wait for its sockets forever. The next secured server starts a new one."""
    context = context or zmq.Context.instance()
    with _AUTH_LOCK:
        entry = _AUTHENTICATORS.pop(id(context), None)
    if entry is not None:
        entry[0].stop()


class _Admission:
    """The ZAP credentials callback of one domain: a client is in if its public key is authorized."""

    def __init__(self, authorized: frozenset[bytes]):
        self.authorized = authorized
        self._refused: set[bytes] = set()  # a refused client retries; say so once per key, not every retry

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.authorized:
            return True
        if key not in self._refused:
            self._refused.add(key)
            log.warning("bridge security: refused a client with unauthorized key %s (ZAP domain %s)",
                        key.decode("ascii", "replace"), domain)
        return False


_AUTH_LOCK = threading.Lock()
_AUTHENTICATORS: dict[int, tuple[ThreadAuthenticator, dict[str, _Admission]]] = {}  # id(context) -> (auth, domains)


def _admit(context: zmq.Context, domain: str, authorized: frozenset[bytes]) -> None:
    """Start ``context``'s authenticator once and have it admit ``authorized`` on ``domain``."""
    with _AUTH_LOCK:
        entry = _AUTHENTICATORS.get(id(context))
        if entry is None or not entry[0].is_alive():
            if entry is not None:
                entry[0].stop()
            auth = ThreadAuthenticator(context, log=log.getChild("zap"))
            try:
                auth.start()
            except zmq.ZMQError as exc:
                raise RuntimeError(f"bridge security: cannot start the ZAP handler ({exc}); another one is bound in "
                                   f"this ZeroMQ context: start every secured socket through bridge.security") from exc
            entry = _AUTHENTICATORS[id(context)] = (auth, {})  # the auth keeps the context alive: ids stay unique
        auth, domains = entry
        if domain not in domains:
            domains[domain] = _Admission(authorized)
            auth.configure_curve_callback(domain, domains[domain])


def _owner_only(path: Path) -> None:
    """Create ``path`` empty and 0600 before zmq.auth writes the secret into it (it would keep the umask's mode,
    and chmod afterwards would leave a moment in which others could read the secret)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def _read(path: Path) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise SecurityError(f"{path}: missing" + (" (not a file)" if path.exists() else ""))
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        reason = "no public-key line" if isinstance(exc, ValueError) else f"cannot be read ({exc})"
        raise SecurityError(f"{path}: not a ZeroMQ certificate: {reason}") from None
    _check_key(path, "public-key", public)
    if secret is not None:
        _check_key(path, "secret-key", secret)
    return public, secret


def _check_key(path: Path, what: str, key: bytes) -> None:
    if not _Z85_KEY.fullmatch(key.decode("ascii", "replace")):
        raise SecurityError(f"{path}: corrupt {what}: a key is 40 Z85 characters, this one has {len(key)}"
                            + (" and some outside Z85" if len(key) == 40 else ""))


def _read_public(path: Path, expected: bytes | None = None) -> bytes:
    public, _ = _read(path)
    if expected is not None and public != expected:
        raise SecurityError(f"{path}: its public key is not the one in {path.name}_secret: the pair was mixed up")
    return public


def _read_pair(path: Path, expected_public: bytes | None = None) -> tuple[bytes | None, bytes | None]:
    """(public, secret) of a secret certificate, or (None, None) if the file is not there."""
    if not path.exists():
        return None, None
    public, secret = _read(path)
    if secret is None:
        raise SecurityError(f"{path}: no secret-key line (is it a public .key file renamed?)")
    if zmq.curve_public(secret) != public:
        raise SecurityError(f"{path}: the secret key does not belong to the public key next to it")
    if expected_public is not None and public != expected_public:
        raise SecurityError(f"{path}: its public key differs from {path.with_suffix('.key').name}: the files "
                            f"come from different key pairs")
    if os.name == "posix" and path.stat().st_mode & 0o077:
        log.warning("bridge security: %s is readable by other users (chmod 600 it)", path)
    return public, secret


def _read_authorized(directory: Path) -> frozenset[bytes]:
    """Every *.key in ``directory`` (the zmq.auth convention); a server that admits nobody is a mistake."""
    if not directory.is_dir():
        raise SecurityError(f"{directory}: missing: the server needs the directory of authorized client keys")
    keys = frozenset(_read(path)[0] for path in sorted(directory.glob("*.key")))
    if not keys:
        raise SecurityError(f"{directory}: no client keys (*.key files): nobody could connect")
    return keys
