"""Part firmware backed by the pybullet world: servos and wheels on joints, the ring and contacts as sensors."""
from .embody import CLOCKS, EmbodiedRobot, Pacer, embody
from .sensing import ContactFirmware, RangeRingFirmware, part_seed
from .servo import Interlock, JointServo

__all__ = ["embody", "EmbodiedRobot", "Pacer", "CLOCKS", "JointServo", "Interlock", "RangeRingFirmware",
           "ContactFirmware", "part_seed"]
