"""What the robot's helpers see of an opened robot: :class:`RobotView`, a Protocol that ``Robot`` satisfies.

Presence (parts lost and found), adoption (parts plugged in while running), the multi-bus mirror and the crowd
overlay all work on an opened robot, and Robot (robot.py) builds on each of them. So they name the robot by this
Protocol instead of importing robot.py: imports point one way, from Robot down to its helpers. The view reads
the robot's current :class:`~runtime.robot.assembly.Assembly`, adds notes, registers hooks, and hands a new
assembly to the robot whole; it never writes the robot's attributes.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..bus import BusHost
from ..clock.base import Clock
from ..model import Model
from ..scan import VirtualRobot
from .assembly import Assembly
from .base import DifferentialBase
from .joints import Joint
from .names import NameMap
from .profile import Profile
from .semantics import Semantics
from .sensors import SensorHandle


class RobotView(Protocol):
    """The opened robot as its helpers use it (runtime.robot.robot.Robot is one)."""

    profile: Profile
    bus: BusHost  # the main bus
    buses: dict[str, BusHost]  # bus name -> host, main first
    clock: Clock
    after_cycle: list[Callable[[Any], None]]  # hooks run after each bus cycle

    @property
    def assembly(self) -> Assembly: ...

    @property
    def semantics(self) -> Semantics | None: ...

    @property
    def virtual(self) -> VirtualRobot: ...

    @property
    def model(self) -> Model: ...

    @property
    def joints(self) -> NameMap[Joint]: ...

    @property
    def sensors(self) -> NameMap[SensorHandle]: ...

    @property
    def drivers(self) -> Mapping[int, Any]: ...

    @property
    def base(self) -> DifferentialBase: ...

    def note(self, text: str) -> None:
        """Add one line to what the robot noticed (``robot.notes``)."""

    def swap_assembly(self, new: Assembly) -> None:
        """Replace the robot's assembly with ``new``, whole, between two bus cycles."""
