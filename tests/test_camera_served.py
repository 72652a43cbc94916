"""Camera frames of a device served by ``hil sim`` in another process (--camera-endpoint, bridge/camera_wire.py):
a robot opened on the served device over a pty, its clock and its cameras over loopback ZeroMQ, gets the same
frame, byte for byte, as the same world in its own process; a read within a frame period moves no pixels and
returns the same frame; time moving on gives the next frame; the server answers every bad request with what
was wrong and goes on serving; a bad reply and a silent server are named in the client's error; the profile
refuses a camera_endpoint it cannot use at its file:line."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from conftest import SimProcess

LOOPBACK_ANY = "tcp://127.0.0.1:*"


def _served():
    device = SimProcess("--pty", "--clock", "sim", "--clock-endpoint", LOOPBACK_ANY, "--camera-endpoint",
                        LOOPBACK_ANY, "--map", "lab", assembly="commbot")
    try:
        clock = device.next_line().split()
        camera = device.next_line().split()
    except BaseException:
        device.stop()
        raise
    assert clock[0] == "clock" and camera[0] == "camera", (clock, camera)
    return device, clock[1], camera[1]


def _same(a, b):
    return (a is None and b is None) or (a.shape == b.shape and a.dtype == b.dtype
                                         and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def test_a_robot_on_a_served_device_gets_its_cameras_frames(tmp_path):
    from hil.runtime.robot import Robot
    from hil.runtime.robot.camera_remote import RemoteCameraSource

    local = Robot.open({"bus": "sim://commbot?map=lab", "clock": "sim", "semantics": "commbot"})
    try:
        here = local.sensors["head_camera"].frame()
    finally:
        local.close()
    device, clock_endpoint, camera_endpoint = _served()
    try:
        robot = Robot.open({"bus": device.where, "clock": "sim", "clock_endpoint": clock_endpoint,
                            "camera_endpoint": camera_endpoint, "semantics": "commbot"})
        try:
            camera = robot.sensors["head_camera"]
            assert isinstance(camera._source, RemoteCameraSource)
            frame = camera.frame()
            assert frame.rgb.shape == (240, 320, 3) and frame.rgb.dtype == np.uint8
            assert frame.depth.dtype == np.float32 and frame.labels.dtype == np.int32
            assert not frame.rgb.flags.writeable and frame.rgb.std() > 5
            assert frame.t == here.t == 0.0 and frame.source == here.source
            for name in ("rgb", "depth", "labels"):
                assert _same(getattr(frame, name), getattr(here, name)), f"{name} differs from the in-process world's"
            assert frame.legend == here.legend and frame.pose == here.pose
            assert frame.invalid == here.invalid and frame.invalid["no_return"] >= 0  # the depth's causes too
            assert frame.intrinsics == here.intrinsics
            assert camera.frame() is frame and camera._source.received == 1, "a read in the same period moved pixels"
            other = robot.sensors["right_camera"].frame()
            assert other.rgb.shape[2] == 3 and not np.array_equal(other.rgb, frame.rgb)
            for _ in robot.loop(hz=10, duration_s=0.45):
                pass
            later = camera.frame()
            assert later.t > frame.t and camera._source.received == 2
        finally:
            robot.close()
        assert device.alive
    finally:
        device.stop()


LOOK_AROUND = Path(__file__).resolve().parents[1] / "examples" / "look_around.py"


def test_the_look_around_example_on_a_served_device(tmp_path):
    from PIL import Image

    device, clock_endpoint, camera_endpoint = _served()
    profile = tmp_path / "served.yaml"
    profile.write_text(f"clock: sim\nclock_endpoint: {clock_endpoint}\ncamera_endpoint: {camera_endpoint}\n"
                       "semantics: commbot\n")
    picture = tmp_path / "last.png"
    try:
        proc = subprocess.run([sys.executable, "-m", "hil", "run", str(LOOK_AROUND), "--profile", str(profile),
                               "--bus", device.where, "--duration", "1.0"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "LOOK_AROUND_OUT": str(picture),
                                                "HIL_CACHE_DIR": str(tmp_path / "cache")})
    finally:
        device.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(r"t=\s*([0-9.]+) s  neck ([-+0-9.]+) rad  depth valid\s+([0-9.]+) %  ahead ([0-9.inf]+) m",
                      proc.stdout)
    assert [float(r[0]) for r in rows] == [round(0.1 * k, 1) for k in range(len(rows))] and len(rows) >= 10, \
        proc.stdout  # one line per camera frame at 10 Hz
    assert all(float(r[2]) > 20 for r in rows) and any(float(r[3]) < 20 for r in rows)  # it sees the lab
    assert np.asarray(Image.open(picture)).shape == (240, 640, 3)


BAD_REQUESTS = [
    ([b"\xc1"], "not msgpack"),
    ([msgpack.packb([1, 2])], "msgpack map"),
    ([msgpack.packb({"v": 2, "part": 1})], "version"),
    ([msgpack.packb({"v": 1, "part": 999})], "'part'"),
    ([msgpack.packb({"v": 1, "part": True})], "'part'"),
    ([msgpack.packb({"v": 1, "part": 1, "sensor": 5})], "'sensor'"),
    ([msgpack.packb({"v": 1, "part": 1, "have": float("nan")})], "'have'"),
    ([msgpack.packb({"v": 1, "part": 1, "pickle": b"cos\nsystem\n"})], "unknown fields"),
    ([b"a", b"b"], "one frame"),
    ([msgpack.packb({"v": 1, "part": 1})], "not a camera"),  # a servo, not a camera
]


def test_the_camera_server_answers_bad_requests_and_goes_on(tmp_path):
    device, _clock, endpoint = _served()
    context = zmq.Context.instance()
    try:
        sock = context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
        part, sensor = _camera_part()
        try:
            for frames, says in [*BAD_REQUESTS, ([msgpack.packb({"v": 1, "part": part, "sensor": "nose"})], "'nose'")]:
                sock.send_multipart(frames)
                assert sock.poll(60_000), f"no answer to {frames!r}"
                reply = sock.recv_multipart()
                header = msgpack.unpackb(reply[0])
                assert len(reply) == 1 and header["ok"] is False, header
                assert says in header["error"], (says, header["error"])
            huge = context.socket(zmq.DEALER)  # beyond the request size limit: ZeroMQ drops that peer
            huge.setsockopt(zmq.LINGER, 0)
            huge.connect(endpoint)
            huge.send_multipart([b"", b"x" * 100_000])
            huge.close(0)
            from hil.bridge.camera_wire import encode_request, parse_reply

            sock.send(encode_request(part, sensor))
            assert sock.poll(60_000)
            good = parse_reply(sock.recv_multipart(copy=False))
            assert good["rgb"].shape == (240, 320, 3) and good["t"] == 0.0
        finally:
            sock.close(0)
        assert device.alive, device.stderr()
    finally:
        device.stop()


def _camera_part() -> tuple[int, str]:
    """A camera part's ID and sensor name as the served device has them (read from the assembly, not guessed)."""
    from hil.firmware_sim import load_assembly

    for part in load_assembly("commbot").parts:
        for sensor in part.descriptor.sensors:
            if sensor.kind == "camera":
                return part.id, sensor.name
    raise AssertionError("commbot has no camera part")


def test_bad_replies_and_a_silent_server_are_named():
    from hil.bridge.camera_wire import RemoteCameraError, WireError, encode_reply, parse_reply
    from hil.runtime.robot.camera_remote import RemoteCameraSource

    rgb = np.zeros((4, 5, 3), np.uint8)
    good = encode_reply({"t": 0.5, "rgb": rgb, "pose": {"position": (0, 0, 1), "orientation": (0, 0, 0, 1)}})
    assert parse_reply([bytes(f) for f in good])["rgb"].shape == (4, 5, 3)
    header = msgpack.unpackb(good[0])

    def with_header(**change):
        return [msgpack.packb({**header, **change}), bytes(good[1])]

    for frames, says in [
        ([], "empty"),
        ([b"\x93\x01"], "msgpack"),
        (with_header(v=9), "version"),
        (with_header(t=float("inf")), "'t'"),
        (with_header(arrays=[{"name": "rgb", "dtype": "<f8", "shape": [4, 5, 3]}]), "dtype"),
        (with_header(arrays=[{"name": "rgb", "dtype": "|u1", "shape": [4, 5, 4]}]), "shape"),
        (with_header(arrays=[{"name": "rgb", "dtype": "|u1", "shape": [99999, 5, 3]}]), "shape"),
        (with_header(arrays=[{"name": "rgb", "dtype": "|u1", "shape": [5, 5, 3]}]), "bytes"),
        (with_header(arrays=[{"name": "code", "dtype": "|u1", "shape": [4, 5, 3]}]), "name"),
        (with_header(arrays=[]), "arrays"),
        (with_header(pose={"position": [0, 0], "orientation": [0, 0, 0, 1]}), "pose.position"),
        (with_header(legend={"a": 1}), "legend"),
        (with_header(invalid={"shadow": -1}), "invalid"),
        (with_header(invalid=[1, 2]), "invalid"),
    ]:
        with pytest.raises(WireError, match=says):
            parse_reply(frames)
    with pytest.raises(RemoteCameraError, match="no such camera"):
        parse_reply([msgpack.packb({"v": 1, "ok": False, "error": "no such camera"})])

    silent = zmq.Context.instance().socket(zmq.REP)  # takes the request, never answers
    silent.setsockopt(zmq.LINGER, 0)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    source = RemoteCameraSource(f"tcp://127.0.0.1:{port}", 60, "head_camera", timeout_s=0.5)
    try:
        with pytest.raises(RemoteCameraError, match=f"127.0.0.1:{port} did not answer"):
            source()
        assert source._socket is None  # made anew for the next read
    finally:
        source.close()
        silent.close(0)


def test_hil_sim_refuses_a_camera_endpoint_it_cannot_serve(capsys):
    from hil.cli import main

    for args, says in [(["commbot", "--tcp", "0", "--camera-endpoint", "http://127.0.0.1:1"], "a ZeroMQ endpoint"),
                       (["commbot", "--tcp", "0", "--no-world", "--camera-endpoint", LOOPBACK_ANY], "no world"),
                       (["servo_chain", "--tcp", "0", "--camera-endpoint", LOOPBACK_ANY], "no world")]:
        assert main(["sim", *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and says in captured.err, captured.err


def test_a_profile_refuses_a_camera_endpoint_it_cannot_use(tmp_path):
    from hil.devices.yaml_source import ConfigError
    from hil.runtime.robot.profile import load_profile

    for text, says in [("bus: sim://commbot\nclock: sim\ncamera_endpoint: tcp://127.0.0.1:5758\n", "in this process"),
                       ("bus: socket://127.0.0.1:4000\nclock: real\ncamera_endpoint: http://x\n", "must start with")]:
        path = tmp_path / "p.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=says) as info:
            load_profile(path)
        assert f"{path}:3" in str(info.value)
    path.write_text("bus: socket://127.0.0.1:4000\nclock: real\ncamera_endpoint: tcp://127.0.0.1:5758\n")
    assert load_profile(path).camera_endpoint == "tcp://127.0.0.1:5758"


def test_hil_sim_keys_secures_the_camera_endpoint_and_refuses_clients_without_its_key(tmp_path):
    """``hil sim --keys DIR --camera-endpoint EP`` (real clock: the camera alone is secured): a robot whose profile
    has the keys gets its frames; a client without keys, and one with another directory's keys, are refused with
    an error naming the endpoint and why; the server serves on."""
    from hil.bridge.camera_wire import RemoteCameraError
    from hil.bridge.security import Security, create_keys
    from hil.runtime.robot import Robot
    from hil.runtime.robot.camera_remote import RemoteCameraSource

    create_keys(tmp_path / "keys")
    create_keys(tmp_path / "other")
    device = SimProcess("--pty", "--camera-endpoint", LOOPBACK_ANY, "--keys", str(tmp_path / "keys"),
                        assembly="commbot")
    try:
        line = device.next_line().split()
        assert line[0] == "camera", line
        endpoint = line[1]
        stranger = tmp_path / "stranger"  # knows the server's public key; its own key is not authorized
        stranger.mkdir()
        shutil.copy(tmp_path / "keys" / "server.key", stranger)
        for name in ("client.key", "client.key_secret"):
            shutil.copy(tmp_path / "other" / name, stranger)
        part_id, sensor = _camera_part()
        for security, says in [(None, "CURVE-secured and this client has no keys"),
                               (Security.load(stranger), "refused this client's key"),
                               (Security.load(tmp_path / "other"), "seems not to hold the secret")]:
            source = RemoteCameraSource(endpoint, part_id, sensor, security=security, timeout_s=1.0)
            try:
                with pytest.raises(RemoteCameraError) as refused:
                    source()
                assert endpoint in str(refused.value) and says in str(refused.value), str(refused.value)
                assert source._socket is None and source.received == 0
            finally:
                source.close()
        profile = {"bus": device.where, "clock": "real", "camera_endpoint": endpoint, "semantics": "commbot",
                   "keys": str(tmp_path / "keys"), "cache_dir": str(tmp_path / "cache")}
        with Robot.open(profile) as robot:
            frame = robot.sensors["head_camera"].frame()
            assert frame.rgb.shape == (240, 320, 3) and frame.rgb.std() > 5
            assert robot.sensors["head_camera"]._source.received == 1
        assert device.alive, device.stderr()
    finally:
        assert device.stop() == 0, device.stderr()


def test_hil_sim_serves_a_camera_endpoint_off_loopback_only_with_keys(capsys, tmp_path):
    from hil.cli import main

    assert main(["sim", "commbot", "--tcp", "0", "--camera-endpoint", "tcp://0.0.0.0:*"]) == 2
    captured = capsys.readouterr()
    assert "--camera-endpoint tcp://0.0.0.0:*: off loopback the camera endpoint needs --keys" in captured.err
    assert captured.out == ""
    assert main(["sim", "commbot", "--tcp", "0", "--no-world", "--keys", str(tmp_path)]) == 2
    assert "--camera-endpoint" in capsys.readouterr().err, "the error lists what --keys secures"
