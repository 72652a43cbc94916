"""The blueprint robot and the controller API (DESIGN "The runtime" items 4 and 5).

    profile.py     which bus, which clock, which names (config/profiles/*.yaml), validated with file:line
    buses.py       `buses:`: one robot on several buses, each mounted on a part's port (checked before opening)
    multibus.py    open and scan each bus, merge the scans into one tree (runtime.scan.merge)
    semantics.py   blueprint names file (config/semantics/*.yaml): names -> tree paths or serials
    blueprint.py   those names bound to a scanned robot; defaults to tree paths
    joints.py      a joint: position/velocity read, target written, limits checked when set (position,
                   velocity or current mode)
    dynamics.py    robot.dynamics: the model (gravity torques, RNEA, ABA, ...) at the last bus cycle's joints
    sensors.py     range ring (metres) and contact sensors (named zones)
    base.py        differential drive and odometry from the wheel parts' geometry
    cycle.py       one bus cycle: one write for the changed targets, one Fast Bulk Read for everything (per bus)
    startup.py     modes, goal = present, torque on; wheels to 0 at the end; switching modes (set_mode)
    assembly.py    assemble(): scanned robot -> frozen Assembly (model, drivers, names, joints, sensors, base,
                   cycle), for opening and adoption alike
    view.py        RobotView: the robot as its helpers see it (a Protocol, so they need not import robot.py)
    robot.py       Robot.open / loop / close; swaps its assembly whole
    presence.py    parts lost after K missed cycles, pinged in spare time, re-armed when back
    adoption.py    parts new or changed while running: scanned, assembled anew, swapped in whole
    part_events.py PartEvent (lost, back, new, changed, quarantined)
    runner.py      `hil run CONTROLLER.py --profile P`
"""
from .base import BaseGeometryError, DifferentialBase, Pose2D, Twist2D
from .dynamics import Dynamics
from .joints import CURRENT, POSITION, VELOCITY, Joint, JointLimitError, JointModeError
from .names import NameMap, UnknownName
from .part_events import PartEvent
from .profile import Profile, load_profile
from .robot import Robot, Tick
from .sensors import ContactSensor, RangeRing

__all__ = [
           "BaseGeometryError",
           "CURRENT",
           "ContactSensor",
           "DifferentialBase",
           "Dynamics",
           "Joint",
           "JointLimitError",
           "JointModeError",
           "NameMap",
           "PartEvent",
           "POSITION",
           "Pose2D",
           "Profile",
           "RangeRing",
           "Robot",
           "Tick",
           "Twist2D",
           "UnknownName",
           "VELOCITY",
           "load_profile",
]
