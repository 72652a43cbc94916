"""Foxglove-native channels beside the ``hil.*`` topics, so Foxglove's 3D, Log and plot panels show a trial as is.

:class:`FoxgloveChannels` listens to every message the trial writes (a :class:`TrialRecorder` listener) and
writes, in the same file and at the same log times, messages with Foxglove's well-known schemas, encoded with the
``foxglove-sdk`` package (Foxglove's own SDK: the schemas and their protobuf encoding come from the installed
package, nothing is fetched):

- ``/foxglove/scene`` (foxglove.SceneUpdate): the map's walls and the goal once; the robot's links as entities
  locked to their frames (the descriptors' visual shapes, as ``/robot/model`` has them); every person as a
  cylinder sized by its body and coloured by what it is doing (palette.py), deleted when the person leaves;
- ``/foxglove/tf`` (foxglove.FrameTransforms): ``map`` -> the robot's base link (ground truth pose), and every
  link from its parent: all of them at t = 0, the moving joints whenever their position changed;
- ``/foxglove/ring`` (foxglove.LaserScan) in the ring's frame: each sensor's echo as a range from the ring's
  centre (the rays are radial, so range + origin radius is exact), NaN for no echo; a mixed trial adds
  ``/foxglove/ring_real`` and ``/foxglove/ring_virtual``;
- ``/foxglove/ring_rays`` (foxglove.SceneUpdate, entity ``ring/rays`` locked to the ring's frame): each sensor's
  ray as ``hil view`` draws it: to its echo in the echo's colour, or, where the reading failed, to the range
  limit in the colour of why it failed (the part's per-reading code, ``ring_cause``: palette.CAUSE_RGB), with the
  cause of each failed one in the entity's metadata; a mixed trial's virtual echoes in their own colour. The
  LaserScan cannot show a failed reading (its range is NaN, nothing is drawn);
- ``/foxglove/log`` (foxglove.Log): the script lines as they ran (``line N: text``), the controller's mode
  changes and what the trial is.

Everything is computed from the hil messages alone (nothing of the wall clock), so the same trial still gives
the same bytes, and a SIGKILLed trial keeps its Foxglove channels up to the last flush like the rest.
"""
from __future__ import annotations

import math
from typing import Any

from .palette import (CAUSE_TEXT, GOAL_RGB, WALL_HEIGHT_M, WALL_RGB, WALL_THICKNESS_M, doing_rgb, failed_ray_rgb,
                      ring_sides)
from .robot_model import LinkPoser

SCENE, TF, LOG, RING = "/foxglove/scene", "/foxglove/tf", "/foxglove/log", "/foxglove/ring"
RAYS = "/foxglove/ring_rays"
RAY_THICKNESS_M = 0.015  # as hil view draws them
MAP_FRAME = "map"
JOINT_EPS = 1e-4  # rad (or m): a joint that moved less is not published again


def _fx():
    import foxglove.messages as fx

    return fx


def _stamp(t: float):
    ns = round(t * 1e9)
    return _fx().Timestamp(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)


def _quat_yaw(yaw: float):
    return _fx().Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))


def _quat_matrix(m) -> Any:
    """A rotation matrix's quaternion (Shepperd's method, w >= 0)."""
    fx = _fx()
    tr = m[0][0] + m[1][1] + m[2][2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        return fx.Quaternion(w=0.25 * s, x=(m[2][1] - m[1][2]) / s, y=(m[0][2] - m[2][0]) / s, z=(m[1][0] - m[0][1]) / s)
    if m[0][0] > m[1][1] and m[0][0] > m[2][2]:
        s = math.sqrt(1.0 + m[0][0] - m[1][1] - m[2][2]) * 2
        q = ((m[2][1] - m[1][2]) / s, 0.25 * s, (m[0][1] + m[1][0]) / s, (m[0][2] + m[2][0]) / s)
    elif m[1][1] > m[2][2]:
        s = math.sqrt(1.0 + m[1][1] - m[0][0] - m[2][2]) * 2
        q = ((m[0][2] - m[2][0]) / s, (m[0][1] + m[1][0]) / s, 0.25 * s, (m[1][2] + m[2][1]) / s)
    else:
        s = math.sqrt(1.0 + m[2][2] - m[0][0] - m[1][1]) * 2
        q = ((m[1][0] - m[0][1]) / s, (m[0][2] + m[2][0]) / s, (m[1][2] + m[2][1]) / s, 0.25 * s)
    w, x, y, z = q if q[0] >= 0 else tuple(-v for v in q)
    return fx.Quaternion(w=w, x=x, y=y, z=z)


def _pose(m) -> Any:
    fx = _fx()
    return fx.Pose(position=fx.Vector3(x=float(m[0][3]), y=float(m[1][3]), z=float(m[2][3])),
                   orientation=_quat_matrix(m))


def _color(rgb, a: float = 1.0):
    return _fx().Color(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=float(a))


class FoxgloveChannels:
    """A recorder listener: hil messages in, Foxglove messages out (into the same recorder)."""

    def __init__(self, recorder: Any):
        self.rec = recorder
        self.poser: LinkPoser | None = None
        self.ring: dict[str, Any] | None = None
        self.people: set[int] = set()
        self.joints: dict[str, float] = {}
        self.mode: str | None = None
        self._handlers = {"/map": self._map, "/robot/model": self._model, "/robot/state": self._state,
                          "/robot/joints": self._joints_only, "/robot/sensors": self._sensors,
                          "/pedestrians": self._people, "/crowd/script": self._script, "/trial/meta": self._meta,
                          "/trial/params": self._steered, "/trial/mark": self._steered,
                          "/trial/refused": self._steered}

    def __call__(self, topic: str, t: float, payload: dict[str, Any]) -> None:
        handler = self._handlers.get(topic)
        if handler is not None:
            handler(t, payload)

    def _write(self, topic: str, t: float, message: Any) -> None:
        self.rec.write_encoded(topic, t, message.encode(), type(message).get_schema(), "protobuf")

    # --- once ------------------------------------------------------------------------------------------------
    def _map(self, t: float, msg: dict[str, Any]) -> None:
        fx = _fx()
        cubes = []
        for x1, y1, x2, y2 in msg.get("walls", []):
            length, yaw = math.hypot(x2 - x1, y2 - y1), math.atan2(y2 - y1, x2 - x1)
            cubes.append(fx.CubePrimitive(
                pose=fx.Pose(position=fx.Vector3(x=(x1 + x2) / 2, y=(y1 + y2) / 2, z=WALL_HEIGHT_M / 2),
                             orientation=_quat_yaw(yaw)),
                size=fx.Vector3(x=length, y=WALL_THICKNESS_M, z=WALL_HEIGHT_M), color=_color(WALL_RGB)))
        entities = [fx.SceneEntity(timestamp=_stamp(t), frame_id=MAP_FRAME, id="walls", cubes=cubes)]
        goal = msg.get("goal")
        if goal is not None:
            radius = float(msg.get("goal_radius", 0.5))
            entities.append(fx.SceneEntity(timestamp=_stamp(t), frame_id=MAP_FRAME, id="goal", cylinders=[
                fx.CylinderPrimitive(pose=fx.Pose(position=fx.Vector3(x=goal[0], y=goal[1], z=0.005),
                                                  orientation=_quat_yaw(0.0)),
                                     size=fx.Vector3(x=2 * radius, y=2 * radius, z=0.01), bottom_scale=1.0,
                                     top_scale=1.0, color=_color(GOAL_RGB, 0.6))]))
        self._write(SCENE, t, fx.SceneUpdate(entities=entities))

    def _model(self, t: float, msg: dict[str, Any]) -> None:
        fx = _fx()
        self.poser = LinkPoser(msg)
        self.ring = msg.get("ring")
        entities = [fx.SceneEntity(timestamp=_stamp(t), frame_id=entry["name"], id=f"robot/{entry['name']}",
                                   frame_locked=True, **_primitives(entry["visuals"]))
                    for entry in msg["links"] if entry["visuals"]]
        self._write(SCENE, t, fx.SceneUpdate(entities=entities))
        self._write(TF, t, fx.FrameTransforms(transforms=self._link_transforms(t, {}, every=True)))

    def _meta(self, t: float, msg: dict[str, Any]) -> None:
        text = (f"trial: controller {msg.get('controller', '?')}, scenario {msg.get('scenario')}, seed "
                f"{msg.get('seed')}, clock {msg.get('clock', '?')}")
        self._log(t, text, "trial")

    # --- every cycle -----------------------------------------------------------------------------------------
    def _state(self, t: float, msg: dict[str, Any]) -> None:
        fx = _fx()
        transforms = []
        if self.poser is not None:
            root = self.poser.names[0]
            transforms.append(fx.FrameTransform(
                timestamp=_stamp(t), parent_frame_id=MAP_FRAME, child_frame_id=root,
                translation=fx.Vector3(x=msg["x"], y=msg["y"], z=self.poser.stand_z), rotation=_quat_yaw(msg["yaw"])))
            transforms += self._link_transforms(t, msg.get("joints") or {})
        if transforms:
            self._write(TF, t, fx.FrameTransforms(transforms=transforms))
        mode = msg.get("mode")
        if mode != self.mode and mode is not None:
            self._log(t, f"mode: {mode}", "controller")
        self.mode = mode

    def _joints_only(self, t: float, msg: dict[str, Any]) -> None:
        transforms = self._link_transforms(t, msg.get("joints") or {})
        if transforms:
            self._write(TF, t, _fx().FrameTransforms(transforms=transforms))

    def _link_transforms(self, t: float, joints: dict[str, float], every: bool = False) -> list[Any]:
        """Parent -> child of every link whose joint moved (all links when ``every``), from the model's joints."""
        fx = _fx()
        poser, out = self.poser, []
        if poser is None:
            return out
        for joint in poser.model.joints:
            name = poser.q_names[joint.idx_q] if joint.idx_q is not None else None
            if not every and name is None:
                continue
            q = float(joints.get(name, 0.0) or 0.0) if name else 0.0
            if not math.isfinite(q):
                q = 0.0
            if not every:
                if abs(q - self.joints.get(name, math.inf)) < JOINT_EPS:
                    continue
                self.joints[name] = q
            m = joint.transform(q).homogeneous
            out.append(fx.FrameTransform(timestamp=_stamp(t), parent_frame_id=poser.names[joint.parent],
                                         child_frame_id=poser.names[joint.child],
                                         translation=fx.Vector3(x=m[0, 3], y=m[1, 3], z=m[2, 3]),
                                         rotation=_quat_matrix(m)))
        return out

    def _sensors(self, t: float, msg: dict[str, Any]) -> None:
        if self.ring is None:
            return
        self._scan(RING, t, msg.get("ring") or [])
        if "ring_real" in msg:
            self._scan(f"{RING}_real", t, msg.get("ring_real") or [])
            self._scan(f"{RING}_virtual", t, msg.get("ring_virtual") or [])
        self._rays(t, msg)

    def _rays(self, t: float, msg: dict[str, Any]) -> None:
        """The rays as hil view draws them (trial/view/scene.py): what the controller's ring read, every ray; a
        mixed trial's virtual side, only its echoes."""
        fx, ring = _fx(), self.ring
        yaws = ring["yaw"]
        r0, z0, max_r = ring["origin_radius_m"], ring["origin_z_m"], ring["max_range_m"]
        points, colors, metadata = [], [], []
        for ranges, echo_rgb, causes, every_ray in ring_sides(msg):
            if not ranges or len(ranges) != len(yaws):
                continue
            causes = causes if causes and len(causes) == len(yaws) else [None] * len(yaws)
            for i, (yaw, r, cause) in enumerate(zip(yaws, ranges, causes)):
                if r is None and not every_ray:
                    continue
                c, s = math.cos(yaw), math.sin(yaw)
                end = r0 + (max_r if r is None else float(r))
                rgb = echo_rgb if r is not None else failed_ray_rgb(cause)
                points += [fx.Point3(x=r0 * c, y=r0 * s, z=z0), fx.Point3(x=end * c, y=end * s, z=z0)]
                colors += [_color(rgb), _color(rgb)]
                if r is None and cause:
                    metadata.append(fx.KeyValuePair(key=f"sensor {i}", value=CAUSE_TEXT.get(cause, cause)))
        if not points:
            return
        line = fx.LinePrimitive(type=fx.LinePrimitiveLineType.LineList, thickness=RAY_THICKNESS_M,
                                pose=fx.Pose(position=fx.Vector3(x=0.0, y=0.0, z=0.0), orientation=_quat_yaw(0.0)),
                                points=points, colors=colors)
        self._write(RAYS, t, fx.SceneUpdate(entities=[fx.SceneEntity(
            timestamp=_stamp(t), frame_id=ring["link"], id="ring/rays", frame_locked=True, metadata=metadata,
            lines=[line])]))

    def _scan(self, topic: str, t: float, ranges: list) -> None:
        fx, ring = _fx(), self.ring
        yaws = ring["yaw"]
        if not yaws or len(ranges) != len(yaws):
            return
        r0 = ring["origin_radius_m"]
        self._write(topic, t, fx.LaserScan(
            timestamp=_stamp(t), frame_id=ring["link"],
            pose=fx.Pose(position=fx.Vector3(x=0.0, y=0.0, z=ring["origin_z_m"]), orientation=_quat_yaw(0.0)),
            start_angle=yaws[0], end_angle=yaws[-1],
            ranges=[math.nan if r is None else float(r) + r0 for r in ranges]))

    def _people(self, t: float, msg: dict[str, Any]) -> None:
        fx = _fx()
        entities, now = [], set()
        stamp, upright, colors = _stamp(t), _quat_yaw(0.0), {}  # the same for everyone (messages copy them in)
        for person in msg.get("people", []):
            pid = int(person["id"])
            now.add(pid)
            radius, height = float(person.get("radius", 0.25)), float(person.get("height", 1.7))
            doing = person.get("doing") or "walking"
            color = colors.get(doing)
            if color is None:
                color = colors[doing] = _color(doing_rgb(doing))
            entities.append(fx.SceneEntity(
                timestamp=stamp, frame_id=MAP_FRAME, id=f"person/{pid}",
                metadata=[fx.KeyValuePair(key="type", value=str(person.get("type", ""))),
                          fx.KeyValuePair(key="doing", value=doing)],
                cylinders=[fx.CylinderPrimitive(
                    pose=fx.Pose(position=fx.Vector3(x=person["x"], y=person["y"], z=height / 2),
                                 orientation=upright),
                    size=fx.Vector3(x=2 * radius, y=2 * radius, z=height), bottom_scale=1.0, top_scale=1.0,
                    color=color)]))
        deletions = [fx.SceneEntityDeletion(timestamp=stamp, id=f"person/{pid}")
                     for pid in sorted(self.people - now)]
        self.people = now
        if entities or deletions:
            self._write(SCENE, t, fx.SceneUpdate(deletions=deletions, entities=entities))

    def _steered(self, t: float, msg: dict[str, Any]) -> None:
        """What a live Foxglove session did to the trial (trial/foxglove_live): in the Log panel with the rest."""
        if "changed" in msg:
            text, level = f"parameters changed by {msg['by']}: {msg['changed']}", "Info"
        elif "note" in msg:
            text, level = f"mark by {msg['by']}: {msg['note']}", "Info"
        else:
            text, level = f"refused {msg['request']} from {msg['by']}: {msg['error']}", "Warning"
        self._log(t, text, "steering", level=level)

    def _script(self, t: float, msg: dict[str, Any]) -> None:
        if msg.get("error"):
            self._log(t, f"line {msg['line']} failed: {msg['error']}", "crowd/script", line=int(msg["line"]),
                      level="Error")
            return
        self._log(t, f"line {msg['line']}: {msg['text']}", "crowd/script", line=int(msg["line"]))

    def _log(self, t: float, text: str, name: str, line: int = 0, level: str = "Info") -> None:
        fx = _fx()
        self._write(LOG, t, fx.Log(timestamp=_stamp(t), level=getattr(fx.LogLevel, level), message=text, name=name,
                                   line=line))


def _primitives(visuals: list[dict[str, Any]]) -> dict[str, list]:
    """A link's visual shapes as SceneEntity primitives in the link's frame (capsules as cylinder + 2 spheres)."""
    from .robot_model import shape_matrix

    fx = _fx()
    out: dict[str, list] = {"cubes": [], "cylinders": [], "spheres": [], "triangles": []}
    for shape in visuals:
        m, size, color = shape_matrix(shape), shape["size"], _color(shape["rgba"][:3], shape["rgba"][3])
        kind = shape["kind"]
        if kind == "box":
            out["cubes"].append(fx.CubePrimitive(pose=_pose(m), size=fx.Vector3(x=size[0], y=size[1], z=size[2]),
                                                 color=color))
        elif kind in ("cylinder", "capsule"):
            r, length = size[0], size[1]
            out["cylinders"].append(fx.CylinderPrimitive(pose=_pose(m), size=fx.Vector3(x=2 * r, y=2 * r, z=length),
                                                         bottom_scale=1.0, top_scale=1.0, color=color))
            if kind == "capsule":
                for end in (-length / 2, length / 2):
                    cap = m.copy()
                    cap[:3, 3] = m[:3, 3] + m[:3, 2] * end
                    out["spheres"].append(fx.SpherePrimitive(pose=_pose(cap), size=fx.Vector3(x=2 * r, y=2 * r,
                                                                                               z=2 * r), color=color))
        elif kind == "sphere":
            r = size[0]
            out["spheres"].append(fx.SpherePrimitive(pose=_pose(m), size=fx.Vector3(x=2 * r, y=2 * r, z=2 * r),
                                                     color=color))
        elif kind == "mesh" and shape.get("vertices"):
            points = [fx.Point3(x=v[0], y=v[1], z=v[2]) for v in shape["vertices"]]
            out["triangles"].append(fx.TriangleListPrimitive(pose=_pose(m), points=points, color=color,
                                                             indices=[i for tri in shape["triangles"] for i in tri]))
    return {k: v for k, v in out.items() if v}

