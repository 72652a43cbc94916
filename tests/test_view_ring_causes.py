"""The viewer colours a ring ray whose reading failed by why it failed: the ring part's per-reading
code (``ring_cause`` in ``/robot/sensors``) picks the ray's colour (trial.record.palette.CAUSE_RGB), an echo stays
the echo's colour, and the page's Ring panel has the legend (a real viser server on port 0)."""
from __future__ import annotations

import re

import numpy as np
import viser

from hil.trial.record.palette import CAUSE_RGB, ECHO_RGB, RAY_RGB
from hil.trial.view.app import ring_legend_html
from hil.trial.view.scene import SceneDrawer
from hil.trial.view.timeline import Timeline

YAWS = [0.0, np.pi / 2, np.pi, 3 * np.pi / 2, np.pi / 4]
MODEL = {"links": [{"name": "ring", "parent": -1, "part": 4, "body": "ring", "joint": None, "visuals": []}],
         "stand_z": 0.0,
         "ring": {"name": "ring", "link": "ring", "yaw": YAWS, "origin_radius_m": 0.2, "origin_z_m": 0.0,
                  "min_range_m": 0.03, "max_range_m": 4.0}}


def rgb8(rgb) -> tuple[int, ...]:
    return tuple(int(v) for v in np.round(np.asarray(rgb) * 255))


def test_a_failed_ray_has_the_colour_of_its_cause():
    timeline = Timeline()
    timeline.add("/robot/state", 1.0, {"x": 0.0, "y": 0.0, "yaw": 0.0, "vx": 0.0, "w": 0.0, "joints": {}})
    timeline.add("/robot/sensors", 1.0, {"ring": [1.5, None, None, None, None], "contacts": [],
                                         "ring_cause": [None, "angle", "range", "noise", "no_hit"]})
    timeline.add("/robot/sensors", 2.0, {"ring": [1.5, None, None, None, None], "contacts": []})  # an older log
    server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
    try:
        drawer = SceneDrawer(server)
        drawer.draw_robot(MODEL)
        drawer.draw(timeline.frame(1.0), lines=False)
        colors = np.asarray(drawer._rays.colors, dtype=int)[:, 0]  # each segment's start colour, 0..255
        want = [rgb8(ECHO_RGB), rgb8(CAUSE_RGB["angle"]), rgb8(CAUSE_RGB["range"]), rgb8(CAUSE_RGB["noise"]),
                rgb8(RAY_RGB)]
        assert np.abs(colors - np.asarray(want)).max() <= 1, colors  # viser rounds the float colours its own way
        assert len({tuple(c) for c in want[1:4]}) == 3, "the three causes look different"
        ends = np.asarray(drawer._rays.points)[:, 1, :2]
        assert np.hypot(*ends[1]) == np.float32(4.2), "a failed ray is drawn to the range limit"
        drawer.draw(timeline.frame(2.0), lines=False)
        later = np.asarray(drawer._rays.colors, dtype=int)[1:, 0]
        assert np.abs(later - np.asarray(rgb8(RAY_RGB))).max() <= 1, "no causes logged: the failed rays are grey"
    finally:
        server.stop()


def test_the_legend_names_every_cause_in_its_colour():
    legend = ring_legend_html()
    shown = dict(re.findall(r"data-cause='(\w+)' data-rgb='(#[0-9a-f]{6})'", legend))
    for cause, rgb in CAUSE_RGB.items():
        assert shown[cause] == "#" + "".join(f"{v:02x}" for v in rgb8(rgb)), cause
    assert "incidence-angle dropout" in legend and "id='hil-ring-legend'" in legend
