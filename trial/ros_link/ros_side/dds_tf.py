"""``/tf`` and ``/tf_static`` as plain DDS topics, for a ROS Python without tf2_msgs (the registry's wheels).

ROS 2 puts a topic ``/NAME`` of type ``pkg/msg/Type`` on DDS as the topic ``rt/NAME`` of type
``pkg::msg::dds_::Type_`` in plain CDR (XCDR1), and lists any DDS writer so named on its graph as that ROS topic
(the rmw's name mangling). So a DDS participant of Eclipse Cyclone DDS's Python binding (``cyclonedds``, which
declares types in Python: no generated code, no ROS package) that writes ``rt/tf`` with tf2_msgs/TFMessage's layout
is, for tf2's listeners, RViz and ``ros2 topic echo``, a /tf publisher like any other: rclpy nodes on Fast DDS
see it as ``/tf`` typed ``tf2_msgs/msg/TFMessage``.

Discovery: Cyclone is given a configuration (:func:`cyclone_config`) on the loopback interface, without multicast,
with 127.0.0.1 as its unicast peer, so it finds the Fast DDS participants of the same ``ROS_DOMAIN_ID`` on this
machine (ROS's ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) by their well-known unicast ports; they learn its
locators from its announcements. Other discovery ranges would need a configuration of the user's own
(``CYCLONEDDS_URI``, used as given when set).

QoS as tf2 uses: /tf reliable, volatile, keep last 100; /tf_static reliable, transient local, keep last 1 (a
node that starts later still gets the fixed joints). This file imports nothing of hil, nor rclpy.
"""
# no ``from __future__ import annotations``: cyclonedds reads the IDL structs' annotations as objects
import os
from dataclasses import dataclass, field

TF_TOPIC, TF_STATIC_TOPIC = "rt/tf", "rt/tf_static"  # /tf and /tf_static as ROS 2 names them on DDS
TF_DEPTH, TF_STATIC_DEPTH = 100, 1  # tf2's: TransformBroadcaster keeps 100, StaticTransformBroadcaster 1
PEER_PARTICIPANTS = 32  # unicast ports of this many participants per domain are sent announcements (Cyclone's
# default is 10: a machine running a trial, its bridge, a ROS stack and tools easily has more participants)


def cyclone_config(domain_id: int, participants: int = PEER_PARTICIPANTS) -> str:
    """Cyclone DDS's configuration for ``domain_id`` on this machine: loopback, no multicast, 127.0.0.1 as the
    peer whose discovery ports (one per participant index, up to ``participants``) get its announcements."""
    return (f'<CycloneDDS><Domain id="{int(domain_id)}"><General><Interfaces>'
            '<NetworkInterface address="127.0.0.1"/></Interfaces><AllowMulticast>false</AllowMulticast>'
            '</General><Discovery><ParticipantIndex>auto</ParticipantIndex>'
            f'<MaxAutoParticipantIndex>{int(participants)}</MaxAutoParticipantIndex>'
            '<Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>')


def _types():
    """tf2_msgs/TFMessage and what it holds as cyclonedds IDL structs, named as ROS 2's rmw names them."""
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.annotations import final
    from cyclonedds.idl.types import float64, int32, sequence, uint32

    @final
    @dataclass
    class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
        sec: int32 = 0
        nanosec: uint32 = 0

    @final
    @dataclass
    class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
        stamp: Time = field(default_factory=Time)
        frame_id: str = ""

    @final
    @dataclass
    class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
        x: float64 = 0.0
        y: float64 = 0.0
        z: float64 = 0.0

    @final
    @dataclass
    class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
        x: float64 = 0.0
        y: float64 = 0.0
        z: float64 = 0.0
        w: float64 = 1.0

    @final
    @dataclass
    class Transform(IdlStruct, typename="geometry_msgs::msg::dds_::Transform_"):
        translation: Vector3 = field(default_factory=Vector3)
        rotation: Quaternion = field(default_factory=Quaternion)

    @final
    @dataclass
    class TransformStamped(IdlStruct, typename="geometry_msgs::msg::dds_::TransformStamped_"):
        header: Header = field(default_factory=Header)
        child_frame_id: str = ""
        transform: Transform = field(default_factory=Transform)

    @final
    @dataclass
    class TFMessage(IdlStruct, typename="tf2_msgs::msg::dds_::TFMessage_"):
        transforms: sequence[TransformStamped] = field(default_factory=list)

    return Time, Header, Vector3, Quaternion, Transform, TransformStamped, TFMessage


class DdsTf:
    """Writers of ``/tf`` and ``/tf_static`` on a Cyclone DDS participant of the domain ``ROS_DOMAIN_ID``.

    :meth:`send` and :meth:`send_static` take transforms as tuples ``(sec, nanosec, parent, child, (x, y, z),
    (qx, qy, qz, qw))``. Raises ImportError where cyclonedds does not import."""

    def __init__(self, domain_id: int | None = None):
        from cyclonedds.core import Policy, Qos
        from cyclonedds.domain import Domain, DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.topic import Topic
        from cyclonedds.util import duration

        if domain_id is None:
            domain_id = int(os.environ.get("ROS_DOMAIN_ID") or 0)
        self.domain_id = domain_id
        # a configuration of the user's own (CYCLONEDDS_URI) is used as given; else loopback with unicast peers
        self._domain = None if os.environ.get("CYCLONEDDS_URI") else Domain(domain_id, cyclone_config(domain_id))
        self.participant = DomainParticipant(domain_id)
        (self._time, self._header, self._vector, self._quaternion, self._transform, self._stamped,
         self._message) = _types()
        plain_cdr = Policy.DataRepresentation(use_cdrv0_representation=True)  # ROS 2's rmw speaks XCDR1
        reliable = Policy.Reliability.Reliable(duration(seconds=1))
        self.tf = DataWriter(self.participant, Topic(self.participant, TF_TOPIC, self._message), qos=Qos(
            reliable, Policy.Durability.Volatile, Policy.History.KeepLast(TF_DEPTH), plain_cdr))
        self.tf_static = DataWriter(self.participant, Topic(self.participant, TF_STATIC_TOPIC, self._message), qos=Qos(
            reliable, Policy.Durability.TransientLocal, Policy.History.KeepLast(TF_STATIC_DEPTH), plain_cdr))

    def message(self, transforms: list[tuple]):
        """A TFMessage of transforms given as tuples (see the class)."""
        out = []
        for sec, nanosec, parent, child, xyz, xyzw in transforms:
            header = self._header(stamp=self._time(sec=int(sec), nanosec=int(nanosec)), frame_id=str(parent))
            x, y, z = (float(v) for v in xyz)
            qx, qy, qz, qw = (float(v) for v in xyzw)
            out.append(self._stamped(header=header, child_frame_id=str(child), transform=self._transform(
                translation=self._vector(x=x, y=y, z=z), rotation=self._quaternion(x=qx, y=qy, z=qz, w=qw))))
        return self._message(transforms=out)

    def send(self, transforms: list[tuple]) -> None:
        """One TFMessage on /tf."""
        self.tf.write(self.message(transforms))

    def send_static(self, transforms: list[tuple]) -> None:
        """One TFMessage on /tf_static (kept for readers that join later)."""
        self.tf_static.write(self.message(transforms))

    def close(self) -> None:
        """Leave the domain (the writers' readers see the participant go)."""
        self.participant = self.tf = self.tf_static = None
        self._domain = None
