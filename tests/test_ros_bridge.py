"""The ROS 2 bridge (trial/ros_link): its plain parts without ROS, and a real rclpy node (Fast DDS) in a process of
its own that sends broken Twists to ``hil trial --ros`` and then dies.

The ROS test runs the real command line (``hil trial --ros``: the trial, its bridge process in ROS's Python) and
a node written here, in ROS's Python, on a ROS_DOMAIN_ID of its own with discovery on localhost. The node uses
``use_sim_time``; it writes what it received to a JSON file, which is checked against the trial's log. ROS's
Python is HIL_ROS_PYTHON or the checkout's .venv-ros (``make test`` builds it from the ``ros`` extra): without
it these tests skip on a developer's machine and fail under CI. The other topics, joint commands, a /cmd_vel
flood and a node driving to a goal: tests/test_ros_topics.py (one trial, one node, the watchdog at 2 s).
"""
from __future__ import annotations

import math
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec
import pytest
import zmq

from hil.bridge.envelope import VERSION, pack
from hil.trial.record import read_log
from hil.trial.ros_link import link as link_mod
from hil.trial.ros_link import launch
from hil.trial.ros_link.launch import DISCOVERY_PROFILE, NO_RCLPY, PROFILE_ENV, PYTHON_ENV
from hil.trial.ros_link.link import REFUSED, RosLink
from hil.trial.ros_link.ros_side import bridge_node

from conftest import hil_command
from ros_helpers import NODE_COMMON, ros_env, ros_python, run_with_node  # noqa: F401 (fixtures)


# --- the plain parts, no ROS needed -----------------------------------------------------------------------------
def test_bridge_node_speaks_the_links_wire():
    """The bridge imports nothing of hil, so it spells the envelope's version and the types itself."""
    assert bridge_node.ENVELOPE_VERSION == VERSION
    names = ("STATE", "BYE", "CMD_VEL", "JOINT_POSITIONS", "JOINT_TRAJECTORY", "FORWARD_TOPIC", "TRAJECTORY_TOPIC")
    assert [getattr(bridge_node, n) for n in names] == [getattr(link_mod, n) for n in names]
    assert bridge_node.NO_RCLPY == NO_RCLPY  # the exit status hil turns into its one line (launch.py)


def test_the_bridges_environment_keeps_discovery_local_and_announces_often(monkeypatch):
    """The bridge gets hil's Fast DDS profile (a participant announces itself every 0.2 s) and discovery on
    localhost, unless the environment says otherwise; ROS's wheels re-run their own start-up."""
    for name in (PROFILE_ENV, "FASTDDS_DEFAULT_PROFILES_FILE", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(launch.BOOTSTRAP_GUARD, "1")
    env = launch.ros_env()
    assert env[PROFILE_ENV] == str(DISCOVERY_PROFILE) and env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert launch.BOOTSTRAP_GUARD not in env
    ns = {"p": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}
    profile = ET.parse(DISCOVERY_PROFILE).getroot().find("p:participant", ns)
    assert profile.get("is_default_profile") == "true"
    period = profile.find("p:rtps/p:builtin/p:discovery_config/p:leaseAnnouncement", ns)
    assert int(period.find("p:sec", ns).text) + int(period.find("p:nanosec", ns).text) / 1e9 == 0.2
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/theirs.xml")
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    env = launch.ros_env()
    assert PROFILE_ENV not in env and env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"


def test_scan_follows_rep_117_and_the_rings_directions():
    """The commbot's ring (12 sensors, 30 degrees apart from straight ahead, counter-clockwise) as a LaserScan:
    sorted from -150 degrees; a reading in metres stays, no return is +inf, an invalid reading NaN."""
    angles = [math.radians(a) for a in range(0, 360, 30)]
    first, step, bins = bridge_node.scan_layout(angles)
    assert first == pytest.approx(math.radians(-150))
    assert step == pytest.approx(math.radians(30))
    assert bins[0] == 5 and bins[6] == 11 and bins[7] == 0  # ahead; behind (+180); -150
    ranges = [1.5, None, None, 2.0] + [None] * 8
    causes = [None, "no_hit", "noise", None] + ["range"] * 8
    scan = bridge_node.scan_ranges(ranges, causes, bins)
    assert scan[5] == 1.5 and scan[8] == 2.0
    assert scan[6] == math.inf
    assert math.isnan(scan[7]) and math.isnan(scan[0])
    assert bridge_node.scan_ranges([None], ["unknown"], [0]) == [math.inf]  # a part without cause codes


def test_uneven_ring_leaves_empty_bins_nan():
    first, step, bins = bridge_node.scan_layout([0.0, 0.5, 1.5])
    assert (first, step, bins) == (0.0, 0.5, [0, 1, 3])
    scan = bridge_node.scan_ranges([1.0, 1.0, 1.0], [None] * 3, bins)
    assert scan[:2] == [1.0, 1.0] and math.isnan(scan[2]) and scan[3] == 1.0


def test_link_refuses_broken_commands_over_its_socket():
    """NaN, inf, 1e9 and garbage sent to the link's real PULL socket: each refused with one line, REFUSED returned
    (the driver stops the base); a good command after them is taken."""
    errors: list[str] = []

    class Lines:
        def write(self, text: str) -> None:
            errors.extend(line for line in text.splitlines() if line)

        def flush(self) -> None:
            pass

    link = RosLink(err=Lines())
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(link.command_endpoint)
    try:
        bad = [{"v": math.nan, "w": 0.0}, {"v": 0.2, "w": math.inf}, {"v": 1e9, "w": 0.0}, {"v": "fast", "w": 0}]
        for payload in bad:
            push.send(pack(link_mod.CMD_VEL, payload))
        push.send(b"\xc1 not msgpack")
        taken = _take(link, 5)
        assert taken is REFUSED
        assert len(errors) == 5, errors
        assert "v=nan" in errors[0] and "the base stops" in errors[0]
        assert "1000000000.0" in errors[2]
        push.send(pack(link_mod.CMD_VEL, {"v": 0.25, "w": -0.1}))
        good = _take(link, 1)
        assert (good.v, good.w) == (0.25, -0.1)
        assert link.refused == 5
    finally:
        push.close()
        link.close()


def _take(link: RosLink, count: int):
    """take_command once the link has received ``count`` more messages (they arrive asynchronously)."""
    import time

    seen, result, deadline = link.received + count, None, time.monotonic() + 10
    while link.received < seen and time.monotonic() < deadline:
        got = link.take_command(0.0)
        if got is not None:
            result = got
        time.sleep(0.01)
    assert link.received >= seen, "the link did not get the commands"
    return result


def test_no_rclpy_says_what_to_do_in_one_line(tmp_path, capsys, monkeypatch):
    """A --ros-python without rclpy: exit 2 and one line naming what to source or install, from ``hil ros`` (which
    checks that Python) and from ``hil trial --ros`` (where the bridge starting in it is the check); no trial
    starts, no folder is written."""
    monkeypatch.setenv(PYTHON_ENV, "")
    done = subprocess.run([*hil_command(), "ros", "--ros-python", sys.executable], capture_output=True, text=True,
                          timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2
    assert len(lines) == 1, done.stderr
    assert "rclpy" in lines[0] and "source" in lines[0] and "hil[ros]" in lines[0]
    from hil.cli import main

    out = tmp_path / "trial"
    assert main(["trial", "--ros", "--ros-python", sys.executable, "--out", str(out), "--duration", "1"]) == 2
    said = capsys.readouterr()
    lines = [line for line in said.err.splitlines() if line.strip()]
    assert len(lines) == 1, said.err
    assert "rclpy" in lines[0] and "source" in lines[0] and "hil[ros]" in lines[0] and sys.executable in lines[0]
    assert not out.exists() and "bridge up" not in said.out
    ros_file = tmp_path / "ros.yaml"  # controller: ros is --ros with no controller: the same line
    ros_file.write_text("map: lab\ncontroller: ros\nduration: 1\n")
    assert main(["trial", str(ros_file), "--ros-python", sys.executable, "--out", str(out)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "rclpy" in lines[0] and not out.exists()


def test_controller_ros_outside_hil_trial_says_where_in_one_line(tmp_path):
    """A trial file's ``controller: ros`` needs the bridge hil trial starts: run from Python, the trial refuses at
    the file's line, before anything starts."""
    from hil.devices.yaml_source import ConfigError
    from hil.trial.run import Trial

    ros_file = tmp_path / "ros.yaml"
    ros_file.write_text("map: lab\ncontroller: ros\n")
    with pytest.raises(ConfigError, match=r"ros\.yaml:2: controller: ros: .*hil trial"):
        Trial.from_file(ros_file).run(tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- with ROS 2 ---------------------------------------------------------------------------------------------------
def test_bridge_survives_states_it_cannot_publish(ros_env, ros_python, monkeypatch):
    """The real bridge node fed, on its state socket, states it cannot publish (people without ids, a wrong
    type, broken diagnostics, a time that is no number or beyond ROS's, a camera with no size, bytes that are not
    msgpack) and then a good one: it says what it dropped, once per kind of error, and ends cleanly at the bye."""
    import time

    from hil.trial.ros_link.launch import BridgeProcess

    for name, value in ros_env.items():
        monkeypatch.setenv(name, value)
    lines: list[str] = []

    class Lines:
        def write(self, text: str) -> None:
            lines.extend(line for line in text.splitlines() if line)

        def flush(self) -> None:
            pass

    context = zmq.Context.instance()
    pub, pull = context.socket(zmq.PUB), context.socket(zmq.PULL)
    for sock in (pub, pull):
        sock.setsockopt(zmq.LINGER, 0)
    state = f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}"
    commands = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
    bridge = BridgeProcess(ros_python, state, commands, err=Lines())
    try:
        bridge.wait_ready()
        bad = [{"t": 0.1, "people": [{"x": 0.0}]}, {"t": 0.2, "people": "nobody"},
               {"t": 0.3, "diagnostics": [{"level": 7}]}, {"t": "soon"}, {"t": 1e30},
               {"t": 0.4, "cameras": [{"name": "head camera!", "frame_id": "x"}]}]
        good = {"t": 0.5, "people": [{"id": 3, "x": 1.0, "y": 2.0, "vx": 0.0, "vy": 0.0}],
                "diagnostics": [{"level": 0, "name": "hil: parts", "message": "every part answers",
                                 "hardware_id": "", "values": [["lost", ""]]}]}
        deadline = time.monotonic() + 30
        while bridge.proc.poll() is None and time.monotonic() < deadline:  # until the bye got through
            for payload in bad:
                pub.send(pack(bridge_node.STATE, payload))
            pub.send(b"\xc1 not msgpack")
            pub.send(pack(bridge_node.STATE, good))
            pub.send(pack(bridge_node.BYE, {}))
            time.sleep(0.2)
        assert bridge.proc.wait(timeout=10) == 0
    finally:
        bridge.stop()
        pub.close()
        pull.close()
    said = "\n".join(lines)
    assert "the trial ended" in said and "Traceback" not in said, said
    dropped = [line for line in lines if "was not (wholly) published" in line]
    assert 2 <= len(dropped) <= 6, said  # one line per kind of error, not one per message
    assert any("dropped a state message" in line for line in lines), said


BAD_NODE = NODE_COMMON + '''
from geometry_msgs.msg import TwistStamped  # the bridge follows the publishers' type
pub = node.create_publisher(TwistStamped, "/cmd_vel", 10)
spin_until(lambda: state["odom"] is not None and sim_now() > 0)

def drive(v, until):
    while sim_now() < until and not clock_stopped():
        msg = TwistStamped()
        msg.twist.linear.x = v
        pub.publish(msg)
        for _ in range(4):
            rclpy.spin_once(node, timeout_sec=0.01)

start = sim_now()
drive(0.3, start + 0.6)
sent = {}
for name, value in (("nan", math.nan), ("inf", math.inf), ("huge", 1e9)):
    msg = TwistStamped()
    msg.twist.linear.x = value
    pub.publish(msg)
    sent[name] = sim_now()
    spin_until(lambda: sim_now() > sent[name] + 0.2)
drive(0.3, sim_now() + 0.6)
finish(sent=sent, died_at=sim_now())
os._exit(0)  # dies at once, mid-drive: no stop is ever sent
'''


def test_broken_twists_are_refused_and_a_dead_node_is_stopped_by_the_watchdog(tmp_path, ros_env, ros_python):
    """TwistStamped at 0.3 m/s, then NaN, inf and 1e9 (each refused with one line, the base stopped), 0.3 m/s
    again, then the node dies mid-drive: the watchdog (the default one, 0.5 trial seconds) stops the base, and the
    log says so. The node's part takes about 2 trial seconds from when it first hears the trial, the watchdog
    and the stop one more."""
    seen, log, stderr = run_with_node(tmp_path, ros_env, ros_python, BAD_NODE, "--duration", "4.5", "--ros-rtf",
                                      "2")
    refusals = [line for line in stderr.splitlines() if "refused" in line]
    assert len(refusals) == 3, stderr
    assert "v=nan" in refusals[0] and "v=inf" in refusals[1] and "v=1000000000.0" in refusals[2]
    logged = log.messages["/trial/refused"]
    assert [m.data["by"] for m in logged] == ["ros /cmd_vel"] * 3
    applied = log.messages["/ros/cmd_vel"]
    stop = next(m for m in applied if m.data.get("why") == "refused")
    assert stop.data["v"] == 0.0 and stop.t == pytest.approx(logged[0].t)
    assert any(m.t > stop.t and m.data["v"] == pytest.approx(0.3) for m in applied)  # it drove again after
    watchdog = log.messages["/ros/watchdog"]
    assert len(watchdog) == 1
    assert watchdog[0].t >= seen["died_at"] - 0.1
    assert watchdog[0].data["silent_s"] > 0.5 and watchdog[0].data["limit_s"] == 0.5
    assert applied[-1].data == {"v": 0.0, "w": 0.0, "why": "watchdog"}
    late = [m.data["vx"] for m in log.messages["/robot/state"] if m.t > watchdog[0].t + 0.5]
    assert late and max(abs(v) for v in late) < 0.02  # stopped, and stayed stopped
    assert "no /cmd_vel for" in stderr


def test_wait_for_holds_the_trial_until_the_node_is_there_and_ctrl_c_ends_it(tmp_path, ros_env, ros_python):
    """``--ros-wait-for NODE``: the bridge is up but the trial's clock does not start while no such node is on the
    graph; it says what it waits for (the node, the domain), and Ctrl-C then ends it with no traceback, no log."""
    out = tmp_path / "trial"
    trial = subprocess.Popen([*hil_command(), "trial", "--ros", "--ros-wait-for", "nobody_here", "--map", "lab",
                              "--duration", "1", "--out", str(out), "--quiet"], env=ros_env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        waiting = None
        for line in trial.stderr:  # the bridge's lines come to the trial's stderr as they are said
            if "waiting for node" in line:
                waiting = line
                break
        assert waiting is not None and "nobody_here" in waiting and f"ROS_DOMAIN_ID={ros_env['ROS_DOMAIN_ID']}" \
            in waiting
        assert not (out / "trial.mcap").exists()  # held at its start
        trial.send_signal(signal.SIGINT)
        rest_out, rest_err = trial.communicate(timeout=30)
    finally:
        if trial.poll() is None:
            trial.kill()
            trial.wait()
    assert trial.returncode == 130, rest_out + rest_err
    assert "Traceback" not in rest_err and not (out / "trial.mcap").exists()


def test_cmd_vel_schema_bounds_match_the_link():
    """1e9 is beyond the bounds; 100 m/s is the bound itself (a number, not a command any base takes: the
    driver then scales it to the wheels)."""
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"v": 1e9, "w": 0.0}, link_mod.CmdVel)
    assert msgspec.convert({"v": 100.0, "w": 0.0}, link_mod.CmdVel).v == 100.0


def test_publishing_never_changes_the_trial(tmp_path):
    """A Python controller's trial with the link tapping it (what --ros adds) records the same robot, cycle for
    cycle, as without: the link only reads."""
    from hil.trial.run import Trial

    def logged(folder: Path, link: RosLink | None) -> list:
        served = {"taps": link.taps, "hooks": link.hooks} if link is not None else {}
        result = Trial("examples/wander_avoid.py", map="lab", duration=1, seed=3).run(folder, **served)
        assert result.status == "ok", result.error
        return [(m.t, m.data) for m in read_log(folder / "trial.mcap").messages["/robot/state"]]

    link = RosLink()
    sub = zmq.Context.instance().socket(zmq.SUB)  # a subscriber, so the link's messages really go out
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(link.state_endpoint)
    try:
        with_link = logged(tmp_path / "with", link)
    finally:
        link.close()
        sub.close()
    assert link.seq == len(with_link) > 15  # it published every cycle (20 a second)
    assert with_link == logged(tmp_path / "without", None)
