"""The host side of hil: transports, bus host, scan, model, drivers, clocks, and the controller API.

``from runtime import Robot`` is the controller's entry point; it is imported on first use so that the CLI and
tools that need only the bus do not load the model and the robot runtime.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Robot"]


def __getattr__(name: str) -> Any:
    if name == "Robot":
        from .robot import Robot

        return Robot
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
