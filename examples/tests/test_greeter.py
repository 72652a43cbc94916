"""The greeter (examples/greeter.py) in the crowd-simulation reference's child scene: a child comes from afar to
interact with the robot; the greeter finds them in its depth image (no labels) and ends with its head turned to them."""
from __future__ import annotations

import math
from pathlib import Path

GREETER = Path(__file__).resolve().parent.parent / "greeter.py"


def test_the_greeter_turns_its_head_to_the_child(tmp_path):
    from hil.trial import Trial
    from hil.trial.world import WorldProbe

    seen: dict = {}

    def watch(robot):  # ground truth for the test only (after every bus cycle), never shown to the controller
        probe = seen.get("probe") or WorldProbe.of(robot)
        seen["probe"] = probe
        x, y, yaw = probe.robot_pose()
        people, _, _ = probe.people()
        kid = next((p for p in people if p.get("name") == "kid"), None)
        if kid is None:
            return
        neck = robot.joints["head.neck_yaw"]
        link = next(i for i, link in enumerate(robot.model.links) if link.bus_id == neck.part_key)
        nx, ny = robot.dynamics.placement(link).translation[:2]
        neck_x, neck_y = x + nx * math.cos(yaw) - ny * math.sin(yaw), y + nx * math.sin(yaw) + ny * math.cos(yaw)
        bearing = math.atan2(kid["y"] - neck_y, kid["x"] - neck_x)
        head = yaw + neck.position
        seen["error"] = math.atan2(math.sin(bearing - head), math.cos(bearing - head))
        seen["distance"] = math.hypot(kid["x"] - x, kid["y"] - y)
        seen["mode"] = robot.mode

    r = Trial(GREETER, map="arcade", scenario="child_interacts", start=(7.0, 0.0, math.pi), duration=45,
              seed=0).run(tmp_path, hooks=(watch,))
    assert r.status == "ok", r.summary_line()
    assert seen["distance"] < 2.0, f"the child should have come to the robot: {seen}"
    assert abs(seen["error"]) < 0.1, seen
    assert seen["mode"] == "greet"
