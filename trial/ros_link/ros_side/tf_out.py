"""Where the bridge's ``/tf`` and ``/tf_static`` go: rclpy's publishers where tf2_msgs imports (a sourced ROS 2
install), else Cyclone DDS writers of the same DDS topics (ros_side/dds_tf.py: the registry's wheels have no
tf2_msgs), else nowhere, said in one line.

A transform is a tuple ``(sec, nanosec, parent, child, (x, y, z), (qx, qy, qz, qw))``; :meth:`send` puts one
TFMessage of them on /tf, :meth:`send_static` on /tf_static. Imports nothing of hil.
"""
from __future__ import annotations

try:
    from . import dds_tf
except ImportError:  # run as a script (launch.py starts bridge_node.py by its path)
    import dds_tf

TF_DEPTH, TF_STATIC_DEPTH = dds_tf.TF_DEPTH, dds_tf.TF_STATIC_DEPTH


class RclpyTf:
    """/tf and /tf_static as rclpy publishers of tf2_msgs/TFMessage, with tf2's QoS."""

    def __init__(self, node):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from tf2_msgs.msg import TFMessage

        self.tf = node.create_publisher(TFMessage, "/tf", QoSProfile(
            depth=TF_DEPTH, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE))
        self.tf_static = node.create_publisher(TFMessage, "/tf_static", QoSProfile(
            depth=TF_STATIC_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL))

    @staticmethod
    def message(transforms: list[tuple]):
        from geometry_msgs.msg import TransformStamped
        from tf2_msgs.msg import TFMessage

        out = []
        for sec, nanosec, parent, child, xyz, xyzw in transforms:
            tf = TransformStamped()
            tf.header.stamp.sec, tf.header.stamp.nanosec = int(sec), int(nanosec)
            tf.header.frame_id, tf.child_frame_id = str(parent), str(child)
            t, r = tf.transform.translation, tf.transform.rotation
            t.x, t.y, t.z = (float(v) for v in xyz)
            r.x, r.y, r.z, r.w = (float(v) for v in xyzw)
            out.append(tf)
        return TFMessage(transforms=out)

    def send(self, transforms: list[tuple]) -> None:
        self.tf.publish(self.message(transforms))

    def send_static(self, transforms: list[tuple]) -> None:
        self.tf_static.publish(self.message(transforms))

    def close(self) -> None:
        pass


def open_tf(node, log):
    """The bridge's /tf and /tf_static: :class:`RclpyTf` where tf2_msgs imports, else Cyclone DDS's
    (:class:`dds_tf.DdsTf`), else None, said in one line."""
    try:
        return RclpyTf(node)
    except ImportError:
        pass
    try:
        sender = dds_tf.DdsTf()
    except ImportError as exc:
        log.warning(f"neither tf2_msgs nor cyclonedds imports here ({exc.name}): /tf and /tf_static are not "
                    "published (odom -> base_link is in /odom; the fixed joints are in /robot_description)")
        return None
    except Exception as exc:  # noqa: BLE001 - a DDS that will not start costs /tf, not the bridge
        log.warning(f"tf2_msgs does not import here and Cyclone DDS did not start ({type(exc).__name__}: {exc}): "
                    "/tf and /tf_static are not published")
        return None
    log.info("tf2_msgs does not import here: /tf and /tf_static are published through Cyclone DDS")
    return sender
