"""The robot as its parts describe it, in the log (``/robot/model``), and its links placed from a log's joints.

The modular-robot reference's viewer draws the virtual robot from the parts' own data. A trial log carries that data
once, at t = 0: every link of the scanned model (its parent, the joint that places it, the visual shapes of its body)
and the range ring's rays (which link, which directions, from where). :class:`LinkPoser` turns the message back into
a :class:`runtime.model.Model` and places every link with the model's own forward kinematics at the joint
positions ``/robot/state`` logs by blueprint name: the browser viewer (trial/view) and the Foxglove channels
(foxglove.py) draw the robot from the log alone, live or replayed, the same way.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

MIN_Z_FALLBACK_M = 0.0


def robot_model_message(robot: Any) -> dict[str, Any]:
    """``/robot/model`` of an opened :class:`runtime.robot.Robot`."""
    model = robot.model
    q_names = {model.q_index(j.part_key, j.part_joint): name for name, j in robot.joints.items()}
    links = []
    for link in model.links:
        joint = model.joints[link.joint] if link.joint >= 0 else None
        entry: dict[str, Any] = {"name": link.name, "parent": link.parent, "part": link.bus_id, "body": link.body,
                                 "visuals": [_shape(s) for s in link.visuals]}
        if joint is None:
            entry["joint"] = {"type": "root", "axis": [0.0, 0.0, 1.0], "xyz": [0.0] * 3, "rpy": [0.0] * 3, "q": None}
        else:
            entry["joint"] = {"name": joint.name, "type": joint.type, "axis": [float(v) for v in joint.axis],
                              "xyz": [float(v) for v in joint.placement.translation],
                              "rpy": [float(v) for v in joint.placement.rpy],
                              "q": q_names.get(joint.idx_q) if joint.idx_q is not None else None}
        links.append(entry)
    # no model name: it is made from the bus URL, which holds the crowd's randomly picked port (same seed, same bytes)
    message = {"links": links, "ring": _ring(robot), "contacts": _contacts(robot)}
    message["stand_z"] = _stand_height(message)
    return message


def _contacts(robot: Any) -> dict[str, list[str]]:
    """Each contact sensor's zones by the sensor's blueprint name (bumper: [left, centre, right]), so a log says
    which zones there are, not only which were pressed."""
    from hil.runtime.robot.sensors import ContactSensor

    return {name: list(sensor.zones) for name, sensor in robot.sensors.items() if isinstance(sensor, ContactSensor)}


def _shape(shape: Any) -> dict[str, Any]:
    out = {"kind": shape.kind, "size": [float(v) for v in shape.size], "xyz": [float(v) for v in shape.pose.xyz],
           "rpy": [float(v) for v in shape.pose.rpy], "rgba": [float(v) for v in shape.rgba]}
    if shape.kind == "mesh":
        out["vertices"] = [[float(c) for c in v] for v in shape.vertices]
        out["triangles"] = [[int(i) for i in t] for t in shape.triangles]
    return out


def _ring(robot: Any) -> dict[str, Any] | None:
    """The first range ring: the link its rays start from and their geometry in that link's frame."""
    from hil.runtime.robot.sensors import RANGE_RING, RangeRing

    ring = next((s for s in robot.sensors.values() if isinstance(s, RangeRing)), None)
    if ring is None:
        return None
    desc = robot.virtual.parts[ring.part_key].descriptor
    sensor = next(s for s in desc.sensors if s.kind == RANGE_RING and s.params.get("registers"))
    params = sensor.params
    link = next(k.name for k in robot.model.links if k.bus_id == ring.part_key and k.body == sensor.body)
    yaws = params.get("yaw_deg") or [0.0] * len(ring.angles)
    from hil.runtime.robot.overlay import ring_geometry

    _, (translation, rotation) = ring_geometry(robot, ring)
    part = robot.virtual.parts[ring.part_key]
    return {"name": ring.name, "link": link, "yaw": [math.radians(float(y)) for y in yaws],
            "origin_radius_m": float(params.get("origin_radius_m", 0.0)),
            "origin_z_m": float(params.get("origin_z_m", 0.0)),
            "min_range_m": ring.min_range, "max_range_m": ring.max_range if math.isfinite(ring.max_range) else 4.0,
            # the part's sensor model and the ring frame in the base frame: what `hil calibrate check` needs to
            # know every ray's incidence from a trial log alone
            "part": desc.name, "serial": part.serial_number, "sensor": sensor.name, "params": _plain(params),
            "in_base": {"rotation": [[float(v) for v in row] for row in np.asarray(rotation)],
                        "translation": [float(v) for v in np.asarray(translation)]}}


def _plain(value: Any) -> Any:
    """JSON-ready (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class LinkPoser:
    """Link frames in the map from a ``/robot/model`` message, the base pose and the joints by name."""

    def __init__(self, message: dict[str, Any]):
        from hil.devices.descriptor import JointLimits
        from hil.runtime.model import Inertia, JointModel, Link, Model, SE3, create_data

        self.message = message
        self.names = [entry["name"] for entry in message["links"]]
        self.index = {name: i for i, name in enumerate(self.names)}
        joints, links, q_names = [], [], []
        for i, entry in enumerate(message["links"]):
            j = entry["joint"]
            joint_index = -1
            if entry["parent"] >= 0:
                moving = j["type"] in ("revolute", "continuous", "prismatic")
                idx_q = len(q_names) if moving else None
                if moving:
                    q_names.append(j.get("q"))
                joint_index = len(joints)
                joints.append(JointModel(j.get("name", entry["name"]), j["type"], entry["parent"], i,
                                         SE3.from_pose(j["xyz"], j["rpy"]), np.asarray(j["axis"], dtype=float),
                                         JointLimits(), 0.0, 0.0, int(entry.get("part", 0)), None, idx_q))
            links.append(Link(entry["name"], entry["parent"], joint_index, Inertia(0.0, np.zeros(3), np.zeros((3, 3))),
                              (), (), int(entry.get("part", 0)), entry.get("body", "")))
        self.model = Model(message.get("name", "robot"), tuple(links), tuple(joints), ())
        self.data = create_data(self.model)
        self.q_names = q_names
        self.stand_z = float(message.get("stand_z", MIN_Z_FALLBACK_M))

    def local(self, joints: dict[str, float] | None) -> list[np.ndarray]:
        """Every link's 4x4 frame in the robot's base frame (runtime.model.forward_kinematics)."""
        from hil.runtime.model import forward_kinematics

        joints = joints or {}
        q = np.array([_finite(joints.get(name)) if name else 0.0 for name in self.q_names])
        return [frame.homogeneous for frame in forward_kinematics(self.model, self.data, q)]

    def world(self, x: float, y: float, yaw: float, joints: dict[str, float] | None) -> list[np.ndarray]:
        """Every link's 4x4 frame in the map: the base stands on the floor at (x, y) heading ``yaw``."""
        base = base_matrix(x, y, yaw, self.stand_z)
        return [base @ frame for frame in self.local(joints)]


def base_matrix(x: float, y: float, yaw: float, z: float = 0.0) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, z], [0.0, 0.0, 0.0, 1.0]])


def shape_matrix(shape: dict[str, Any]) -> np.ndarray:
    """A visual's 4x4 placement in its link's frame."""
    from hil.runtime.model import SE3

    return SE3.from_pose(shape["xyz"], shape["rpy"]).homogeneous


def half_extents(shape: dict[str, Any]) -> tuple[float, float, float]:
    """Half the shape's bounding box in its own frame (cylinders and capsules along z)."""
    size = shape["size"]
    kind = shape["kind"]
    if kind == "box":
        return size[0] / 2, size[1] / 2, size[2] / 2
    if kind in ("cylinder", "capsule"):
        r, length = size[0], size[1]
        return r, r, length / 2 + (r if kind == "capsule" else 0.0)
    if kind == "sphere":
        return size[0], size[0], size[0]
    vertices = np.asarray(shape.get("vertices") or [[0.0, 0.0, 0.0]])
    return tuple(float(v) for v in np.abs(vertices).max(axis=0))  # type: ignore[return-value]


def _stand_height(message: dict[str, Any]) -> float:
    """The base frame's height that puts the lowest visual point on the floor at q = 0 (as the world stands it)."""
    poser = LinkPoser({**message, "stand_z": 0.0})
    lowest = math.inf
    for frame, entry in zip(poser.local({}), message["links"]):
        for shape in entry["visuals"]:
            m = frame @ shape_matrix(shape)
            hx, hy, hz = half_extents(shape)
            reach = abs(m[2, 0]) * hx + abs(m[2, 1]) * hy + abs(m[2, 2]) * hz
            lowest = min(lowest, m[2, 3] - reach)
    return -lowest if math.isfinite(lowest) else MIN_Z_FALLBACK_M


def _finite(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0
