"""Contacts, the scenario's line, a trial file's ``ros:`` and a JointTrajectory's velocities on ROS 2, with a real
rclpy node (Fast DDS) in a process of its own against the real ``hil trial`` of a trial file with ``controller:
ros`` (tests/ros_helpers.py runs them); and ``hil demo --ros`` heard by a node.

The one trial: the lab, the robot at its centre facing north, a person (tests' scenario, below) walking up to it
and into it. The node sends a trajectory with velocities for the neck at once, then drives north on /cmd_vel
until ``/bumper`` says pressed, and records what it hears of ``/bumper``, ``/bumper/centre``, ``/contacts`` and
``/scenario/line``. The trial file's ``ros:`` sets the cycle rate (25 Hz: the log's /clock steps by 0.04 s),
the real-time factor and the watchdog.
"""
from __future__ import annotations

import json
import math
import subprocess
import textwrap

import pytest

from hil.cli import main
from hil.trial.record import read_log

from conftest import hil_command
from ros_helpers import (NODE_COMMON, TRIAL_TIMEOUT_S, decoded_bag, hil_log_rosbag, ros_env, ros_python,  # noqa: F401
                         run_with_node)

SCENARIO = """\
# a person walks up to the robot and into it
spawn a = man01 at 0.0 1.6
run 1s
move a to robot
objective a interact Dstop=0.0
run 30s
"""
TRIAL_FILE = """\
controller: ros
map: lab
scenario: bump.scn
start: [0, 0, 1.5707963]
duration: 9
camera_rate: 0
ros:
  rtf: 4
  hz: 25
  watchdog_s: 2
"""
# the trajectory: the neck from rest to 0.3 rad at 1 s moving at +0.8 rad/s, back to 0.3 rad at 3 s moving at
# -0.8 rad/s, to rest at 0 at 4 s: the middle segment bulges to 0.7 rad where a straight line stays at 0.3
POINTS = [(1.0, 0.3, 0.8), (3.0, 0.3, -0.8), (4.0, 0.0, 0.0)]

NODE = NODE_COMMON + f"POINTS = {POINTS!r}\n" + '''
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Twist
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import MarkerArray

latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
heard = {"bumper": [], "bumper/centre": [], "shoulders": [], "lines": [], "contacts": []}
for topic in ("bumper", "bumper/centre", "shoulders"):
    node.create_subscription(Bool, "/" + topic, lambda m, k=topic: heard[k].append([sim_now(), m.data]), latched)
node.create_subscription(String, "/scenario/line", lambda m: heard["lines"].append(m.data), latched)
node.create_subscription(MarkerArray, "/contacts", lambda m: heard["contacts"].append(
    [[stamp(k), k.ns, k.id, k.action, k.pose.position.x, k.pose.position.y] for k in m.markers]), 50)
cmd_vel = node.create_publisher(Twist, "/cmd_vel", 10)
trajectory = node.create_publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", 10)
spin_until(lambda: state["odom"] is not None and sim_now() > 0)

msg = JointTrajectory(joint_names=["head.neck_yaw"])
for at, position, velocity in POINTS:
    msg.points.append(JointTrajectoryPoint(positions=[position], velocities=[velocity], time_from_start=Duration(
        sec=int(at), nanosec=int(round((at % 1) * 1e9)))))
trajectory.publish(msg)

def pressed():
    return bool(heard["bumper"]) and heard["bumper"][-1][1]

drive = Twist()
drive.linear.x = 0.5
while not pressed() and sim_now() < 7.0 and not clock_stopped():
    cmd_vel.publish(drive if sim_now() > 0.5 else Twist())
    rclpy.spin_once(node, timeout_sec=0.02)
bumped_at = sim_now()
while not clock_stopped():
    cmd_vel.publish(Twist())
    rclpy.spin_once(node, timeout_sec=0.05)
finish(heard=heard, bumped_at=bumped_at)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("ros_contacts")


@pytest.fixture(scope="module")
def session(folder, ros_env, ros_python):
    (folder / "bump.scn").write_text(SCENARIO, encoding="utf-8")
    (folder / "bump.yaml").write_text(TRIAL_FILE, encoding="utf-8")
    # --no-fail: the robot drives into the person on purpose (a robot-initiated collision fails the verdict)
    return run_with_node(folder, ros_env, ros_python, NODE, "--no-fail", target=str(folder / "bump.yaml"))


def test_the_trial_files_ros_keys_are_honoured(session):
    """hz: 25 gives bus cycles 0.04 s apart; the log's /trial/meta keeps the rtf and watchdog the driver ran
    with."""
    seen, log, _ = session
    steps = {round(b.t - a.t, 6) for a, b in zip(log.messages["/clock"], log.messages["/clock"][1:])}
    assert steps == {0.04}
    assert log.messages["/clock"][-1].t == pytest.approx(9.0, abs=0.05)
    # what the driver ran with (the trial file's, the test's --ros-wait-for beside them)
    assert log.messages["/trial/meta"][0].data["trial"]["ros"] == {"rtf": 4.0, "hz": 25.0, "watchdog_s": 2.0,
                                                          "wait_for": ["test_driver"]}


def test_bumper_switches_follow_the_log(session):
    seen, log, _ = session
    heard = seen["heard"]
    pressed_at = [m.t for m in log.messages["/robot/sensors"] if "bumper.centre" in m.data["contacts"]]
    assert pressed_at, "the robot never pressed its bumper into the person"
    assert [v for _, v in heard["bumper"]][:2] == [False, True]  # all clear at the start, then the press
    assert [v for _, v in heard["bumper/centre"]][:2] == [False, True]
    first_true = next(t for t, v in heard["bumper"] if v)
    assert first_true >= pressed_at[0] - 1e-6  # heard no earlier than the log has it
    assert seen["bumped_at"] < 7.0  # the node stopped on it
    assert [v for _, v in heard["shoulders"]] == [False]  # published once, never pressed


def test_contacts_mark_the_person_touching_the_robot(session):
    seen, log, _ = session
    touches = [m for m in log.messages["/world/contacts"] if m.data["people"]]
    assert touches and touches[0].data["people"] == [0]
    arrays = seen["heard"]["contacts"]
    assert arrays[0][0][3] == 3  # DELETEALL first
    added = [m for array in arrays for m in array if m[3] == 0]
    assert added and all(m[1] == "contacts" and m[2] == 0 for m in added)
    first = added[0]
    t_ns = first[0]
    assert t_ns == round(touches[0].t * 1e9)  # stamped at the log's first touch
    people = {round(m.t * 1e9): m.data["people"] for m in log.messages["/pedestrians"]}
    states = {round(m.t * 1e9): m.data for m in log.messages["/robot/state"]}
    person, robot = people[t_ns][0], states[t_ns]
    # the person's edge toward the robot: its position moved by its radius toward the robot's true position
    dx, dy = robot["x"] - person["x"], robot["y"] - person["y"]
    gap = math.hypot(dx, dy)
    radius = person.get("radius") or 0.25
    assert first[4] == pytest.approx(person["x"] + dx / gap * radius, abs=1e-9)
    assert first[5] == pytest.approx(person["y"] + dy / gap * radius, abs=1e-9)
    assert any(m[3] == 2 and m[2] == 0 for array in arrays for m in array) or touches[-1] == \
        log.messages["/world/contacts"][-1]  # a DELETE once the touch ended (unless it lasted to the end)


def test_scenario_line_says_each_line_that_ran_with_file_and_line(session):
    seen, log, _ = session
    ran = log.messages["/crowd/script"]
    assert len(ran) >= 3
    expected = [f"bump.scn:{m.data['line']}: {m.data['text']}" for m in ran]
    assert seen["heard"]["lines"] == expected
    assert expected[0] == "bump.scn:2: spawn a = man01 at 0.0 1.6"


def test_a_trajectory_with_velocities_follows_the_hermite_spline(session):
    """The neck's logged position in the middle of the second segment is the cubic Hermite's, computed here by
    hand (0.7 rad), not the straight line's (0.3 rad)."""
    seen, log, _ = session
    [taken] = [m for m in log.messages["/ros/joint_command"]]
    assert taken.data["interpolation"] == "cubic" and taken.data["velocities"] == [[0.8], [-0.8], [0.0]]
    start = taken.data["start"]

    def hermite(p0, v0, p1, v1, span, s):
        u = s / span
        return ((2 * u ** 3 - 3 * u ** 2 + 1) * p0 + (u ** 3 - 2 * u ** 2 + u) * span * v0 +
                (-2 * u ** 3 + 3 * u ** 2) * p1 + (u ** 3 - u ** 2) * span * v1)

    def logged(t):
        return min(log.messages["/robot/state"], key=lambda m: abs(m.t - t)).data["joints"]["head.neck_yaw"]

    middle = hermite(0.3, 0.8, 0.3, -0.8, 2.0, 1.0)
    assert middle == pytest.approx(0.7)
    # the servo follows its target a cycle or so behind: compare where the curve is flat (its top)
    assert logged(start + 2.0) == pytest.approx(middle, abs=0.05)
    assert abs(logged(start + 2.0) - 0.3) > 0.3  # not the straight line
    first_half = hermite(0.0, 0.0, 0.3, 0.8, 1.0, 0.5)  # from rest to the first point
    assert logged(start + 0.5) == pytest.approx(first_half, abs=0.06)
    assert logged(start + 5.0) == pytest.approx(0.0, abs=0.02)  # the last point, held


def test_the_rosbag_has_the_switches_touches_and_lines(session, folder):
    seen, log, _ = session
    status, out, err = hil_log_rosbag(str(folder / "trial"), "--out", str(folder / "bag"))
    assert status == 0, out + err
    bag = decoded_bag(folder / "bag")
    assert [m.data for _, m in bag["/scenario/line"]] == seen["heard"]["lines"]
    assert [m.data for _, m in bag["/bumper"]][:2] == [False, True]
    assert [m.data for _, m in bag["/bumper/centre"]] == [v for _, v in seen["heard"]["bumper/centre"]]
    live = [[m[2], m[3], m[4], m[5]] for array in seen["heard"]["contacts"] for m in array]
    recorded = [[k.id, k.action, k.pose.position.x, k.pose.position.y] for _, m in bag["/contacts"] for k in m.markers]
    assert recorded == live
    [(_, trajectory)] = bag["/joint_trajectory_controller/joint_trajectory"]
    assert [list(p.velocities) for p in trajectory.points] == [[0.8], [-0.8], [0.0]]


def test_a_bad_ros_key_is_one_line_at_its_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("controller: ros\nmap: lab\nros:\n  rtf: 2\n  hz: fast\n", encoding="utf-8")
    assert main(["trial", str(tmp_path / "bad.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"hil: error: {tmp_path / 'bad.yaml'}:5: ros.hz must be a number > 0 (at most 1000): bus " \
                  "cycles (and /odom, /scan, /joint_states) per trial second, with controller: ros, not 'fast'"
    (tmp_path / "typo.yaml").write_text("controller: ros\nros: {rtff: 2}\n", encoding="utf-8")
    assert main(["trial", str(tmp_path / "typo.yaml")]) == 2
    assert "typo.yaml:2: unknown key ros.rtff; did you mean 'rtf'?" in capsys.readouterr().err


def test_the_command_line_wins_over_the_files_ros_keys(tmp_path):
    from hil.cli import build_parser
    from hil.trial.ros_link.cli import settle_ros_options
    from hil.trial.spec import load_trial_file

    (tmp_path / "t.yaml").write_text("controller: ros\nros: {rtf: 3, hz: 20, wait_for: nav, python: py/bin/x}\n",
                                     encoding="utf-8")
    argv = ["trial", str(tmp_path / "t.yaml"), "--ros-hz", "40", "--ros-wait-for", "a"]
    args = build_parser(argv).parse_args(argv)
    settle_ros_options(args, load_trial_file(tmp_path / "t.yaml").ros)
    assert (args.ros_rtf, args.ros_hz, args.ros_watchdog, args.ros_wait_for, args.ros_python) == \
        (3.0, 40.0, 0.5, ["a"], str(tmp_path / "py/bin/x"))


DEMO_NODE = NODE_COMMON + '''
from rosgraph_msgs.msg import Clock
clocks = []
node.create_subscription(Clock, "/clock", lambda m: clocks.append(m.clock.sec * 1_000_000_000 + m.clock.nanosec),
                         500)
spin_until(lambda: False, 120)
finish(clock=clocks)
'''


DRIVE_SLOWLY = """\
def main(robot):
    for tick in robot.loop(50):
        robot.base.drive(0.1, 0.0)
"""


@pytest.mark.parametrize("command", ["demo", "run"])
def test_hil_demo_and_hil_run_with_ros_are_heard_by_a_node(command, tmp_path, ros_env, ros_python):
    """``hil demo --ros`` and ``hil run --ros``: published only (their controller drives); a node hears /clock and
    /odom stamped with the run's log times."""
    (tmp_path / "node.py").write_text(textwrap.dedent(DEMO_NODE), encoding="utf-8")
    (tmp_path / "drive.py").write_text(DRIVE_SLOWLY, encoding="utf-8")
    out = tmp_path / "out"
    argv = {"demo": ["demo", "--duration", "3", "--camera-rate", "0", "--out", str(out), "--quiet", "--no-fail"],
            "run": ["run", str(tmp_path / "drive.py"), "--profile", "virtual", "--duration", "3", "--record",
                    str(out)]}[command]
    with open(tmp_path / "node.log", "w") as node_log:
        node = subprocess.Popen([ros_python, str(tmp_path / "node.py"), str(tmp_path / "seen.json")], env=ros_env,
                                stdout=node_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            done = subprocess.run([*hil_command(), *argv, "--ros", "--ros-wait-for", "test_driver"], env=ros_env,
                                  capture_output=True, text=True, timeout=TRIAL_TIMEOUT_S)
            node.wait(timeout=30)
        finally:
            if node.poll() is None:
                node.kill()
                node.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "controller drives" in done.stdout
    seen = json.loads((tmp_path / "seen.json").read_text())
    log = read_log(out / "trial.mcap")
    clock_ns = {round(m.t * 1e9) for m in log.messages["/clock"]}
    assert len(seen["clock"]) > 10 and set(seen["clock"]) <= clock_ns
    assert len(seen["odom"]) > 10 and set(seen["odom"]) <= clock_ns
    assert max(seen["clock"]) > 2.0e9  # heard through the run, not only its start


def test_a_quintic_segment_meets_positions_velocities_and_accelerations_at_both_ends():
    """The quintic a trajectory with accelerations follows: at both ends the position, velocity and acceleration
    given; halfway, the value of the polynomial solved by hand for p0=0, v0=a0=0 to p1=1, v1=a1=0 over 1 s
    (10 u^3 - 15 u^4 + 6 u^5 at u = 1/2: 0.5) and, with v0 = 1, 0.5 + 5/32 (the velocity's own quintic term)."""
    from hil.trial.ros_link.joint_commands import spline

    ends = (0.2, -0.7, 1.5, 0.9, 0.4, -2.0)  # p0, v0, a0, p1, v1, a1
    assert spline(*ends, 2.0, 0.0) == pytest.approx((0.2, -0.7, 1.5), abs=1e-12)
    assert spline(*ends, 2.0, 2.0) == pytest.approx((0.9, 0.4, -2.0), abs=1e-12)
    assert spline(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.5)[0] == pytest.approx(0.5)
    # v0 = 1 adds u - 6 u^3 + 8 u^4 - 3 u^5 (the quintic with unit start velocity, zero elsewhere): 5/32 at 1/2
    assert spline(0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.5)[0] == pytest.approx(0.5 + 5 / 32)
    assert spline(0.0, 0.0, None, 1.0, 0.0, None, 1.0, 0.25)[0] == pytest.approx(3 / 16 - 2 / 64)  # the cubic
