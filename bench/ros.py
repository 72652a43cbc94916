"""What publishing a trial to ROS 2 costs: the demo's real-time factor with and without ``--ros``'s publishing.

  python -m bench.ros [--duration S] [--rounds 3] [--camera-rate HZ] [--smoke]

The demo (seed 0, its Python controller, ``--duration`` sim seconds, after one uncounted warm-up trial) run
``plain``; ``published``: with the ROS 2 bridge as ``hil trial --ros`` gives a Python controller's trial (the
link's recorder tap and after-cycle hook in the trial's process, the bridge node in ROS's Python publishing every
topic: /clock, /odom, /scan, /joint_states, /people/markers, /people/ground_truth, /diagnostics, ...) and no
subscriber; ``subscribed``: the same with an rclpy node in a process of its own subscribed to every topic the
bridge publishes, counting what it receives. Alternated round by round so all see the same load; each mode's
real-time factor against the same round's plain run (medians), the ratios side by side. Beside them the figure the
machine's load does not change: the CPU the trial's thread spends in the link (``thread_time`` of its tap and hook)
per sim second, as a share of the plain trial's CPU, and the bridge's and the node's own CPU (their processes:
other processes, on a machine with a core to spare they cost the trial nothing). Target: publishing
everything but cameras costs <= 3 % of the real-time factor, with cameras <= 10 % (``--camera-rate 5``: the
cameras recorded with depth at 5 Hz in every mode, so each mode renders the same frames and the difference is what
publishing them costs).

ROS's Python is HIL_ROS_PYTHON or what ``hil ros`` finds; without one the benchmark says so and runs the plain
trials only. The ROS processes get a ROS_DOMAIN_ID of their own on localhost.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from statistics import median

from bench._proc import process_jiffies
from bench._smoke import parse_with_smoke
from bench.foxglove import _Timed

MODES = ("plain", "published", "subscribed")
WHAT = {"published": "the bridge publishing, no subscriber", "subscribed": "the bridge + a node subscribed to "
        "every topic"}
LISTENER_NAME = "bench_listener"
LISTENER = '''
import json, sys, time
import rclpy
from rclpy.qos import qos_profile_sensor_data
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState, LaserScan, PointCloud2
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

rclpy.init()
node = rclpy.create_node("bench_listener")
counts = {}

def counter(topic):
    counts[topic] = 0
    def on(msg):
        counts[topic] += 1
        last[0] = time.monotonic()
    return on

last = [None]
for kind, topic in ((Clock, "/clock"), (Odometry, "/odom"), (JointState, "/joint_states"),
                    (MarkerArray, "/people/markers"), (PointCloud2, "/people/ground_truth"),
                    (DiagnosticArray, "/diagnostics"), (String, "/robot_description")):
    node.create_subscription(kind, topic, counter(topic), 100)
node.create_subscription(LaserScan, "/scan", counter("/scan"), qos_profile_sensor_data)
from sensor_msgs.msg import CameraInfo, Image
for camera in ("head_camera", "right_camera"):
    for kind, topic in ((Image, f"/{camera}/image_raw"), (Image, f"/{camera}/depth/image_raw"),
                        (CameraInfo, f"/{camera}/camera_info")):
        node.create_subscription(kind, topic, counter(topic), qos_profile_sensor_data)
print("up", flush=True)
while last[0] is None or time.monotonic() - last[0] < 3.0:  # until the trial has been quiet for 3 s
    rclpy.spin_once(node, timeout_sec=0.1)
print(json.dumps({"counts": counts}), flush=True)
'''


def _ros_python() -> str | None:
    from hil.trial.ros_link.launch import RosUnavailable, find_ros_python

    try:
        return find_ros_python()
    except RosUnavailable as exc:
        print(f"  (no ROS 2 here: {exc}; the plain trials only)")
        return None


def _trial(duration: float, out: Path, mode: str, python: str | None, tmp: Path, camera_rate: float):
    """One demo trial in ``mode``: (its TrialResult, the trial's process CPU s, the link's CPU s on the trial's
    thread, the bridge's CPU s, the node's report or None)."""
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial

    spec = demo_spec(duration=duration, camera_rate=camera_rate, camera_depth=camera_rate > 0)
    cpu0 = _cpu_s()
    if mode == "plain":
        result = Trial(spec=spec).run(out)
        return result, _cpu_s() - cpu0, None, None, None
    from hil.trial.ros_link.launch import BridgeProcess, ros_env
    from hil.trial.ros_link.link import RosLink

    node = None
    if mode == "subscribed":
        (tmp / "listener.py").write_text(textwrap.dedent(LISTENER))
        node = subprocess.Popen([python, str(tmp / "listener.py")], env=ros_env(), stdout=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
        assert node.stdout.readline().strip() == "up"
    link = RosLink(err=open(os.devnull, "w"))
    bridge = BridgeProcess(python, link.state_endpoint, link.command_endpoint, err=open(os.devnull, "w"),
                           extra=["--wait-for", LISTENER_NAME] if node is not None else [])
    try:
        bridge.wait_ready()
        jiffies0 = process_jiffies(bridge.proc.pid)
        taps, hooks = [_Timed(t) for t in link.taps], [_FirstApart(h) for h in link.hooks]
        cpu0 = _cpu_s()
        result = Trial(spec=spec).run(out, taps=tuple(taps), hooks=tuple(hooks))
        cpu = _cpu_s() - cpu0
        bridge_s = (process_jiffies(bridge.proc.pid) - jiffies0) / os.sysconf("SC_CLK_TCK")
    finally:
        link.close()
        bridge.stop()
    report = None
    if node is not None:
        text = node.communicate(timeout=60)[0]
        line = next((x for x in text.splitlines() if x.startswith("{")), None)
        report = json.loads(line) if line else None
    link_s = (sum(t.cpu_s for t in [*taps, *hooks]), sum(h.first_s for h in hooks))
    return result, cpu, link_s, bridge_s, report


class _FirstApart(_Timed):
    """The after-cycle hook timed as :class:`_Timed` does, its first call apart (``first_s``: the link builds the
    robot's URDF once there, a start-up cost, not a per-cycle one)."""

    def __init__(self, fn):
        super().__init__(fn)
        self.first_s: float | None = None

    def __call__(self, *args):
        before = self.cpu_s
        try:
            return super().__call__(*args)
        finally:
            if self.first_s is None:
                self.first_s = self.cpu_s - before
                self.cpu_s = before


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def bench_publishing(duration: float, rounds: int, camera_rate: float, warm: bool = True) -> None:
    """Each mode's trials alternated over ``rounds``, after a warm-up trial unless ``warm`` is False (the smoke run:
    its first trial pays the imports, and its figures mean nothing)."""
    python = _ros_python()
    modes = MODES if python is not None else MODES[:1]
    cameras = f"its 2 cameras recorded (and so published) at {camera_rate:g} Hz with depth" if camera_rate else \
        "no cameras (the demo's default)"
    print(f"the demo, seed 0, {duration:g} s of sim time, {cameras}; {' / '.join(modes)}, alternated {rounds}x")
    rtfs: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    link_cpu: dict[str, list[float]] = {m: [] for m in modes[1:]}
    first_cpu: list[float] = []
    bridge_cpu: dict[str, list[float]] = {m: [] for m in modes[1:]}
    with tempfile.TemporaryDirectory() as tmp:
        if warm:
            _trial(min(duration, 2.0), Path(tmp) / "warm-up", "plain", python, Path(tmp), camera_rate)  # imports
        for k in range(rounds):
            for mode in modes:
                result, cpu, link_s, bridge_s, report = _trial(duration, Path(tmp) / f"{k}-{mode}", mode, python,
                                                               Path(tmp), camera_rate)
                rtf = result.sim_s / result.wall_s
                rtfs[mode].append(rtf)
                cpus[mode].append(cpu / result.sim_s)
                extra = ""
                if link_s is not None:
                    link_cpu[mode].append(link_s[0] / result.sim_s)
                    first_cpu.append(link_s[1])
                    bridge_cpu[mode].append(bridge_s / result.sim_s)
                    extra = (f"; the link {1000 * link_s[0] / result.sim_s:.1f} ms per sim s (+ {1000 * link_s[1]:.0f} "
                             f"ms at its first cycle), the bridge {1000 * bridge_s / result.sim_s:.0f} ms CPU per sim s")
                if report is not None:
                    extra += "; the node got " + ", ".join(f"{t} {n}" for t, n in report["counts"].items())
                print(f"  {mode:10s} run {k + 1}: {result.sim_s:5.1f} s sim in {result.wall_s:5.1f} s wall -> "
                      f"real-time factor {rtf:5.2f}; the trial's process {1000 * cpu / result.sim_s:5.1f} ms CPU "
                      f"per sim s{extra}", flush=True)
    print(f"  plain: real-time factor {median(rtfs['plain']):.2f} (median)")
    plain_cpu = median(cpus["plain"])
    target = 10 if camera_rate else 3  # the target: with cameras, without
    for mode in modes[1:]:
        ratios = [r / p for r, p in zip(rtfs[mode], rtfs["plain"])]  # each round against its own plain run
        print(f"  {mode} ({WHAT[mode]}): real-time factor {median(rtfs[mode]):.2f}, {median(ratios):.3f} of plain "
              f"(median; runs {', '.join(f'{r:.3f}' for r in ratios)}; target >= {1 - target / 100:.2f})")
        print(f"    the link's own CPU on the trial's thread (load-independent): {1000 * median(link_cpu[mode]):.1f} "
              f"ms per sim s = {100 * median(link_cpu[mode]) / plain_cpu:.1f} % of the plain trial's "
              f"{1000 * plain_cpu:.0f} ms (target <= {target} %), + {1000 * median(first_cpu):.0f} ms once at the first "
              f"cycle (the URDF); the bridge process {1000 * median(bridge_cpu[mode]):.0f} ms per sim s (its own)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ros", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="sim seconds per trial (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of plain / published / subscribed (3)")
    parser.add_argument("--camera-rate", type=float, default=0.0, metavar="HZ",
                        help="record (and so publish) the cameras with depth at HZ (default 0: none, as the demo)")
    args = parse_with_smoke(parser, argv, duration=1.0, rounds=1)
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))  # the bench's own, unless given
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    bench_publishing(args.duration, args.rounds, args.camera_rate, warm=not args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
