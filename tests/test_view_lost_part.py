"""The viewer greys a part while it is lost: the timeline knows which parts are lost at a time from
``/robot/parts``, and the scene colours those links' shapes grey and back (a real viser server on port 0)."""
from __future__ import annotations

import viser

from hil.trial.view.scene import LOST_RGB, SceneDrawer
from hil.trial.view.timeline import Timeline

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


def test_a_swapped_part_is_redrawn_with_its_own_shape_from_the_time_it_was_swapped():
    """A later ``/robot/model`` (logged after a changed or new part) is drawn from its time on; scrubbing back
    draws the robot as it was."""
    import copy

    swapped = copy.deepcopy(MODEL)
    swapped["links"][1]["visuals"] = [{"kind": "box", "size": [0.2, 0.05, 0.05], "xyz": [0, 0, 0], "rpy": [0, 0, 0],
                                       "rgba": [0, 1, 0, 1]}]
    timeline = Timeline()
    timeline.add("/robot/model", 0.0, MODEL)
    timeline.add("/robot/state", 1.0, {"x": 0.0, "y": 0.0, "yaw": 0.0})
    timeline.add("/robot/parts", 5.0, {"kind": "lost", "part_id": 26})
    timeline.add("/robot/parts", 7.0, {"kind": "changed", "part_id": 26})
    timeline.add("/robot/model", 7.0, swapped)
    timeline.add("/clock", 10.0, {"t": 10.0})
    assert timeline.static["/robot/model"] is MODEL, "the robot as it started is drawn first"
    assert timeline.frame(6.0).model is MODEL and timeline.frame(8.0).model is swapped
    server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
    try:
        drawer = SceneDrawer(server)
        drawer.draw_robot(timeline.static["/robot/model"])

        def part_26():
            """(the kind of shape part 26 is drawn as, its colour on the page now)"""
            batch, _row = drawer._where[(1, 0)]
            return batch.kind, drawer.drawn_color(1, 0)

        drawer.draw(timeline.frame(6.0), lines=False)
        assert part_26() == ("sphere", LOST_RGB), "the old shape, grey: lost at 5 s"
        drawer.draw(timeline.frame(8.0), lines=False)
        assert part_26() == ("box", (0, 255, 0)), "the new part's shape and colour"
        assert sorted(b.kind for b in drawer._batches) == ["box"], "one batch of boxes: the old sphere is gone"
        # the nodes the drawer keeps (removed with the trial; no map here): the new robot's base and its one batch
        assert drawer._nodes == [drawer.robot_node, drawer._batches[0].node], "the old robot's removed, not drawn over"
        drawer.draw(timeline.frame(6.0), lines=False)
        assert part_26() == ("sphere", LOST_RGB), "scrubbed back: the part as it was, and lost at 6 s"
    finally:
        server.stop()
