"""The robot as ROS tools take it: ``/robot_description`` (a URDF) and ``/tf_static`` (its fixed joints).

The URDF is the one ``hil urdf`` writes for the scanned parts (runtime.model.to_urdf), with two names changed so
that it speaks the names the rest of the ROS graph uses:

- every moving joint is named by the blueprint (``left_arm.elbow``), as ``/joint_states`` names it, so
  robot_state_publisher and RViz move the right link;
- the root link is ``base_link``, the frame ``/odom`` and ``/scan`` use, so the description hangs below
  ``odom -> base_link``.

The other links and the fixed joints keep the model's names (``camera_43_camera``: the part, its bus ID, its
body), which are also the frames of ``/tf_static``. Each camera adds a link ``NAME_optical_frame`` (REP-103's
optical frame: x right, y down, z forward; the frame of its images and camera_info) on a fixed joint
``NAME_optical_joint`` from its body's link, rpy (-pi/2, 0, -pi/2), as ROS camera drivers describe theirs.
Both come from a live robot (the trial's link) or from a trial log's ``/robot/model`` (``hil log rosbag``); a
log's model has the shapes but no inertias or limits, so its URDF has no inertias or limits.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any

import numpy as np

from hil.devices.descriptor import Pose, Shape
from hil.runtime.model import Model, to_urdf
from hil.runtime.model.urdf import camera_links, optical_frame

from ..view.quat import wxyz_of

ROOT_FRAME = "base_link"


def blueprint_names(robot: Any) -> dict[int, str]:
    """Index in q -> the blueprint's name of that joint (``left_arm.elbow``), for an opened Robot."""
    model = robot.model
    return {model.q_index(j.part_key, j.part_joint): name for name, j in robot.joints.items()}


def link_names(model: Model, root: str = ROOT_FRAME) -> list[str]:
    """The frame name of every link of ``model``, in model order: the root is ``root``."""
    return [root if link.parent < 0 else link.name for link in model.links]


def description_urdf(model: Model, q_names: dict[int, str], root: str = ROOT_FRAME,
                     optical: list[dict[str, Any]] = ()) -> str:
    """The URDF of ``model`` with its moving joints named by ``q_names`` and its root link named ``root``, and a
    fixed joint ``NAME_optical_joint`` to a link ``NAME_optical_frame`` for each camera's optical frame given
    (``optical``: :func:`optical_frames`' entries; written by runtime.model.to_urdf, as ``hil urdf`` writes them)."""
    doc = ET.fromstring(to_urdf(model, cameras={f["camera"]: f["parent"] for f in optical}).split("\n", 1)[1])
    joint_names = {j.name: q_names[j.idx_q] for j in model.joints if j.idx_q is not None and j.idx_q in q_names}
    old_root = model.links[0].name
    for el in doc.iter("joint"):
        el.set("name", joint_names.get(el.get("name"), el.get("name")))
        for end in ("parent", "child"):
            tag = el.find(end)
            if tag is not None and tag.get("link") == old_root:
                tag.set("link", root)
    for el in doc.iter("link"):
        if el.get("name") == old_root:
            el.set("name", root)
    ET.indent(doc, space="  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(doc, encoding="unicode") + "\n"


def static_transforms(model: Model, root: str = ROOT_FRAME) -> list[dict[str, Any]]:
    """Every fixed joint as a transform ``parent -> child``: ``xyz`` (m) and ``xyzw`` (the quaternion), as
    robot_state_publisher puts them on /tf_static."""
    names = link_names(model, root)
    out = []
    for joint in model.joints:
        if joint.moving:
            continue
        w, x, y, z = wxyz_of(np.asarray(joint.placement.rotation))
        out.append({"parent": names[joint.parent], "child": names[joint.child],
                    "xyz": [float(v) for v in joint.placement.translation], "xyzw": [x, y, z, w]})
    return out


def description_of_robot(robot: Any, root: str = ROOT_FRAME) -> dict[str, Any]:
    """``{"urdf", "static"}`` of an opened Robot (what the link sends the bridge); the static transforms end with
    each camera's optical frame (:func:`optical_frames`)."""
    optical = optical_frames(robot)
    return {"urdf": description_urdf(robot.model, blueprint_names(robot), root, optical),
            "static": static_transforms(robot.model, root) + optical}


def optical_frames(robot: Any) -> list[dict[str, Any]]:
    """Each camera's optical frame ``NAME_optical_frame`` (x right, y down, z forward: REP-103's, the frame of
    its images and camera_info) in its camera body's link, as a static transform (``camera``: its name)."""
    from hil.runtime.robot.camera import Camera

    from ..record.camera_log import OPTICAL_XYZW

    cameras = [(name, s.part_key, s.sensor.body) for name, s in robot.sensors.items() if isinstance(s, Camera)]
    return [{"camera": name, "parent": link, "child": optical_frame(name), "xyz": [0.0, 0.0, 0.0],
             "xyzw": list(OPTICAL_XYZW)} for name, link in camera_links(robot.model, cameras).items()]


def description_of_log(model_message: dict[str, Any], root: str = ROOT_FRAME,
                       optical: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """``{"urdf", "static"}`` from a trial log's ``/robot/model`` message and the cameras' optical frames
    (:func:`optical_frames`' entries, as the log places them)."""
    from ..record.robot_model import LinkPoser

    poser = LinkPoser(model_message)
    q_names = {k: name for k, name in enumerate(poser.q_names) if name}
    links = tuple(replace(link, visuals=tuple(_shape(s) for s in entry.get("visuals", ())))
                  for link, entry in zip(poser.model.links, model_message["links"]))
    model = replace(poser.model, links=links)
    return {"urdf": description_urdf(model, q_names, root, optical),
            "static": static_transforms(model, root) + list(optical)}


def _shape(entry: dict[str, Any]) -> Shape:
    """A visual of a ``/robot/model`` message (trial/record/robot_model.py) as the descriptor's Shape."""
    return Shape(entry["kind"], tuple(entry["size"]), Pose(tuple(entry["xyz"]), tuple(entry["rpy"])),
                 tuple(entry["rgba"]), tuple(tuple(v) for v in entry.get("vertices", ())),
                 tuple(tuple(t) for t in entry.get("triangles", ())))
