"""The virtual bus device: each part's firmware behind one Dynamixel 2.0 endpoint.

``part`` / ``servo``: the firmware of one part (its control table and what it does with it);
``bus_device``: the protocol server that hosts many parts on one bus, with optional wire timing and faults;
``assembly``: builds the parts of a robot from config/robots/*.yaml; ``serve``: puts a device on a pty or TCP.
The firmware never knows the host exists.
"""
from .assembly import load_assembly
from .bus_device import VirtualBusDevice
from .faults import FaultInjector
from .timing import WireTiming

__all__ = ["VirtualBusDevice", "WireTiming", "FaultInjector", "load_assembly"]
