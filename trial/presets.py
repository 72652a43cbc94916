"""``hil demo``: the main job on the built-in virtual robot, no hardware, as one preset of the trial API.

The commbot in the arcade on the simulator's clock, driven by the shipped guide robot controller
(examples/guide_robot.py) from the west hall round the fountain to the east hall, among the weekday crowd, with
the child scene of the crowd-simulation reference on its route (config/scenarios/guide_meets_child.scn: a child comes to
the robot and stays with it a while). It is exactly ``Trial(guide_robot.py, robot="commbot", map="arcade",
crowd=("weekday", "weekend"), scenario="guide_meets_child", start=(-18, 0, 0), goal=(18, 0), duration=240)``:
the same trial ``hil trial`` runs with those options, so the demo shows what a user's own trial gets. It ends
3 s after the goal is reached, or when the guide says it arrived, or after ``duration`` simulated seconds. The
same seed gives the same bytes.

The demo records no camera images unless asked (``camera_rate``, ``hil demo --camera-rate 5``, or
``$HIL_CAMERA_RATE``): it is the first thing run after installing hil alone, whose core has no image encoder
(Pillow comes with ``hil[camera]``), so it must neither warn nor log differently on a machine that has the extra;
and its metrics and picture do not use the images, which on a machine without a GPU cost ~40 % of its loop.
"""
from __future__ import annotations

import os
from typing import Any

from hil.devices.config_path import builtin_examples

from .spec import CAMERA_RATE_ENV, TrialSpec, make_spec

DEMO_SCENARIO = "guide_meets_child"
DEMO_DURATION_S = 240.0
DEMO_CONTROLLER = "guide_robot.py"
DEMO_CAMERA_RATE = 0.0  # Hz: no camera images unless asked (see above)


def demo_spec(*, seed: int = 0, scenario: str | None = DEMO_SCENARIO, duration: float = DEMO_DURATION_S,
              gui: bool = False, crowd_endpoint: str | None = None, crowd_timeout_s: float = 10.0,
              source: str = "<python>", **more: Any) -> TrialSpec:
    """The demo's trial; ``scenario`` None or "none": the background crowd only. ``source`` names the caller in
    errors (``hil demo``)."""
    if "camera_rate" not in more and not os.environ.get(CAMERA_RATE_ENV, "").strip():
        more["camera_rate"] = DEMO_CAMERA_RATE
    return make_spec(builtin_examples() / DEMO_CONTROLLER, source=source, robot="commbot", map="arcade",
                     crowd=("weekday", "weekend"), scenario=scenario, start=(-18.0, 0.0, 0.0), goal=(18.0, 0.0),
                     duration=duration, seed=seed, gui=gui, crowd_endpoint=crowd_endpoint,
                     crowd_timeout_s=crowd_timeout_s, name="demo", **more)
