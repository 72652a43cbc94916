"""The Foxglove layout ``hil foxglove-layout`` prints: a place to start from when opening a trial (live or its log).

Built with foxglove-sdk's own layout types (``foxglove.layouts``, generated from Foxglove's layout schema; the
SDK version pins the schema version), so a misnamed field or a wrong type fails here, not in the app. Panels:

- 3D in frame ``map`` following the robot's base link (the walls, people, robot, ring from /foxglove/scene,
  /foxglove/tf and /foxglove/ring; the ring's rays coloured by why a reading failed from /foxglove/ring_rays);
- Image: the head camera's images (the topic a camera channel is recorded on; ``--image-topic``);
- Log: /foxglove/log (the script's lines, mode changes, what Foxglove steered);
- Plot: the distance to the nearest person (a user script over /robot/state and /pedestrians, since no channel
  carries it: the layout computes it in Foxglove) and the robot's speed (/robot/state.vx);
- Raw messages of the joints: ``/robot/state.joints`` (``--joints-path``): a robot with a drivable base logs its
  joints in /robot/state; /robot/joints is only written for a robot without one (``hil run --record``), so the
  default follows the demo's robot.

:func:`check_layout` re-reads what was printed: the layout schema's shape (version, content tree of panels and
splits), every panel type known, every topic a panel names one that a trial writes.
"""
from __future__ import annotations

import json
from typing import Any

from ..record.foxglove import LOG, MAP_FRAME, RAYS, RING, SCENE, TF

IMAGE_TOPIC = "/foxglove/head_camera/image"  # where the head camera's images are served (a camera channel)
NEAREST_OUT = "/studio_script/nearest_person"  # Foxglove's user scripts publish under /studio_script/
PANEL_TYPES = {"ThreeDee", "Image", "Log", "Plot", "RawMessages"}
TRIAL_TOPICS = {SCENE, TF, LOG, RING, RAYS, "/robot/state", "/robot/joints", "/pedestrians", NEAREST_OUT}

NEAREST_SCRIPT = """\
// The distance from the robot's centre to the nearest person's edge (m), from the trial's own topics.
import { Input } from "./types";

export const inputs = ["/robot/state", "/pedestrians"];
export const output = "%s";

let robot: { x: number; y: number } | undefined;

export default function script(event: Input<"/robot/state"> | Input<"/pedestrians">): { distance_m: number } | undefined {
  const message: any = event.message;
  if (event.topic === "/robot/state") {
    robot = { x: message.x, y: message.y };
    return undefined;
  }
  if (robot === undefined || !Array.isArray(message.people) || message.people.length === 0) {
    return undefined;
  }
  let nearest = Infinity;
  for (const person of message.people) {
    const d = Math.hypot(person.x - robot.x, person.y - robot.y) - (person.radius ?? 0.25);
    nearest = Math.min(nearest, d);
  }
  return { distance_m: nearest };
}
""" % NEAREST_OUT


FOLLOW_FRAME = "carriage_1_chassis"  # the commbot's base link (the root of /robot/model's links)


JOINTS_PATH = "/robot/state.joints"


def hil_layout(image_topic: str = IMAGE_TOPIC, base_frame: str = FOLLOW_FRAME, joints_path: str = JOINTS_PATH) -> dict[str, Any]:
    """The layout as plain data (``json.dumps`` it for Foxglove's Layouts -> Import from file)."""
    import foxglove.layouts as fl

    three_d = fl.ThreeDeePanel(title="trial", config=fl.ThreeDeeConfig(
        fixed_frame=MAP_FRAME, follow_tf=base_frame, follow_mode="follow-position",
        topics={SCENE: fl.BaseRendererSceneUpdateTopicSettings(visible=True),
                RING: fl.BaseRendererLaserScanTopicSettings(visible=True),
                RAYS: fl.BaseRendererSceneUpdateTopicSettings(visible=True)},
        camera_state=fl.ThreeDeeCameraState(distance=12.0, perspective=True, phi=50.0)))
    image = fl.ImagePanel(title="head camera", config=fl.ImageConfig(
        image_mode=fl.ImageModeConfig(image_topic=image_topic)))
    log = fl.LogPanel(title="log", config=fl.LogConfig(topic_to_render=LOG))
    plot = fl.PlotPanel(title="nearest person and speed", config=fl.PlotConfig(paths=[
        fl.PlotSeries(value=f"{NEAREST_OUT}.distance_m", label="nearest person (m)"),
        fl.PlotSeries(value="/robot/state.vx", label="speed (m/s)")]))
    joints = fl.RawMessagesPanel(title="joints", config=fl.RawMessagesConfig(topic_path=joints_path))
    layout = fl.Layout(
        content=fl.SplitContainer(direction="row", items=[
            fl.SplitItem(proportion=2, content=fl.SplitContainer(direction="column", items=[
                fl.SplitItem(proportion=3, content=three_d), fl.SplitItem(proportion=1, content=plot)])),
            fl.SplitItem(proportion=1, content=fl.SplitContainer(direction="column", items=[
                fl.SplitItem(content=image), fl.SplitItem(content=log), fl.SplitItem(content=joints)]))]),
        user_scripts={"nearest": fl.UserScript(name="nearest person", source_code=NEAREST_SCRIPT)})
    return json.loads(layout.to_json())


def check_layout(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """The layout's panels, after checking its shape; ValueError saying where and what otherwise."""
    if layout.get("version") != 1 or "content" not in layout:
        raise ValueError("layout: needs version 1 and a content tree")
    panels: list[dict[str, Any]] = []

    def walk(node: Any, where: str) -> None:
        kind = node.get("type") if isinstance(node, dict) else None
        if kind == "panel":
            if node.get("panelType") not in PANEL_TYPES:
                raise ValueError(f"layout {where}: unknown panel type {node.get('panelType')!r}")
            panels.append(node)
        elif kind in ("split", "tab", "stack"):
            items = node.get("items") or node.get("tabs") or []
            if not items:
                raise ValueError(f"layout {where}: a {kind} without items")
            for k, item in enumerate(items):
                if not item.get("proportion", 1) > 0:
                    raise ValueError(f"layout {where}.items[{k}]: proportion must be > 0")
                walk(item.get("content"), f"{where}.items[{k}]")
        else:
            raise ValueError(f"layout {where}: not a panel or a container: {node!r:.80}")

    walk(layout["content"], "content")
    for panel in panels:
        for topic in _topics_of(panel):
            if topic not in TRIAL_TOPICS and not topic.startswith("/foxglove/"):
                raise ValueError(f"layout: panel {panel.get('title')!r} names {topic!r}, which no trial writes")
    return panels


def _topics_of(panel: dict[str, Any]) -> list[str]:
    config = panel.get("config") or {}
    kind = panel["panelType"]
    if kind == "ThreeDee":
        return list((config.get("topics") or {}))
    if kind == "Image":
        return [config.get("imageMode", {}).get("imageTopic")] if config.get("imageMode") else []
    if kind == "Log":
        return [config["topicToRender"]] if config.get("topicToRender") else []
    if kind == "Plot":
        return [p["value"].split(".")[0] for p in config.get("paths", [])]
    if kind == "RawMessages":
        return [config["topicPath"].split(".")[0]] if config.get("topicPath") else []
    return []
