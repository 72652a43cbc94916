"""The pybullet world the virtual parts live in: one physics client, a floor, a fixed time step, and hooks
around every step.

Time is counted in whole steps (``time_s = steps * time_step_s``), never accumulated as a float, so a long trial
does not drift and two worlds stepped alike agree on the time bit for bit. Pre-step hooks run before the physics
step (part firmware applies motor commands and its watchdog there), post-step hooks after it (sensors, contact
checks), and they see ``time_s`` at the start and at the end of the step respectively.

Determinism: pybullet in DIRECT mode is deterministic for the same sequence of calls; this world also asks for
deterministic overlapping pairs and a fixed number of solver iterations, so the result does not depend on the
order in which the broadphase happens to find pairs (the sorting costs about 2 us of a ~180 us commbot step,
bench/world.py). Nothing here reads a data file (the floor is a
GEOM_PLANE collision shape, not pybullet_data's plane.urdf).
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable

import pybullet as p

from .maps import Map, Wall
from .shapes import MeshFiles

Hook = Callable[["World"], None]

DEFAULT_TIME_STEP_S = 1.0 / 240.0  # pybullet's own default, 240 Hz
GRAVITY_Z = -9.81
SOLVER_ITERATIONS = 50  # pybullet's default, fixed here so it cannot change under us
FLOOR_RGBA = (0.78, 0.78, 0.74, 1.0)
FLOOR_HALF_SIZE_M = 50.0  # the floor's visual extent; its collision plane is infinite
WALL_RGBA = (0.55, 0.57, 0.62, 1.0)
STEP_EPSILON = 1e-9  # in steps: advance_to(t) takes a step whose end lies within this of t (float rounding)


class WorldError(RuntimeError):
    pass


GUI_WINDOW = "--width=800 --height=600 --minGraphicsUpdateTimeMs=1000"  # smaller: faster to draw; the viewer
# redraws on its own at most once a second (we ask for frames ourselves, GUI_FRAME_S)
GUI_FRAME_S = 0.5  # wall seconds between frames: each costs the physics a few frames of waiting
GUI_CAMERA_DISTANCE_M, GUI_CAMERA_PITCH_DEG = 4.5, -35.0


def display_available() -> bool:
    """Whether a GUI window can open: on Linux an X display must be named (pybullet's viewer is X11 there);
    elsewhere the platform's window system is assumed."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY"))


class World:
    """A pybullet client (DIRECT unless ``gui``), gravity, a floor plane at z = 0, a fixed time step."""

    def __init__(self, *, gui: bool = False, time_step_s: float = DEFAULT_TIME_STEP_S, gravity_z: float = GRAVITY_Z,
                 solver_iterations: int = SOLVER_ITERATIONS):
        if not time_step_s > 0:
            raise ValueError(f"time step must be > 0 s, not {time_step_s}")
        if gui and not display_available():  # pybullet would end the whole process ("cannot connect to X server")
            raise WorldError("the pybullet viewer needs a display and DISPLAY is not set; run without --gui "
                             "(DIRECT mode) or from a desktop session")
        self.client = p.connect(p.GUI, options=GUI_WINDOW) if gui else p.connect(p.DIRECT)
        if self.client < 0:
            raise WorldError("pybullet could not open a GUI window (no display?); use the default DIRECT mode"
                             if gui else "pybullet could not start a DIRECT physics client")
        self.gui = gui
        self.camera_target: Callable[[], tuple[float, float, float]] | None = None  # (x, y, yaw) the camera follows
        if gui:
            self._quiet_viewer()
        self.time_step_s = float(time_step_s)
        self.steps = 0
        self.meshes = MeshFiles()
        self.walls: dict[int, Wall] = {}  # body ID -> the wall it is (sensors and contact checks look here)
        # (body ID, link index; -1 a body's base) -> what it is made of (devices/surfaces.py), for the sensors; only
        # what names a surface is here, everything else is the default surface
        self.surfaces: dict[tuple[int, int], str] = {}
        self._pre: list[Hook] = []
        self._post: list[Hook] = []
        self._closed = False
        self._configure(gravity_z, solver_iterations)
        self.floor_id = self._add_floor()

    # --- setup -------------------------------------------------------------------------------------------------
    def _quiet_viewer(self) -> None:
        """pybullet's viewer answers a command only between the frames it draws: with rendering on, every query
        (a joint state, the contact points) waits for a frame, which llvmpipe under Xvfb takes 25-30 ms to draw,
        so building the robot and the map took minutes and a simulated second 15-20 s of wall time. Rendering
        is therefore off, and switched on for one physics step at most every ``GUI_FRAME_S`` of wall time (the
        picture the window keeps in between is the last one drawn); the camera follows ``camera_target``. What
        is drawn never changes what is simulated: the same trial gives the same log with or without ``--gui``.
        """
        c = self.client
        p.configureDebugVisualizer(p.COV_ENABLE_GUI, 0, physicsClientId=c)  # the side panels: more to draw
        p.configureDebugVisualizer(p.COV_ENABLE_SHADOWS, 0, physicsClientId=c)  # a second pass per frame
        p.configureDebugVisualizer(p.COV_ENABLE_RENDERING, 0, physicsClientId=c)
        self._next_frame_s = 0.0
        self.frames = 0  # frames drawn (the GUI test checks the viewer drew)

    def _render_step(self) -> None:
        """One physics step with the viewer drawing (rendering on around it), the camera on its target first."""
        c = self.client
        if self.camera_target is not None:
            x, y, yaw = self.camera_target()
            p.resetDebugVisualizerCamera(cameraDistance=GUI_CAMERA_DISTANCE_M, cameraYaw=math.degrees(yaw) - 90.0,
                                         cameraPitch=GUI_CAMERA_PITCH_DEG, cameraTargetPosition=(x, y, 0.5),
                                         physicsClientId=c)
        p.configureDebugVisualizer(p.COV_ENABLE_RENDERING, 1, physicsClientId=c)
        try:
            p.stepSimulation(physicsClientId=c)
        finally:
            p.configureDebugVisualizer(p.COV_ENABLE_RENDERING, 0, physicsClientId=c)
        self.frames += 1

    def _configure(self, gravity_z: float, solver_iterations: int) -> None:
        c = self.client
        p.setPhysicsEngineParameter(fixedTimeStep=self.time_step_s, numSolverIterations=solver_iterations,
                                    numSubSteps=0, deterministicOverlappingPairs=1, physicsClientId=c)
        p.setGravity(0.0, 0.0, gravity_z, physicsClientId=c)

    def _add_floor(self) -> int:
        shape = p.createCollisionShape(p.GEOM_PLANE, planeNormal=(0, 0, 1), physicsClientId=self.client)
        # pybullet has no visual for a plane shape (it warns on stdout); a thin box just below z = 0 stands in
        visual = p.createVisualShape(p.GEOM_BOX, halfExtents=(FLOOR_HALF_SIZE_M, FLOOR_HALF_SIZE_M, 0.005),
                                     visualFramePosition=(0, 0, -0.005), rgbaColor=FLOOR_RGBA,
                                     physicsClientId=self.client)
        return p.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=shape, baseVisualShapeIndex=visual,
                                 physicsClientId=self.client)

    def add_map(self, world_map: Map) -> list[int]:
        """Static boxes for the map's walls (each centred on its segment, as long as it, ``thickness`` across,
        from its ``bottom`` (0: the floor) to ``height`` above that); returns their body IDs, in the map's order."""
        ids = []
        for wall in world_map.walls:
            half = (wall.length / 2, wall.thickness / 2, wall.height / 2)
            shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=self.client)
            visual = p.createVisualShape(p.GEOM_BOX, halfExtents=half, rgbaColor=WALL_RGBA, physicsClientId=self.client)
            (mx, my), orientation = wall.midpoint, p.getQuaternionFromEuler((0.0, 0.0, wall.yaw))
            body = p.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=shape, baseVisualShapeIndex=visual,
                                     basePosition=(mx, my, wall.bottom + wall.height / 2), baseOrientation=orientation,
                                     physicsClientId=self.client)
            self.walls[body] = wall
            if wall.surface is not None:
                self.surfaces[(body, -1)] = wall.surface
            ids.append(body)
        return ids

    # --- time ----------------------------------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        """Simulated time: 0 at start, exactly ``steps * time_step_s``."""
        return self.steps * self.time_step_s

    def set_surface(self, body: int, link: int, surface: str | None) -> None:
        """Say what a body's link (-1: its base, or the whole of a one-link body) is made of; None forgets it
        (the default surface). Whoever creates or removes a body keeps this true (pybullet reuses freed ids)."""
        if surface is None:
            self.surfaces.pop((body, link), None)
        else:
            self.surfaces[(body, link)] = surface

    def forget_body(self, body: int) -> None:
        """A removed body's surfaces forgotten, every link of it."""
        for key in [k for k in self.surfaces if k[0] == body]:
            del self.surfaces[key]

    def add_pre_step(self, hook: Hook) -> Hook:
        """Run ``hook(world)`` before every physics step, in the order added; returns it (usable as decorator)."""
        self._pre.append(hook)
        return hook

    def add_post_step(self, hook: Hook) -> Hook:
        """Run ``hook(world)`` after every physics step (``time_s`` already at the step's end)."""
        self._post.append(hook)
        return hook

    def remove_hook(self, hook: Hook) -> None:
        for hooks in (self._pre, self._post):
            if hook in hooks:
                hooks.remove(hook)

    def step(self) -> None:
        """Pre-step hooks, one physics step, post-step hooks. A pre-step hook that raises leaves the world
        unstepped; a post-step hook that raises leaves it stepped (time already advanced)."""
        self._check_open()
        for hook in tuple(self._pre):
            hook(self)
        if self.gui and time.perf_counter() >= self._next_frame_s:  # wall time: only what is shown depends on it
            self._render_step()
            self._next_frame_s = time.perf_counter() + GUI_FRAME_S
        else:
            p.stepSimulation(physicsClientId=self.client)
        self.steps += 1
        for hook in tuple(self._post):
            hook(self)

    def advance_to(self, t_s: float, max_steps: int | None = None) -> int:
        """Step while the next step ends at or before ``t_s``; the number of steps taken (0 if ``t_s`` is not
        ahead). A step ending within 1e-9 of a step of ``t_s`` counts as ending at it, so advance_to(1.0) at
        240 Hz takes 240 steps despite 1/240 not being a binary fraction. ``max_steps`` bounds the work of one
        call (a served device steps in small pieces so that it can answer the line between them)."""
        target = math.floor(t_s / self.time_step_s + STEP_EPSILON)
        if max_steps is not None:
            target = min(target, self.steps + max_steps)
        taken = 0
        while self.steps < target:
            self.step()
            taken += 1
        return taken

    # --- lifetime --------------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise WorldError("the world is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Disconnect the physics client and remove scratch files; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        try:
            p.disconnect(physicsClientId=self.client)
        finally:
            self.meshes.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
