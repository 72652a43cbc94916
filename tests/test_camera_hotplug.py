"""Cameras while parts come and go: a swap elsewhere (even before the first frame) leaves every camera working; an
unplugged, rebooting or swapped-out camera says which camera and why, in process and through the camera endpoint,
while the cameras that remain keep giving frames; plugged back, or a camera swapped back in, frames return.

The commbot in a pybullet DIRECT world on the simulator's clock, parts changed with firmware_sim.hotplug as the
trial faults and the live control change them; the endpoint is a real REP socket on loopback."""
from __future__ import annotations

import msgpack
import pytest
import zmq

from hil.bridge.camera_wire import encode_request, parse_reply
from hil.firmware_sim import hotplug, load_assembly
from hil.firmware_sim.camera_server import CameraServer
from hil.firmware_sim.embodied.camera import CameraError
from hil.firmware_sim.embodied.embody import embody
from hil.trial import Trial

LEFT_WHEEL, LEFT_EYE, RIGHT_EYE = 2, 43, 48  # config/robots/commbot.yaml
FRAME_PERIOD_S = 0.2  # more than one frame period of the catalog camera: the next read renders anew


@pytest.fixture
def world():
    embodied = embody(load_assembly("commbot"), clock="sim", watchdog_s=0.0)
    try:
        yield embodied
    finally:
        embodied.close()


def later(embodied, seconds: float = FRAME_PERIOD_S) -> None:
    embodied.world.advance_to(embodied.world.time_s + seconds)


def test_a_swap_before_the_first_frame_leaves_every_camera_working(world):
    later(world, 0.5)
    hotplug.swap(world.device, LEFT_WHEEL, "speaker")  # no camera has rendered yet
    for eye in (LEFT_EYE, RIGHT_EYE):
        frame = world.camera_frame(eye)
        assert frame["t"] == pytest.approx(0.5) and frame["rgb"].shape == (240, 320, 3)
        # the swapped part keeps the old part's shapes in the world, and the camera draws them
        assert any(name.startswith(f"robot:{LEFT_WHEEL}/") for name in frame["legend"].values())
    later(world)
    assert world.camera_frame(LEFT_EYE)["t"] > 0.5


def test_an_unplugged_camera_says_so_and_the_other_keeps_working(world):
    assert world.camera_frame(RIGHT_EYE)["t"] == 0.0
    hotplug.unplug(world.device, RIGHT_EYE)
    later(world)
    with pytest.raises(CameraError, match=rf"camera 'camera' of part {RIGHT_EYE} \(camera\) gives no frames: it is "
                                          "unplugged"):
        world.camera_frame(RIGHT_EYE)
    assert world.camera_frame(LEFT_EYE)["t"] == pytest.approx(FRAME_PERIOD_S)
    hotplug.plug(world.device, RIGHT_EYE)
    assert world.camera_frame(RIGHT_EYE)["t"] == pytest.approx(FRAME_PERIOD_S)
    hotplug.reboot(world.device, RIGHT_EYE, boot_s=0.5)
    with pytest.raises(CameraError, match=rf"part {RIGHT_EYE} .* it is rebooting \(back at t=0.700 s\)"):
        world.camera_frame(RIGHT_EYE)
    later(world, 0.6)
    assert world.camera_frame(RIGHT_EYE)["t"] == pytest.approx(0.8)


def test_a_camera_swapped_for_a_speaker_says_so_and_a_camera_swapped_back_gives_frames(world):
    hotplug.swap(world.device, RIGHT_EYE, "speaker")
    with pytest.raises(CameraError, match=rf"camera 'camera' of part {RIGHT_EYE} \(camera\) gives no frames: the "
                                          r"part was replaced by a speaker at t=0.000 s"):
        world.camera_frame(RIGHT_EYE)
    later(world)
    assert world.camera_frame(LEFT_EYE)["t"] == pytest.approx(FRAME_PERIOD_S)
    hotplug.swap(world.device, RIGHT_EYE, "camera")  # the same model again: its body is the one in the world
    frame = world.camera_frame(RIGHT_EYE)
    assert frame["t"] == pytest.approx(FRAME_PERIOD_S) and frame["part_id"] == RIGHT_EYE


def test_a_camera_swapped_in_where_the_world_has_no_body_for_it_says_why(world):
    hotplug.swap(world.device, LEFT_WHEEL, "camera")
    with pytest.raises(CameraError, match=rf"part {LEFT_WHEEL} is a camera swapped in at t=0.000 s where the world "
                                          "has no body for its camera"):
        world.camera_frame(LEFT_WHEEL)
    assert world.camera_frame(LEFT_EYE)["t"] == 0.0


def test_the_camera_endpoint_names_an_unplugged_or_swapped_camera_and_serves_the_others(world):
    server = CameraServer(world, "tcp://127.0.0.1:*")
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)

    def ask(part_id: int):
        sock.send(encode_request(part_id, "camera"))
        assert sock.poll(60_000), "the camera server did not answer"
        return sock.recv_multipart(copy=False)

    try:
        hotplug.unplug(world.device, RIGHT_EYE)
        header = msgpack.unpackb(ask(RIGHT_EYE)[0].bytes)
        assert header["ok"] is False and f"camera 'camera' of part {RIGHT_EYE}" in header["error"], header
        assert "unplugged" in header["error"]
        assert parse_reply(ask(LEFT_EYE))["rgb"].shape == (240, 320, 3)
        hotplug.swap(world.device, RIGHT_EYE, "speaker")
        header = msgpack.unpackb(ask(RIGHT_EYE)[0].bytes)
        assert header["ok"] is False and f"part {RIGHT_EYE}" in header["error"], header
        assert "replaced by a speaker" in header["error"]
        assert parse_reply(ask(LEFT_EYE))["rgb"].shape == (240, 320, 3)
    finally:
        sock.close(0)
        server.close()


def test_a_controller_reads_its_camera_after_a_swap_before_the_first_frame_in_a_trial(tmp_path):
    seen = []

    def controller(robot):
        camera = robot.sensors["head_camera"]
        for tick in robot.loop(hz=10):
            if tick.time >= 1.2:
                seen.append(camera.frame().t)
                return

    result = Trial(controller, robot="commbot", duration=2, camera_rate=0,
                   faults=[{"at": 1, "swap": LEFT_WHEEL, "with": "speaker"}]).run(tmp_path / "t")
    assert result.ok, result.error
    assert seen and seen[0] >= 1.2
