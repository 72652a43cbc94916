"""The defaults of ``hil trial --ros``'s options, in a module of their own: the command line shows them in its
help without importing the robot's runtime (drive.py imports it), so every ``hil`` command starts sooner."""
from __future__ import annotations

DEFAULT_HZ = 50.0  # bus cycles (and /odom, /scan, /joint_states) per trial second
DEFAULT_WATCHDOG_S = 0.5  # trial seconds without a /cmd_vel before the base is stopped
DEFAULT_RTF = 1.0  # trial seconds per wall second
