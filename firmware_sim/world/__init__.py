"""The pybullet world of the virtual bus device (DESIGN.md, "The world").

``world``: the physics client, floor, fixed time step and step hooks; ``maps``: config/maps/*.yaml (walls,
places); ``builder``: the robot as one multibody built from its parts' descriptors and port tables;
``tree``/``shapes``/``frames``: what the builder is made of. The world knows parts only through their
firmware objects (descriptor + control-table memory), never the host.
"""
from .builder import RobotBody, RobotJoint, RobotLink, build_robot
from .maps import Map, Wall, load_map, parse_map
from .tree import RobotBuildError
from .world import DEFAULT_TIME_STEP_S, World, WorldError, display_available

__all__ = ["DEFAULT_TIME_STEP_S", "Map", "RobotBody", "RobotBuildError", "RobotJoint", "RobotLink", "Wall",
           "World", "WorldError", "display_available", "build_robot", "load_map", "parse_map"]
