"""The live and replay Foxglove servers against a hostile web page, a client that stops reading, and retries asked
for at awkward moments.

Every server here is the real one (foxglove-sdk behind hil's gate, trial/foxglove_live/gate.py) on loopback; the
clients are real sockets: hand-written HTTP upgrade requests for the handshake checks, a raw socket that subscribes
to everything and then never reads, and ``websockets`` (tests/foxglove_client.py) for the protocol. Retries run
``hil trial`` children for real.
"""
from __future__ import annotations

import base64
import io
import json
import os
import socket
import struct
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from foxglove_client import PAUSE, PLAY, FoxgloveClient
from waiting import wait_for

from hil.trial import Trial
from hil.trial.foxglove_live.live import LiveServer
from hil.trial.foxglove_live.replay import ReplayServer
from hil.trial.record.log import read_log

DRIVE = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            robot.mode = "{mode}"
            robot.base.drive(0.2, 0.0)
''')


def _upgrade(port: int, *, origin: str | None = None, protocols: str = "foxglove.sdk.v1") -> str:
    """A WebSocket upgrade request as a browser (with ``origin``) or a script (without) sends it; the status line
    and headers of the answer."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET / HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: {protocols}"]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return head.decode("latin-1")


def _service(client, name):
    return next(s for doc in client.op("advertiseServices") for s in doc["services"] if s["name"] == name)


def _call(client, service, call_id: int, request: dict) -> dict:
    """A service call's answer ({"ok": payload} or {"failed": message})."""
    client.call_service(service["id"], call_id, json.dumps(request).encode())
    return _answer(client, call_id)


def _answer(client, call_id: int) -> dict:
    def answered():
        for r in client.responses:
            if r["call"] == call_id:
                return {"ok": json.loads(r["payload"])}
        for d in client.op("serviceCallFailure"):
            if d["callId"] == call_id:
                return {"failed": d["message"]}
        return None

    return wait_for(answered, what=f"the answer to call {call_id}")


def _recorded(tmp_path: Path, duration: float = 4.0) -> Path:
    (tmp_path / "own.py").write_text(DRIVE.format(mode="own"))
    assert Trial(tmp_path / "own.py", map="lab", start=(0, 0, 0), duration=duration,
                 state_every=1.0).run(tmp_path / "t").ok
    return tmp_path / "t"


def test_a_web_page_from_another_site_is_refused_at_the_handshake_and_foxglove_is_admitted():
    """A browser tells the server which page opened the socket (Origin): any site's page could otherwise steer the
    trial and start retries. Refused with 403 and a line naming the origin and the option; Foxglove's app, an
    origin given with --foxglove-origin and a client that is not a web page (no Origin) are admitted."""
    err = io.StringIO()
    server = LiveServer("127.0.0.1", 0, err=err, origins=("https://viewer.example.org",))
    try:
        for hostile in ("https://evil.example", "null", "http://127.0.0.1:9999", "https://app.foxglove.dev.evil.io"):
            answer = _upgrade(server.port, origin=hostile)
            assert answer.startswith("HTTP/1.1 403"), (hostile, answer)
        for admitted in ("https://app.foxglove.dev", "https://APP.foxglove.dev/", "https://viewer.example.org",
                         None):
            answer = _upgrade(server.port, origin=admitted)
            assert answer.startswith("HTTP/1.1 101"), (admitted, answer)
            assert "sec-websocket-protocol: foxglove.sdk.v1" in answer.lower()
        assert _upgrade(server.port, protocols="chat").startswith("HTTP/1.1 400")
        with pytest.raises(Exception, match="403"):  # the protocol client as a page from elsewhere would be
            FoxgloveClient(server.url, origin="https://evil.example")
        with FoxgloveClient(server.url, origin="https://app.foxglove.dev") as client:
            assert wait_for(lambda: client.op("serverInfo"), what="serverInfo")[0]["name"]
        if sys.platform.startswith("linux"):  # the SDK's own port is on an address a page cannot guess
            assert server.gate.upstream[0] != "127.0.0.1" and server.gate.upstream[0].startswith("127.")
    finally:
        server.close()
    said = err.getvalue()
    assert "'https://evil.example' may not connect" in said and "--foxglove-origin" in said, said


def test_a_client_offering_only_the_original_subprotocol_connects_subscribes_and_receives(tmp_path):
    """``foxglove.websocket.v1`` (@foxglove/ws-protocol clients, Lichtblick, older Foxglove) as well as
    ``foxglove.sdk.v1``: the client is told the name it offered and receives the log's own bytes."""
    (tmp_path / "own.py").write_text(DRIVE.format(mode="own"))
    server = LiveServer("127.0.0.1", 0, start_paused=True, duration_s=2.0)
    trial = Trial(tmp_path / "own.py", map="lab", start=(0, 0, 0), duration=2.0)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(r=trial.run(tmp_path / "t", taps=server.taps,
                                                                    hooks=server.hooks)), daemon=True)
    thread.start()
    try:
        with FoxgloveClient(server.url, subprotocols=("foxglove.websocket.v1",)) as client:
            assert client.ws.subprotocol == "foxglove.websocket.v1"
            subs = client.subscribe(client.channels(wait_for_topics=("/robot/model", "/trial/meta")))
            wait_for(lambda: server.robot is not None, what="the trial's first cycle")
            # a step to 0.5 s and a hold: /clock is advertised when first written, and subscribed to before the
            # rest of the trial plays (a free run of 2 s could end before a late subscription on a busy machine)
            client.playback(PAUSE, seek_ns=500_000_000)
            wait_for(lambda: (client.last_time() or 0) >= 500_000_000 and server.control.paused, what="the step")
            late = client.channels(wait_for_topics=("/clock",))
            if "/clock" not in subs:  # advertised at the first look when the first tick came before it
                subs.update(client.subscribe({"/clock": late["/clock"]}))
            client.playback(PLAY)
            thread.join(timeout=300)
            wait_for(lambda: len(client.received(subs["/clock"])) > 5, what="/clock messages")
            got = client.received(subs["/clock"])
            model = client.received(subs["/robot/model"])
    finally:
        server.close()
    assert box["r"].ok, box["r"].error
    log = read_log(tmp_path / "t" / "trial.mcap")
    assert log.complete
    from mcap.reader import make_reader

    with open(tmp_path / "t" / "trial.mcap", "rb") as f:
        logged = {(m.log_time, bytes(m.data)) for _, c, m in make_reader(f).iter_messages() if c.topic == "/clock"}
    assert set(got) <= logged and model, "the log's own bytes"


def test_a_retry_runs_only_the_trials_own_controller_unless_allowed_and_a_named_one_is_checked(tmp_path):
    """``{"controller": FILE, "run": true}`` runs FILE as the user: refused unless the server was started with
    --foxglove-allow-controller; with it, what is named must be a regular readable .py file of bounded size
    (/dev/zero, a .py link to it and a 2 MiB file are refused, one line each). Nothing is written or started."""
    folder = _recorded(tmp_path)
    (tmp_path / "other.py").write_text(DRIVE.format(mode="other"))
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "big.py").write_text("# padding\n" * (1 << 18))
    strict = ReplayServer(folder, "127.0.0.1", 0, err=io.StringIO())
    try:
        with FoxgloveClient(strict.url) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"), what="services")
            answer = _call(client, retry, 1, {"controller": str(tmp_path / "other.py"), "run": True})
    finally:
        strict.close()
    assert "runs only the trial's own controller" in answer["failed"] and "--foxglove-allow-controller" in \
        answer["failed"], answer
    assert not strict.retries.children and not list(folder.glob("retry-from-*")), "nothing written or started"

    allowing = ReplayServer(folder, "127.0.0.1", 0, err=io.StringIO(), allow_controller=True)
    try:
        with FoxgloveClient(allowing.url) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"), what="services")
            refused = {name: _call(client, retry, k, {"controller": name, "run": True})
                       for k, name in enumerate(["/dev/zero", str(tmp_path / "zero.py"), str(tmp_path / "big.py"),
                                                 str(tmp_path / "missing.py")], start=2)}
    finally:
        allowing.close()
    why = {name: answer.get("failed", "") for name, answer in refused.items()}
    assert "Python file (x.py)" in why["/dev/zero"], why
    assert "not a regular file" in why[str(tmp_path / "zero.py")], why
    assert "a controller is at most" in why[str(tmp_path / "big.py")], why
    assert "No such file" in why[str(tmp_path / "missing.py")], why
    assert all(w and "\n" not in w for w in why.values()), why
    assert not allowing.retries.children and not list(folder.glob("retry-from-*")), "nothing written or started"


def _frame(text: str) -> bytes:
    """A masked client text frame."""
    data, mask = text.encode(), os.urandom(4)
    n = len(data)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def _read_frame(sock: socket.socket, buf: bytearray) -> tuple[int, bytes]:
    def need(n):
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf.extend(chunk)

    need(2)
    op, n = buf[0] & 0x0F, buf[1] & 0x7F
    start = 2
    if n == 126:
        need(4)
        n, start = struct.unpack(">H", bytes(buf[2:4]))[0], 4
    elif n == 127:
        need(10)
        n, start = struct.unpack(">Q", bytes(buf[2:10]))[0], 10
    need(start + n)
    payload = bytes(buf[start:start + n])
    del buf[:start + n]
    return op, payload


def test_a_client_that_stops_reading_cannot_hold_the_trial_past_a_bounded_close(tmp_path):
    """A client subscribes to every channel (the cameras' images and depth included), then never reads again: the
    trial runs to its end and the server closes within its bound (foxglove-sdk's own stop waits for that client's
    socket to take its close frame, for ever)."""
    (tmp_path / "own.py").write_text(DRIVE.format(mode="own"))
    server = LiveServer("127.0.0.1", 0, start_paused=True, duration_s=3.0, err=io.StringIO())
    trial = Trial(tmp_path / "own.py", map="lab", start=(0, 0, 0), duration=3.0, camera_rate=10.0,
                  camera_depth=True)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(r=trial.run(tmp_path / "t", taps=server.taps,
                                                                    hooks=server.hooks)), daemon=True)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's sends stall soon
    try:
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
                     f"{base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n".encode())
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            buf.extend(sock.recv(1))
        assert buf.startswith(b"HTTP/1.1 101"), buf
        buf.clear()
        thread.start()
        subscribed: set[int] = set()
        topics: set[str] = set()
        sock.settimeout(120)
        played = False
        while not played or not {"/foxglove/head_camera/image", "/foxglove/head_camera/depth"} <= topics:
            if not played and server.robot is not None:  # the trial's first cycle is done: play
                sock.sendall(bytes([0x82, 0x80 | 19]) + _masked_play())
                played = True
            op, payload = _read_frame(sock, buf)
            if op != 1:
                continue
            doc = json.loads(payload)
            if doc.get("op") == "advertise":
                new = [c for c in doc["channels"] if c["id"] not in subscribed]
                sock.sendall(_frame(json.dumps({"op": "subscribe", "subscriptions": [
                    {"id": c["id"], "channelId": c["id"]} for c in new]})))
                subscribed |= {c["id"] for c in new}
                topics |= {c["topic"] for c in new}
        # from here on the client reads nothing
        thread.join(timeout=600)
        assert not thread.is_alive() and box["r"].ok, box.get("r") and box["r"].error
        closer = threading.Thread(target=server.close, daemon=True)
        closer.start()
        closer.join(timeout=60)  # a hang bound, not a timing check: the close itself is bounded to ~2 s
        assert not closer.is_alive(), "the server's close waits on a client that does not read"
    finally:
        sock.close()
        server.close() if thread.is_alive() else None
    log = read_log(tmp_path / "t" / "trial.mcap")
    assert log.complete and "/foxglove/head_camera/depth" in log.messages


def _masked_play() -> bytes:
    """A binary playback request (play, speed 1, no seek, no request id) as a masked client payload of 19 bytes."""
    data = bytes([3, 0]) + struct.pack("<fBQI", 1.0, 0, 0, 0)
    mask = os.urandom(4)
    return mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def test_a_live_retry_past_the_last_state_is_refused_and_one_near_the_end_is_answered(tmp_path):
    """A running trial has states up to its last save: a run at a later time is refused, saying so (it used to be
    answered as running while its child had died). A run asked for just before the trial ends is answered (the
    server's close waits for it): running, from its state, its child served."""
    (tmp_path / "own.py").write_text(DRIVE.format(mode="own"))
    server = LiveServer("127.0.0.1", 0, start_paused=True, duration_s=4.0, err=io.StringIO())
    trial = Trial(tmp_path / "own.py", map="lab", start=(0, 0, 0), duration=4.0, state_every=1.0)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(r=trial.run(tmp_path / "t", taps=server.taps,
                                                                    hooks=server.hooks)), daemon=True)
    thread.start()
    closer = threading.Thread(target=server.close, daemon=True)
    try:
        with FoxgloveClient(server.url) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"), what="services")
            wait_for(lambda: server.robot is not None, what="the first cycle")
            client.playback(PAUSE, seek_ns=2_500_000_000)
            wait_for(lambda: server.now_s >= 2.5 - 1e-9 and server.control.paused, what="held at 2.5 s")
            past = _call(client, retry, 1, {"run": True})
            client.playback(PAUSE, seek_ns=3_000_000_000)
            wait_for(lambda: server.now_s >= 3.0 - 1e-9 and server.control.paused, what="held at 3 s")
            client.call_service(retry["id"], 2, b'{"run": true}')
            client.playback(PLAY)  # the trial ends while its retry starts, and its server closes
            thread.join(timeout=300)
            closer.start()
            near = _answer(client, 2)
    finally:
        closer.join(timeout=300) if closer.is_alive() else server.close()
    assert box["r"].ok, box["r"].error
    assert "outside the log" in past["failed"] and "still running" in past["failed"], past
    assert not list(tmp_path.glob("t-from-2.5s*")), "nothing started for the refused time"
    assert "ok" in near, near
    running = near["ok"]["running"]
    assert near["ok"]["t"] == 3.0 and running["foxglove"].startswith("ws://127.0.0.1:")
    retried = read_log(Path(running["out"]) / "trial.mcap")  # ended with its server, its log complete
    assert retried.complete and retried.messages["/trial/meta"][0].data["resumed_from"]["state_t"] == 3.0


def test_two_retries_at_once_each_get_their_own_trial_file_and_child(tmp_path):
    """Call A (controller a.py, run) and 0.3 s later B (controller b.py) at the same time of a replay: each answer
    names its own trial file, and the child each answer points at runs that answer's controller."""
    folder = _recorded(tmp_path)
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(DRIVE.format(mode=name))
    replay = ReplayServer(folder, "127.0.0.1", 0, err=io.StringIO(), allow_controller=True)
    try:
        with FoxgloveClient(replay.url) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"), what="services")
            client.playback(PAUSE, seek_ns=2_000_000_000, request_id="seek")
            wait_for(lambda: [s for s in client.states if s["request_id"] == "seek"], what="the seek")
            client.call_service(retry["id"], 1, json.dumps({"controller": str(tmp_path / "a.py"), "run": True}).encode())
            time.sleep(0.3)
            client.call_service(retry["id"], 2, json.dumps({"controller": str(tmp_path / "b.py"), "run": True}).encode())
            a, b = (_answer(client, k)["ok"] for k in (1, 2))
        metas = {}
        for name, answer in (("a", a), ("b", b)):
            with FoxgloveClient(answer["running"]["foxglove"]) as child:
                channel = child.channels(wait_for_topics=("/trial/meta",))["/trial/meta"]
                sub = child.subscribe({"/trial/meta": channel})["/trial/meta"]
                metas[name] = json.loads(wait_for(lambda: child.received(sub), what="the child's meta")[0][1])
    finally:
        replay.close()
    import yaml

    assert a["trial_file"] != b["trial_file"] and a["running"]["out"] != b["running"]["out"]
    for name, answer in (("a", a), ("b", b)):
        assert yaml.safe_load(Path(answer["trial_file"]).read_text())["controller"] == str(tmp_path / f"{name}.py")
        assert metas[name]["controller"].endswith(f"{name}.py"), (name, metas[name]["controller"])
        assert f"{name}.py" in answer["command"]
