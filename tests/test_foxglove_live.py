"""--foxglove, live: a real WebSocket client speaking the Foxglove protocol watches and steers a running trial.

The trial is real (pybullet in this process, the lockstep sim clock, the recorder writing trial.mcap); the
server is foxglove-sdk's; the client is ``websockets`` speaking the SDK's subprotocol (tests/foxglove_client.py).
The trial starts paused so the client subscribes before anything moves; the bytes it receives must be the MCAP's
own for the same topic and time, its Time messages sim time; pause must hold the sim time (two reads a second of
wall apart: a state check), play go on, a seek forward step to a time and hold; a parameter set reach the
controller and be in the log; wrong input be refused, recorded, and the trial go on.
"""
from __future__ import annotations

import json
import textwrap
import threading
import time
from pathlib import Path

from foxglove_client import PAUSE, PLAY, FoxgloveClient
from waiting import wait_for

from hil.trial import Trial
from hil.trial.foxglove_live.live import LiveServer
from hil.trial.record.log import read_log

TUNED = textwrap.dedent('''\
    """Drive east at a speed Foxglove may change; say the speed in robot.mode (recorded with the state)."""
    def main(robot):
        robot.declare_changeable(speed=0.2, label="east")
        for tick in robot.loop(hz=10):
            robot.mode = f"speed={robot.params['speed']:g}"
            robot.base.drive(robot.params["speed"], 0.0)
''')


def _start(tmp_path, duration=30.0):
    (tmp_path / "tuned.py").write_text(TUNED)
    server = LiveServer("127.0.0.1", 0, label="t", start_paused=True, duration_s=duration)
    trial = Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=duration)
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=trial.run(tmp_path / "t", taps=server.taps,
                                                                         hooks=server.hooks)), daemon=True)
    thread.start()
    return server, thread, box


def _mcap(tmp_path):
    from mcap.reader import make_reader

    with open(tmp_path / "t" / "trial.mcap", "rb") as f:
        out, schemas = {}, {}
        for schema, channel, message in make_reader(f).iter_messages():
            out.setdefault(channel.topic, []).append((message.log_time, bytes(message.data)))
            schemas[channel.topic] = (channel.message_encoding, schema.name, schema.encoding, bytes(schema.data))
        return out, schemas


def test_channels_bytes_time_pause_play_step_and_parameters(tmp_path):
    server, thread, box = _start(tmp_path)
    try:
        with FoxgloveClient(server.url) as client:
            info = client.op("serverInfo")
            wait_for(lambda: client.op("serverInfo"), what="serverInfo")
            info = client.op("serverInfo")[0]
            assert {"time", "playbackControl", "parameters", "services"} <= set(info["capabilities"])
            channels = client.channels(wait_for_topics=("/robot/model", "/foxglove/scene", "/foxglove/tf",
                                                        "/trial/meta"))
            subs = client.subscribe(channels)
            wait_for(lambda: server.robot is not None, what="the trial's first bus cycle")
            wait_for(lambda: client.received(subs["/robot/model"]), what="the t = 0 messages for a late subscriber")

            client.playback(PLAY, request_id="go")
            wait_for(lambda: (client.last_time() or 0) > 2e9, what="sim time past 2 s after play")
            # channels are advertised when their topic is first written: a client subscribes to the late ones as
            # Foxglove does (under load the first look can come before the first tick wrote /clock)
            late = client.channels(wait_for_topics=("/clock", "/robot/state"))
            subs.update(client.subscribe({t: c for t, c in late.items() if t not in subs}))
            client.playback(PAUSE, request_id="hold")
            wait_for(lambda: server.control.paused, what="paused")
            time.sleep(0.5)
            held = client.last_time()
            time.sleep(1.0)
            assert client.last_time() == held, "sim time moved while paused"
            # a cycle's messages are handed to the SDK with its time: none written before the pause is held back
            tf_at_hold = set(client.received(subs["/foxglove/tf"]))
            assert any(s["status"] == "paused" and s["request_id"] == "hold" for s in client.states)

            target = held + 500_000_000  # a seek forward while paused: run to it and hold again
            client.playback(PAUSE, seek_ns=target, request_id="step")
            wait_for(lambda: (client.last_time() or 0) >= target and server.control.paused, what="the step")
            stepped = client.last_time()
            time.sleep(1.0)
            assert client.last_time() == stepped and target <= stepped < target + 200_000_000

            client.send({"op": "getParameters", "parameterNames": [], "id": "all"})
            values = wait_for(lambda: client.op("parameterValues"), what="parameter values")
            assert any(p["name"] == "speed" for doc in values for p in doc["parameters"])
            client.send({"op": "setParameters", "parameters": [{"name": "speed", "value": 0.5}], "id": "fast"})
            client.send({"op": "setParameters", "parameters": [{"name": "speed", "value": "fast"}], "id": "bad"})
            client.send({"op": "setParameters", "parameters": [{"name": "nope", "value": 1}], "id": "unknown"})
            client.playback(PLAY)
            wait_for(lambda: (client.last_time() or 0) > stepped + 1e9, what="sim time after play again")

            mark = next(s for doc in client.op("advertiseServices") for s in doc["services"]
                        if s["name"] == "hil/mark")
            client.call_service(mark["id"], 7, json.dumps({"note": "look here"}).encode())
            client.call_service(mark["id"], 8, b"\xff not json")
            wait_for(lambda: any(r["call"] == 7 for r in client.responses), what="the mark's answer")
            client.send(b"\x09 not a frame")  # malformed: refused by the server, the trial goes on
            client.send("{not json")
            client.send({"op": "subscribe", "subscriptions": [{"id": 99, "channelId": 987654}]})
            t_bad = client.last_time()
            wait_for(lambda: (client.last_time() or 0) > t_bad + 1e9, what="the trial going on after bad input")
            client.playback(PAUSE)
            wait_for(lambda: server.control.paused, what="paused before the end")
            time.sleep(0.5)
            # every message the client received is the MCAP's own, at the same log time
            got = {topic: client.received(sub) for topic, sub in subs.items()}
            statuses = [d["message"] for d in client.op("status")]
            advertised = client.channels()
            client.playback(PLAY)
        thread.join(timeout=300)
    finally:
        server.close()
    assert box["result"].ok, box["result"].error
    logged, schemas = _mcap(tmp_path)
    for topic, messages in got.items():
        wanted = set(logged.get(topic, ()))
        assert set(messages) <= wanted, f"{topic}: received bytes the log does not have at that time"
    assert got["/clock"] and got["/foxglove/tf"] and got["/robot/state"]
    written = {m for m in logged["/foxglove/tf"] if 500_000_000 < m[0] <= held}  # after play, up to the pause
    assert written and written <= tf_at_hold, f"{len(written - tf_at_hold)} messages written before the pause " \
        "had not reached the client while it was paused"
    for topic, (encoding, name, schema_encoding, data) in schemas.items():
        if topic in ("/trial/mark", "/trial/refused", "/trial/params"):
            continue  # written after the last look at the advertisements
        channel = advertised[topic]  # every channel of the log, with its schema
        assert (channel["encoding"], channel["schemaName"], channel["schemaEncoding"]) == \
            (encoding, name, schema_encoding), topic
        served = channel["schema"].encode() if schema_encoding == "jsonschema" else \
            __import__("base64").b64decode(channel["schema"])
        assert served == data, f"{topic}: the schema served is not the log's"
    log = read_log(tmp_path / "t" / "trial.mcap")
    changes = [m.data for m in log.messages.get("/trial/params", [])]
    assert changes and changes[0]["changed"] == {"speed": 0.5} and changes[0]["params"]["speed"] == 0.5
    modes = [m.data.get("mode") for m in log.messages["/robot/state"]]
    assert "speed=0.2" in modes and "speed=0.5" in modes, "the change reached the controller"
    refused = [m.data for m in log.messages.get("/trial/refused", [])]
    assert any("takes a float" in r["error"] for r in refused), refused
    assert any("not changeable" in r["error"] for r in refused), refused
    assert any("mark" in r["request"] for r in refused)
    marks = [m.data for m in log.messages.get("/trial/mark", [])]
    assert marks and marks[0]["note"] == "look here"
    assert any("Unknown channel" in s for s in statuses) and any("Invalid message" in s for s in statuses)


def test_a_replay_server_seeks_plays_and_refuses_a_seek_out_of_range(tmp_path):
    from hil.trial.foxglove_live.replay import ReplayServer

    (tmp_path / "tuned.py").write_text(TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=3.0).run(tmp_path / "t").ok
    logged, schemas = _mcap(tmp_path)
    server = ReplayServer(tmp_path / "t", "127.0.0.1", 0)
    try:
        with FoxgloveClient(server.url) as client:
            info = wait_for(lambda: client.op("serverInfo"), what="serverInfo")[0]
            assert "playbackControl" in info["capabilities"]
            end = logged["/clock"][-1][0]
            assert info["dataStartTime"] == {"sec": 0, "nsec": 0}
            assert info["dataEndTime"]["sec"] * 10**9 + info["dataEndTime"]["nsec"] == end
            channels = client.channels(wait_for_topics=tuple(schemas))
            subs = client.subscribe({t: channels[t] for t in ("/clock", "/robot/model")})
            time.sleep(0.3)  # the subscription reaches the server before the seek
            client.playback(PAUSE, seek_ns=end + 10**9, request_id="too far")
            client.playback(PAUSE, seek_ns=2_000_000_000, request_id="seek")
            state = wait_for(lambda: [s for s in client.states if s["request_id"] == "seek"], what="seek")[0]
            refused = [s for s in client.states if s["request_id"] == "too far"]
            assert refused and refused[0]["time"] == 0 and not refused[0]["did_seek"]
            assert state["did_seek"] and state["time"] == 2_000_000_000 and state["status"] == "paused"
            wait_for(lambda: client.received(subs["/robot/model"]), what="the t = 0 messages again after a seek")
            before = client.received(subs["/clock"])
            assert all(t == 0 for t, _ in before), "nothing but the t = 0 messages while paused"
            client.playback(PLAY, speed=4.0, request_id="play")
            wait_for(lambda: any(s["status"] == "ended" for s in client.states), what="the end of the log")
            clocks = client.received(subs["/clock"])[len(before):]
            assert clocks and clocks[0][0] >= 2_000_000_000, "playback goes on from the seek"
            assert clocks == [m for m in logged["/clock"] if m[0] >= 2_000_000_000], "the log's own bytes"
            assert client.last_time() == end
            assert any("refused" in d["message"] for d in client.op("status"))
    finally:
        server.close()


def test_hil_foxglove_layout_prints_a_checked_layout_for_the_topics_a_trial_writes(tmp_path):
    import subprocess
    import sys

    from hil.trial.foxglove_live.layout import NEAREST_OUT, check_layout

    out = subprocess.run([sys.executable, "-m", "hil", "foxglove-layout", "--image-topic", "/foxglove/cam"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    layout = json.loads(out)
    panels = {p["panelType"]: p for p in check_layout(layout)}
    assert set(panels) == {"ThreeDee", "Image", "Log", "Plot", "RawMessages"}
    assert panels["Image"]["config"]["imageMode"]["imageTopic"] == "/foxglove/cam"
    (tmp_path / "tuned.py").write_text(TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=1.0).run(tmp_path / "t").ok
    logged, _ = _mcap(tmp_path)
    three_d = panels["ThreeDee"]["config"]
    model = json.loads(logged["/robot/model"][0][1])
    assert three_d["fixedFrame"] == "map" and three_d["followTf"] == model["links"][0]["name"]
    for topic in [*three_d["topics"], panels["Log"]["config"]["topicToRender"],
                  panels["RawMessages"]["config"]["topicPath"].split(".")[0]]:
        assert topic in logged, f"the layout names {topic}, the trial writes none"
    assert "joints" in json.loads(logged["/robot/state"][-1][1])
    plotted = [p["value"] for p in panels["Plot"]["config"]["paths"]]
    assert f"{NEAREST_OUT}.distance_m" in plotted and "/robot/state.vx" in plotted
    assert "/pedestrians" in layout["userScripts"]["nearest"]["sourceCode"]
    broken = json.loads(out)
    broken["content"]["items"][0]["content"]["items"][0]["content"]["panelType"] = "Teapot"
    with __import__("pytest").raises(ValueError, match="unknown panel type 'Teapot'"):
        check_layout(broken)


def test_hil_trial_foxglove_serves_a_paused_trial_that_plays_from_the_client(tmp_path):
    """The command line: ``hil trial ... --foxglove 127.0.0.1:0 --foxglove-paused`` in its own process."""
    import re
    import subprocess
    import sys

    (tmp_path / "tuned.py").write_text(TUNED)
    proc = subprocess.Popen([sys.executable, "-m", "hil", "trial", str(tmp_path / "tuned.py"), "--map", "lab",
                             "--duration", "3", "--out", str(tmp_path / "t"), "--quiet", "--foxglove",
                             "127.0.0.1:0", "--foxglove-paused"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"serving (ws://127\.0\.0\.1:\d+)", line)
        assert url, line
        with FoxgloveClient(url.group(1)) as client:
            client.subscribe(client.channels(wait_for_topics=("/trial/meta",)))
            time.sleep(1.0)
            assert proc.poll() is None, "the trial ran on while paused"
            client.playback(PLAY)
            assert proc.wait(timeout=300) == 0
        rest = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
    assert "tuned: passed (duration) after 3.0 s" in rest


def test_hil_trial_foxglove_waits_for_the_trial_it_retried_from_foxglove(tmp_path):
    """``hil trial --foxglove``: a retry started from Foxglove (``{"run": true}``) keeps the command waiting after
    its own trial ends, saying where the retry is served, until the retry is played to its end."""
    import re
    import subprocess
    import sys

    (tmp_path / "tuned.py").write_text(TUNED)
    proc = subprocess.Popen([sys.executable, "-m", "hil", "trial", str(tmp_path / "tuned.py"), "--map", "lab",
                             "--duration", "3", "--out", str(tmp_path / "t"), "--quiet", "--state-every", "1",
                             "--foxglove", "127.0.0.1:0", "--foxglove-paused"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"serving (ws://127\.0\.0\.1:\d+)", proc.stdout.readline())
        with FoxgloveClient(url.group(1)) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"),
                             what="the services")
            client.playback(PAUSE, seek_ns=2_000_000_000, request_id="to 2 s")
            wait_for(lambda: (client.last_time() or 0) >= 2e9 and
                     [s for s in client.states if s["status"] == "paused" and s["request_id"] == ""],
                     what="the trial held at 2 s")
            client.call_service(retry["id"], 1, b'{"run": true}')
            running = json.loads(wait_for(lambda: client.responses, what="the retry's answer")[0]["payload"])["running"]
            client.playback(PLAY)
        waiting = proc.stdout.readline()
        while "waiting for" not in waiting and waiting:
            waiting = proc.stdout.readline()
        assert running["foxglove"] in waiting, waiting
        assert proc.poll() is None, "hil trial exited with its retry still running"
        with FoxgloveClient(running["foxglove"]) as retried:
            wait_for(lambda: retried.last_time(), what="the retried trial's time")
            retried.playback(PLAY)
            assert proc.wait(timeout=300) == 0
    finally:
        proc.kill()
        proc.wait()
    retried_log = read_log(Path(running["out"]) / "trial.mcap")
    assert retried_log.complete and retried_log.messages["/clock"][-1].t >= 2.9
    assert "tuned: passed (duration)" in Path(running["log"]).read_text()


def _service(client, name):
    return next(s for doc in client.op("advertiseServices") for s in doc["services"] if s["name"] == name)


def test_retry_from_here_is_a_service_live_and_in_a_replay(tmp_path):
    """``hil/retry``: on a running trial it writes the trial file that starts from the trial's
    state at its time now, and answers with it and the ``hil trial --from`` line; on a replay at the playback
    position; a trial without states, and a request that is not JSON, are refused with the reason."""
    from hil.trial.foxglove_live.replay import ReplayServer
    from hil.trial.spec import load_trial_file

    server, thread, box = _start(tmp_path, duration=4.0)
    try:
        with FoxgloveClient(server.url) as client:
            wait_for(lambda: client.op("advertiseServices"), what="the services")
            retry = _service(client, "hil/retry")
            client.playback(PLAY)
            wait_for(lambda: (client.last_time() or 0) > 1.5e9, what="sim time past 1.5 s")
            client.call_service(retry["id"], 1, b"{}")
            client.call_service(retry["id"], 2, b"\xff not json")
            answer = json.loads(wait_for(lambda: [r for r in client.responses if r["call"] == 1],
                                         what="the retry's answer")[0]["payload"])
            failed = wait_for(lambda: [d for d in client.op("serviceCallFailure") if d["callId"] == 2],
                              what="the refusal of a request that is not JSON")
        thread.join(timeout=300)
    finally:
        server.close()
    assert box["result"].ok, box["result"].error
    assert answer["t"] >= 1.5 and answer["command"].startswith("hil trial ") and f"@{answer['t']:g}" in answer["command"]
    spec = load_trial_file(answer["trial_file"])
    assert spec.resume_from == f"{(tmp_path / 't').resolve()}@{answer['t']:g}", spec.resume_from
    assert "must be JSON" in failed[0]["message"]

    replay = ReplayServer(tmp_path / "t", "127.0.0.1", 0)
    try:
        with FoxgloveClient(replay.url) as client:
            wait_for(lambda: client.op("advertiseServices"), what="the replay's services")
            client.playback(PAUSE, seek_ns=3_000_000_000, request_id="seek")
            wait_for(lambda: [s for s in client.states if s["request_id"] == "seek"], what="the seek")
            client.call_service(_service(client, "hil/retry")["id"], 3, b'{"controller": "other.py"}')
            again = json.loads(wait_for(lambda: [r for r in client.responses if r["call"] == 3],
                                        what="the replay's retry")[0]["payload"])
    finally:
        replay.close()
    assert again["t"] == 3.0 and "other.py" in again["command"]
    assert (tmp_path / "t" / "retry-from-3s.yaml").is_file()

    (tmp_path / "none").mkdir()
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=1.0,
                 state_every=0).run(tmp_path / "none" / "t").ok
    bare = ReplayServer(tmp_path / "none" / "t", "127.0.0.1", 0, err=__import__("io").StringIO())
    try:
        with FoxgloveClient(bare.url) as client:
            wait_for(lambda: client.op("advertiseServices"), what="the services")
            client.call_service(_service(client, "hil/retry")["id"], 4, b"{}")
            nothing = wait_for(lambda: [d for d in client.op("serviceCallFailure") if d["callId"] == 4],
                               what="the refusal")
    finally:
        bare.close()
    assert "no saved states to retry from" in nothing[0]["message"]
    assert not list((tmp_path / "none" / "t").glob("retry-from-*.yaml"))


def test_parameter_subscribers_coming_and_going_never_freeze_the_trial(tmp_path):
    """Clients that subscribe to a parameter, set it and leave, over and over, while the trial applies the sets.
    This froze the whole process within ~2 s of wall time when the server published parameter values itself
    (foxglove-sdk 0.30 takes its subscriptions' lock holding the GIL; its own thread takes that lock and then waits
    for the GIL): CI hung to its limit. Now the SDK alone tells subscribers of an accepted set, the trial runs to
    its end, and every set the trial applied is in the log."""
    server, thread, box = _start(tmp_path, duration=8.0)
    rounds, pushed, run_to_s = 0, [], 0.5
    try:
        with FoxgloveClient(server.url) as first:
            first.playback(PLAY, seek_ns=round(run_to_s * 1e9))
            wait_for(lambda: server.robot is not None and server.robot.changeable, what="the controller's declaration")
        while thread.is_alive():  # each subscription is the name's only one: the SDK tells the listener every time
            with FoxgloveClient(server.url) as client:
                # the trial runs another 0.5 s while this client comes and goes: as many rounds however fast it runs
                run_to_s += 0.5
                client.playback(PLAY, seek_ns=round(run_to_s * 1e9))
                for _ in range(5):
                    client.send({"op": "subscribeParameterUpdates", "parameterNames": ["speed"]})
                    client.send({"op": "setParameters", "id": f"r{rounds}",
                                 "parameters": [{"name": "speed", "value": 0.1 + 0.01 * (rounds % 10)}]})
                    client.send({"op": "unsubscribeParameterUpdates", "parameterNames": ["speed"]})
                    rounds += 1
                client.send({"op": "subscribeParameterUpdates", "parameterNames": ["speed"]})
                client.send({"op": "setParameters", "parameters": [{"name": "speed", "value": 0.25}]})
                if len(pushed) < 3:  # a subscriber is told of a set (by the SDK; no request id: not an answer)
                    pushed += wait_for(lambda: [d for d in client.op("parameterValues") if "id" not in d],
                                       what="the set pushed to a subscriber")
    finally:
        server.close()
    thread.join(timeout=300)
    assert not thread.is_alive() and box["result"].ok, box.get("result") and box["result"].error
    assert rounds >= 50, f"only {rounds} rounds of subscribe, set and leave ran beside the trial"
    assert pushed and all(p["name"] == "speed" for doc in pushed for p in doc["parameters"])
    log = read_log(tmp_path / "t" / "trial.mcap")
    assert log.complete and log.messages["/clock"][-1].t >= 7.9, "the trial ran to its end"
    applied = log.messages.get("/trial/params", [])
    assert applied and all(m.data["changed"].keys() == {"speed"} for m in applied)


def test_retry_with_run_serves_the_retried_trial_paused_and_its_server_ends_it(tmp_path):
    """``{"run": true}``: the retry also runs, as a ``hil trial FILE --foxglove`` child on a port of its own,
    paused at its start; the answer says where. Played from its own connection, it runs from the state at the
    replay's position to its end; one left running is ended, log complete, when the server that started it
    closes. A 'run' that is not a boolean is refused."""
    from hil.trial.foxglove_live.replay import ReplayServer

    (tmp_path / "tuned.py").write_text(TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=4.0,
                 state_every=1.0).run(tmp_path / "t").ok
    replay = ReplayServer(tmp_path / "t", "127.0.0.1", 0, err=__import__("io").StringIO())
    try:
        with FoxgloveClient(replay.url) as client:
            retry = wait_for(lambda: client.op("advertiseServices") and _service(client, "hil/retry"),
                             what="the replay's services")
            client.playback(PAUSE, seek_ns=2_000_000_000, request_id="seek")
            wait_for(lambda: [s for s in client.states if s["request_id"] == "seek"], what="the seek")
            client.call_service(retry["id"], 1, b'{"run": true}')
            client.call_service(retry["id"], 2, b'{"run": "yes"}')
            client.call_service(retry["id"], 3, b'{"run": true}')
            answers = wait_for(lambda: (lambda got: got if len(got) == 2 else None)(
                {r["call"]: json.loads(r["payload"]) for r in client.responses}), what="the two runs' answers")
            bad = wait_for(lambda: [d for d in client.op("serviceCallFailure") if d["callId"] == 2],
                           what="the refusal of a 'run' that is not a boolean")
        first, left = answers[1]["running"], answers[3]["running"]
        assert first["out"] != left["out"] and first["foxglove"] != left["foxglove"]
        with FoxgloveClient(first["foxglove"]) as retried:
            wait_for(lambda: retried.op("serverInfo"), what="the retried trial's server")
            t0 = wait_for(lambda: retried.last_time(), what="the retried trial's time")
            time.sleep(1.0)
            assert retried.last_time() == t0, "the retried trial waits, paused, for play"
            retried.playback(PLAY)
            proc = next(p for p, started, _ in replay.retries.children if started == first)
            proc.wait(timeout=300)
        assert proc.returncode == 0, Path(first["log"]).read_text()
        assert replay.retries.running() == [left]
    finally:
        replay.close()
    assert "'run' must be true or false" in bad[0]["message"]
    # two calls at once: each its own folder (the second of a time gets -2), whichever was served first
    assert {first["out"], left["out"]} == {str(tmp_path / "t-from-2s"), str(tmp_path / "t-from-2s-2")}
    played = read_log(Path(first["out"]) / "trial.mcap")
    clocks = [m.t for m in played.messages["/clock"]]
    assert played.complete and clocks[0] >= 2.0 - 1e-9 and clocks[-1] >= 3.9, (clocks[0], clocks[-1])
    assert "foxglove: serving" in Path(first["log"]).read_text() and first["log"] == first["out"] + ".log"
    ended = read_log(Path(left["out"]) / "trial.mcap")
    assert ended.complete and not replay.retries.running(), Path(left["log"]).read_text()  # ended with its server


def test_off_loopback_a_client_may_not_name_the_controller_a_retry_runs(tmp_path):
    """Security: ``{"run": true, "controller": ...}`` runs code; only a loopback server lets a client name it.
    A sweep's server runs no retry (its trial process ends with its trial)."""
    import pytest

    from hil.trial.foxglove_live.retry import RetryRunner, retry_from_here

    (tmp_path / "tuned.py").write_text(TUNED)
    assert Trial(tmp_path / "tuned.py", map="lab", start=(0, 0, 0), duration=1.0).run(tmp_path / "t").ok
    with pytest.raises(ValueError, match="only on a loopback server"):  # even when the server allows it
        retry_from_here(tmp_path / "t", 0.0, b'{"run": true, "controller": "/tmp/other.py"}',
                        RetryRunner("0.0.0.0", allow_controller=True))
    with pytest.raises(ValueError, match="cannot run a retried trial"):  # a sweep's server runs none
        retry_from_here(tmp_path / "t", 0.0, b'{"run": true}', None)
    assert not list(tmp_path.glob("t-from-*")), "nothing started"
    sweeps = LiveServer("127.0.0.1", 0, run_retries=False)
    try:
        assert sweeps.retries is None
    finally:
        sweeps.close()
    assert RetryRunner("127.0.0.1").loopback and RetryRunner("::1").loopback and RetryRunner("localhost").loopback
