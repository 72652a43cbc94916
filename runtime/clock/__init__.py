"""One switch for the time source (the simulator-clock reference): ``clock: real | sim`` in the profile.

``open_clock("real")`` is wall time; ``open_clock("sim", transport=...)`` joins the lockstep clock of an
in-process virtual robot (sim:// with clock=sim); ``open_clock("sim", endpoint="tcp://...")`` joins the clock of a
virtual device in another process (``hil sim ... --clock sim`` serves it). The controller never changes.
"""
from __future__ import annotations

from .base import WALL, Clock, ClockError
from .real import RealClock

CLOCK_KINDS = ("real", "sim")


def open_clock(kind: str, *, transport=None, endpoint: str | None = None, name: str = "controller",
               stall_timeout_s: float | None = None, security=None) -> Clock:
    """The configured clock. ``security`` (a :class:`bridge.security.Security`) joins a clock served with
    ``hil sim --clock-endpoint EP --keys DIR`` over CURVE."""
    if kind == "real":
        return RealClock()
    if kind != "sim":
        raise ValueError(f"clock must be one of {', '.join(CLOCK_KINDS)}, not {kind!r}")
    from hil.bridge.lockstep import LocalParticipant, RemoteParticipant

    from .sim import LockstepClock

    if endpoint:
        kwargs = {"timeout_s": 2 * stall_timeout_s} if stall_timeout_s else {}
        return LockstepClock(RemoteParticipant(endpoint, name, security=security, **kwargs), name)
    embodied = getattr(transport, "embodied", None)
    if embodied is None or embodied.clock != "sim":
        raise ClockError("clock: sim needs a simulator: an in-process sim:// bus with clock=sim, or a "
                         "clock_endpoint of a device started with `hil sim ... --clock sim`")
    core, cond = embodied.lockstep(stall_timeout_s)
    return LockstepClock(LocalParticipant(core, cond, name), name)


__all__ = ["Clock", "ClockError", "RealClock", "open_clock", "CLOCK_KINDS", "WALL"]
