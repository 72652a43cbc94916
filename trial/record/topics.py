"""The topics of a trial log and their JSON schemas.

Every channel carries JSON messages described by a JSON Schema (MCAP schema encoding ``jsonschema``), so Foxglove,
the ``mcap`` CLI or a ten-line script can read a trial without our code. The schemas are the contract between the
trial runner that writes the log and the report that reads it: the recorder checks the required keys of the known
topics at write time, so a misnamed field fails in the run that wrote it rather than as a silent ``None`` metric
later. Other topics (anything starting with ``/``) are accepted with a permissive schema.

Units are SI throughout: metres, seconds, radians, m/s, rad/s; positions in the map frame (x east, y north).
"""
from __future__ import annotations

from typing import Any

_NUM = {"type": "number"}
_POINT = {"type": "array", "items": _NUM, "minItems": 2, "maxItems": 2}

SCHEMAS: dict[str, dict[str, Any]] = {
    "/clock": {
        "title": "hil.Clock",
        "description": "Simulated (or wall) time of the trial, seconds.",
        "type": "object",
        "properties": {"t": _NUM},
        "required": ["t"],
    },
    "/robot/state": {
        "title": "hil.RobotState",
        "description": "Base pose and velocity in the map frame, joint positions by blueprint name.",
        "type": "object",
        "properties": {
            "x": _NUM, "y": _NUM, "yaw": _NUM,
            "vx": {"type": "number", "description": "forward speed along the heading, m/s"},
            "w": {"type": "number", "description": "yaw rate, rad/s"},
            "joints": {"type": "object", "additionalProperties": _NUM},
            "mode": {"type": "string", "description": "what the controller says it is doing (optional)"},
            "odometry": {"type": "array", "items": _NUM, "minItems": 3, "maxItems": 3,
                         "description": "[x, y, yaw] the robot believes (optional: when x, y, yaw are ground truth)"},
        },
        "required": ["x", "y", "yaw", "vx", "w"],
    },
    "/robot/joints": {
        "title": "hil.RobotJoints",
        "description": "Joint positions by blueprint name, for a robot without a drivable base (no pose to log; "
                       "``hil run --record``). A robot with a base logs its joints in /robot/state.",
        "type": "object",
        "properties": {"joints": {"type": "object", "additionalProperties": _NUM}},
        "required": ["joints"],
    },
    "/pedestrians": {
        "title": "hil.Pedestrians",
        "description": "Every person in the world at one crowd tick (actual states, not intents).",
        "type": "object",
        "properties": {
            "people": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "type": {"type": "string"},
                        "x": _NUM, "y": _NUM, "vx": _NUM, "vy": _NUM,
                        "radius": {"type": "number", "description": "body radius, m (0.25 when absent)"},
                        "gaze": {"description": "where the person looks: yaw (rad) or a unit vector [gx, gy]",
                                 "oneOf": [_NUM, _POINT, {"type": "null"}]},
                        "doing": {"type": "string", "description": "what the person does: walking, scripted, or "
                                                                   "the objective it follows (interact, observe...)"},
                        "name": {"type": "string", "description": "the script's name for the person ('' if none)"},
                        "height": {"type": "number", "description": "body height, m (by person type)"},
                    },
                    "required": ["id", "x", "y", "vx", "vy"],
                },
            },
            "crowd_t": {"oneOf": [_NUM, {"type": "null"}],
                        "description": "the crowd's own time of these states (optional; mixed trials)"},
        },
        "required": ["people"],
    },
    "/robot/sensors": {
        "title": "hil.RobotSensors",
        "description": "What the robot's sensors read: ring ranges in metres (null: no echo), pressed contact zones. "
                       "In a mixed trial ``ring`` is what the controller read (the nearer of the real and the virtual "
                       "echo) and ``ring_real``/``ring_virtual`` keep the two apart.",
        "type": "object",
        "properties": {
            "ring": {"type": "array", "items": {"oneOf": [_NUM, {"type": "null"}]}},
            "ring_real": {"type": "array", "items": {"oneOf": [_NUM, {"type": "null"}]},
                          "description": "mixed trials: what the physical ring measured"},
            "ring_virtual": {"type": "array", "items": {"oneOf": [_NUM, {"type": "null"}]},
                             "description": "mixed trials: what the shadow world's ring saw of the virtual people"},
            "ring_cause": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                           "description": "why each of the ring part's own readings failed (no_hit, range, "
                                          "angle, noise; unknown for a part without per-cause codes), null: valid"},
            "ring_virtual_cause": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                                   "description": "mixed trials: why each shadow-ring reading had no echo"},
            "contacts": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["ring", "contacts"],
    },
    "/world/contacts": {
        "title": "hil.WorldContacts",
        "description": "Ground truth from the physics engine: ids of the people whose bodies touched the robot at "
                       "any physics step since the previous message.",
        "type": "object",
        "properties": {"people": {"type": "array", "items": {"type": "integer"}}},
        "required": ["people"],
    },
    "/crowd/script": {
        "title": "hil.ScriptLine",
        "description": "A line of the crowd's staged script that ran (crowd time t, line number, the line), or the "
                       "line that failed (error: the crowd's message; the script stopped there, the crowd goes on).",
        "type": "object",
        "properties": {"t": _NUM, "line": {"type": "integer"}, "text": {"type": "string"},
                       "error": {"type": "string", "description": "why the line failed (source:line: message)"}},
        "required": ["t", "line", "text"],
    },
    "/camera/people": {
        "title": "hil.CameraPeople",
        "description": "The people a virtual camera's new frame showed (ground-truth labels; frames are made when "
                       "the controller or the recording asks): each person's id and pixel count.",
        "type": "object",
        "properties": {"camera": {"type": "string", "description": "the camera's blueprint name"},
                       "people": {"type": "array", "items": {
                           "type": "object", "properties": {"id": {"type": "integer"},
                                                            "pixels": {"type": "integer"}},
                           "required": ["id", "pixels"]}}},
        "required": ["camera", "people"],
    },
    "/bus/stats": {
        "title": "hil.BusStats",
        "description": "BusStats.as_dict() of the robot's bus host (cumulative counters, latency percentiles); "
                       "``bus`` names the bus when the log has several (hil run --record writes it always).",
        "type": "object",
        "properties": {"bus": {"type": "string", "description": "the profile's bus name (main for one bus)"}},
        "additionalProperties": {"oneOf": [_NUM, {"type": "null"}]},
    },
    "/robot/sensor_faults": {
        "title": "hil.SensorFaults",
        "description": "Why sensors' readings failed: each range ring's own invalid-reading counters by cause "
                       "(no_hit, range, angle, noise: cumulative since the part powered on), read over the bus at "
                       "the trial's start and end, and each depth camera's invalid pixels by cause (no_return, "
                       "range, shadow, angle) over the frames it handed out since the trial started; the metrics "
                       "count the difference.",
        "type": "object",
        "properties": {"sensors": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}},
                       "frames": {"type": "object", "description": "per camera: frames and pixels counted",
                                  "additionalProperties": {"type": "object", "properties": {
                                      "frames": {"type": "integer"}, "pixels": {"type": "integer"}}}}},
        "required": ["sensors"],
    },
    "/robot/camera_faults": {
        "title": "hil.CameraFaults",
        "description": "One depth camera frame's invalid pixels by cause (no_return: nothing within the far plane; "
                       "range: nearer than min_range_m or beyond max_range_m; shadow: the projector does not see "
                       "the point; angle: incidence dropout), written when the trial first sees the frame.",
        "type": "object",
        "properties": {"camera": {"type": "string"}, "frame_t": _NUM, "pixels": {"type": "integer"},
                       "invalid": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}},
        "required": ["camera", "frame_t", "pixels", "invalid"],
    },
    "/robot/model": {
        "title": "hil.RobotModel",
        "description": "The robot as its parts describe it, once at t = 0: links (parent, the joint placing it, "
                       "visual shapes in the link frame) and the range ring's rays, so a log alone draws the robot "
                       "(trial/record/robot_model.py).",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "links": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "parent": {"type": "integer"},
                "joint": {"type": "object", "description": "type, axis, xyz, rpy (placement in the parent at q=0), "
                                                          "q: the blueprint joint name giving its position or null"},
                "visuals": {"type": "array", "items": {"type": "object"}}},
                "required": ["name", "parent", "joint", "visuals"]}},
            "ring": {"oneOf": [{"type": "object"}, {"type": "null"}],
                     "description": "link, yaw (rad, ring frame), origin_radius_m, origin_z_m, min/max_range_m"},
            "contacts": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                         "description": "each contact sensor's zones by its name (bumper: [left, centre, right])"},
        },
        "required": ["links"],
    },
    "/crowd/scenario": {
        "title": "hil.Scenario",
        "description": "The staged script of the trial, once at t = 0: its name and its lines (1-based as in "
                       "/crowd/script's line numbers).",
        "type": "object",
        "properties": {"name": {"type": "string"}, "lines": {"type": "array", "items": {"type": "string"}},
                       "file": {"type": "string", "description": "the script's file name (child_interacts.scn)"}},
        "required": ["name", "lines"],
    },
    "/map": {
        "title": "hil.Map",
        "description": "The world's static layout, written once at the start.",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "walls": {"type": "array", "items": {"type": "array", "items": _NUM, "minItems": 4, "maxItems": 4},
                      "description": "segments [x1, y1, x2, y2]"},
            "places": {"type": "object", "additionalProperties": _POINT},
            "entrances": {"type": "object",
                          "description": "name -> a point [x, y] or a segment [x1, y1, x2, y2]",
                          "additionalProperties": {"type": "array", "items": _NUM}},
            "start": {"oneOf": [_POINT, {"type": "null"}]},
            "goal": {"oneOf": [_POINT, {"type": "null"}]},
            "goal_radius": {"type": "number", "description": "m; 0.5 when absent"},
        },
        "required": ["walls", "goal"],
    },
    "/trial/meta": {
        "title": "hil.TrialMeta",
        "description": "What ran: seed, scenario, profile, software versions; robot footprint radius.",
        "type": "object",
        "properties": {
            "seed": {"type": "integer"},
            "scenario": {"type": "string"},
            "profile": {"type": "string"},
            "versions": {"type": "object", "additionalProperties": {"type": "string"}},
            "robot_radius": {"type": "number", "description": "m; 0.3 when absent"},
            "objectives": {"type": "object", "description": "user: the rates files' own objectives, name -> "
                                                            "'module:Class' (only when there are)"},
            "controller": {"type": "string", "description": "hil run: the controller file"},
            "clock": {"type": "string", "description": "hil run: the profile's clock (real or sim)"},
            "clock_start_s": {"type": "number", "description": "hil run: the robot clock's reading at trial time 0"},
            "buses": {"type": "array", "description": "hil run: the robot's buses, main first",
                      "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                 "url": {"type": "string"}}}},
        },
        "required": ["seed", "scenario", "profile", "versions"],
    },
    "/trial/params": {
        "title": "hil.ParamsChanged",
        "description": "Controller parameters changed while it ran (a live Foxglove session), applied between two "
                       "bus cycles at this time; who asked and the whole set after the change.",
        "type": "object",
        "properties": {"changed": {"type": "object"}, "params": {"type": "object"},
                       "by": {"type": "string", "description": "e.g. 'foxglove client 3'"}},
        "required": ["changed", "params", "by"],
    },
    "/trial/mark": {
        "title": "hil.Mark",
        "description": "A moment marked by whoever watched (Foxglove's 'mark this moment' service), with a note.",
        "type": "object",
        "properties": {"note": {"type": "string"}, "by": {"type": "string"}},
        "required": ["note", "by"],
    },
    "/trial/refused": {
        "title": "hil.Refused",
        "description": "A request from whoever watched that was refused (a parameter of the wrong type, a seek "
                       "backwards in a live trial...): what was asked, why not, by whom. The trial went on.",
        "type": "object",
        "properties": {"request": {"type": "string"}, "error": {"type": "string"}, "by": {"type": "string"}},
        "required": ["request", "error", "by"],
    },
}

GENERIC_SCHEMA: dict[str, Any] = {"title": "hil.Json", "type": "object"}


def schema_for(topic: str) -> dict[str, Any]:
    """The JSON schema of a topic (a permissive object schema for topics not listed in SCHEMAS)."""
    return SCHEMAS.get(topic, GENERIC_SCHEMA)


def check_payload(topic: str, payload: dict[str, Any]) -> None:
    """Raise ValueError naming the topic and the key when a known topic's payload lacks a required key.

    Only the keys the report depends on are checked (required keys, and those of every person in
    /pedestrians); full JSON Schema validation would need another dependency and cost time on every message.
    """
    schema = SCHEMAS.get(topic)
    if schema is None:
        return
    missing = [k for k in schema.get("required", ()) if k not in payload]
    if missing:
        raise ValueError(f"{topic}: payload lacks {', '.join(missing)} (has {sorted(payload)})")
    if topic == "/pedestrians":
        if not isinstance(payload["people"], (list, tuple)):
            raise ValueError(f"/pedestrians: 'people' must be a list, not {type(payload['people']).__name__}")
        need = SCHEMAS["/pedestrians"]["properties"]["people"]["items"]["required"]
        for k, person in enumerate(payload["people"]):
            lacking = [key for key in need if key not in person]
            if lacking:
                raise ValueError(f"/pedestrians: people[{k}] lacks {', '.join(lacking)} (has {sorted(person)})")
