"""The bridge's Cyclone DDS ``/tf`` writers (trial/ros_link/ros_side/dds_tf.py) as ROS 2 sees them, without a trial:
the writers run in ROS's Python in a process of their own, a real rclpy node (Fast DDS) in another.

- the bytes the writers send are ROS 2's CDR of tf2_msgs/msg/TFMessage, byte for byte as rosbags (a ROS 2 CDR
  implementation written apart from ours and from cyclonedds) serializes the same message: the wire layout a
  tf2 listener on Fast DDS decodes;
- the rclpy node's graph lists the writers with the QoS tf2 uses (reliable; /tf volatile, /tf_static
  transient-local): what ROS's discovery says of them, not what our code asked for.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from hil.trial.ros_link.launch import BRIDGE_NODE

from ros_helpers import ros_env, ros_python  # noqa: F401

TRANSFORMS = [(3, 250_000_000, "odom", "base_link", (1.5, -0.25, 0.0), (0.0, 0.0, 0.6, 0.8)),
              (3, 250_000_000, "map", "odom", (0.125, 0.2, 0.0), (0.0, 0.0, 0.0, 1.0)),
              (0, 7, "camera_43_camera", "head_camera_optical_frame", (0.0, 0.0, 0.0), (-0.5, 0.5, -0.5, 0.5))]

# the bridge's writers: the bytes of the message they send, then /tf and /tf_static written until stdin closes
WRITER = '''
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from cyclonedds.core import Policy
from dds_tf import DdsTf

transforms = json.loads(sys.argv[2])
tf = DdsTf()
representation = next(p for p in tf.tf.get_qos() if isinstance(p, Policy.DataRepresentation))
assert representation.use_cdrv0_representation and not representation.use_xcdrv2_representation, representation
print(json.dumps({"bytes": tf.message(transforms).serialize(use_version_2=False).hex()}), flush=True)
tf.send_static(transforms)
closed = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
while not closed.wait(0.1):
    tf.send(transforms[:2])
tf.close()
'''

# an rclpy node: the graph's /tf and /tf_static, their types and their publishers' QoS as discovery reports them
READER = '''
import json, sys, time
import rclpy

rclpy.init()
node = rclpy.create_node("tf_wire_probe")
began = time.monotonic()
def graph():
    return {topic: node.get_publishers_info_by_topic(topic) for topic in ("/tf", "/tf_static")}
while not all(graph().values()) and time.monotonic() - began < 60:
    rclpy.spin_once(node, timeout_sec=0.1)
types = dict(node.get_topic_names_and_types())
print(json.dumps({topic: {"types": types.get(topic, []), "publishers": [
    {"type": info.topic_type, "reliability": info.qos_profile.reliability.name.lower(),
     "durability": info.qos_profile.durability.name.lower()} for info in infos]}
    for topic, infos in graph().items()}), flush=True)
node.destroy_node()
rclpy.shutdown()
'''


@pytest.fixture(scope="module")
def wire(ros_env, ros_python):
    """(the bytes the writers send, as hex; what the rclpy node's graph says of /tf and /tf_static)."""
    writer = subprocess.Popen([ros_python, "-c", textwrap.dedent(WRITER), str(BRIDGE_NODE.parent),
                               json.dumps(TRANSFORMS)], env=ros_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        first = writer.stdout.readline()
        assert first, writer.communicate(timeout=30)[1] if writer.poll() is not None else "the writer said nothing"
        reader = subprocess.run([ros_python, "-c", textwrap.dedent(READER)], env=ros_env, capture_output=True,
                                text=True, timeout=120)
        assert reader.returncode == 0, reader.stderr
        writer.stdin.close()
        writer.wait(timeout=30)
        assert writer.returncode == 0, writer.stderr.read()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    return json.loads(first)["bytes"], json.loads(reader.stdout.strip().splitlines()[-1])


def test_the_bytes_are_ros2_cdr_of_tf2_msgs_tfmessage(wire):
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    msg = store.types
    transforms = [msg["geometry_msgs/msg/TransformStamped"](
        header=msg["std_msgs/msg/Header"](stamp=msg["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                          frame_id=parent),
        child_frame_id=child,
        transform=msg["geometry_msgs/msg/Transform"](translation=msg["geometry_msgs/msg/Vector3"](*xyz),
                                                     rotation=msg["geometry_msgs/msg/Quaternion"](*xyzw)))
        for sec, nanosec, parent, child, xyz, xyzw in TRANSFORMS]
    expected = bytes(store.serialize_cdr(msg["tf2_msgs/msg/TFMessage"](transforms=transforms),
                                         "tf2_msgs/msg/TFMessage"))
    sent, _ = wire
    assert bytes.fromhex(sent) == expected
    # and rosbags reads them back as the values given (a second look, from the other side)
    back = store.deserialize_cdr(bytes.fromhex(sent), "tf2_msgs/msg/TFMessage")
    assert [(t.header.frame_id, t.child_frame_id, t.header.stamp.nanosec, t.transform.rotation.x)
            for t in back.transforms] == [(p, c, ns, q[0]) for _, ns, p, c, _, q in TRANSFORMS]


def test_ros_discovery_sees_tf2s_qos(wire):
    _, graph = wire
    print(json.dumps(graph), file=sys.stderr)
    for topic, durability in (("/tf", "volatile"), ("/tf_static", "transient_local")):
        assert graph[topic]["types"] == ["tf2_msgs/msg/TFMessage"], graph
        assert graph[topic]["publishers"] == [{"type": "tf2_msgs/msg/TFMessage", "reliability": "reliable",
                                               "durability": durability}], graph
