"""The viewer greys a part while it is lost (issue 26): the timeline knows which parts are lost at a time from
``/robot/parts``, and the scene colours those links' shapes grey and back (a real viser server on port 0)."""
from __future__ import annotations

import viser

from trial.view.scene import LOST_RGB, SceneDrawer
from trial.view.timeline import Timeline

MODEL = {"links": [
    {"name": "a", "parent": -1, "part": 1, "body": "a", "joint": None,
     "visuals": [{"kind": "box", "size": [0.1, 0.1, 0.1], "xyz": [0, 0, 0], "rpy": [0, 0, 0], "rgba": [1, 0, 0, 1]}]},
    {"name": "b", "parent": 0, "part": 26, "body": "b",
     "joint": {"type": "fixed", "axis": [0, 0, 1], "xyz": [0, 0, 0.1], "rpy": [0, 0, 0], "q": None},
     "visuals": [{"kind": "sphere", "size": [0.05], "xyz": [0, 0, 0], "rpy": [0, 0, 0], "rgba": [0, 0, 1, 1]}]}],
    "stand_z": 0.0}


def test_a_lost_part_is_grey_while_lost():
    timeline = Timeline()
    timeline.add("/robot/parts", 5.0, {"kind": "lost", "part_id": 26})
    timeline.add("/robot/parts", 8.0, {"kind": "back", "part_id": 26})
    timeline.add("/clock", 10.0, {"t": 10.0})
    assert timeline.frame(4.0).lost_parts == frozenset()
    assert timeline.frame(6.0).lost_parts == {26}
    assert timeline.frame(9.0).lost_parts == frozenset()
    server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
    try:
        drawer = SceneDrawer(server)
        drawer.draw_robot(MODEL)
        drawer.draw(timeline.frame(6.0), lines=False)
        box, sphere = (0, 0), (1, 0)  # (link, visual)
        assert drawer.drawn_color(*sphere) == LOST_RGB and drawer.drawn_color(*box) == (255, 0, 0)
        drawer.draw(timeline.frame(9.0), lines=False)
        assert drawer.drawn_color(*sphere) == (0, 0, 255) and drawer.drawn_color(*box) == (255, 0, 0)
    finally:
        server.stop()
