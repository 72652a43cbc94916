"""The time source switch (the simulator-clock reference): the lockstep clock in-process and over ZeroMQ, stalls that
fail with a name instead of hanging, resets announced, and the time patch for code not written for the runtime.

No wall-clock assertions: everything checked is simulated time or an ordering of events.
"""
from __future__ import annotations

import threading
import time

import pytest
import zmq

from hil.bridge.envelope import EnvelopeError, pack, unpack
from hil.bridge.lockstep import ClockServer, LocalParticipant, LockstepCore, LockstepError, RemoteParticipant
from hil.runtime.clock import ClockError, RealClock, open_clock
from hil.runtime.clock.patch import patched
from hil.runtime.clock.sim import LockstepClock


class Recorder:
    """A stand-in simulation: records every advance (the world is tested elsewhere)."""

    def __init__(self):
        self.advances: list[float] = []

    def __call__(self, t: float) -> None:
        self.advances.append(t)


def local_clock(core: LockstepCore, cond: threading.Condition, name: str) -> LockstepClock:
    return LockstepClock(LocalParticipant(core, cond, name), name)


def test_single_participant_advances_to_each_wake_time():
    world = Recorder()
    core = LockstepCore(world)
    clock = local_clock(core, threading.Condition(), "controller")
    assert clock.now() == 0.0, "time reads 0 until the first tick"
    for k in range(1, 4):
        assert clock.sleep_until(0.02 * k) == pytest.approx(0.02 * k)
    assert world.advances == pytest.approx([0.02, 0.04, 0.06])
    assert clock.now() == pytest.approx(0.06)


def test_time_advances_only_when_every_participant_sleeps():
    world = Recorder()
    core, cond = LockstepCore(world), threading.Condition()
    controller = local_clock(core, cond, "controller")
    crowd = local_clock(core, cond, "crowd")
    order: list[tuple[str, float]] = []

    def run(clock: LockstepClock, period: float, n: int) -> None:
        for k in range(1, n + 1):
            t = clock.sleep_until(period * k)
            order.append((clock.name, round(t, 6)))
        clock.close()

    threads = [threading.Thread(target=run, args=(controller, 0.02, 5)),
               threading.Thread(target=run, args=(crowd, 0.05, 2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert world.advances == pytest.approx([0.02, 0.04, 0.05, 0.06, 0.08, 0.1])
    times = [t for _, t in order]
    assert times == sorted(times), "nobody ever saw time go backwards or run ahead of another"


def test_a_stalled_participant_fails_the_run_with_its_name():
    core, cond = LockstepCore(Recorder(), stall_timeout_s=0.2), threading.Condition()
    controller = local_clock(core, cond, "controller")
    local_clock(core, cond, "crowd")  # joins and then never sleeps
    with pytest.raises(ClockError, match="'crowd' stalled"):
        controller.sleep_until(0.1)


def test_reset_is_announced():
    core = LockstepCore(Recorder())
    clock = local_clock(core, threading.Condition(), "controller")
    heard: list[tuple[float, float]] = []
    clock.on_reset.append(lambda before, after: heard.append((before, after)))
    clock.sleep_until(1.0)
    core.reset(0.0)
    clock.sleep_until(0.5)
    assert clock.resets == 1 and heard == [(1.0, 0.5)] and clock.now() == 0.5


def test_remote_participants_over_zeromq():
    world = Recorder()
    core = LockstepCore(world)
    server = ClockServer(core, "tcp://127.0.0.1:*")
    try:
        a = LockstepClock(RemoteParticipant(server.endpoint, "controller", timeout_s=10), "controller")
        b = LockstepClock(RemoteParticipant(server.endpoint, "crowd", timeout_s=10), "crowd")
        done: list[float] = []
        thread = threading.Thread(target=lambda: done.extend(b.sleep_until(0.1 * k) for k in (1, 2, 3)))
        thread.start()
        seen = [a.sleep_until(0.04 * k) for k in range(1, 8)]
        a.close()  # leaving lets the crowd's last wake (0.3) come without the controller
        thread.join(20)
        assert not thread.is_alive()
        b.close()
    finally:
        server.close()
    assert seen == pytest.approx([0.04 * k for k in range(1, 8)])
    assert done == pytest.approx([0.1, 0.2, 0.3])
    assert world.advances == sorted(world.advances) and world.advances[-1] == pytest.approx(0.3)


def test_remote_stall_names_the_participant():
    core = LockstepCore(Recorder(), stall_timeout_s=0.2)
    server = ClockServer(core, "tcp://127.0.0.1:*")
    try:
        waiting = RemoteParticipant(server.endpoint, "controller", timeout_s=10)
        stalled = RemoteParticipant(server.endpoint, "crowd", timeout_s=10)
        with pytest.raises(LockstepError, match="'crowd' stalled"):
            waiting.sleep_until(1.0)
        stalled._socket.close(0)
    finally:
        server.close()


def test_a_vanished_master_is_an_error_not_a_hang():
    core = LockstepCore(Recorder())
    server = ClockServer(core, "tcp://127.0.0.1:*")
    participant = RemoteParticipant(server.endpoint, "controller", timeout_s=0.5)
    server.close()
    with pytest.raises(LockstepError, match="did not answer 'controller'"):
        participant.sleep_until(1.0)


def test_garbage_wrong_version_and_unknown_type_are_rejected_with_a_reason():
    for data, reason in ((b"\xc1\xc1garbage", "not msgpack"), (pack("hello", {})[:-3], "not msgpack"),
                         (b"\x93\x01\x02\x03", "not a map")):
        with pytest.raises(EnvelopeError, match=reason):
            unpack(data, ("hello",))
    import msgpack
    with pytest.raises(EnvelopeError, match="version 99"):
        unpack(msgpack.packb({"v": 99, "type": "hello"}), ("hello",))
    with pytest.raises(EnvelopeError, match="unknown message type 'pickle'"):
        unpack(pack("pickle", {}), ("hello",))
    core = LockstepCore(Recorder())
    server = ClockServer(core, "tcp://127.0.0.1:*")
    try:
        socket = zmq.Context.instance().socket(zmq.REQ)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(server.endpoint)
        for data in (b"garbage", msgpack.packb({"v": 1, "type": "hello"}), pack("teleport", {"name": "x"})):
            socket.send(data)
            assert socket.poll(5000), "the server answers instead of dying"
            assert unpack(socket.recv(), ("error",)).type == "error"
        socket.close(0)
        good = RemoteParticipant(server.endpoint, "controller", timeout_s=5)
        assert good.sleep_until(0.5)[0] == 0.5, "the clock still works after the garbage"
    finally:
        server.close()
    assert len(server.rejected) == 3 and any("version 1" in r for r in server.rejected)


def test_time_patch_maps_unmodified_code_onto_the_sim_clock():
    world = Recorder()
    clock = local_clock(LockstepCore(world), threading.Condition(), "controller")
    wall_before = time.perf_counter
    with patched(clock):
        start_time, start_mono = time.time(), time.monotonic()
        for _ in range(60):
            time.sleep(1.0)  # a controller that knows nothing of the runtime
        elapsed_time, elapsed_mono = time.time() - start_time, time.monotonic() - start_mono
        assert time.perf_counter() == clock.now() == pytest.approx(60.0)
    assert elapsed_time == pytest.approx(60.0) and elapsed_mono == pytest.approx(60.0)
    assert len(world.advances) == 60
    assert time.perf_counter is wall_before, "restored"


def test_real_clock_and_sim_clock_need_a_simulator():
    assert isinstance(open_clock("real"), RealClock)
    with pytest.raises(ClockError, match="needs a simulator"):
        open_clock("sim")
    with pytest.raises(ValueError, match="real, sim"):
        open_clock("lunar")


def test_in_process_virtual_robot_runs_on_the_sim_clock():
    from hil.runtime.transports.sim import SimTransport

    transport = SimTransport("sim://commbot?clock=sim")
    try:
        clock = open_clock("sim", transport=transport)
        for k in range(1, 51):
            clock.sleep_until(k / 50)
        assert clock.now() == pytest.approx(1.0)
        world = transport.embodied.world
        assert world.steps == 240, "the world took every physics step on the way (240 Hz)"
        clock.close()
    finally:
        transport.close()
