"""Unmodified native programs on the simulator's clock (the simulator-clock reference's LD_PRELOAD of
gettimeofday/usleep).

``hiltime.c`` is the time shim (package data, built on first use by :mod:`.build`); :mod:`.relay` is the program's participant on the lockstep clock,
:mod:`.launch` starts and watches the program, :mod:`.session` gives it the profile's buses and clock, and
:mod:`.cli` is ``hil run --native``.
"""
from .build import NativeBuildError, NativeTools, ensure_built
from .launch import NativeRun, launch

__all__ = ["ensure_built", "NativeTools", "NativeBuildError", "launch", "NativeRun"]
