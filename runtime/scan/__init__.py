"""Scan a bus into the virtual robot: ping, identities, CPC blocks, descriptors (cached), port tables -> tree."""
from .cache import DescriptorCache, NoCache, default_cache_dir
from .merge import MountError, attach, rekey, robot_key
from .robot import ScannedPart, VirtualRobot
from .scanner import ScanReport, scan_bus

__all__ = ["ScannedPart", "VirtualRobot", "scan_bus", "ScanReport", "DescriptorCache", "NoCache", "default_cache_dir",
           "MountError", "attach", "rekey", "robot_key"]
