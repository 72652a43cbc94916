"""The 3D scene of the viewer, drawn with viser from a trial's messages (trial/view/timeline.py).

Map walls and the goal once; the robot as its parts describe it (``/robot/model``: each link a frame node
carrying the descriptors' visual shapes, placed by the model's forward kinematics at the logged joint
positions); people as walking human figures (trial/view/figures.py, the cameras' figures); the
ring's rays from their sensors to the echo (real and virtual echoes apart in a mixed trial; a ray whose reading
failed drawn to the range limit in the colour of its cause, trial.record.palette.CAUSE_RGB); the robot's path and
the people's recent trails. Only what changed is sent: viser forwards every property set to the browser.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trial.record.palette import (CAUSE_RGB, ECHO_RGB, GOAL_RGB, RAY_RGB, ROBOT_PATH_RGB, VIRTUAL_ECHO_RGB,
                                  WALL_HEIGHT_M, WALL_RGB, WALL_THICKNESS_M)
from trial.record.robot_model import LinkPoser, base_matrix, shape_matrix

from .quat import wxyz_of
from .timeline import Frame

def _unit_cylinder(segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """A cylinder of radius 1 and height 1 about z, centred at the origin: (vertices, faces), outward faces."""
    angle = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    bottom = np.column_stack([ring, np.full(segments, -0.5)])
    top = np.column_stack([ring, np.full(segments, 0.5)])
    vertices = np.vstack([bottom, top, [[0, 0, -0.5], [0, 0, 0.5]]]).astype(np.float32)
    i = np.arange(segments)
    j = (i + 1) % segments
    t, bc, tc = segments, 2 * segments, 2 * segments + 1
    faces = np.vstack([np.column_stack([i, j, t + j]), np.column_stack([i, t + j, t + i]),
                       np.column_stack([np.full(segments, tc), t + i, t + j]),
                       np.column_stack([np.full(segments, bc), j, i])]).astype(np.uint32)
    return vertices, faces


def _unit_box() -> tuple[np.ndarray, np.ndarray]:
    """A box of side 1 centred at the origin: (vertices, faces), outward faces."""
    vertices = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)],
                        dtype=np.float32)  # index = 4 * (x > 0) + 2 * (y > 0) + (z > 0)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # -x, +x
                      [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # -y, +y
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], dtype=np.uint32)  # -z, +z
    return vertices, faces


UNIT_CYLINDER = _unit_cylinder()
UNIT_BOX = _unit_box()
MOVED = 1e-4  # a link whose frame changed less than this (m, or rotation matrix entries) is not sent again


LOST_RGB = (128, 128, 128)  # a part that stopped answering


def rgb255(rgb) -> tuple[int, int, int]:
    return tuple(int(round(255 * max(0.0, min(1.0, c)))) for c in rgb[:3])  # type: ignore[return-value]




def yaw_wxyz(yaw: float) -> tuple[float, float, float, float]:
    return math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)


class SceneDrawer:
    """Owns the scene nodes of one trial on a viser server; :meth:`reset` for the next trial."""

    def __init__(self, server: Any):
        self.server = server
        self.scene = server.scene
        self.scene.set_up_direction("+z")
        self._light()
        self._nodes: list[Any] = []
        self.reset()

    def _light(self) -> None:
        """A sky light instead of viser's image-based lighting: the scene is flat-coloured boxes and cylinders,
        which it lights the same, while prefiltering the environment map costs a browser without a GPU ~4 s
        of CPU each time the page opens a scene (measured on SwiftShader). No shadows: seen from above they
        hide the floor markings and cost every frame a second pass."""
        self.scene.configure_environment_map(hdri=None)
        self.scene.configure_default_lights(cast_shadow=False)
        self.scene.add_light_hemisphere("/lights/sky", sky_color=(255, 255, 255), ground_color=(120, 120, 130),
                                        intensity=2.0)

    def reset(self) -> None:
        """Remove every node of the trial shown so far (the next one may have another map and robot)."""
        leftovers = [getattr(self, name, None) for name in ("_rays", "_echoes", "_path", "_trails")]
        for node in [*self._nodes, *(n for n in leftovers if n is not None)]:
            node.remove()
        if getattr(self, "_figure_drawer", None) is not None:
            self._figure_drawer.clear()
        self._figure_drawer = None  # the people's figures (trial/view/figures.py), made on first use
        self._nodes = []
        if getattr(self, "robot_node", None) is not None:
            self.robot_node.remove()  # with every node below /robot (viser removes a node's children)
        self.robot_node: Any = None
        self.model_msg: dict[str, Any] | None = None  # the /robot/model drawn
        self.poser: LinkPoser | None = None
        self.link_nodes: list[Any] = []
        self._link_shapes: list[tuple[int | None, list[tuple[Any, tuple]]]] = []  # (part, [(handle, colour)])
        self._greyed: frozenset = frozenset()
        self.people: dict[int, str] = {}  # id -> what the person does, as drawn
        self.ring: dict[str, Any] | None = None
        self.map_msg: dict[str, Any] | None = None
        self._rays = self._echoes = self._path = self._trails = None
        self.robot_xy: tuple[float, float] = (0.0, 0.0)
        self.robot_yaw = 0.0

    def _keep(self, node: Any) -> Any:
        self._nodes.append(node)
        return node

    # --- once per trial --------------------------------------------------------------------------------------
    def draw_map(self, msg: dict[str, Any]) -> None:
        self.map_msg = msg
        walls = msg.get("walls", [])
        if walls:  # one node of instanced unit boxes: one draw call for the whole map, not one per wall
            w = np.asarray(walls, dtype=np.float64).reshape(-1, 4)
            dx, dy = w[:, 2] - w[:, 0], w[:, 3] - w[:, 1]
            length, yaw = np.hypot(dx, dy), np.arctan2(dy, dx)
            positions = np.column_stack([(w[:, 0] + w[:, 2]) / 2, (w[:, 1] + w[:, 3]) / 2,
                                         np.full(len(w), WALL_HEIGHT_M / 2)])
            wxyzs = np.column_stack([np.cos(yaw / 2), np.zeros(len(w)), np.zeros(len(w)), np.sin(yaw / 2)])
            scales = np.column_stack([length, np.full(len(w), WALL_THICKNESS_M), np.full(len(w), WALL_HEIGHT_M)])
            self._keep(self.scene.add_batched_meshes_simple(
                "/map/walls", vertices=UNIT_BOX[0], faces=UNIT_BOX[1], batched_wxyzs=wxyzs.astype(np.float32),
                batched_positions=positions.astype(np.float32), batched_scales=scales.astype(np.float32),
                batched_colors=np.tile(np.array(rgb255(WALL_RGB), dtype=np.uint8), (len(w), 1)), lod="off",
                flat_shading=True, cast_shadow=False))
        goal = msg.get("goal")
        if goal is not None:
            radius = float(msg.get("goal_radius", 0.5))
            self._keep(self.scene.add_cylinder("/map/goal", radius=radius, height=0.02, color=rgb255(GOAL_RGB),
                                               position=(goal[0], goal[1], 0.01), opacity=0.7))
        start = msg.get("start")
        if start is not None:
            self._keep(self.scene.add_cylinder("/map/start", radius=0.3, height=0.01, color=(120, 150, 230),
                                               position=(start[0], start[1], 0.005), opacity=0.5))

    def draw_robot(self, msg: dict[str, Any]) -> None:
        """Every link a frame node, its visual shapes children placed in the link's frame. Called again with
        another model (a part swapped or added while the trial ran: a later ``/robot/model``), the robot drawn so
        far is removed and this one drawn in its place, at the pose the next frame gives."""
        if self.robot_node is not None:
            self.robot_node.remove()  # with every node below /robot (viser removes a node's children)
            self.link_nodes, self._link_shapes = [], []
            self._greyed = frozenset()
        self.model_msg = msg
        self.poser = LinkPoser(msg)
        self.ring = msg.get("ring")
        scene = self.scene
        self.robot_node = scene.add_frame("/robot", show_axes=False)
        self._sent: list[np.ndarray | None] = [None] * len(msg["links"])
        for i, entry in enumerate(msg["links"]):
            frame = scene.add_frame(f"/robot/l{i}", show_axes=False)
            self.link_nodes.append(frame)
            shapes = [(self._add_shape(f"/robot/l{i}/v{k}", shape), rgb255(shape["rgba"]))
                      for k, shape in enumerate(entry["visuals"])]
            self._link_shapes.append((entry.get("part"), [(h, c) for h, c in shapes if h is not None]))

    def _add_shape(self, name: str, shape: dict[str, Any]) -> Any:
        m = shape_matrix(shape)
        pos, wxyz = tuple(m[:3, 3]), wxyz_of(m[:3, :3])
        color, size, kind = rgb255(shape["rgba"]), shape["size"], shape["kind"]
        opacity = shape["rgba"][3] if shape["rgba"][3] < 1.0 else None
        scene = self.scene
        if kind == "box":
            return scene.add_box(name, dimensions=tuple(size[:3]), color=color, position=pos, wxyz=wxyz, opacity=opacity)
        elif kind in ("cylinder", "capsule"):
            return scene.add_cylinder(name, radius=size[0], height=size[1] + (2 * size[0] if kind == "capsule" else 0.0),
                               color=color, position=pos, wxyz=wxyz, opacity=opacity)
        elif kind == "sphere":
            return scene.add_icosphere(name, radius=size[0], color=color, position=pos, wxyz=wxyz, opacity=opacity)
        elif kind == "mesh" and shape.get("vertices"):
            return scene.add_mesh_simple(name, vertices=np.asarray(shape["vertices"], dtype=np.float32),
                                  faces=np.asarray(shape["triangles"], dtype=np.uint32), color=color, position=pos,
                                  wxyz=wxyz)
        return None

    def grey_lost(self, lost: frozenset) -> None:
        """The links of parts lost at this time drawn grey (issue 26: ``/robot/parts``), the others in their colours."""
        if lost == self._greyed:
            return
        for part, shapes in self._link_shapes:
            if (part in lost) != (part in self._greyed):
                for handle, colour in shapes:
                    handle.color = LOST_RGB if part in lost else colour
        self._greyed = lost

    # --- every frame -----------------------------------------------------------------------------------------
    def draw(self, frame: Frame, lines: bool = True) -> None:
        """The scene at ``frame``; ``lines`` False leaves the paths as they are (they change slowly, and a long
        path is the biggest message: the live page redraws them less often)."""
        with self.server.atomic():
            if frame.model is not None and self.model_msg is not None and frame.model is not self.model_msg:
                self.draw_robot(frame.model)  # another part at t: its own shape (a scrub back: the old one)
            links = self._robot(frame.robot) if frame.robot is not None else None
            self.grey_lost(frame.lost_parts)
            self._figures(frame.t, frame.people)
            self._ring(frame, links)
            if lines:
                self._lines(frame)

    def _robot(self, state: dict[str, Any]) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """Place the robot: its base node in the map, and (in the base's frame) only the links whose joints moved
        since they were last sent; one forward kinematics per frame, shared with the ring."""
        if self.poser is None or "x" not in state:
            return None
        self.robot_xy, self.robot_yaw = (state["x"], state["y"]), state["yaw"]
        base = base_matrix(state["x"], state["y"], state["yaw"], self.poser.stand_z)
        self.robot_node.position = tuple(base[:3, 3])
        self.robot_node.wxyz = yaw_wxyz(state["yaw"])
        local = self.poser.local(state.get("joints"))
        for i, (node, m) in enumerate(zip(self.link_nodes, local)):
            sent = self._sent[i]
            if sent is None or float(np.abs(sent - m).max()) > MOVED:
                node.position = tuple(m[:3, 3])
                node.wxyz = wxyz_of(m[:3, :3])
                self._sent[i] = m
        return base, local

    def _figures(self, t: float, people: list[dict[str, Any]]) -> None:
        """Everyone as a walking human figure (trial/view/figures.py, the cameras' figures, issue 23)."""
        from .figures import FigureDrawer

        if getattr(self, "_figure_drawer", None) is None:
            self._figure_drawer = FigureDrawer(self.scene, {"box": UNIT_BOX, "cylinder": UNIT_CYLINDER})
        if people:
            self._figure_drawer.draw(t, people)
        else:
            self._figure_drawer.clear()
        self.people = {int(p["id"]): p.get("doing") or "walking" for p in people}

    def _ring(self, frame: Frame, placed: tuple[np.ndarray, list[np.ndarray]] | None) -> None:
        """The ring's rays (to the echo, or to the range limit in grey) and its echoes, all rays at once; the
        nodes are kept and only their points and colours sent again (a node made anew each frame cost the page
        more than everything else it draws)."""
        ring, sensors = self.ring, frame.sensors
        if ring is None or sensors is None or placed is None:
            return
        base, local = placed
        link = base @ local[self.poser.index[ring["link"]]]
        sides = [(sensors.get("ring_real", sensors.get("ring")), ECHO_RGB, sensors.get("ring_cause"))]
        if "ring_virtual" in sensors:
            sides.append((sensors.get("ring_virtual"), VIRTUAL_ECHO_RGB, None))
        yaw = np.asarray(ring["yaw"], dtype=float)
        r0, z0, max_r = ring["origin_radius_m"], ring["origin_z_m"], ring["max_range_m"]
        segments, colors, echoes, echo_colors = [], [], [], []
        for ranges, rgb, causes in sides:
            n = min(len(ranges or ()), len(yaw))
            if n == 0:
                continue
            r = np.array([np.nan if v is None else v for v in ranges[:n]], dtype=float)
            hit = ~np.isnan(r)
            keep = hit if rgb is not ECHO_RGB else np.ones(n, dtype=bool)  # the virtual side: only what it saw
            c, s = np.cos(yaw[:n]), np.sin(yaw[:n])
            ends = [r0, r0 + np.where(hit, r, max_r)]
            points = [(np.stack([d * c, d * s, np.full(n, z0), np.ones(n)], axis=1) @ link.T)[:, :3] for d in ends]
            segments.append(np.stack(points, axis=1)[keep])
            failed = np.asarray([CAUSE_RGB.get(c, RAY_RGB) if c else RAY_RGB
                                 for c in ((causes or [])[:n] + [None] * n)[:n]])  # a log without causes: grey
            rgb_each = np.where(hit[:, None], np.asarray(rgb), failed)
            colors.append(np.repeat(rgb_each[:, None, :], 2, axis=1)[keep])
            echoes.append(points[1][hit])
            echo_colors.append(np.tile(np.asarray(rgb), (int(hit.sum()), 1)))
        if segments and sum(len(x) for x in segments):
            self._rays = self._refresh(self._rays, np.concatenate(segments), np.concatenate(colors),
                                       lambda pts, cols: self.scene.add_line_segments("/ring/rays", pts, cols,
                                                                                      thickness=0.015))
        if echoes and sum(len(x) for x in echoes):
            self._echoes = self._refresh(self._echoes, np.concatenate(echoes), np.concatenate(echo_colors),
                                         lambda pts, cols: self.scene.add_point_cloud(
                                             "/ring/echoes", pts, cols, point_size=0.07, point_shape="circle"))
        elif self._echoes is not None:
            self._echoes.remove()
            self._echoes = None

    @staticmethod
    def _refresh(handle: Any, points: np.ndarray, colors: np.ndarray, make: Callable[[Any, Any], Any]) -> Any:
        """``handle`` with new points and colours (0..1), or a new node when there is none or the count changed."""
        points = points.astype(np.float32)
        if handle is not None and handle.points.shape == points.shape:
            handle.points = points
            handle.colors = np.round(colors * 255).astype(np.uint8)
            return handle
        if handle is not None:
            handle.remove()
        return make(points, colors.astype(np.float32))

    def _lines(self, frame: Frame) -> None:
        if len(frame.path) >= 2:
            pts = np.asarray(frame.path, dtype=np.float32)
            seg = np.stack([pts[:-1], pts[1:]], axis=1)
            seg = np.concatenate([seg, np.full((*seg.shape[:2], 1), 0.03, dtype=np.float32)], axis=2)
            self._path = self.scene.add_line_segments("/paths/robot", seg, np.asarray(ROBOT_PATH_RGB, np.float32),
                                                      thickness=0.06)
        segs = []
        for trail in frame.trails.values():
            for a, b in zip(trail[:-1], trail[1:]):
                segs.append(((a[0], a[1], 0.02), (b[0], b[1], 0.02)))
        if segs:
            self._trails = self.scene.add_line_segments("/paths/people", np.asarray(segs, dtype=np.float32),
                                                        np.asarray((0.6, 0.6, 0.6), np.float32), thickness=0.03)
