"""How a trial is drawn, shared by the browser viewer (trial/view) and the Foxglove channels (foxglove.py): people
coloured by what they are doing (the crowd-simulation reference's display: walking, the reaction to the robot they
follow, or staged by a script), and the colours of the robot's ring, goal and walls. RGB components 0..1."""
from __future__ import annotations

WALKING, SCRIPTED = "walking", "scripted"
DOING_RGB: dict[str, tuple[float, float, float]] = {
    WALKING: (0.55, 0.60, 0.68),
    SCRIPTED: (0.93, 0.55, 0.10),
    "interact": (0.85, 0.15, 0.20),
    "observe": (0.60, 0.25, 0.80),
    "curious": (0.80, 0.30, 0.65),
    "slow_look": (0.20, 0.55, 0.90),
    "pass_by": (0.25, 0.70, 0.70),
    "regular": (0.45, 0.65, 0.35),
    "impassive": (0.40, 0.45, 0.50),
    "surprised": (0.95, 0.80, 0.15),
    "scared": (0.10, 0.75, 0.45),
    "threatening": (0.55, 0.05, 0.05),
}
OTHER_OBJECTIVE_RGB = (0.90, 0.35, 0.55)  # a user's objective
WALL_RGB = (0.62, 0.60, 0.56)
GOAL_RGB = (0.15, 0.75, 0.25)
ROBOT_PATH_RGB = (0.10, 0.35, 0.90)
RAY_RGB = (0.75, 0.78, 0.82)  # a ray with no echo
ECHO_RGB = (0.95, 0.20, 0.15)  # what the controller read (the real ring's echo in a mixed trial)
VIRTUAL_ECHO_RGB = (0.65, 0.20, 0.95)  # a mixed trial's virtual people, seen by the shadow ring
# a ray whose reading failed, by why (the ring's per-reading code): drawn to the range limit
CAUSE_RGB: dict[str, tuple[float, float, float]] = {
    "no_hit": RAY_RGB,  # nothing within range: the common, harmless case stays the quiet grey
    "range": (0.95, 0.60, 0.05),  # something closer than the minimum range (the blind zone)
    "angle": (0.10, 0.55, 0.95),  # incidence-angle dropout: a surface too slanted to echo
    "noise": (0.90, 0.20, 0.70),  # an echo rejected as noise
    "unknown": (0.45, 0.45, 0.45),  # a part that reports only "invalid"
}
CAUSE_TEXT = {"no_hit": "no hit within range", "range": "closer than the minimum range",
              "angle": "incidence-angle dropout", "noise": "rejected as noise", "unknown": "invalid (cause not reported)"}
WALL_HEIGHT_M, WALL_THICKNESS_M = 1.2, 0.12


def failed_ray_rgb(cause: str | None) -> tuple[float, float, float]:
    """The colour of a ray whose reading failed for ``cause`` (None: a log without causes, grey)."""
    return CAUSE_RGB.get(cause, RAY_RGB) if cause else RAY_RGB


def ring_sides(sensors: dict) -> list[tuple[list | None, tuple[float, float, float], list | None, bool]]:
    """What a ``/robot/sensors`` message draws of the ring, as (ranges, echo colour, causes, every ray) per side,
    for hil view's scene and the Foxglove rays alike: the ring the controller read (a mixed trial's real one),
    every ray, with the part's causes; a mixed trial's virtual side, only its echoes."""
    sides = [(sensors.get("ring_real", sensors.get("ring")), ECHO_RGB, sensors.get("ring_cause"), True)]
    if "ring_virtual" in sensors:
        sides.append((sensors.get("ring_virtual"), VIRTUAL_ECHO_RGB, None, False))
    return sides


def doing_rgb(doing: str | None) -> tuple[float, float, float]:
    """The colour of a person doing ``doing`` (None: walking)."""
    if not doing:
        return DOING_RGB[WALKING]
    return DOING_RGB.get(doing, OTHER_OBJECTIVE_RGB)
