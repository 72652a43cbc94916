"""What serving a trial to Foxglove costs, and what the page's batched robot saved.

  python -m bench.foxglove [--duration S] [--rounds 3] [--frames N] [--smoke]

(a) The demo's real-time factor (seed 0, ``--duration`` sim seconds, after one uncounted warm-up trial) plain,
with ``--foxglove``'s LiveServer and no client (``served``), and with a Foxglove client subscribed to every
channel (``subscribed``: a separate process speaking the protocol over the real socket, subscribing to each
channel as it is advertised and counting what it receives, as Foxglove's app would); alternated round by round so
all see the same load. Target: the server costs <= 3 %. Beside it, the trial's process's CPU per simulated second
and the client's CPU share.

(b) The page's robot (trial/view/scene.py): the same frames of a demo log (``--frames``, 10 per sim second) drawn
as the page draws them now (the robot's shapes as batched meshes: one update per batch touched) and as it drew
them before (a frame node per link, a position and an orientation setter for each link that moved: that loop is
kept here, for this comparison only), alternated, on a viser server with no client (what the page's process
spends; a browser adds its own). CPU per frame, and the scene messages per frame, both ways.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._smoke import parse_with_smoke

MODES = ("plain", "served", "subscribed")
WHAT = {"served": "the LiveServer, no client", "subscribed": "the LiveServer + a client subscribed to everything"}


# --- (a) the server's cost ---------------------------------------------------------------------------------------
def client_main(url: str) -> int:
    """The client process: subscribe to every channel as it is advertised; print what arrived when the server
    goes away (the trial ended)."""
    from websockets.sync.client import connect

    frames = data = 0
    subscribed: set[int] = set()
    next_id = 1
    with connect(url, subprotocols=["foxglove.sdk.v1"], max_size=None, open_timeout=60) as ws:
        print("connected", flush=True)
        try:
            for frame in ws:
                if isinstance(frame, str):
                    doc = json.loads(frame)
                    if doc.get("op") == "advertise":
                        new = [c["id"] for c in doc["channels"] if c["id"] not in subscribed]
                        ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                            {"id": next_id + k, "channelId": cid} for k, cid in enumerate(new)]}))
                        next_id += len(new)
                        subscribed.update(new)
                elif frame[:1] == b"\x01":
                    frames += 1
                    data += len(frame)
        except Exception:  # noqa: BLE001 - the server closed: the trial is over
            pass
    user, system, _, _, _ = os.times()
    print(json.dumps({"messages": frames, "bytes": data, "channels": len(subscribed), "cpu_s": user + system}),
          flush=True)
    return 0


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


class _Timed:
    """A tap or hook of the server, with the CPU time the trial's thread spends in it (``thread_time``: CPU, not
    wall, so the machine's load does not count); ``bind`` passed through (TrialRecorder.add_tap)."""

    def __init__(self, fn):
        self.fn, self.cpu_s = fn, 0.0
        if hasattr(fn, "bind"):
            self.bind = fn.bind

    def __call__(self, *args):
        t0 = time.thread_time()
        try:
            return self.fn(*args)
        finally:
            self.cpu_s += time.thread_time() - t0


def sdk_threads_cpu_s() -> float:
    """CPU seconds so far of this process's threads named by the SDK's runtime (``tokio-rt-worker``: foxglove-sdk
    encodes and sends there), from /proc/self/task."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if not f.read().startswith("tokio"):
                    continue
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:  # a thread that ended meanwhile
            continue
    return total / os.sysconf("SC_CLK_TCK")


def _trial(duration: float, out: Path, mode: str):
    """One demo trial in ``mode``: (its TrialResult, the trial process's CPU s, the client's report or None, the
    server's CPU s: on the trial's thread and on the SDK's threads)."""
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial

    spec = demo_spec(duration=duration)
    if mode == "plain":
        cpu0 = _cpu_s()
        result = Trial(spec=spec).run(out)
        return result, _cpu_s() - cpu0, None, None
    from hil.trial.foxglove_live.live import LiveServer

    server = LiveServer("127.0.0.1", 0, label="bench", duration_s=duration, err=open(os.devnull, "w"))
    client = None
    try:
        if mode == "subscribed":
            client = subprocess.Popen([sys.executable, "-m", "bench.foxglove", "--client", server.url],
                                      stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": _root()})
            assert client.stdout.readline().strip() == "connected"
        taps, hooks = [_Timed(t) for t in server.taps], [_Timed(h) for h in server.hooks]
        cpu0, sdk0 = _cpu_s(), sdk_threads_cpu_s()
        result = Trial(spec=spec).run(out, taps=tuple(taps), hooks=tuple(hooks))
        cpu = _cpu_s() - cpu0
        served = {"trial_thread": sum(t.cpu_s for t in [*taps, *hooks]), "sdk": sdk_threads_cpu_s() - sdk0}
    finally:
        server.close()
    report = None
    if client is not None:
        out_text = client.communicate(timeout=120)[0]
        line = next((x for x in out_text.splitlines() if x.startswith("{")), None)
        report = json.loads(line) if line else None
    return result, cpu, report, served


def _root() -> str:
    return str(Path(__file__).resolve().parents[1])


def bench_server(duration: float, rounds: int, warm: bool = True) -> None:
    """Each mode's trials alternated over ``rounds``, after a warm-up trial unless ``warm`` is False (the smoke run:
    its first trial pays the imports, and its figures mean nothing)."""
    print(f"(a) demo, seed 0, {duration:g} s of sim time; {' / '.join(MODES)}, alternated {rounds}x")
    rtfs: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES}
    clients: list[dict] = []
    server_cpu: dict[str, list[dict]] = {m: [] for m in MODES[1:]}
    with tempfile.TemporaryDirectory() as tmp:
        if warm:
            _trial(min(duration, 2.0), Path(tmp) / "warm-up", "plain")  # imports, first-use caches
        for k in range(rounds):
            for mode in MODES:
                result, cpu, report, served = _trial(duration, Path(tmp) / f"{k}-{mode}", mode)
                if served is not None:
                    server_cpu[mode].append({who: s / result.sim_s for who, s in served.items()})
                rtf = result.sim_s / result.wall_s
                rtfs[mode].append(rtf)
                cpus[mode].append(cpu / result.sim_s)
                extra = ""
                if report is not None:
                    clients.append({**report, "wall_s": result.wall_s})
                    extra = (f"; the client got {report['messages']} messages ({report['bytes'] / 1e6:.1f} MB) on "
                             f"{report['channels']} channels, {100 * report['cpu_s'] / result.wall_s:.0f} % of a core")
                print(f"  {mode:10s} run {k + 1}: {result.sim_s:6.1f} s sim in {result.wall_s:6.1f} s wall -> "
                      f"real-time factor {rtf:5.2f}; the trial's process {1000 * cpu / result.sim_s:5.1f} ms CPU "
                      f"per sim s{extra}", flush=True)
    from statistics import median

    print(f"  plain: real-time factor {median(rtfs['plain']):.2f} (median)")
    for mode in MODES[1:]:
        # each round's run against that round's plain run (the load changes between rounds, less within one)
        costs = [1 - r / p for r, p in zip(rtfs[mode], rtfs["plain"])]
        cpu_more = [c / p - 1 for c, p in zip(cpus[mode], cpus["plain"])]
        print(f"  {mode} ({WHAT[mode]}): real-time factor {median(rtfs[mode]):.2f}; against the same round's plain "
              f"run it costs {100 * median(costs):+.1f} % (median; runs {', '.join(f'{100 * c:+.1f}' for c in costs)} "
              f"%; target <= 3 %); the trial's process (the SDK's threads included) {100 * median(cpu_more):+.1f} % "
              f"CPU per sim s (runs {', '.join(f'{100 * c:+.1f}' for c in cpu_more)} %)")
        on_trial = median(c["trial_thread"] for c in server_cpu[mode])
        on_sdk = median(c["sdk"] for c in server_cpu[mode])
        plain_cpu = median(cpus["plain"])
        print(f"    the server's own CPU (load-independent): {1000 * on_trial:.1f} ms per sim s on the trial's thread "
              f"(taps, after-cycle) + {1000 * on_sdk:.1f} ms on the SDK's threads = "
              f"{100 * (on_trial + on_sdk) / plain_cpu:.1f} % of the plain trial's {1000 * plain_cpu:.0f} ms per sim s "
              f"(target <= 3 %)")


# --- (b) the page's robot ----------------------------------------------------------------------------------------
class PerLinkSetters:
    """The page's robot as it was before trial/view/scene.py batched the links: a frame node per link
    with its shapes as children, and for each link that moved a position and an orientation setter."""

    def __init__(self, scene, model: dict) -> None:
        from hil.trial.record.robot_model import LinkPoser

        self.poser = LinkPoser(model)
        self.base = scene.add_frame("/before", show_axes=False)
        self.nodes = [scene.add_frame(f"/before/l{i}", show_axes=False) for i in range(len(model["links"]))]
        for i, entry in enumerate(model["links"]):  # the shapes as children, the primitives it added
            for k, shape in enumerate(entry["visuals"]):
                _old_shape(scene, f"/before/l{i}/v{k}", shape)
        self.sent: list = [None] * len(self.nodes)

    def draw(self, state: dict) -> None:
        import numpy as np

        from hil.trial.record.robot_model import base_matrix
        from hil.trial.view.quat import wxyz_of
        from hil.trial.view.scene import MOVED, yaw_wxyz

        base = base_matrix(state["x"], state["y"], state["yaw"], self.poser.stand_z)
        self.base.position = tuple(base[:3, 3])
        self.base.wxyz = yaw_wxyz(state["yaw"])
        local = self.poser.local(state.get("joints"))
        for i, (node, m) in enumerate(zip(self.nodes, local)):
            sent = self.sent[i]
            if sent is None or float(np.abs(sent - m).max()) > MOVED:
                node.position = tuple(m[:3, 3])
                node.wxyz = wxyz_of(m[:3, :3])
                self.sent[i] = m


def _old_shape(scene, name: str, shape: dict):
    from hil.trial.record.robot_model import shape_matrix
    from hil.trial.view.quat import wxyz_of
    from hil.trial.view.scene import rgb255

    m = shape_matrix(shape)
    pos, wxyz, color, size = tuple(m[:3, 3]), wxyz_of(m[:3, :3]), rgb255(shape["rgba"]), shape["size"]
    if shape["kind"] == "box":
        return scene.add_box(name, dimensions=tuple(size[:3]), color=color, position=pos, wxyz=wxyz)
    if shape["kind"] in ("cylinder", "capsule"):
        return scene.add_cylinder(name, radius=size[0], height=size[1], color=color, position=pos, wxyz=wxyz)
    if shape["kind"] == "sphere":
        return scene.add_icosphere(name, radius=size[0], color=color, position=pos, wxyz=wxyz)
    return None


def bench_page(duration: float, frames: int, rounds: int) -> None:
    import viser

    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial
    from hil.trial.view.scene import SceneDrawer
    from hil.trial.view.timeline import Timeline

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        Trial(spec=demo_spec(duration=duration)).run(out)
        timeline = Timeline.from_log(out)
    model = timeline.static["/robot/model"]
    times = [timeline.end_t * k / max(1, frames - 1) for k in range(frames)]
    states = [timeline.frame(t).robot for t in times]
    server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
    try:
        scene = server.scene
        queued = []
        real = scene._queue_scene_message  # noqa: SLF001 - counted where viser queues its messages
        scene._queue_scene_message = lambda message: (queued.append(1), real(message))[1]
        cpu = {"batched": [], "per-link": [], "kinematics": []}
        messages = {"batched": [], "per-link": []}
        from hil.trial.record.robot_model import LinkPoser

        poser = LinkPoser(model)
        for k in range(rounds):
            t0 = time.process_time()
            for state in states:  # what both do first: the forward kinematics of the frame
                poser.local(state.get("joints"))
            cpu["kinematics"].append((time.process_time() - t0) / len(states))
            for how in ("batched", "per-link"):
                drawer = before = None
                if how == "batched":
                    drawer = SceneDrawer(server)
                    drawer.draw_robot(model)
                else:
                    before = PerLinkSetters(scene, model)
                queued.clear()
                t0 = time.process_time()
                for state in states:
                    with server.atomic():
                        if before is None:
                            drawer._robot(state)  # noqa: SLF001 - the robot's part of a frame, alone
                        else:
                            before.draw(state)
                cpu[how].append((time.process_time() - t0) / len(states))
                messages[how].append(len(queued) / len(states))
                if drawer is not None:
                    drawer.reset()
                if before is not None:
                    before.base.remove()  # its links with it
        scene._queue_scene_message = real
    finally:
        server.stop()
    links = len(model["links"])
    shapes = sum(len(link["visuals"]) for link in model["links"])
    b, p = sum(cpu["batched"]) / rounds, sum(cpu["per-link"]) / rounds
    print(f"(b) the page's robot drawn ({links} links, {shapes} shapes), {len(states)} frames of a {duration:g} s demo log, "
          f"alternated {rounds}x, a viser server with no client")
    print(f"  per-link setters (before): {1000 * p:.2f} ms CPU per frame, {sum(messages['per-link']) / rounds:.1f} "
          f"scene messages per frame (runs {', '.join(f'{1000 * c:.2f}' for c in cpu['per-link'])} ms)")
    print(f"  batched (now):             {1000 * b:.2f} ms CPU per frame, {sum(messages['batched']) / rounds:.1f} "
          f"scene messages per frame (runs {', '.join(f'{1000 * c:.2f}' for c in cpu['batched'])} ms)")
    fk = sum(cpu["kinematics"]) / rounds
    print(f"  batched / per-link: {b / p:.2f} of the CPU, "
          f"{sum(messages['batched']) / max(1e-9, sum(messages['per-link'])):.2f} of the messages; beyond the "
          f"forward kinematics both do ({1000 * fk:.2f} ms): {1000 * (p - fk):.2f} ms before, {1000 * (b - fk):.2f} "
          f"ms now ({(b - fk) / max(1e-9, p - fk):.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.foxglove", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="sim seconds per trial (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of plain / served / subscribed (3)")
    parser.add_argument("--frames", type=int, default=300, help="frames of the page's robot drawn each way (300)")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # the client process
    args = parse_with_smoke(parser, argv, duration=0.5, rounds=1, frames=3)
    if args.client:
        return client_main(args.client)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    bench_server(args.duration, args.rounds, warm=not args.smoke)
    bench_page(args.duration, args.frames, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
