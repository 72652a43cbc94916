"""Contacts on ROS 2: the robot's contact zones as ``std_msgs/Bool`` switches and the people touching it as
RViz markers, plain Python shared by the bridge (bridge_node.py, rclpy's messages) and the rosbag (rosbag.py,
rosbags' messages); it imports nothing of hil, as the bridge runs in ROS's Python.

- **Switches.** Each contact sensor NAME (its blueprint name: ``bumper``, ``shoulders``, ``left_arm.forearm``)
  is ``/NAME`` (dots as ``/``: ``/left_arm/forearm``), true while any of its zones is pressed, and each zone ZONE
  ``/NAME/ZONE`` (``/bumper/left``), true while it is. A bumper is a switch: a Bool per switch is the type every
  ROS install has, a behaviour tree's condition or a safety node subscribes to the one it cares about, and the
  topic names the zone, so no message layout is to be learned. Published once at the start (all false) and then
  each cycle one changes, transient-local: a node that starts later gets the state now.
- **Touches.** ``/contacts`` (visualization_msgs/MarkerArray, in ``map``): one red sphere per person touching the
  robot (namespace ``contacts``, id: the person's, as ``/people/markers`` numbers them), where the person's body
  meets the robot's: the person's position moved by its radius toward the robot (the log keeps who touched, not
  where nor how hard); a DELETE when the touch ends. From the log's ``/world/contacts`` (the physics engine's
  ground truth, every crowd period).
"""
from __future__ import annotations

import math

CONTACTS_TOPIC = "/contacts"
CONTACTS_NS = "contacts"
TOUCH_RGBA = (1.0, 0.1, 0.1, 0.9)
TOUCH_DIAMETER_M = 0.12
ADD, DELETE, DELETEALL, SPHERE = 0, 2, 3, 2  # visualization_msgs/Marker's actions and its SPHERE type
PERSON_RADIUS_M = 0.25  # when /pedestrians gives none (its schema's default radius)


def contact_topic(sensor: str, zone: str | None = None) -> str:
    """``/NAME`` or ``/NAME/ZONE`` of a contact sensor's name (dots as ``/``) and zone; anything a ROS name cannot
    hold becomes ``_``."""
    parts = [*sensor.split("."), *([zone] if zone is not None else [])]
    safe = []
    for part in parts:
        word = "".join(c if c.isalnum() or c == "_" else "_" for c in part) or "_"
        safe.append("_" + word if word[0].isdigit() else word)
    return "/" + "/".join(safe)


def contact_states(zones: dict, pressed: list) -> dict[str, bool]:
    """topic -> pressed of every sensor and zone: ``zones`` {sensor: [zone, ...]} (the log's /robot/model
    ``contacts``), ``pressed`` the log's /robot/sensors ``contacts`` (``sensor.zone`` each). A zone pressed that
    ``zones`` does not list is added."""
    on = set(pressed)
    known = {sensor: list(names) for sensor, names in zones.items()}
    for item in pressed:
        sensor, _, zone = item.rpartition(".")
        if sensor and zone not in known.setdefault(sensor, []):
            known[sensor].append(zone)
    out: dict[str, bool] = {}
    for sensor, names in sorted(known.items()):
        states = {zone: f"{sensor}.{zone}" in on for zone in names}
        out[contact_topic(sensor)] = any(states.values())
        out.update({contact_topic(sensor, zone): state for zone, state in states.items()})
    return out


def changed(before: dict | None, now: dict) -> dict:
    """The entries of ``now`` that differ from ``before`` (all of them when ``before`` is None)."""
    return dict(now) if before is None else {k: v for k, v in now.items() if before.get(k) != v}


def touch_points(people: list, touched: list, robot_xy) -> list[dict]:
    """{id, x, y} of each person in ``touched`` (ids) found in ``people`` (the log's /pedestrians): the person's
    position moved by its radius toward ``robot_xy`` (the robot's position in the map; None: the person's)."""
    where = {int(p["id"]): p for p in people}
    out = []
    for pid in sorted(int(i) for i in touched):
        person = where.get(pid)
        if person is None:
            continue
        x, y = float(person["x"]), float(person["y"])
        if robot_xy is not None:
            dx, dy = float(robot_xy[0]) - x, float(robot_xy[1]) - y
            gap = math.hypot(dx, dy)
            if gap > 1e-9:
                reach = min(float(person.get("radius") or PERSON_RADIUS_M), gap)
                x, y = x + dx / gap * reach, y + dy / gap * reach
        out.append({"id": pid & 0x7FFFFFFF, "x": x, "y": y})
    return out


def touch_markers(points: list[dict], shown: set | None) -> tuple[list[dict], set]:
    """The markers of one /world/contacts: a sphere per touch point, a DELETE per touch that ended, a DELETEALL
    first in the first message (``shown`` None); (markers, the ids shown now)."""
    markers: list[dict] = [{"action": DELETEALL, "id": 0}] if shown is None else []
    now = set()
    for point in points:
        markers.append({"action": ADD, "id": point["id"], "x": point["x"], "y": point["y"]})
        now.add(point["id"])
    markers.extend({"action": DELETE, "id": gone} for gone in sorted((shown or set()) - now))
    return markers, now


def touch_marker_array(make, stamp, markers: list[dict], frame: str = "map"):
    """A visualization_msgs/MarkerArray of :func:`touch_markers`' markers (``make`` as bridge_node.py's)."""
    size = (TOUCH_DIAMETER_M,) * 3
    return shape_markers(make, stamp, [{**m, "z": 0.5, "scale": size, "text": f"person {m['id']}"}
                                       if m["action"] == ADD else m for m in markers],
                         ns=CONTACTS_NS, shape=SPHERE, rgba=TOUCH_RGBA, frame=frame)


def shape_markers(make, stamp, markers: list[dict], *, ns: str, shape: int, rgba: tuple, frame: str):
    """A visualization_msgs/MarkerArray in ``frame``: each ADD (``action`` 0) a ``shape`` at x, y, z with
    ``scale`` (3 sizes, m) and optional ``text``, upright; any other action (DELETE, DELETEALL) as it says. The
    people's cylinders (bridge_node.py) and the touches' spheres are made by it."""
    out = []
    r, g, b, a = rgba
    for marker in markers:
        header = make("std_msgs/msg/Header", stamp=stamp, frame_id=frame)
        if marker["action"] != ADD:
            out.append(make("visualization_msgs/msg/Marker", header=header, ns=ns, id=marker["id"],
                            action=marker["action"]))
            continue
        sx, sy, sz = (float(v) for v in marker["scale"])
        out.append(make("visualization_msgs/msg/Marker", header=header, ns=ns, id=marker["id"], type=shape,
                        action=ADD, text=marker.get("text", ""),
                        pose=make("geometry_msgs/msg/Pose",
                                  position=make("geometry_msgs/msg/Point", x=marker["x"], y=marker["y"],
                                                z=marker["z"]),
                                  orientation=make("geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.0, w=1.0)),
                        scale=make("geometry_msgs/msg/Vector3", x=sx, y=sy, z=sz),
                        color=make("std_msgs/msg/ColorRGBA", r=r, g=g, b=b, a=a)))
    return make("visualization_msgs/msg/MarkerArray", markers=out)


SCENARIO_LINE_TOPIC = "/scenario/line"


def scenario_line(file: str, line: dict) -> str:
    """``/scenario/line``'s text of one of the log's /crowd/script lines: ``FILE:LINE: TEXT`` (and ``(failed:
    ERROR)`` when the line failed), FILE the scenario's file name."""
    said = f"{file}:{int(line['line'])}: {str(line.get('text', '')).strip()}"
    return f"{said} (failed: {line['error']})" if line.get("error") else said


def scenario_file(scenario: dict) -> str:
    """The file name a log's /crowd/scenario names (``file``; a log without it: NAME.scn)."""
    return str(scenario.get("file") or f"{scenario.get('name', 'scenario')}.scn")
