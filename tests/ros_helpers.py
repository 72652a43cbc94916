"""What the ROS 2 tests share: ROS's Python (HIL_ROS_PYTHON or the checkout's .venv-ros, which ``make test``
builds from the ``ros`` extra) and a ROS_DOMAIN_ID of each test module's own on localhost, with hil's Fast DDS
profile for the tests' nodes too (a participant already running announces itself every 0.2 s, so the bridge that
starts after a node finds it at once: trial/ros_link/ros_side/fastdds_discovery.xml). Without ROS's Python the
tests that need it skip on a developer's machine and fail under CI. Import the fixtures into a test module:
``from ros_helpers import ros_env, ros_python  # noqa: F401``.

Starting ROS processes is what these tests pay for (a trial with its bridge, a node, DDS discovery), not the
trials: so a module runs one ``hil trial --ros`` with one node that goes through every scenario its tests check
in turn, each scenario timed from what the node saw, and the tests assert on that one recording."""
from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from hil.cli import main
from hil.trial.record import read_log
from hil.trial.ros_link.launch import DISCOVERY_PROFILE, PROFILE_ENV, PYTHON_ENV, checkout_venv, works

from conftest import hil_command

TRIAL_TIMEOUT_S = 120
NODE_NAME = "test_driver"  # NODE_COMMON's node: the trial's clock starts once it is on the graph (--ros-wait-for)

# the start of a test's node: use_sim_time, /odom and /scan seen, helpers to spin on sim time and to write
# what it saw (sys.argv[1], JSON)
NODE_COMMON = '''
import json, math, os, sys, time
import rclpy
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from nav_msgs.msg import Odometry
from sensor_msgs.msg import LaserScan

OUT = sys.argv[1]
rclpy.init()
node = rclpy.create_node("test_driver", parameter_overrides=[Parameter("use_sim_time", value=True)])
seen = {"odom": [], "scan": [], "front": []}
state = {"odom": None, "front": None}

def stamp(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

def on_odom(msg):
    seen["odom"].append(stamp(msg))
    p = msg.pose.pose
    state["odom"] = (p.position.x, p.position.y, 2 * math.atan2(p.orientation.z, p.orientation.w))

def on_scan(msg):
    seen["scan"].append(stamp(msg))
    ahead = [r for k, r in enumerate(msg.ranges)
             if abs(msg.angle_min + k * msg.angle_increment) <= math.radians(20) and math.isfinite(r)]
    state["front"] = min(ahead) if ahead else math.inf
    seen["front"].append(state["front"])

node.create_subscription(Odometry, "/odom", on_odom, 10)
node.create_subscription(LaserScan, "/scan", on_scan, qos_profile_sensor_data)

def sim_now():
    return node.get_clock().now().nanoseconds / 1e9

_clock = {"sim": 0.0, "wall": time.monotonic()}

def clock_stopped(after_s=3.0):
    """The trial's clock started and has not moved for after_s wall seconds (the trial ended): every loop of the
    node ends then, so the node writes what it saw instead of waiting on a clock that will not come."""
    now = sim_now()
    if now != _clock["sim"]:
        _clock["sim"], _clock["wall"] = now, time.monotonic()
    return _clock["sim"] > 0 and time.monotonic() - _clock["wall"] > after_s

def spin_until(done, wall_limit_s=60.0):
    start = time.monotonic()
    while not done() and time.monotonic() - start < wall_limit_s and not clock_stopped():
        rclpy.spin_once(node, timeout_sec=0.05)

def finish(**extra):
    with open(OUT, "w") as f:
        json.dump({**seen, **extra}, f)
'''


@pytest.fixture(scope="module")
def ros_python() -> str:
    python = os.environ.get(PYTHON_ENV) or (str(checkout_venv()) if checkout_venv().exists() else None)
    why = "no ROS Python (set HIL_ROS_PYTHON or run make test, which builds .venv-ros)" if python is None \
        else works(python)
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the ROS 2 tests need rclpy: {why}")
        pytest.skip(why)
    return python


_DOMAINS = itertools.count()


@pytest.fixture(scope="module")
def ros_env(ros_python) -> dict[str, str]:
    """A domain of this module's own (from the process id, so parallel test processes differ) on localhost."""
    domain = 1 + (os.getpid() * 7 + next(_DOMAINS)) % 100
    return {**os.environ, "ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            PYTHON_ENV: ros_python, PROFILE_ENV: str(DISCOVERY_PROFILE)}


def run_with_node(tmp_path: Path, env: dict[str, str], ros_python: str, node_source: str, *trial_args: str,
                  target: str | None = None):
    """The node started first, then ``hil trial [TARGET] --ros --ros-wait-for test_driver`` (TARGET: a trial file,
    e.g. one with ``controller: ros``): the trial's clock starts once the node is on the graph, so the node hears
    the trial from its first cycle however busy the machine is; (node's JSON, the trial's log, the trial's
    stderr)."""
    node_file, seen_file, out = tmp_path / "node.py", tmp_path / "seen.json", tmp_path / "trial"
    node_file.write_text(textwrap.dedent(node_source), encoding="utf-8")
    node_log = open(tmp_path / "node.log", "w")
    node = subprocess.Popen([ros_python, str(node_file), str(seen_file)], env=env, stdout=node_log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        trial = subprocess.run([*hil_command(), "trial", *([target] if target else []), "--ros", "--ros-wait-for", NODE_NAME, "--map", "lab",
                                "--out", str(out), "--quiet", *trial_args], env=env, capture_output=True, text=True,
                               timeout=TRIAL_TIMEOUT_S)
        node.wait(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
        node_log.close()
    assert trial.returncode == 0, trial.stdout + trial.stderr
    assert seen_file.exists(), (tmp_path / "node.log").read_text() + trial.stderr
    return json.loads(seen_file.read_text()), read_log(out / "trial.mcap"), trial.stderr


def hil_log_rosbag(*argv: str) -> tuple[int, str, str]:
    """``hil log rosbag ARGV``, hil's command line called in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["log", "rosbag", *argv])
    return status, out.getvalue(), err.getvalue()


def decoded_bag(bag: Path) -> dict[str, list[tuple[int, object]]]:
    """Every message of a rosbag2 by topic, (recorded time in ns, the message) as ``rosbags`` decodes it."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    out: dict[str, list[tuple[int, object]]] = {}
    with Reader(bag) as reader:
        for connection, timestamp, raw in reader.messages():
            out.setdefault(connection.topic, []).append((timestamp, store.deserialize_cdr(raw, connection.msgtype)))
    return out
