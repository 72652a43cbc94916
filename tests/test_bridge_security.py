"""CURVE on the bridge (bridge/security.py): real ZeroMQ sockets on loopback, keys made by ``hil keys``.

An authorized world ticks an encrypted crowd end to end; a client with a key the server never authorized, a
client for another server and a plain client all get no answer (named errors, never a hang), and the server
keeps serving the authorized client afterwards. The lockstep clock works the same way. Key directories that
are missing a file or hold a corrupt one fail with the file's name before anything binds.
"""
from __future__ import annotations

import queue
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq

from hil.bridge.crowd_link import CrowdClient, CrowdLinkError
from hil.bridge.lockstep import ClockServer, LockstepCore, LockstepError, RemoteParticipant
from hil.bridge.security import Security, SecurityError, create_keys, curve_available
from hil.crowd.agents import AgentSpec
from hil.crowd.serve import serve
from hil.crowd.sim import CrowdSim
from crowd_helpers import hall_map
from waiting import needs


@pytest.fixture
def curve() -> None:
    """CURVE in this libzmq (pyzmq's wheels bundle one built with libsodium): without it a test is skipped on a
    developer's machine and fails under CI, as every test that needs what the machine lacks (waiting.needs)."""
    if not curve_available():
        needs("this libzmq has no CURVE: install pyzmq from its wheels (libzmq built with libsodium)")


needs_curve = pytest.mark.usefixtures("curve")  # requested before the test's own fixtures (keys need CURVE)
LOOPBACK = "tcp://127.0.0.1:*"
ROBOT = {"x": 0.0, "y": -5.0, "yaw": 0.0, "vx": 0.0, "vy": 0.0, "radius": 0.3}
REFUSED_WAIT_S = 2.0  # how long a refused client waits for an answer that never comes (it fails in milliseconds)
START_TIMEOUT_S = 10.0


@pytest.fixture
def keys(tmp_path: Path) -> Security:
    create_keys(tmp_path / "keys")
    return Security.load(tmp_path / "keys")


def intruder(tmp_path: Path, server_key_of: Security | None) -> Security:
    """A connecting side with a key pair of its own, never authorized by the real server. With
    ``server_key_of`` it knows the real server's public key (so only authorization stops it); without, it
    expects another server."""
    other = tmp_path / "intruder"
    create_keys(other)
    if server_key_of is not None:
        shutil.copyfile(server_key_of.keys_dir / "server.key", other / "server.key")
        (other / "server.key_secret").unlink()  # a client-only directory: what a connecting machine holds
    return Security.load(other)


def tiny_crowd() -> CrowdSim:
    """One person walking east across an open hall: enough to see intents come back."""
    sim = CrowdSim(hall_map(), seed=1)
    person = sim.add_agent(AgentSpec("adult", 0.25, 1.3, (-10.0, 0.0), exit_on_arrival=False))
    sim.move(person, (10.0, 0.0))
    return sim


@contextmanager
def served_crowd(security: Security | None):
    """``serve()`` in a thread; yields (endpoint, result) where result gets the tick count (or the error)."""
    sim, lines, result = tiny_crowd(), queue.Queue(), {}

    def run() -> None:
        try:
            result["ticks"] = serve(sim, LOOPBACK, ready=lines.put, security=security)
        except Exception as exc:  # reported to the test, not lost in the thread
            result["error"] = exc
            lines.put("")

    thread = threading.Thread(target=run, name="served-crowd", daemon=True)
    thread.start()
    line = lines.get(timeout=START_TIMEOUT_S)
    if "error" in result:
        raise result["error"]
    endpoint = line.split()[1]
    try:
        yield endpoint, result
    except BaseException:  # the test failed before its client said bye: say it now, so the socket closes
        CrowdClient(endpoint, timeout_s=START_TIMEOUT_S, security=security).close()
        raise
    finally:
        thread.join(START_TIMEOUT_S)
    assert not thread.is_alive(), "the served crowd did not stop after bye"


def ticks(client: CrowdClient, count: int, start: int = 1) -> list:
    out = []
    for k in range(start, start + count):
        t, people, payload = client.tick(0.1 * k, ROBOT, [])
        out.append((t, people, payload))
    return out


# --- the crowd link ---------------------------------------------------------------------------------------------
@needs_curve
def test_an_encrypted_lockstep_crowd_tick_works_end_to_end(keys):
    with served_crowd(keys) as (endpoint, result):
        client = CrowdClient(endpoint, timeout_s=START_TIMEOUT_S, security=keys)
        replies = ticks(client, 5)
        client.close()
    assert result == {"ticks": 5}
    assert [round(t, 6) for t, _, _ in replies] == [0.1, 0.2, 0.3, 0.4, 0.5], "the crowd stepped to the world's time"
    people = replies[-1][1]
    assert len(people) == 1 and people[0].vx > 0, "the walker's intent came back over the encrypted link"


@needs_curve
def test_unauthorized_and_plain_clients_get_no_answer_and_the_crowd_keeps_serving(keys, tmp_path, caplog):
    stranger = intruder(tmp_path, server_key_of=keys)
    with served_crowd(keys) as (endpoint, result):
        refused = CrowdClient(endpoint, timeout_s=REFUSED_WAIT_S, security=stranger)
        # the refusal lands before the send (no connection to send on) or after it (no answer), as the handshake
        # and the send race: either way the message names it
        with pytest.raises(CrowdLinkError, match=f"the crowd at {endpoint} (did not answer|took no tick)") as err:
            refused.tick(0.1, ROBOT, [])
        refused.close()
        assert "refused this client's key" in str(err.value)
        assert any("refused a client with unauthorized key" in r.getMessage() for r in caplog.records)

        plain = CrowdClient(endpoint, timeout_s=REFUSED_WAIT_S)
        with pytest.raises(CrowdLinkError, match=f"the crowd at {endpoint} (did not answer|took no tick)"):
            plain.tick(0.1, ROBOT, [])
        plain.close()

        client = CrowdClient(endpoint, timeout_s=START_TIMEOUT_S, security=keys)
        replies = ticks(client, 3)
        client.close()
    assert result == {"ticks": 3}, "only the authorized client's ticks reached the crowd"
    assert round(replies[-1][0], 6) == 0.3


@needs_curve
def test_a_client_expecting_another_server_is_told_so(keys, tmp_path):
    elsewhere = intruder(tmp_path, server_key_of=None)  # authorized nowhere here, and a different server key
    with served_crowd(keys) as (endpoint, result):
        client = CrowdClient(endpoint, timeout_s=REFUSED_WAIT_S, security=elsewhere)
        with pytest.raises(CrowdLinkError, match=r"seems not to hold the secret of .*server\.key"):
            client.tick(0.1, ROBOT, [])
        client.close()
        CrowdClient(endpoint, timeout_s=START_TIMEOUT_S, security=keys).close()
    assert result == {"ticks": 0}


@needs_curve
def test_client_only_keys_cannot_serve_and_nothing_binds(keys, tmp_path):
    stranger = intruder(tmp_path, server_key_of=keys)
    with pytest.raises(SecurityError, match=r"intruder/server\.key_secret: missing"), served_crowd(stranger):
        pass


@needs_curve
def test_a_world_from_a_sim_url_with_keys_ticks_its_crowd_encrypted(keys):
    from hil.runtime.transports import open_transport

    with served_crowd(keys) as (endpoint, result):
        transport = open_transport(f"sim://commbot?clock=sim&crowd={endpoint}&keys={keys.keys_dir}")
        try:
            transport.embodied.world.advance_to(0.5)
            crowd = transport.embodied.crowd
            ticked, people = crowd.ticks, crowd.states()
        finally:
            transport.close()  # says bye to the crowd
    assert ticked >= 5 and result == {"ticks": ticked}
    assert len(people) == 1 and people[0]["type"] == "adult", "the hall's walker lives in the world"


# --- the lockstep clock -------------------------------------------------------------------------------------------
@needs_curve
def test_the_lockstep_clock_over_curve(keys, tmp_path):
    advanced: list[float] = []
    server = ClockServer(LockstepCore(advanced.append), LOOPBACK, security=keys)
    try:
        participant = RemoteParticipant(server.endpoint, "controller", timeout_s=START_TIMEOUT_S, security=keys)
        assert participant.sleep_until(0.25) == (0.25, 0)
        assert participant.sleep_until(0.5) == (0.5, 0)
        assert advanced == [0.25, 0.5]

        with pytest.raises(LockstepError, match=f"clock master at {server.endpoint} did not answer 'crowd'.*refused"):
            RemoteParticipant(server.endpoint, "crowd", timeout_s=REFUSED_WAIT_S,
                              security=intruder(tmp_path, server_key_of=keys))
        with pytest.raises(LockstepError, match="did not answer 'plain'"):
            RemoteParticipant(server.endpoint, "plain", timeout_s=REFUSED_WAIT_S)

        assert participant.sleep_until(0.75) == (0.75, 0), "the clock still serves the authorized participant"
        participant.close()
    finally:
        server.close()
    assert list(server.core.participants) == [], "the refused never joined; the authorized one said bye"


@needs_curve
def test_a_clock_server_with_bad_keys_fails_before_binding(keys):
    (keys.keys_dir / "authorized" / "client.key").unlink()
    with pytest.raises(SecurityError, match=r"authorized: no client keys"):
        ClockServer(LockstepCore(lambda t: None), LOOPBACK, security=Security.load(keys.keys_dir))


# --- hil keys and bad key directories ---------------------------------------------------------------------------
@needs_curve
def test_hil_keys_writes_loadable_keys(tmp_path, capsys):
    from hil.cli import main

    target = tmp_path / "lab-keys"
    assert main(["keys", str(target)]) == 0
    out = capsys.readouterr().out
    security = Security.load(target)
    security.check_server()
    security.check_client()
    assert security.client_public in security.authorized
    for name in ("server.key", "server.key_secret", "client.key", "client.key_secret", "authorized/client.key"):
        assert str(target / name) in out
    assert f"--keys {target}" in out and f"keys={target}" in out, "it says how to use them"
    assert (target / "server.key_secret").stat().st_mode & 0o077 == 0, "secrets are for their owner only"
    assert "secret" not in repr(security).lower().replace("key_secret", ""), "no secret in the repr"

    assert main(["keys", str(target)]) == 2, "existing keys are not replaced unless asked"
    assert "exists" in capsys.readouterr().err
    assert main(["keys", str(target), "--force"]) == 0
    assert Security.load(target).server_public != security.server_public


def _replace_line(path: Path, prefix: str, line: str) -> None:
    text = "\n".join(line if row.strip().startswith(prefix) else row for row in path.read_text().splitlines())
    path.write_text(text + "\n")


BREAKAGES = {
    "missing server.key": (lambda d: (d / "server.key").unlink(), r"server\.key: missing"),
    "empty server secret": (lambda d: (d / "server.key_secret").write_text(""),
                            r"server\.key_secret: not a ZeroMQ certificate: no public-key line"),
    "corrupt client secret": (lambda d: _replace_line(d / "client.key_secret", "secret-key",
                                                      '    secret-key = "not a key"'),
                              r"client\.key_secret: corrupt secret-key"),
    "secret of another pair": (lambda d: _replace_line(d / "client.key_secret", "secret-key",
                                                       (d / "server.key_secret").read_text().split("\n")[-2]),
                               r"client\.key_secret: the secret key does not belong"),
    "corrupt authorized key": (lambda d: _replace_line(d / "authorized" / "client.key", "public-key",
                                                       '    public-key = "short"'),
                               r"authorized/client\.key: corrupt public-key"),
    "no authorized dir": (lambda d: shutil.rmtree(d / "authorized"), r"authorized: missing"),
    "no directory": (lambda d: shutil.rmtree(d), r"no such key directory"),
}


@needs_curve
@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_missing_or_corrupt_key_file_is_named(keys, breakage):
    damage, message = BREAKAGES[breakage]
    damage(keys.keys_dir)
    with pytest.raises(SecurityError, match=message):
        Security.load(keys.keys_dir)


@needs_curve
def test_a_client_without_its_secret_fails_when_asked_to_connect(keys):
    (keys.keys_dir / "client.key_secret").unlink()
    serving_only = Security.load(keys.keys_dir)
    with pytest.raises(SecurityError, match=r"client\.key_secret: missing"):
        CrowdClient("tcp://127.0.0.1:9", security=serving_only)


@needs_curve
def test_bad_keys_stop_the_commands_before_anything_binds(keys, capsys):
    from hil.cli import main
    from hil.runtime.transports import open_transport
    from hil.runtime.transports.base import TransportError

    (keys.keys_dir / "server.key_secret").write_text("garbage\n")
    assert main(["crowd", "--map", "arcade", "--serve", LOOPBACK, "--keys", str(keys.keys_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", "nothing was bound, so no 'crowd ENDPOINT' line"
    assert "server.key_secret: not a ZeroMQ certificate" in captured.err

    assert main(["sim", "commbot", "--tcp", "0", "--clock", "sim", "--clock-endpoint", LOOPBACK,
                 "--keys", str(keys.keys_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "server.key_secret" in captured.err

    with pytest.raises(SecurityError, match=r"server\.key_secret"):
        open_transport(f"sim://commbot?clock=sim&crowd=tcp://127.0.0.1:9&keys={keys.keys_dir}")
    with pytest.raises(TransportError, match="keys= secures the crowd link: it needs crowd="):
        open_transport(f"sim://commbot?keys={keys.keys_dir}")


def test_without_curve_loading_keys_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(zmq, "has", lambda capability: False)
    with pytest.raises(SecurityError, match="without CURVE"):
        Security.load(tmp_path)


def test_a_profile_with_keys_joins_a_secured_simulator_clock_and_a_plain_one_is_refused(keys, tmp_path):
    from conftest import SimProcess

    from hil.runtime import Robot

    device = SimProcess("--pty", "--clock", "sim", "--clock-endpoint", "tcp://127.0.0.1:*", "--keys",
                        str(keys.keys_dir), assembly="commbot")
    try:
        endpoint = device.next_line().split()[1]
        profile = {"bus": device.where, "clock": "sim", "clock_endpoint": endpoint, "semantics": "commbot",
                   "cache_dir": str(tmp_path / "cache"), "keys": str(keys.keys_dir), "stall_timeout_s": 2.0}
        with Robot.open(profile) as robot:
            times = [tick.time for tick in robot.loop(hz=10, duration_s=0.5)]
        assert times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4]), "the simulator's clock paced the secured controller"
        del profile["keys"]
        with pytest.raises(LockstepError, match=endpoint):
            Robot.open(profile)
    finally:
        device.stop()


@needs_curve
def test_one_shot_requests_to_a_curve_server_without_its_key_give_up_instead_of_blocking(keys):
    """A REQ socket whose handshake fails has no pipe to send on, and a plain send blocks for ever (a suite worker
    hung 30 minutes on it): ``bind.send_within`` waits for one within the timeout and sends without blocking,
    and the one-shot requests (``request_once``: ``clock_status``, ``hil sim fault``; the real-time crowd's
    ``ask``) answer "nothing" instead. The waits are bounded by the requests' own timeouts."""
    from hil.bridge.bind import bind_server, send_within
    from hil.bridge.realtime import LinkError, ask
    from hil.bridge.security import request_once

    server, endpoint = bind_server(zmq.REP, LOOPBACK, keys)
    try:
        for _ in range(5):
            reply, why = request_once(endpoint, b"status", 0.5, None)
            assert reply is None, "a plain client was answered by a CURVE server"
        with pytest.raises(LinkError, match="did not answer 'status'"):
            ask(endpoint, "status", timeout_s=0.5)
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue only to a finished connection, as after a refused handshake
        sock.connect("tcp://127.0.0.1:1")  # nothing listens: no pipe, ever
        assert send_within(sock, b"x", 0.3) is False
        sock.close(0)
    finally:
        server.close(0)
