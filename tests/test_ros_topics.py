"""The ROS 2 bridge's other topics and its behaviour under bad input, with real rclpy nodes (Fast DDS) in
processes of their own against the real ``hil trial --ros`` (tests/ros_helpers.py runs them):

- ``/robot_description`` is transient-local: a node that subscribes after the trial started still gets it, and the
  URDF places each camera where runtime.model does (the registry's wheels have no tf2_msgs, so the cameras'
  poses are checked in the URDF rather than on /tf_static);
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from hil.runtime.model import build_model, create_data, forward_kinematics

from model_helpers import assembly_robot
from ros_helpers import NODE_COMMON, ros_env, ros_python, run_with_node  # noqa: F401 (fixtures)

DESCRIPTION_NODE = NODE_COMMON + '''
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
spin_until(lambda: sim_now() > 1.0)  # long after the bridge published the description (its first cycle)
got = {}
latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
subscribed_at = sim_now()
node.create_subscription(String, "/robot_description", lambda m: got.setdefault("urdf", m.data), latched)
spin_until(lambda: "urdf" in got, 20)
finish(urdf=got.get("urdf"), subscribed_at=subscribed_at, received_at=sim_now())
'''


def _rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis roll, pitch, yaw: Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
                              math.sin(yaw))
    return np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]]) @ np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]]) @ \
        np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])


def _urdf_frames(urdf: ET.Element) -> dict[str, np.ndarray]:
    """Every link's 4x4 frame in the root link at zero joint positions, chaining the joints' origins."""
    joints = {j.find("child").get("link"): j for j in urdf.iter("joint")}
    frames: dict[str, np.ndarray] = {}

    def frame(link: str) -> np.ndarray:
        if link not in frames:
            joint = joints.get(link)
            if joint is None:
                frames[link] = np.eye(4)
            else:
                origin = joint.find("origin")
                local = np.eye(4)
                local[:3, :3] = _rpy(*(float(v) for v in origin.get("rpy").split()))
                local[:3, 3] = [float(v) for v in origin.get("xyz").split()]
                frames[link] = frame(joint.find("parent").get("link")) @ local
        return frames[link]

    for link in urdf.iter("link"):
        frame(link.get("name"))
    return frames


def test_robot_description_is_latched_and_places_the_cameras_as_the_model_does(tmp_path, ros_env, ros_python):
    seen, log, stderr = run_with_node(tmp_path, ros_env, ros_python, DESCRIPTION_NODE, "--duration", "4",
                                      "--ros-rtf", "2")
    assert seen["urdf"], "the late subscriber got no /robot_description"
    assert seen["subscribed_at"] > 1.0
    urdf = ET.fromstring(seen["urdf"])
    moving = {j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"}
    assert moving == set(log.messages["/robot/state"][0].data["joints"])  # the names /joint_states uses
    assert urdf.find("link").get("name") == "base_link"
    model = build_model(assembly_robot("commbot"))
    placed = forward_kinematics(model, create_data(model), np.zeros(model.nq))
    frames = _urdf_frames(urdf)
    cameras = [k for k, link in enumerate(model.links) if link.name.startswith("camera_")]
    assert len(cameras) == 2
    for k in cameras:
        assert frames[model.links[k].name] == pytest.approx(placed[k].homogeneous, abs=1e-9)
    masses = [float(m.get("value")) for m in urdf.iter("mass")]
    assert sum(masses) == pytest.approx(sum(link.inertia.mass for link in model.links))  # the whole URDF
