"""Scan a bus into the virtual robot: ping, identities, CPC blocks, descriptors (cached), port tables -> tree."""
from .robot import ScannedPart, VirtualRobot

__all__ = ["ScannedPart", "VirtualRobot"]
