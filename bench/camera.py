"""What a camera costs: render time per frame for each renderer, and the demo's real-time factor with a controller
reading a 320x240 RGB-D camera at 10 Hz against the same trial not reading it, side by side in one run.

  python -m bench.camera [--smoke] [--frames N] [--duration S] [--rounds R] [--surfaces]

Renderers, each at 320x240 and 640x480 with 20 people in view (a crowd standing 2..6 m ahead, a wall behind):
``moderngl-egl`` (ours: firmware_sim/render/gl.py, figures, labels per part; on Mesa's llvmpipe here),
``tinyrenderer`` (pybullet's getCameraImage, ER_TINY_RENDERER, capsules), and ``pybullet-egl`` (pybullet's
eglRendererPlugin + ER_BULLET_HARDWARE_OPENGL) where that plugin loads. Each figure is the median wall time of
N frames, the scene's assembly, depth failure model and read-back included for ours.

The real-time factor is simulated seconds over wall seconds of the demo trial (``hil demo``, seed 0, its first
``--duration`` s), plain and with a hook that reads ``head_camera.frame()`` every 0.1 s of the trial's clock
(the hook runs in the controller's thread after each bus cycle, as a controller's own read does); rounds
alternate so both see the same machine load. Target: camera >= 70 % of plain.

``--surfaces`` measures only what per-pixel surfaces cost (firmware_sim/sensors/camera.py "Surfaces"): our
320x240 frame (scene, render with the surface target read back, depth model) with no surface named against the
same scene with the wall glass and every other person in fabric (each pixel then drawn with its surface's law),
alternating rounds, medians and their ratio.

A frame from a device served by ``hil sim`` in another process (``--camera-endpoint``, loopback ZeroMQ): the
controller's ``frame()`` per new frame period, in process against served, and a read within the same period
(served: a header and no pixels), medians of N, side by side in one run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

SIZES = ((320, 240), (640, 480))
PEOPLE = 20


def _scene_world():
    """A world with the commbot, a wall 8 m ahead and 20 people standing 2..6 m in front of it."""
    from hil.firmware_sim import load_assembly
    from hil.firmware_sim.world import World, build_robot
    from hil.firmware_sim.world.maps import Map
    from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians
    from hil.devices.map_format import Wall

    world = World()
    world.add_map(Map("bench", "<bench>", (Wall((8.0, -6.0), (8.0, 6.0), 0.2, 3.0),)))
    robot = build_robot(world, load_assembly("commbot").parts)
    walkers = Pedestrians(world)
    rng = np.random.default_rng(0)
    intents = [PedestrianIntent(i, float(rng.uniform(2.0, 6.0)), float(rng.uniform(-1.5, 1.5)), 1.0, 0.0,
                                height=float(rng.choice([1.1, 1.7]))) for i in range(PEOPLE)]
    walkers.sync(intents)
    people = [{"id": i.id, "x": i.x, "y": i.y, "vx": i.vx, "vy": i.vy, "height": i.height, "radius": i.radius}
              for i in intents]
    return world, robot, walkers, people


def _camera_pose(robot):
    from hil.firmware_sim.render.scene import quat_matrix

    position, quat = robot.link_pose(43, "camera")
    return np.asarray(position), quat_matrix(quat)


def _matrices(width: int, height: int, robot):
    from hil.firmware_sim.render.gl import projection_matrix, view_matrix

    fx = (width / 2) / np.tan(np.radians(35.0))
    position, rotation = _camera_pose(robot)
    view = view_matrix(position, rotation, np.array([1.0, 0, 0]), np.array([0, 0, 1.0]))
    return view, projection_matrix(width, height, fx, fx, (width - 1) / 2, (height - 1) / 2, 0.05, 12.0), fx


def _time(fn, frames: int) -> float:
    fn()  # warm-up: shaders, buffers
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def render_costs(frames: int, sizes: tuple[tuple[int, int], ...] = SIZES) -> list[tuple[str, str, str]]:
    from hil.devices.descriptor.camera import DepthFailure
    from hil.firmware_sim.embodied.camera import _gl_renderer
    from hil.firmware_sim.render.gl import RendererUnavailable
    from hil.firmware_sim.render.scene import InstanceList, base_legend, people_scene, robot_scene, static_scene
    from hil.firmware_sim.render.tiny import TinyRenderer
    from hil.firmware_sim.sensors.camera import DepthModel
    from hil.firmware_sim.world.figures import Gait

    world, robot, walkers, people = _scene_world()
    rows = []
    gait = Gait(0)
    robot_cache: dict = {}  # as a camera keeps it (the robot's shapes made once)
    for width, height in sizes:
        view, projection, fx = _matrices(width, height, robot)
        depth = DepthModel(DepthFailure(), fx, 0)
        size = f"{width}x{height}"
        try:
            gl = _gl_renderer(width, height)

            def ours():
                legend = base_legend()
                scene = InstanceList()
                scene.extend(static_scene(world.walls.values()))
                scene.extend(robot_scene(robot, legend, robot_cache))
                scene.extend(people_scene(people, gait.update(time.perf_counter(), people), 0, legend))
                with gl.ctx:
                    rgb, labels, z, cos = gl.render(view, projection, scene.pack())
                depth.apply(z, cos, 0)

            rows.append(("moderngl-egl (ours)", size, f"{_time(ours, frames) * 1000:.1f} ms"))
        except RendererUnavailable as exc:
            rows.append(("moderngl-egl (ours)", size, f"unavailable: {exc}"))
        tiny = TinyRenderer(width, height)

        def pybullet_tiny():
            rgb, labels, z, cos, _, _ = tiny.render_world(world.client, view, projection, 0.05, 12.0, fx, fx,
                                                       (width - 1) / 2, (height - 1) / 2, world, robot,
                                                       walkers.bodies)
            depth.apply(z, cos, 0)

        rows.append(("tinyrenderer (pybullet)", size, f"{_time(pybullet_tiny, max(2, frames // 3)) * 1000:.1f} ms"))
        rows.append(("pybullet-egl plugin", size, _pybullet_egl_child(width, height, frames)))
    world.close()
    return rows


def surface_costs(frames: int, rounds: int) -> list[str]:
    """Our 320x240 frame with no surface named against the same scene with surfaces named (see the docstring)."""
    import dataclasses

    from hil.devices.descriptor.camera import DepthFailure
    from hil.firmware_sim.embodied.camera import _gl_renderer
    from hil.firmware_sim.render.scene import (InstanceList, SurfacePalette, base_legend, people_scene, robot_scene,
                                               static_scene)
    from hil.firmware_sim.sensors.camera import DepthModel
    from hil.firmware_sim.world.figures import Gait

    world, robot, _, people = _scene_world()
    width, height = SIZES[0]
    view, projection, fx = _matrices(width, height, robot)
    gl = _gl_renderer(width, height)
    variants = {
        "no surface named": (list(world.walls.values()), people),
        "glass wall, fabric people": ([dataclasses.replace(w, surface="glass") for w in world.walls.values()],
                                      [{**p, "surface": "fabric" if p["id"] % 2 else None} for p in people]),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    counts: dict[str, dict] = {}
    for _ in range(rounds):
        for name, (walls, crowd) in variants.items():
            gait, cache, palette, depth = Gait(0), {}, SurfacePalette(), DepthModel(DepthFailure(), fx, 0)
            static = static_scene(walls, palette)

            def frame():
                legend = base_legend()
                scene = InstanceList()
                scene.extend(static)
                scene.extend(robot_scene(robot, legend, cache, palette))
                scene.extend(people_scene(crowd, gait.update(time.perf_counter(), crowd), 0, legend, palette))
                with gl.ctx:
                    _, _, z, cos, index = gl.render_surfaces(view, projection, scene.pack())
                counts[name] = depth.apply(z, cos, 0, None, index, tuple(palette.names))[1]

            frame()  # warm-up
            for _ in range(frames):
                start = time.perf_counter()
                frame()
                times[name].append(time.perf_counter() - start)
    world.close()
    base = statistics.median(times["no surface named"])
    return [f"  {name:<26} {statistics.median(t) * 1000:6.1f} ms/frame  x{statistics.median(t) / base:4.2f}  "
            f"invalid {counts[name]}" for name, t in times.items()]


def _pybullet_egl_child(width: int, height: int, frames: int) -> str:
    """pybullet's EGL plugin in a child process: it makes its own EGL context beside moderngl's, and its unload
    ends the process on this Mesa (seen here), so it gets a process of its own."""
    import subprocess

    code = ("import sys; from bench.camera import _egl_in_child; "
            f"print('RESULT', _egl_in_child({width}, {height}, {frames}), flush=True)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    found = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return found[0] if found else f"failed (exit {done.returncode})"


def _egl_in_child(width: int, height: int, frames: int = 10) -> str:
    world, robot, _, _ = _scene_world()
    view, projection, _ = _matrices(width, height, robot)
    return _pybullet_egl(world, view, projection, width, height, frames)


def _pybullet_egl(world, view, projection, width, height, frames) -> str:
    import pkgutil

    import pybullet as p

    egl = pkgutil.get_loader("eglRenderer")
    if egl is None:
        return "not shipped in this pybullet wheel (no eglRenderer module)"
    plugin = p.loadPlugin(egl.get_filename(), "_eglRendererPlugin", physicsClientId=world.client)
    if plugin < 0:
        return "the plugin did not load"
    flip = projection.copy()
    flip[1, :] = -flip[1, :]

    def render():
        p.getCameraImage(width, height, viewMatrix=view.T.reshape(-1).tolist(),
                         projectionMatrix=flip.T.reshape(-1).tolist(), renderer=p.ER_BULLET_HARDWARE_OPENGL,
                         physicsClientId=world.client)

    return f"{_time(render, frames) * 1000:.1f} ms (capsules, no labels per part)"


def realtime_factors(duration: float, rounds: int) -> dict[str, list[float]]:
    from hil.trial import Trial
    from hil.trial.presets import demo_spec

    out: dict[str, list[float]] = {"plain": [], "camera 10 Hz": []}
    for _ in range(rounds):
        for mode in out:
            hooks = (_reader(),) if mode != "plain" else ()
            spec = demo_spec(duration=duration)
            start = time.perf_counter()
            result = Trial(spec=spec).run(None, hooks=hooks)
            wall = time.perf_counter() - start
            if result.status != "ok":
                raise SystemExit(f"bench.camera: the demo failed: {result.summary_line()}")
            out[mode].append(duration / wall)
    return out


def _reader():
    state = {"next": 0.0, "frames": 0}

    def read(robot):
        now = robot.clock.now()
        if now + 1e-9 >= state["next"]:
            robot.sensors["head_camera"].frame()
            state["next"] = now + 0.1
            state["frames"] += 1
    return read


def served_costs(frames: int) -> list[tuple[str, float, float]]:
    """(what, in process ms, served ms): frame() of a new period and of the same period, 320x240 RGB-D."""
    import subprocess

    from hil.bridge.process import spawn
    from hil.runtime.robot import Robot

    def measure(robot) -> tuple[float, float]:
        camera, new, same = robot.sensors["head_camera"], [], []
        camera.frame()  # warm-up: the renderer's context, the connection
        for tick in robot.loop(hz=10, duration_s=(frames + 1) / 10):
            start = time.perf_counter()
            camera.frame()
            new.append(time.perf_counter() - start)
            start = time.perf_counter()
            camera.frame()
            same.append(time.perf_counter() - start)
        return 1000 * statistics.median(new), 1000 * statistics.median(same)

    with Robot.open({"bus": "sim://commbot?map=lab", "clock": "sim", "semantics": "commbot"}) as robot:
        here = measure(robot)
    proc = spawn([sys.executable, "-m", "hil", "sim", "commbot", "--pty", "--map", "lab", "--clock", "sim",
                  "--clock-endpoint", "tcp://127.0.0.1:*", "--camera-endpoint", "tcp://127.0.0.1:*"],
                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        pty, clock, camera = (proc.stdout.readline().split()[-1] for _ in range(3))
        with Robot.open({"bus": pty, "clock": "sim", "clock_endpoint": clock, "camera_endpoint": camera,
                         "semantics": "commbot"}) as robot:
            served = measure(robot)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return [("new frame period", here[0], served[0]), ("same period", here[1], served[1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.camera", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="the smallest settings (a few frames at "
                        "320x240 only, 0.5 s trials)")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--duration", type=float, default=30.0, help="simulated seconds of the demo per trial")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--surfaces", action="store_true", help="only what per-pixel surfaces cost")
    args = parser.parse_args(argv)
    if args.smoke:
        args.frames, args.duration, args.rounds = 3, 0.5, 1
    if args.surfaces:
        print(f"320x240 frame with per-pixel surfaces, {PEOPLE} people in view ({args.rounds} alternating rounds x "
              f"{args.frames} frames; machine shared, loaded)")
        print("\n".join(surface_costs(args.frames, args.rounds)))
        return 0
    print(f"render cost per frame, {PEOPLE} people in view (median of {args.frames}; machine shared, loaded)")
    for name, size, cost in render_costs(args.frames, SIZES[:1] if args.smoke else SIZES):
        print(f"  {name:<26} {size:>8}  {cost}")
    rtf = realtime_factors(args.duration, args.rounds)
    plain, camera = statistics.median(rtf["plain"]), statistics.median(rtf["camera 10 Hz"])
    print(f"demo real-time factor, first {args.duration:g} s, {args.rounds} alternating round(s)")
    print(f"  plain                      {plain:.2f}")
    print(f"  camera 10 Hz 320x240 RGB-D {camera:.2f}  ({100 * camera / plain:.0f} % of plain; target >= 70 %)")
    print(f"frame() of 320x240 RGB-D + labels, in process vs served by hil sim (loopback ZeroMQ), median of "
          f"{args.frames}")
    for what, here, served in served_costs(args.frames):
        print(f"  {what:<26} {here:7.2f} ms in process  {served:7.2f} ms served  ({served / here:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
