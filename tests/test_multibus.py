"""One robot on two buses: the commbot's body in this process (sim://commbot_body) and its left arm
as a virtual device in another process on a real pty (`hil sim left_arm --pty --no-world`, wall clock), mounted
on the torso's shoulder_left port. The arm's IDs (1..9) collide with the body's on purpose.

No timing assertions: targets are reached when the joints get there, however long the machine takes.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from hil.devices.yaml_source import ConfigError
from hil.runtime import Robot
from hil.runtime.bus import BusHost
from hil.runtime.model import build_model, total_mass
from hil.runtime.robot import load_profile
from hil.devices.config_path import builtin_root
from hil.runtime.scan import scan_bus
from hil.runtime.transports import open_transport

ARM_JOINTS = ("left_arm.shoulder_pitch", "left_arm.shoulder_roll", "left_arm.shoulder_yaw", "left_arm.elbow",
              "left_arm.hand")
BODY_NO_WORLD = "sim://commbot_body?world=0"
REACHED_RAD = 0.02
MAX_TICKS = 2000  # a bound that only a broken loop reaches (40 s at 50 Hz); no timing is asserted




@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("descriptors")


def write_profile(path: Path, buses: str, cache_dir: Path | None = None) -> Path:
    """A two-bus profile file (so that errors can name its lines). ``buses`` is the YAML list, indented 2."""
    cache = f"cache_dir: {cache_dir}\n" if cache_dir else ""
    path.write_text(f"clock: real\nsemantics: commbot\n{cache}buses:\n{buses}")
    return path


def two_buses(tmp_path: Path, cache_dir: Path, arm_url: str, body: str = BODY_NO_WORLD,
              mount: str = "{part: torso, port: shoulder_left}") -> Path:
    return write_profile(tmp_path / "two.yaml", f"  - {{name: body, url: '{body}'}}\n"
                                                f"  - {{name: arm, url: '{arm_url}', mount: {mount}}}\n", cache_dir)


def scan_alone(url: str, cache_dir: Path):
    from hil.runtime.scan import DescriptorCache

    with BusHost(open_transport(url)) as host:
        return scan_bus(host, DescriptorCache(cache_dir))


# --- one tree ---------------------------------------------------------------------------------------------------
def test_two_buses_scan_as_one_tree_with_the_commbots_names_and_mass(arm, tmp_path, cache_dir):
    commbot = build_model(scan_alone("sim://commbot?world=0", cache_dir))
    body = build_model(scan_alone(BODY_NO_WORLD, cache_dir))
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where)) as robot:
        virtual = robot.virtual
        shoulder = next(p for p, _ in virtual.walk() if virtual.path(p.id) == "torso/shoulder_left")
        assert (shoulder.bus, shoulder.wire_id) == ("arm", 1)  # ID 1 on the arm's bus, not the carriage
        torso = next(p for p, _ in virtual.walk() if virtual.path(p.id) == "torso")
        assert torso.bus == "body" and torso.children["shoulder_left"] == shoulder.id
        assert virtual.parts[virtual.root_id].descriptor.name == "carriage"
        assert sum(1 for p in virtual.parts.values() if p.bus == "arm") == 9
        assert not virtual.problems and not virtual.quarantined
        # the names of config/semantics/commbot.yaml bind through the mount, on the right bus
        for name in ARM_JOINTS:
            assert robot.joints[name].bus == "arm"
            assert robot.joints[name].host is robot.buses["arm"]
        assert robot.joints["head.neck_yaw"].bus == "body"
        assert robot.joints["left_arm.elbow"].path == "torso/shoulder_left/horn/mount/horn/mount/horn/elbow"
        assert robot.sensors["left_arm.forearm"].bus == "arm"
        # joints: the body's + the arm's = the commbot's
        assert len(robot.joints) == body.nq + len(ARM_JOINTS) == commbot.nq
        assert robot.model.nq == commbot.nq
        assert total_mass(robot.model) == pytest.approx(total_mass(commbot), rel=1e-12)
        assert list(robot.buses) == ["body", "arm"] and robot.bus is robot.buses["body"]


@pytest.mark.parametrize("mount", ["{part: 'body:6', port: shoulder_left}",  # BUS:ID
                                   "{part: shoulders, port: shoulder_left}",  # a blueprint name (the torso's pads)
                                   "{part: torso, port: INDEX}"])  # a port by its index in the port list
def test_a_mount_names_its_part_by_id_blueprint_name_or_path_and_its_port_by_index(arm, tmp_path, cache_dir, mount):
    torso = scan_alone(BODY_NO_WORLD, cache_dir).parts[6]
    mount = mount.replace("INDEX", str([p.name for p in torso.descriptor.ports].index("shoulder_left")))
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where, mount=mount)) as robot:
        assert robot.joints["left_arm.shoulder_pitch"].path == "torso/shoulder_left"


# --- one loop ---------------------------------------------------------------------------------------------------
def test_one_loop_drives_a_joint_on_each_bus_to_its_target(arm, tmp_path, cache_dir):
    profile = two_buses(tmp_path, cache_dir, arm.where, body="sim://commbot_body")  # the body in its world
    with Robot.open(profile) as robot:
        neck, elbow = robot.joints["head.neck_yaw"], robot.joints["left_arm.elbow"]
        goals = {neck: neck.position + 0.3, elbow: elbow.position + 0.4}
        for joint, goal in goals.items():
            joint.target = goal
        for tick in robot.loop(hz=50):
            if all(abs(j.position - g) < REACHED_RAD for j, g in goals.items()) or tick.index >= MAX_TICKS:
                break
        for joint, goal in goals.items():
            assert joint.position == pytest.approx(goal, abs=REACHED_RAD), joint.name
            spec = joint.register("present_position")  # read back on the joint's own bus, outside the cycle
            raw = int.from_bytes(joint.host.read(joint.part_id, spec.address, spec.size), "little", signed=spec.signed)
            assert robot.drivers[joint.part_key].to_si(spec.name, raw) == pytest.approx(goal, abs=REACHED_RAD)
        # each tick is one cycle per bus: with no target changing, exactly one read transaction on each
        before = {name: s.transactions for name, s in robot.bus_stats.items()}
        for n, _ in enumerate(robot.loop(hz=50)):  # ten cycles: a tick's index skips the ticks a loaded machine missed
            if n == 9:
                break
        assert {name: s.transactions - before[name] for name, s in robot.bus_stats.items()} == {"body": 10, "arm": 10}
        assert robot.stats is robot.buses["body"].stats


# --- validation -------------------------------------------------------------------------------------------------
NOWHERE = "/dev/hil-no-such-port"  # static errors must come before anything is opened


def test_two_roots_are_refused_before_opening_anything(tmp_path):
    path = write_profile(tmp_path / "p.yaml", f"  - {{name: body, url: '{BODY_NO_WORLD}'}}\n"
                                              f"  - {{name: arm, url: {NOWHERE}}}\n")
    with pytest.raises(ConfigError, match=r"p\.yaml:5: two roots: buses body \(line 4\), arm \(line 5\)"):
        Robot.open(path)


@pytest.mark.parametrize("mounts, line, message", [
    ("{part: 'nope:6', port: shoulder_left}", 5, r"names bus 'nope', which is not in this profile"),
    ("{part: 'arm:1', port: horn}", 5, r"is on this bus itself"),
])
def test_a_mount_on_an_unknown_bus_names_its_line(tmp_path, mounts, line, message):
    path = write_profile(tmp_path / "p.yaml", f"  - {{name: body, url: '{BODY_NO_WORLD}'}}\n"
                                              f"  - {{name: arm, url: {NOWHERE}, mount: {mounts}}}\n")
    with pytest.raises(ConfigError, match=rf"p\.yaml:{line}: bus arm: .*{message}"):
        Robot.open(path)


def test_two_buses_on_one_port_and_one_url_twice_and_cycles_are_refused(tmp_path):
    body = f"  - {{name: body, url: '{BODY_NO_WORLD}'}}\n"
    occupied = write_profile(tmp_path / "a.yaml", body +
                             f"  - {{name: arm, url: {NOWHERE}, mount: {{part: torso, port: shoulder_left}}}}\n"
                             f"  - {{name: arm2, url: {NOWHERE}2, mount: {{part: torso, port: shoulder_left}}}}\n")
    with pytest.raises(ConfigError, match=r"a\.yaml:6: bus arm2: port 'shoulder_left' of torso is already "
                                          r"occupied by bus arm \(line 5\)"):
        load_profile(occupied)
    twice = write_profile(tmp_path / "b.yaml", body +
                          f"  - {{name: arm, url: {NOWHERE}, mount: {{part: torso, port: 1}}}}\n"
                          f"  - {{name: arm2, url: 'serial://{NOWHERE}?baud=1000000', mount: {{part: torso, port: 2}}}}\n")
    with pytest.raises(ConfigError, match=r"b\.yaml:6: bus arm2: .* is the same device as bus arm on line 5"):
        load_profile(twice)
    cycle = write_profile(tmp_path / "c.yaml", body +
                          f"  - {{name: a, url: {NOWHERE}1, mount: {{part: 'b:1', port: horn}}}}\n"
                          f"  - {{name: b, url: {NOWHERE}2, mount: {{part: 'a:1', port: horn}}}}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:5: bus a: mount cycle: a -> b -> a"):
        load_profile(cycle)
    both = tmp_path / "d.yaml"
    both.write_text(f"clock: real\nbus: {NOWHERE}\nbuses:\n{body}")
    with pytest.raises(ConfigError, match=r"d\.yaml:3: give either bus: .* or buses:"):
        load_profile(both)


def test_an_unknown_mount_part_names_its_line_and_the_close_paths(arm, tmp_path, cache_dir):
    path = two_buses(tmp_path, cache_dir, arm.where, mount="{part: torsoo, port: shoulder_left}")
    with pytest.raises(ConfigError, match=r"two\.yaml:6: bus arm: mount.part 'torsoo' is no part of the robot "
                                          r".*did you mean 'torso'"):
        Robot.open(path)
    assert arm.alive  # the arm's bus was opened and scanned, then closed again: the device goes on serving


def test_a_mount_on_a_port_the_body_already_uses_names_its_line(arm, tmp_path, cache_dir):
    path = two_buses(tmp_path, cache_dir, arm.where, mount="{part: torso, port: shoulder_right}")
    with pytest.raises(ConfigError, match=r"two\.yaml:6: bus arm: port 'shoulder_right' of part body:6 \(torso\) is "
                                          r"already occupied by body:20 \(cpc_servo\)"):
        Robot.open(path)
    with Robot.open(two_buses(tmp_path, cache_dir, arm.where)) as robot:  # and the port is free again after
        assert "left_arm.elbow" in robot.joints


def test_the_sim_clock_refuses_a_second_in_process_world(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(f"clock: sim\nbuses:\n  - {{name: body, url: '{BODY_NO_WORLD}'}}\n"
                    "  - {name: arm, url: 'sim://left_arm', mount: {part: torso, port: shoulder_left}}\n")
    with pytest.raises(ConfigError, match=r"p\.yaml:4: bus arm: .* the sim clock does not step"):
        load_profile(path)


def test_the_shipped_two_bus_profile_is_valid():
    profile = load_profile(builtin_root() / "profiles" / "two_buses.yaml")
    assert [b.name for b in profile.buses] == ["body", "arm"]
    assert profile.buses[1].mount.part == "torso" and profile.bus == "sim://commbot_body"
