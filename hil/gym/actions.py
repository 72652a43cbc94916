"""The action: (v, w) for one control period, continuous in a Box within the base's limits or one of a discrete
set (CrowdNav's: speeds x turn rates, and standing still).

:meth:`Actions.decode` refuses an action outside the space naming its bounds (a learner's bug must not become a
clipped command nobody sees), and says ``nan`` for a NaN action: the caller stops the robot and ends the episode.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .spec import EnvSpec


class ActionError(ValueError):
    """An action outside the action space; the message gives the space's bounds."""


class Actions:
    """The action space of a spec on a base, and the (v, w) of an action."""

    def __init__(self, spec: EnvSpec, base: Any):
        self.want = want = spec.action
        half_track = base.track_width / 2.0
        need = max(abs(want.v_max), abs(want.v_min)) + want.w_max * half_track
        if need > base.max_speed + 1e-9:
            raise spec.error("action", f"action: v_max {want.v_max:g} m/s with w_max {want.w_max:g} rad/s needs "
                                       f"{need:.3f} m/s at a wheel; this base's top speed is {base.max_speed:.3f} "
                                       f"m/s (track {base.track_width:.3f} m)")
        self.table = None
        if want.kind == "discrete":
            speeds = [want.v_max * (k + 1) / want.speeds for k in range(want.speeds)]
            turns = [0.0] if want.turns == 1 else \
                [want.w_max * (2 * k / (want.turns - 1) - 1) for k in range(want.turns)]
            self.table = [(0.0, 0.0)] + [(v, w) for v in speeds for w in turns]

    def space(self) -> Any:
        from gymnasium import spaces

        if self.table is not None:
            return spaces.Discrete(len(self.table))
        want = self.want
        return spaces.Box(np.array([want.v_min, -want.w_max], np.float32),
                          np.array([want.v_max, want.w_max], np.float32), dtype=np.float32)

    def decode(self, action: Any) -> tuple[float, float] | str:
        """(v, w) in m/s and rad/s, or ``"nan"`` for a NaN action; ActionError outside the space."""
        if self.table is not None:
            value = np.asarray(action)
            if value.shape not in ((), (1,)) or not np.issubdtype(value.dtype, np.integer) or \
                    not 0 <= int(value.ravel()[0]) < len(self.table):
                raise ActionError(f"action {action!r} is outside the action space: an integer in "
                                  f"[0, {len(self.table) - 1}] (Discrete({len(self.table)}))")
            return self.table[int(value.ravel()[0])]
        try:
            value = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            value = np.zeros(0)
        if value.shape != (2,):
            raise ActionError(f"action {action!r} is outside the action space: (v, w), two numbers")
        if np.isnan(value).any():
            return "nan"
        v, w = float(value[0]), float(value[1])
        want = self.want
        eps = 1e-6  # float32 rounding of the Box's own bounds
        if not (want.v_min - eps <= v <= want.v_max + eps and abs(w) <= want.w_max + eps) or \
                not (math.isfinite(v) and math.isfinite(w)):
            raise ActionError(f"action (v={v:g}, w={w:g}) is outside the action space: v in [{want.v_min:g}, "
                              f"{want.v_max:g}] m/s, w in [{-want.w_max:g}, {want.w_max:g}] rad/s")
        return min(max(v, want.v_min), want.v_max), min(max(w, -want.w_max), want.w_max)


__all__ = ["ActionError", "Actions"]
