"""Parts that come and go while the commbot runs: lost after 3 missed cycles, found again and
re-armed, a wheel lost stopping the base, a part swapped for another model, a new part adopted (its driver code
only when trusted). The virtual device's hotplug operations (firmware_sim/hotplug.py) act at simulated times
inside the robot's loop on the in-process world; everything is counted in bus cycles and simulated time."""
from __future__ import annotations

import hashlib
import math

import pytest

from hil.devices.catalog import load_part
from hil.devices.descriptor import descriptor_from_dict, descriptor_to_dict
from hil.firmware_sim import hotplug
from hil.runtime.robot import Robot

HZ = 50.0
ELBOW, HEAD_PITCH, LEFT_WHEEL = 26, 32, 2


def profile(tmp_path, **extra) -> dict:
    return {"bus": "sim://commbot?clock=sim&watchdog_ms=500", "clock": "sim", "semantics": "commbot",
            "cache_dir": str(tmp_path / "cache"), **extra}


def device(robot):
    return robot.bus.transport.device


def run(robot, seconds: float, at: dict[float, object] | None = None, each=None) -> list:
    """Loop for ``seconds``; ``at``: tick time -> action(robot) run at that tick; returns (time, each(robot))."""
    out = []
    for tick in robot.loop(hz=HZ, duration_s=seconds):
        for when, action in (at or {}).items():
            if abs(tick.time - when) < 1e-9:
                action(robot)
        out.append((tick.time, each(robot) if each else None))
    return out


def test_unplugged_elbow_is_lost_within_three_cycles_and_rearmed_when_plugged(tmp_path):
    with Robot.open(profile(tmp_path)) as robot:
        start = robot.clock.now()
        elbow = robot.joints["right_arm.elbow"]
        seen: list = []
        robot.on_change.append(seen.append)
        dev = device(robot)

        def set_target(r):
            elbow.target = 0.6  # set while lost: held, not sent

        trace = run(robot, 10.0, {start + 5.0: lambda r: hotplug.unplug(dev, ELBOW), start + 6.0: set_target,
                                  start + 8.0: lambda r: hotplug.plug(dev, ELBOW)},
                    each=lambda r: elbow.available)
        lost_at = next(t for t, available in trace if not available)
        back_at = next(t for t, available in trace if t > lost_at and available)
        assert lost_at - (start + 5.0) <= 3 / HZ + 1e-9, "unavailable within 3 cycles"
        assert back_at - (start + 8.0) <= 1.0
        assert [e.kind for e in seen] == ["lost", "back"] and seen[0].names == ("right_arm.elbow",)
        assert robot.parts_lost == []
        part = dev.part(ELBOW)
        assert part.memory.get("torque_enable") == 1, "torque re-applied after the power cycle"
        assert part.memory.get("operating_mode") == 3  # position
        assert part.memory.get("bus_watchdog") == 25, "the watchdog as it was at open (500 ms), not the default 0"
        assert elbow.position == pytest.approx(0.6, abs=0.05), "the target held while lost was reached"
        assert sum("target is held" in n for n in robot.notes) == 1
        assert robot.presence.counts["lost"] == robot.presence.counts["back"] == 1


def test_lost_sensor_reads_none(tmp_path):
    with Robot.open(profile(tmp_path)) as robot:
        start = robot.clock.now()
        ring, bumper = robot.sensors["ring"], robot.sensors["bumper"]
        run(robot, 0.5)
        assert any(r is not None for r in ring.ranges) or ring.raw[0] is not None
        hotplug.unplug(device(robot), 4)
        hotplug.unplug(device(robot), 5)
        run(robot, 0.2)
        assert ring.ranges == [None] * len(ring.angles) and not ring.available
        assert bumper.any is None and set(bumper.pressed.values()) == {None}
        assert robot.parts_lost == [4, 5]
        del start


def test_rebooted_head_servo_is_rearmed_and_reaches_its_target_again(tmp_path):
    with Robot.open(profile(tmp_path)) as robot:
        start = robot.clock.now()
        pitch = robot.joints["head.neck_pitch"]
        pitch.target = 0.3
        dev = device(robot)
        run(robot, 2.0, {start + 1.0: lambda r: hotplug.reboot(dev, HEAD_PITCH)})
        kinds = [e.kind for e in robot.part_events]
        assert kinds == ["lost", "back"]
        assert dev.part(HEAD_PITCH).memory.get("torque_enable") == 1
        run(robot, 1.0)
        assert pitch.position == pytest.approx(0.3, abs=0.05)


def test_lost_wheel_stops_the_base(tmp_path):
    with Robot.open(profile(tmp_path)) as robot:
        start = robot.clock.now()
        dev = device(robot)
        right = robot.joints["base.wheel_right"]
        trace = run(robot, 4.0, {start + 1.5: lambda r: hotplug.unplug(dev, LEFT_WHEEL)},
                    each=lambda r: (r.base.drive(0.3, 0.0), r.base.halted, right.velocity)[1:])
        after = [(halted, v) for t, (halted, v) in trace if t > start + 3.0]
        assert all(halted and "base.wheel_left" in halted for halted, _ in after)
        assert all(abs(v) < 0.05 for _, v in after), "the other wheel stopped too"
        assert any("the base is stopped" in n for n in robot.notes)
        x, y, _ = robot.bus.transport.embodied.robot.base_pose()[0]
        run(robot, 1.0, each=lambda r: r.base.drive(0.3, 0.0))
        x2, y2, _ = robot.bus.transport.embodied.robot.base_pose()[0]
        assert math.hypot(x2 - x, y2 - y) < 0.02


def test_swapped_part_rebuilds_the_model_and_rebinds_the_name(tmp_path):
    with Robot.open(profile(tmp_path)) as robot:
        start = robot.clock.now()
        dev = device(robot)
        old_elbow = robot.joints["right_arm.elbow"]
        mass_before = sum(link.inertia.mass for link in robot.model.links if link.bus_id == ELBOW)
        run(robot, 1.0, {start + 0.2: lambda r: hotplug.unplug(dev, ELBOW),
                         start + 0.5: lambda r: hotplug.swap(dev, ELBOW, "wheel_motor")})
        kinds = [e.kind for e in robot.part_events]
        assert kinds == ["lost", "changed"], robot.notes
        assert robot.virtual.parts[ELBOW].descriptor.name == "wheel_motor"
        mass_after = sum(link.inertia.mass for link in robot.model.links if link.bus_id == ELBOW)
        assert mass_after == pytest.approx(sum(b.inertial.mass for b in load_part("wheel_motor").bodies))
        assert mass_after != pytest.approx(mass_before)
        elbow = robot.joints["right_arm.elbow"]
        assert elbow is not old_elbow and elbow.part_id == ELBOW and elbow.mode == "velocity", "the name re-bound"
        assert robot.joints["head.neck_yaw"].available
        run(robot, 0.2)


IR_SOURCE = '''
REGISTERS = {"range_raw"}
def to_si(register, raw):
    return raw / 1000.0
def from_si(register, value):
    return round(value * 1000.0)
'''


def ir_part():
    doc = descriptor_to_dict(load_part("speaker"))
    doc["name"], doc["model_number"] = "ir_probe", 0x4802
    doc["registers"] = [{"name": "range_raw", "address": 0x80, "size": 2, "unit": "m"}]
    doc["driver"] = {"source": IR_SOURCE, "sha256": hashlib.sha256(IR_SOURCE.encode()).hexdigest(),
                     "signature": "", "key_id": ""}
    return descriptor_from_dict(doc)


@pytest.mark.parametrize("trusted", [False, True])
def test_new_part_on_a_free_port_is_adopted_with_its_driver_only_when_trusted(tmp_path, trusted):
    desc = ir_part()
    trust = tmp_path / "trust.yaml"
    trust.write_text(f"sha256: [\"{desc.driver.sha256}\"]\n" if trusted else "sha256: []\n")
    with Robot.open(profile(tmp_path, rescan_s=0.5, trust_file=str(trust))) as robot:
        start = robot.clock.now()
        dev = device(robot)
        run(robot, 0.2)
        hotplug.unplug(dev, 37)  # the speaker off the head: its port stays listed, so plug the probe elsewhere
        hotplug.swap(dev, 37, "head_mount")  # a bracket with a free child port where the speaker was
        run(robot, 1.5)
        hotplug.add(dev, 60, desc, 37, "head")
        run(robot, 1.5)
        new = [e for e in robot.part_events if e.kind == "new"]
        assert [e.part_id for e in new] == [60], robot.notes
        part = robot.virtual.parts[60]
        assert part.descriptor.name == "ir_probe" and part.parent_id == 37
        driver = robot.drivers[60]
        if trusted:
            assert driver.to_si("range_raw", 300) == pytest.approx(0.3)
        else:
            assert "not run" in driver.message and "not run" in new[0].detail
        del start


def test_a_new_part_that_fails_its_checks_is_quarantined(tmp_path):
    with Robot.open(profile(tmp_path, rescan_s=0.5)) as robot:
        dev = device(robot)
        run(robot, 0.2)
        hotplug.unplug(dev, 37)
        hotplug.swap(dev, 37, "head_mount")
        run(robot, 1.5)
        part = hotplug.add(dev, 61, "camera", 37, "head")
        sha = part.memory.get("descriptor_sha256")
        part.memory.set("descriptor_sha256", sha ^ 1)  # the header's hash no longer matches the descriptor bytes
        run(robot, 1.5)
        events = [e for e in robot.part_events if e.part_id == 61]
        assert [e.kind for e in events] == ["quarantined"] and "hash mismatch" in events[0].detail
        assert 61 not in robot.virtual.parts and 61 in robot.virtual.quarantined
        run(robot, 1.5)
        assert len([e for e in robot.part_events if e.part_id == 61]) == 1, "reported once, not at every rescan"


@pytest.mark.parametrize("key, value", [("lost_after_misses", 0), ("rescan_s", -1), ("lost_after_misses", 2.5)])
def test_presence_settings_are_checked_in_the_profile(tmp_path, key, value):
    from hil.devices.yaml_source import ConfigError
    from hil.runtime.robot import load_profile

    path = tmp_path / "p.yaml"
    path.write_text(f"bus: sim://commbot\nclock: sim\n{key}: {value}\n")
    with pytest.raises(ConfigError, match=f"p.yaml:3: {key}"):
        load_profile(path)


def test_act_dispatches_each_action_and_names_what_it_cannot_do():
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.bus_device import VirtualBusDevice

    dev = VirtualBusDevice(load_assembly("servo_chain").parts)
    hotplug.act(dev, "unplug", 3)
    assert hotplug.is_unplugged(dev, 3)
    hotplug.act(dev, "plug", 3)
    assert not hotplug.is_unplugged(dev, 3)
    hotplug.act(dev, "reboot", 3, boot_s=2.0)
    assert dev.silent_until[3] == pytest.approx(dev.clock() + 2.0, abs=0.5)
    with pytest.raises(hotplug.HotplugError, match="needs the part to put there"):
        hotplug.act(dev, "swap", 3)
    with pytest.raises(hotplug.HotplugError, match="no hot-plug action 'explode'; known: unplug, plug, reboot, swap"):
        hotplug.act(dev, "explode", 3)
    with pytest.raises(hotplug.HotplugError, match="no part has id 99"):
        hotplug.act(dev, "unplug", 99)


def test_an_overloaded_servo_latches_its_error_until_rebooted_and_a_trial_can_ask_for_it():
    from hil.devices.protocol import Ping, Reboot, StreamDecoder, encode_request
    from hil.firmware_sim.assembly import load_assembly
    from hil.firmware_sim.bus_device import VirtualBusDevice
    from hil.firmware_sim.fault_plan import parse_faults

    def answer(dev, request):
        dev.receive(encode_request(request))
        [reply] = StreamDecoder().feed(dev.take_output())
        return reply

    dev = VirtualBusDevice(load_assembly("servo_chain").parts)
    dev.part(4).memory.set("torque_enable", 1)
    hotplug.act(dev, "overload", 4)
    part = dev.part(4)
    assert (part.memory.get("hardware_error_status"), part.memory.get("torque_enable")) == (0x20, 0)
    assert answer(dev, Ping(4)).error == 0x80 and answer(dev, Ping(5)).error == 0
    answer(dev, Reboot(4))
    assert answer(dev, Ping(4)).error == 0 and part.memory.get("hardware_error_status") == 0
    [action] = parse_faults([{"at": 2, "overload": "head.neck_yaw"}], "trial.yaml", 1, 10.0)
    assert (action.kind, action.target) == ("overload", "head.neck_yaw")
