"""The 3D scene of the viewer, drawn with viser from a trial's messages (trial/view/timeline.py).

Map walls and the goal once; the robot as its parts describe it (``/robot/model``: the descriptors' visual shapes
as the instances of a few batched meshes under the robot's base node, one per kind of shape, each instance
placed by the model's forward kinematics at the logged joint positions: the links that moved cost one update of
their batch's poses, not a position and an orientation setter per link, which was the page's largest cost
(bench/foxglove.py); people as walking human figures (trial/view/figures.py, the cameras' figures); the
ring's rays from their sensors to the echo (real and virtual echoes apart in a mixed trial; a ray whose reading
failed drawn to the range limit in the colour of its cause, trial.record.palette.CAUSE_RGB); the robot's path and
the people's recent trails. Only what changed is sent: viser forwards every property set to the browser.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hil.trial.record.palette import (GOAL_RGB, ROBOT_PATH_RGB, WALL_HEIGHT_M, WALL_RGB, WALL_THICKNESS_M, failed_ray_rgb,
                                  ring_sides)
from hil.trial.record.robot_model import LinkPoser, base_matrix, shape_matrix

from .meshes import UNIT_BOX, UNIT_CYLINDER, UNIT_SPHERE
from .quat import wxyz_many, wxyz_of
from .timeline import Frame

ROBOT_MESHES = {"box": UNIT_BOX, "cylinder": UNIT_CYLINDER, "sphere": UNIT_SPHERE}
BATCHED_KIND = {"box": "box", "cylinder": "cylinder", "capsule": "cylinder", "sphere": "sphere"}
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
        for node in reversed([*self._nodes, *(n for n in leftovers if n is not None)]):
            node.remove()  # children first (removing /robot removes its batches with it)
        if getattr(self, "_figure_drawer", None) is not None:
            self._figure_drawer.clear()
        self._figure_drawer = None  # the people's figures (trial/view/figures.py), made on first use
        self._nodes = []
        if getattr(self, "robot_node", None) is not None:
            self.robot_node.remove()  # with every node below /robot (viser removes a node's children)
        self.robot_node: Any = None
        self.model_msg: dict[str, Any] | None = None  # the /robot/model drawn
        self.poser: LinkPoser | None = None
        self._batches: list[_LinkBatch] = []
        self._mesh_frames: dict[int, Any] = {}
        self._where: dict[tuple[int, int], tuple[Any, int]] = {}
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
        """The robot's visual shapes as a few batched meshes under its base node, one per primitive kind and
        opacity (a box, a cylinder, a sphere: instances placed by the model's forward kinematics); a mesh shape
        keeps a frame node of its link (each mesh is its own geometry). Called again with another model (a part
        swapped or added while the trial ran: a later ``/robot/model``), the robot drawn so far is removed and
        this one drawn in its place, at the pose the next frame gives."""
        if self.robot_node is not None:
            mine = {id(self.robot_node), *(id(f) for f in self._mesh_frames.values()),
                    *(id(b.node) for b in self._batches)}
            self._nodes = [n for n in self._nodes if id(n) not in mine]
            self.robot_node.remove()  # with every node below /robot (viser removes a node's children)
            self._link_shapes = []
            self._greyed = frozenset()
        self.model_msg = msg
        self.poser = LinkPoser(msg)
        self.ring = msg.get("ring")
        scene = self.scene
        self.robot_node = self._keep(scene.add_frame("/robot", show_axes=False))
        local = self.poser.local(None)
        self._sent = np.stack(local)  # (links, 4, 4): each link's frame as last sent
        self._mesh_frames: dict[int, Any] = {}
        self._where: dict[tuple[int, int], tuple[Any, int]] = {}  # (link, visual) -> (batch or mesh handle, row)
        groups: dict[tuple[str, float | None], list[tuple[int, int, dict[str, Any], int | None]]] = {}
        for i, entry in enumerate(msg["links"]):
            for k, shape in enumerate(entry["visuals"]):
                kind = BATCHED_KIND.get(shape["kind"])
                if kind is not None:
                    opacity = shape["rgba"][3] if shape["rgba"][3] < 1.0 else None
                    groups.setdefault((kind, opacity), []).append((i, k, shape, entry.get("part")))
                elif shape["kind"] == "mesh" and shape.get("vertices"):
                    if i not in self._mesh_frames:
                        frame = self._keep(scene.add_frame(f"/robot/l{i}", show_axes=False))
                        frame.position, frame.wxyz = tuple(local[i][:3, 3]), wxyz_of(local[i][:3, :3])
                        self._mesh_frames[i] = frame
                    handle = self._add_mesh(f"/robot/l{i}/v{k}", shape)
                    self._where[(i, k)] = (handle, -1)
                    self._link_shapes.append((entry.get("part"), [(handle, rgb255(shape["rgba"]))]))
        self._batches: list[_LinkBatch] = []
        for n, ((kind, opacity), members) in enumerate(sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or 1))):
            batch = _LinkBatch(kind, members, local)
            vertices, faces = ROBOT_MESHES[kind]
            batch.node = self._keep(scene.add_batched_meshes_simple(
                f"/robot/{kind}{n}", vertices=vertices, faces=faces, batched_wxyzs=batch.wxyzs,
                batched_positions=batch.positions, batched_scales=batch.scales, batched_colors=batch.colors.copy(),
                opacity=opacity, lod="off", flat_shading=True, cast_shadow=False))
            for row, (i, k, _, _) in enumerate(members):
                self._where[(i, k)] = (batch, row)
            self._batches.append(batch)

    def _add_mesh(self, name: str, shape: dict[str, Any]) -> Any:
        m = shape_matrix(shape)
        return self.scene.add_mesh_simple(name, vertices=np.asarray(shape["vertices"], dtype=np.float32),
                                          faces=np.asarray(shape["triangles"], dtype=np.uint32),
                                          color=rgb255(shape["rgba"]), position=tuple(m[:3, 3]),
                                          wxyz=wxyz_of(m[:3, :3]))

    def drawn_color(self, link: int, visual: int) -> tuple[int, int, int] | None:
        """The colour the page has for a link's visual shape now (read back from its viser node)."""
        where = self._where.get((link, visual))
        if where is None:
            return None
        node, row = where
        if isinstance(node, _LinkBatch):
            return tuple(int(c) for c in node.node.batched_colors[row])  # type: ignore[return-value]
        return tuple(int(c) for c in node.color)  # type: ignore[return-value]

    def drawn_pose(self, link: int, visual: int) -> np.ndarray | None:
        """A batched visual shape's 4x4 placement in the robot's base frame as the page has it now."""
        where = self._where.get((link, visual))
        if where is None or not isinstance(where[0], _LinkBatch):
            return None
        batch, row = where
        w, x, y, z = (float(v) for v in batch.node.batched_wxyzs[row])
        rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                             [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                             [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
        out = np.eye(4)
        out[:3, :3], out[:3, 3] = rotation, batch.node.batched_positions[row]
        return out

    def grey_lost(self, lost: frozenset) -> None:
        """The links of parts lost at this time drawn grey (``/robot/parts``), the others in their colours."""
        if lost == self._greyed:
            return
        for batch in self._batches:
            batch.node.batched_colors = batch.colors_with(lost)
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
        frames = np.stack(local)
        moved = np.flatnonzero(np.abs(frames - self._sent).max(axis=(1, 2)) > MOVED)
        if moved.size:  # one update per batch touched (its instances' poses), not one setter per link and pose
            for batch in self._batches:
                if batch.place(moved, frames):
                    batch.node.batched_positions = batch.positions
                    batch.node.batched_wxyzs = batch.wxyzs
            for i in moved:
                frame = self._mesh_frames.get(int(i))
                if frame is not None:
                    frame.position, frame.wxyz = tuple(local[i][:3, 3]), wxyz_of(local[i][:3, :3])
            self._sent[moved] = frames[moved]
        return base, local

    def _figures(self, t: float, people: list[dict[str, Any]]) -> None:
        """Everyone as a walking human figure (trial/view/figures.py, the cameras' figures)."""
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
        yaw = np.asarray(ring["yaw"], dtype=float)
        r0, z0, max_r = ring["origin_radius_m"], ring["origin_z_m"], ring["max_range_m"]
        segments, colors, echoes, echo_colors = [], [], [], []
        for ranges, rgb, causes, every_ray in ring_sides(sensors):
            n = min(len(ranges or ()), len(yaw))
            if n == 0:
                continue
            r = np.array([np.nan if v is None else v for v in ranges[:n]], dtype=float)
            hit = ~np.isnan(r)
            keep = np.ones(n, dtype=bool) if every_ray else hit  # the virtual side: only what it saw
            c, s = np.cos(yaw[:n]), np.sin(yaw[:n])
            ends = [r0, r0 + np.where(hit, r, max_r)]
            points = [(np.stack([d * c, d * s, np.full(n, z0), np.ones(n)], axis=1) @ link.T)[:, :3] for d in ends]
            segments.append(np.stack(points, axis=1)[keep])
            failed = np.asarray([failed_ray_rgb(c) for c in ((causes or [])[:n] + [None] * n)[:n]])
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


class _LinkBatch:
    """The robot's visual shapes of one kind and opacity as the instances of one batched mesh: each instance's
    link, placement in the link, scale and colours, and the poses last sent (float32, as viser keeps them)."""

    def __init__(self, kind: str, members: list[tuple[int, int, dict[str, Any], int | None]],
                 local: list[np.ndarray]):
        self.kind = kind
        self.node: Any = None
        self.links = np.array([m[0] for m in members], dtype=np.int64)
        self.shapes = np.stack([shape_matrix(m[2]) for m in members])
        self.parts = [m[3] for m in members]
        self.scales = np.array([_scale_of(m[2]) for m in members], dtype=np.float32)
        self.colors = np.array([rgb255(m[2]["rgba"]) for m in members], dtype=np.uint8)
        self.positions = np.zeros((len(members), 3), dtype=np.float32)
        self.wxyzs = np.zeros((len(members), 4), dtype=np.float32)
        self.place(np.unique(self.links), np.stack(local))

    def place(self, moved: np.ndarray, frames: np.ndarray) -> bool:
        """The instances of the ``moved`` links placed at their links' ``frames`` (links x 4 x 4), all at once;
        whether any was."""
        rows = np.flatnonzero(np.isin(self.links, moved))
        if rows.size:
            placed = frames[self.links[rows]] @ self.shapes[rows]
            self.positions[rows] = placed[:, :3, 3]
            self.wxyzs[rows] = wxyz_many(placed[:, :3, :3])
        return bool(rows.size)

    def colors_with(self, lost: frozenset) -> np.ndarray:
        grey = np.array([part in lost for part in self.parts], dtype=bool)
        return np.where(grey[:, None], np.asarray(LOST_RGB, dtype=np.uint8), self.colors).astype(np.uint8)


def _scale_of(shape: dict[str, Any]) -> tuple[float, float, float]:
    """The unit mesh's scale for a shape: a box's sides, a cylinder's (r, r, height; a capsule's with its caps),
    a sphere's radius."""
    size, kind = shape["size"], shape["kind"]
    if kind == "box":
        return float(size[0]), float(size[1]), float(size[2])
    if kind in ("cylinder", "capsule"):
        r = float(size[0])
        return r, r, float(size[1]) + (2 * r if kind == "capsule" else 0.0)
    return (float(size[0]),) * 3
