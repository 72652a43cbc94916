"""The bridge: the lockstep crowd tick against raw ZeroMQ, and the full trial against bare pybullet, in one run.

1. The lockstep tick (bridge/crowd_link.py) with N people (default 50) against a raw ZeroMQ REQ/REP round trip of
   the same bytes, three sides alternating in rounds on tcp://127.0.0.1, each against its own server, a
   subprocess started once (so the server does not share this process's GIL), the REQ end in this process:
     raw        a REQ socket sends the packed N-person ``tick`` envelope; the REP server answers with the packed
                N-person ``intents`` envelope, both built once (nothing is encoded or decoded per tick);
     codec      ``CrowdClient.tick`` (pack, send, poll, recv, unpack, Person objects) against a server that
                decodes each request with ``bridge.envelope.unpack`` and answers with an ``intents`` envelope for
                N people built by ``intents_payload`` + ``pack`` (no crowd): what the bridge adds to the raw trip;
     full       ``CrowdClient.tick`` against the real ``crowd.serve.serve`` with a ``CrowdSim`` of N agents
                walking the arcade (each tick 0.1 s of crowd time); the world side sends back the people as the
                crowd intended them (actual = intended). Its cost is split with the crowd's own work
                (``apply_tick`` + ``intents``) timed in this process on an identical crowd.
   The servers report the request and reply sizes they saw, so the raw and codec sides are checked to move the
   same bytes. Target: codec/raw <= 1.8x. Beside it, the crowd's decode of the same tick into checked values: the
   old ``unpack`` + hand coercion against the msgspec typed decode (bridge/schema.py), as a ratio.

2. The full trial (the demo preset through ``trial.Trial``: crowd subprocess, commbot in the arcade on the sim clock, guide
   controller, MCAP recording, report) against bare pybullet stepping of the same world: a DIRECT client built by
   the same builders (``World`` with its floor and physics settings, the arcade's walls by ``add_map``, the commbot
   by ``build_robot`` at the guide's start pose with the same link frictions, as many pedestrian capsules as the
   trial had on average by ``Pedestrians.sync``, standing in the north passage), servos held at 0 and wheels on
   friction as in bench/world.py, then nothing but ``p.stepSimulation()`` for as many steps as the trial took.
   RTF = simulated s / wall s. Trial and bare alternate; the trial's RTF is given for the whole call (crowd start,
   robot open + scan, loop, recorder close, report) and for its loop alone (between its first and last progress
   lines). Target: trial RTF >= 50 % of bare. Then one shorter trial under cProfile, its time split into physics,
   world hooks (firmware sensors and servos), crowd round trips, bus cycles, controller, recording, setup, report.

    .venv/bin/python -m bench.bridge [--quick] [--people 50] [--ticks 2000] [--rounds 9]
                                     [--trial-seconds 60] [--trial-rounds 3] [--profile-seconds 30] [--only PART]
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._smoke import parse_with_smoke
from hil.bridge.process import spawn

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "tcp://127.0.0.1:*"
CROWD_DT_S = 0.1
ROBOT = {"x": -3.0, "y": -4.0, "yaw": 0.0, "vx": 0.0, "vy": 0.0, "radius": 0.3}  # robot_home, standing
PERSON_TYPE = "adult"
SERVER_TIMEOUT_S = 30.0
KINDS = ("raw", "codec", "full")
TARGET_RATIO = 1.8  # the bridge's tick at most this many times the raw round trip of the same bytes
WARMUP_TICKS = 300  # also takes seq past 255, so every timed request has the same size (a 3-byte msgpack int)


# --- CPU accounting: was the machine quiet? --------------------------------------------------------------------------

def _busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (all cores), from /proc/stat; 0 where there is none."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    except (OSError, ValueError):
        return 0.0
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores kept busy over an interval by this benchmark (this process and the children it has waited for:
    servers, crowd subprocesses) and by everything else on the machine."""

    def __enter__(self) -> CpuMeter:
        self._t0, self._busy0, self._ours0 = time.perf_counter(), _busy_s(), sum(os.times()[:4])
        return self

    def __exit__(self, *exc) -> None:
        seconds = time.perf_counter() - self._t0
        self.ours = (sum(os.times()[:4]) - self._ours0) / seconds
        self.others = max(0.0, (_busy_s() - self._busy0) / seconds - self.ours)

    def note(self) -> str:
        quiet = "" if self.others <= 0.25 else "; other processes were busy: the figures are depressed and noisy"
        return f"CPU: this benchmark {self.ours:.2f} cores, other processes {self.others:.2f} cores{quiet}"


# --- the people, the same on every side ------------------------------------------------------------------------

# Free floor of the arcade (config/maps/arcade.yaml), >= 0.5 m off every wall face: the passages and halls.
_FREE = ((-15.4, -5.6, -1.4, 1.4), (5.6, 15.4, -1.4, 1.4), (-19.3, 19.3, 7.0, 9.3), (-19.3, 19.3, -9.3, -7.0),
         (-19.3, -16.6, -6.0, 6.0), (16.6, 19.3, -6.0, 6.0))
_GOALS = ("west_hall", "east_hall", "nw_corner", "ne_corner", "sw_corner", "se_corner", "shop_a", "shop_b",
          "shop_c", "shop_d", "info_desk", "kiosk", "plaza")


def arcade_crowd(people: int, seed: int = 1):
    """A CrowdSim on the arcade map with ``people`` adults placed at random (seeded, >= 0.6 m apart) on free floor,
    each walking a long route through random places (a dozen legs, some minutes of walking) and staying when done:
    no one leaves, no generator, so the count stays ``people``."""
    import numpy as np

    from hil.crowd.agents import AgentSpec
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.sim import CrowdSim

    arcade = load_crowd_map("arcade")
    rng = np.random.default_rng(seed)
    sim = CrowdSim(arcade, seed=seed, dt=CROWD_DT_S)
    placed: list[tuple[float, float]] = []
    while len(placed) < people:
        x0, x1, y0, y1 = _FREE[int(rng.integers(len(_FREE)))]
        xy = (float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1)))
        if all((xy[0] - a) ** 2 + (xy[1] - b) ** 2 >= 0.36 for a, b in placed):
            placed.append(xy)
    for xy in placed:
        route: list[tuple[float, float]] = []
        here = xy
        for _ in range(12):
            goal = _GOALS[int(rng.integers(len(_GOALS)))]
            route += arcade.route(here, goal)
            here = route[-1]
        sim.add_agent(AgentSpec(PERSON_TYPE, 0.25, float(np.clip(rng.normal(1.3, 0.1), 0.9, 1.7)), xy, route,
                                exit_on_arrival=False))
    return sim


def world_people(people: int) -> list[dict]:
    """What the world sends for ``people`` persons: [{id, x, y, vx, vy}] (floats, as measured)."""
    return [{"id": i, "x": -10.0 + 0.5 * i, "y": 0.25 * (i % 5), "vx": 1.2, "vy": -0.1} for i in range(people)]


def crowd_people(people: int):
    """What the crowd answers for ``people`` persons: bridge.crowd_link.Person, the fields serve() fills."""
    from hil.bridge.crowd_link import Person

    return [Person(i, PERSON_TYPE, -10.0 + 0.5 * i, 0.25 * (i % 5), 1.2, -0.1, 0.995, -0.0995, 0.25, 1.7)
            for i in range(people)]


def messages(people: int, seq: int = 1000, t_s: float = 100.0) -> tuple[bytes, bytes]:
    """The packed ``tick`` request and ``intents`` reply for ``people`` persons, as CrowdClient and serve() build
    them (seq and t only change values, not sizes, once seq > 255)."""
    from hil.bridge.crowd_link import intents_payload, tick_payload
    from hil.bridge.envelope import pack

    request = pack("tick", tick_payload(t_s, ROBOT, world_people(people)), seq=seq, t=t_s)
    reply = pack("intents", intents_payload(t_s, crowd_people(people), [], []), seq=seq, t=t_s)
    return request, reply


# --- the servers (subprocesses) ----------------------------------------------------------------------------------

def server_main(argv: list[str]) -> int:
    """``python -c 'from bench.bridge import server_main; ...' KIND PEOPLE SEED``: one REP server on loopback.
    Prints ``ready ENDPOINT`` first; on ``bye`` answers, prints ``sizes REQ REP TICKS`` (the request and reply
    sizes of the last tick served, and how many ticks it served) and exits."""
    kind, people, seed = argv[0], int(argv[1]), int(argv[2])
    if kind == "full":
        from hil.crowd.serve import serve

        sim = arcade_crowd(people, seed)
        ticks = serve(sim, LOOPBACK, ready=lambda line: print("ready", line.split()[-1], flush=True))
        print(f"served {ticks} {len(sim.agents)}", flush=True)
        return 0

    import zmq

    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(LOOPBACK)
    print("ready", socket.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)
    ticks, sizes = 0, (0, 0)
    if kind == "raw":
        reply = messages(people)[1]  # built once; what comes in is not looked at
        while True:
            data = socket.recv()
            if data == b"bye":
                socket.send(b"")
                break
            socket.send(reply)
            ticks, sizes = ticks + 1, (len(data), len(reply))
    elif kind == "codec":
        from hil.bridge.crowd_link import REQUESTS, intents_payload
        from hil.bridge.envelope import pack, unpack

        persons = crowd_people(people)
        while True:
            data = socket.recv()
            msg = unpack(data, REQUESTS)
            if msg.type == "bye":
                socket.send(pack("intents", intents_payload(msg.t, [], [], [])))
                break
            reply = pack("intents", intents_payload(msg.t, persons, [], []), seq=msg.seq, t=msg.t)
            socket.send(reply)
            ticks, sizes = ticks + 1, (len(data), len(reply))
    else:
        raise SystemExit(f"unknown server kind {kind!r}")
    socket.close(0)
    print(f"sizes {sizes[0]} {sizes[1]} {ticks}", flush=True)
    return 0


class Server:
    """A server subprocess of ``server_main``; ``finish()`` reads what it printed after ``bye``."""

    def __init__(self, kind: str, people: int, seed: int):
        code = "import sys; from bench.bridge import server_main; sys.exit(server_main(sys.argv[1:]))"
        command = [sys.executable, "-c", code, kind, str(people), str(seed)]
        self.kind = kind
        self.proc = spawn(command, stdout=subprocess.PIPE, text=True, cwd=str(ROOT))  # dies with the bench
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            self.close()
            raise RuntimeError(f"the {kind} server did not start (said {' '.join(line)!r})")
        self.endpoint = line[1]

    def finish(self) -> list[str]:
        try:
            out = self.proc.communicate(timeout=SERVER_TIMEOUT_S)[0]
        finally:
            self.close()
        return out.split()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


# --- the three sides (client ends, in this process) --------------------------------------------------------------

class RawSide:
    name = "raw zmq REQ/REP, same bytes"

    def __init__(self, server: Server, people: int):
        import zmq

        self.server = server
        self.request = messages(people)[0]
        self.socket = zmq.Context.instance().socket(zmq.REQ)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVTIMEO, int(SERVER_TIMEOUT_S * 1000))  # a dead server raises, never hangs
        self.socket.connect(server.endpoint)
        self.reply_bytes = 0

    def run(self, ticks: int) -> float:
        send, recv, request = self.socket.send, self.socket.recv, self.request
        gc.collect()
        start = time.perf_counter()
        for _ in range(ticks):
            send(request)
            reply = recv()
        elapsed = time.perf_counter() - start
        self.reply_bytes = len(reply)
        return elapsed

    def close(self) -> dict:
        self.socket.send(b"bye")
        self.socket.recv()
        self.socket.close(0)
        said = self.server.finish()
        return {"request_bytes": int(said[1]), "reply_bytes": int(said[2]), "ticks": int(said[3])}


class CodecSide:
    name = "bridge codec, no crowd"

    def __init__(self, server: Server, people: int):
        from hil.bridge.crowd_link import CrowdClient

        self.server = server
        self.client = CrowdClient(server.endpoint, timeout_s=SERVER_TIMEOUT_S)
        self.people = world_people(people)
        self.t_s = 0.0
        self.replied = 0

    def run(self, ticks: int) -> float:
        tick, people = self.client.tick, self.people
        gc.collect()
        start = time.perf_counter()
        for _ in range(ticks):
            self.t_s += CROWD_DT_S
            _, persons, _ = tick(self.t_s, ROBOT, people)
        elapsed = time.perf_counter() - start
        self.replied = len(persons)
        return elapsed

    def close(self) -> dict:
        self.client.close()
        said = self.server.finish()
        return {"request_bytes": int(said[1]), "reply_bytes": int(said[2]), "ticks": int(said[3])}


class FullSide:
    name = "full tick, serve() + CrowdSim"

    def __init__(self, server: Server):
        from hil.bridge.crowd_link import CrowdClient

        self.server = server
        self.client = CrowdClient(server.endpoint, timeout_s=SERVER_TIMEOUT_S)
        self.people: list[dict] = []
        self.tick_count = 0
        self.replied = 0

    def run(self, ticks: int) -> float:
        tick = self.client.tick
        gc.collect()
        elapsed = 0.0
        for _ in range(ticks):
            self.tick_count += 1
            t_s = round(self.tick_count * CROWD_DT_S, 9)
            start = time.perf_counter()
            _, persons, _ = tick(t_s, ROBOT, self.people)
            elapsed += time.perf_counter() - start
            # the world's part, not timed: actual = intended (no physics here)
            self.people = [{"id": p.id, "x": p.x, "y": p.y, "vx": p.vx, "vy": p.vy} for p in persons]
        self.replied = len(self.people)
        return elapsed

    def close(self) -> dict:
        self.client.close()
        said = self.server.finish()
        return {"ticks": int(said[1]), "agents": int(said[2])}


# --- in-process references: the codec's CPU and the crowd's work ---------------------------------------------------

def codec_cpu_us(people: int, repeats: int) -> dict[str, float]:
    """Microseconds per tick of each codec step, both ends in this process, no sockets (min of 5 batches).
    The client reads a reply as ``CrowdClient`` does (``read_intents``): "unpack intents" is the typed decode
    (checked while decoded), "Person objects" the people and the payload map made from it."""
    from hil.bridge.crowd_link import INTENTS_DECODER, REQUESTS, intents_of, intents_payload, tick_payload
    from hil.bridge.envelope import pack, unpack

    sent, persons = world_people(people), crowd_people(people)
    request, reply = messages(people)
    decoded = INTENTS_DECODER.decode(reply).payload
    steps = {
        "pack tick": lambda: pack("tick", tick_payload(100.0, ROBOT, sent), seq=1000, t=100.0),
        "unpack tick": lambda: unpack(request, REQUESTS),
        "pack intents": lambda: pack("intents", intents_payload(100.0, persons, [], []), seq=1000, t=100.0),
        "unpack intents": lambda: INTENTS_DECODER.decode(reply),
        "Person objects": lambda: intents_of(decoded),
    }
    out = {}
    for name, step in steps.items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                step()
            best = min(best, time.perf_counter() - start)
        out[name] = best / repeats * 1e6
    return out


def legacy_tick_decode(data: bytes):
    """The tick as the crowd decoded it before bridge/schema.py: ``envelope.unpack`` (msgpack to dicts),
    then every field coerced by hand (``float()``/``int()``: 1.9 became 1, "1e3" became 1000.0, NaN passed).
    Kept here only as the peer of the typed decode; returns (t, robot tuple, rows) like the typed side."""
    from hil.bridge.crowd_link import REQUESTS, STATE_FIELDS
    from hil.bridge.envelope import EnvelopeError, unpack

    payload = unpack(data, REQUESTS).payload
    t = float(payload["t"])
    robot = payload.get("robot")
    pose = None if robot is None else (
        float(robot["x"]), float(robot["y"]), float(robot.get("yaw", 0.0)), float(robot.get("vx", 0.0)),
        float(robot.get("vy", 0.0)), float(robot.get("radius", 0.3)))
    columns = payload.get("people")
    if not columns:
        return t, pose, []
    if not isinstance(columns, dict) or not all(isinstance(columns.get(k), list) for k in STATE_FIELDS):
        raise EnvelopeError(f"people must be a map of columns {', '.join(STATE_FIELDS)}")
    if len({len(columns[k]) for k in STATE_FIELDS}) != 1:
        raise EnvelopeError("people columns differ in length")
    parsed = [list(map(int if name == "id" else float, columns[name])) for name in STATE_FIELDS]
    return t, pose, list(zip(*parsed))


def typed_tick_decode(data: bytes):
    """The tick as the crowd decodes it now (crowd/serve.py TICK_DECODER: msgspec, checked while decoded: types,
    finite values, bounds), in the same shape as :func:`legacy_tick_decode`."""
    from hil.crowd.serve import TICK_DECODER

    payload = TICK_DECODER.decode(data).payload
    r = payload.robot
    pose = None if r is None else (r.x, r.y, r.yaw, r.vx, r.vy, r.radius)
    return payload.t, pose, payload.rows()


def typed_decode_us(people: int, repeats: int, rounds: int) -> dict[str, float]:
    """Microseconds to decode one ``people``-person tick into checked values, the old unpack + coerce path and the
    msgspec typed decode alternating in rounds (median of the rounds); both must give the same values."""
    request = messages(people)[0]
    sides = {"unpack + coerce": legacy_tick_decode, "typed decode": typed_tick_decode}
    assert legacy_tick_decode(request) == typed_tick_decode(request), "the two decodes disagree"
    per_round: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds + 1):  # the first round warms up
        for name, decode in (list(sides.items()) if r % 2 else list(sides.items())[::-1]):
            gc.collect()
            start = time.perf_counter()
            for _ in range(repeats):
                decode(request)
            if r:
                per_round[name].append((time.perf_counter() - start) / repeats * 1e6)
    med = {name: statistics.median(v) for name, v in per_round.items()}
    return {"legacy_us": med["unpack + coerce"], "typed_us": med["typed decode"],
            "ratio": med["unpack + coerce"] / med["typed decode"]}


def crowd_work_us(people: int, seed: int, ticks: int, rounds: int) -> float:
    """Median over rounds of the crowd's own work per tick (apply_tick: take the world's state and step 0.1 s;
    intents: the Person list), in this process on the crowd the full side's server holds."""
    from hil.bridge.crowd_link import tick_payload
    from hil.crowd.serve import apply_tick, intents

    sim = arcade_crowd(people, seed)
    sent: list[dict] = []
    k = 0
    per_round = []
    for r in range(rounds + 1):  # the first round warms up
        gc.collect()
        elapsed = 0.0
        for _ in range(ticks):
            k += 1
            payload = tick_payload(round(k * CROWD_DT_S, 9), ROBOT, sent)
            start = time.perf_counter()
            apply_tick(sim, payload)
            persons = intents(sim)
            elapsed += time.perf_counter() - start
            sent = [(p.id, p.x, p.y, p.vx, p.vy) for p in persons]
        if r:
            per_round.append(elapsed / ticks * 1e6)
    return statistics.median(per_round)


# --- part 1 --------------------------------------------------------------------------------------------------------

def bridge_section(people: int = 50, ticks: int = 2000, rounds: int = 9, full_ticks: int = 300, seed: int = 1,
                   out=print) -> dict:
    """The lockstep tick against raw ZeroMQ; prints the table, returns the figures."""
    servers: dict[str, Server] = {}
    with CpuMeter() as meter:
        try:
            for kind in KINDS:
                servers[kind] = Server(kind, people, seed)
            raw, codec = RawSide(servers["raw"], people), CodecSide(servers["codec"], people)
            full = FullSide(servers["full"])
            sides = [raw, codec, full]
            counts = {raw.name: ticks, codec.name: ticks, full.name: full_ticks}
            for side in sides:
                side.run(WARMUP_TICKS)
            per_tick: dict[str, list[float]] = {side.name: [] for side in sides}
            for r in range(rounds):
                for side in sides[r % 3:] + sides[:r % 3]:
                    per_tick[side.name].append(side.run(counts[side.name]) / counts[side.name] * 1e6)
            replied = {"codec": codec.replied, "full": full.replied}
            closed = {kind: side.close() for kind, side in zip(KINDS, sides)}  # bye; what the servers saw
        finally:
            for server in servers.values():
                server.close()
    cpu = codec_cpu_us(people, max(20, ticks // 4))
    typed = typed_decode_us(people, max(20, ticks // 4), rounds)
    crowd_us = crowd_work_us(people, seed, full_ticks, rounds)

    med = {name: statistics.median(v) for name, v in per_tick.items()}
    best = {name: min(v) for name, v in per_tick.items()}
    raw_us, codec_us, full_us = med[raw.name], med[codec.name], med[full.name]
    request, reply = messages(people)
    out(f"lockstep crowd tick, {people} people: request {len(request)} B, reply {len(reply)} B; one REP server "
        f"subprocess per side (started once), REQ in this process, tcp://127.0.0.1; {rounds} rounds, order rotated, "
        f"{ticks} ticks per round ({full_ticks} for the full tick); {os.cpu_count()} CPU cores")
    out(f"  {'side':<34} {'us/tick':>9} {'best us':>9} {'vs raw':>7}   bytes seen by the server")
    seen = {"raw": closed["raw"], "codec": closed["codec"]}
    for side, kind in zip(sides, KINDS):
        sizes = (f"   {seen[kind]['request_bytes']} B in, {seen[kind]['reply_bytes']} B out" if kind in seen
                 else f"   {closed['full']['agents']} agents at the end")
        out(f"  {side.name:<34} {med[side.name]:9.1f} {best[side.name]:9.1f} {med[side.name] / raw_us:6.2f}x{sizes}")
    cpu_total = sum(cpu.values())
    out("  codec CPU per tick, both ends in one process, no sockets: "
        + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()) + f" = {cpu_total:.1f} us")
    out(f"  codec - raw = {codec_us - raw_us:.1f} us per tick; the codec's CPU above, both ends: {cpu_total:.1f} us")
    out(f"  the crowd's decode of one {people}-person tick into checked values, {rounds} alternating rounds: unpack + "
        f"coerce (the old path) {typed['legacy_us']:.1f} us, msgspec typed decode {typed['typed_us']:.1f} us: "
        f"typed {typed['ratio']:.2f}x as fast")
    bridge_part = full_us - crowd_us
    out(f"  full tick split: crowd work (apply_tick + intents, same {people} agents, in-process) {crowd_us:.1f} us "
        f"= {crowd_us / full_us:.0%}; bridge and transport (the rest) {bridge_part:.1f} us "
        f"= {bridge_part / full_us:.0%}")
    ratio = codec_us / raw_us
    out(f"  {meter.note()}")
    out(f"  target: bridge/raw <= {TARGET_RATIO:g}x: {ratio:.2f}x ({'met' if ratio <= TARGET_RATIO else 'missed'}; "
        f"best of rounds: "
        f"{best[codec.name] / best[raw.name]:.2f}x)")
    return {"others_cores": meter.others, "people": people, "request_bytes": len(request),
            "reply_bytes": len(reply), "seen": seen, "ticks": {kind: closed[kind]["ticks"] for kind in KINDS},
            "agents": closed["full"]["agents"], "replied": replied, "raw_us": raw_us, "codec_us": codec_us,
            "full_us": full_us, "crowd_us": crowd_us, "codec_cpu_us": cpu, "typed_decode": typed, "ratio": ratio}


# --- part 2: the full trial against bare pybullet ------------------------------------------------------------------

_PROGRESS = re.compile(r"\bt=\s*([0-9.]+)/")
TRIAL_HZ = 10.0  # the guide robot's rate (examples/guide_robot.py HZ)
TRIAL_MAP = "arcade"
DEMO_START = (-18.0, 0.0, 0.0)  # the demo's start pose (trial/presets.py)


def run_trial_timed(out_dir: Path, seed: int, duration_s: float) -> dict:
    """One run_trial: wall time of the whole call, of its loop (between the first and last progress lines), and
    the people it had per crowd tick (from its log)."""
    from hil.trial import Trial
    from hil.trial.presets import demo_spec
    from hil.trial.record.log import read_log

    marks: list[tuple[float, float]] = []

    def out(*args) -> None:
        match = _PROGRESS.search(" ".join(str(a) for a in args))
        if match and str(args[0]).startswith("["):
            marks.append((float(match.group(1)), time.perf_counter()))

    gc.collect()
    start = time.perf_counter()
    Trial(spec=demo_spec(seed=seed, duration=duration_s)).run(out_dir, progress=out).raise_for_status()
    wall = time.perf_counter() - start
    log = read_log(out_dir / "trial.mcap")
    counts = [len(m.data["people"]) for m in log.messages.get("/pedestrians", [])]
    # The world's time at the end: the duration when the loop ran out (its last tick is a period before, and the
    # clock is then advanced to the end), else the last tick's (the trial ends early after the guide's goal).
    last = log.messages["/clock"][-1].t
    sim_s = duration_s if last + 1.0 / TRIAL_HZ >= duration_s - 1e-6 else last  # TRIAL_HZ: the guide's rate
    (t0, w0), (t1, w1) = (marks[0], marks[-1]) if marks else ((0.0, 0.0), (0.0, 0.0))
    return {"wall_s": wall, "sim_s": sim_s, "loop_sim_s": t1 - t0, "loop_wall_s": w1 - w0, "ticks": len(counts),
            "mean_people": statistics.fmean(counts) if counts else 0.0, "max_people": max(counts, default=0)}


class BareWorld:
    """The trial's world as bare pybullet: same builders, same bodies, no hooks; only p.stepSimulation()."""

    def __init__(self, capsules: int):
        import pybullet as p

        from hil.firmware_sim.assembly import load_assembly
        from hil.firmware_sim.world import World, build_robot, load_map
        from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians
        from .world import hold_servos

        self.p = p
        start_pose = DEMO_START
        self.world = World()
        self.walls = len(self.world.add_map(load_map(TRIAL_MAP)))
        parts = load_assembly("commbot").parts
        friction = {(part.id, body.name): body.friction for part in parts if hasattr(part, "descriptor")
                    for body in part.descriptor.bodies if body.friction is not None}  # as embody() does
        self.robot = build_robot(self.world, parts, start_pose, link_friction=friction)
        hold_servos(self.world.client, self.robot.body_id,
                    [(j.index, self.robot.parts[j.part_id].kind, j.limits.effort, j.friction)
                     for j in self.robot.moving_joints])
        # standing in the north passage, out of the robot's way; Pedestrians' drive hook never runs (no world.step)
        Pedestrians(self.world).sync([PedestrianIntent(i, -15.0 + 1.5 * i, 8.25, 0.0, 0.0) for i in range(capsules)])
        self.capsules = capsules
        self.bodies = p.getNumBodies(physicsClientId=self.world.client)
        self.time_step_s = self.world.time_step_s

    def run(self, steps: int) -> float:
        step, client = self.p.stepSimulation, self.world.client
        gc.collect()
        start = time.perf_counter()
        for _ in range(steps):
            step(physicsClientId=client)
        return time.perf_counter() - start

    def close(self) -> None:
        self.world.close()


def trial_section(duration_s: float = 60.0, rounds: int = 3, seed: int = 0, profile_s: float = 30.0,
                  out=print, warm: bool = True) -> dict:
    """The trial's RTF against bare pybullet stepping of the same world; then where the trial's time goes. A 1 s
    warm-up trial first unless ``warm`` is False (the smoke run: its figures mean nothing)."""
    from hil.firmware_sim.world import DEFAULT_TIME_STEP_S as dt

    trials: list[dict] = []
    bare_s: list[float] = []
    bare, steps = None, 0
    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="hil-bench-bridge-") as tmp, meter:
        try:
            if warm:
                run_trial_timed(Path(tmp) / "warm-up", seed, min(1.0, duration_s))  # imports, caches: not timed
            for r in range(rounds):
                for which in ("trial", "bare") if r % 2 == 0 else ("bare", "trial"):
                    if which == "trial":
                        trials.append(run_trial_timed(Path(tmp) / f"trial-{r}", seed, duration_s))
                        continue
                    if bare is None:  # after the first trial: its steps, as many capsules as it had on average
                        steps = max(1, round(trials[0]["sim_s"] / dt))
                        bare = BareWorld(round(trials[0]["mean_people"]))
                        bare.run(max(1, steps // 10))  # warm-up
                    bare_s.append(bare.run(steps))
        finally:
            info = None if bare is None else (bare.walls, bare.capsules, bare.bodies)
            if bare is not None:
                bare.close()
    walls, capsules, bodies = info
    first = trials[0]
    sim_s = first["sim_s"]
    trial_wall = statistics.median(t["wall_s"] for t in trials)
    loop_rtf = statistics.median(t["loop_sim_s"] / t["loop_wall_s"] if t["loop_wall_s"] > 0 else float("nan")
                                 for t in trials)  # nan: a trial too short for two progress lines
    loop_wall = statistics.median(t["loop_wall_s"] for t in trials)
    bare_wall = statistics.median(bare_s)
    trial_rtf, bare_rtf = sim_s / trial_wall, steps * dt / bare_wall
    out(f"full trial (run_trial, seed {seed}, {sim_s:g} s simulated = {steps} physics steps of {dt * 1e3:.3f} ms, "
        f"{first['ticks']} crowd ticks, people per tick mean {first['mean_people']:.1f}, max {first['max_people']}) "
        f"against bare pybullet of the same world ({walls} walls, commbot, {capsules} capsules: {bodies} bodies with "
        f"the floor), stepped as often; {rounds} alternating rounds, medians")
    out(f"  {'side':<48} {'wall s':>7} {'RTF':>7} {'us/step':>8}")
    out(f"  {'trial, whole call (start, open, loop, report)':<48} {trial_wall:7.2f} {trial_rtf:7.2f} "
        f"{trial_wall / steps * 1e6:8.1f}")
    loop_name = f"trial, loop only ({first['loop_sim_s']:g} s between progress lines)"
    out(f"  {loop_name:<48} {loop_wall:7.2f} "
        f"{loop_rtf:7.2f} {1e6 * dt / loop_rtf:8.1f}")
    out(f"  {'bare pybullet, p.stepSimulation() only':<48} {bare_wall:7.2f} {bare_rtf:7.2f} "
        f"{bare_wall / steps * 1e6:8.1f}")
    whole, loop = trial_rtf / bare_rtf, loop_rtf / bare_rtf
    out(f"  {meter.note()}")
    out(f"  target: trial RTF >= 50% of bare: whole call {whole:.0%} ({'met' if whole >= 0.5 else 'missed'}), "
        f"loop alone {loop:.0%} ({'met' if loop >= 0.5 else 'missed'})")
    result = {"others_cores": meter.others, "sim_s": sim_s, "steps": steps, "trial_rtf": trial_rtf,
              "trial_loop_rtf": loop_rtf, "bare_rtf": bare_rtf, "ratio": whole, "loop_ratio": loop,
              "mean_people": first["mean_people"], "capsules": capsules, "walls": walls, "bare_bodies": bodies,
              "crowd_ticks": first["ticks"]}
    if profile_s > 0:
        result["profile"] = profile_section(profile_s, seed, out)
    return result


# --- part 2b: where a trial's wall time goes ---------------------------------------------------------------------

def _stat(stats: pstats.Stats, where: str, name: str, own: bool = False, caller: tuple[str, str] | None = None
          ) -> float:
    """Cumulative (own: total) seconds of the functions named ``name`` in files ending with ``where`` ('~' for
    built-ins); with ``caller``, only the time spent in calls from that (file suffix, function)."""
    total = 0.0
    for (file, _, func), (_, _, tt, ct, callers) in stats.stats.items():
        if func != name or not file.replace(os.sep, "/").endswith(where):
            continue
        if caller is None:
            total += tt if own else ct
        else:
            for (cfile, _, cfunc), (_, _, ctt, cct) in callers.items():
                if cfunc == caller[1] and cfile.replace(os.sep, "/").endswith(caller[0]):
                    total += ctt if own else cct
    return total


def profile_breakdown(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of one profiled run_trial by where they went; the parts do not overlap and add up to the total."""
    def s(*args, **kwargs) -> float:
        return _stat(stats, *args, **kwargs)

    total = s("trial/run.py", "go")
    physics = s("~", "<built-in method pybullet.stepSimulation>", own=True)
    world_step = s("firmware_sim/world/world.py", "step")
    crowd_hook = s("firmware_sim/embodied/crowd_bridge.py", "_pre_step")
    client_tick = s("bridge/crowd_link.py", "tick")
    # send + poll + recv: the round trip on the socket, i.e. the crowd process's turn (its step, its codec) and
    # the transport; on a busy machine send() also absorbs the wait for a core once the I/O thread is woken
    tick = ("bridge/crowd_link.py", "tick")
    crowd_wait = s("zmq/sugar/socket.py", "send", caller=tick) + s("zmq/sugar/socket.py", "poll", caller=tick)
    crowd_wait += s("~", "<method 'recv' of 'zmq.backend.cython.socket.Socket' objects>", caller=tick)
    drive = s("firmware_sim/world/pedestrians.py", "_drive")
    touching = s("firmware_sim/embodied/crowd_bridge.py", "_post_step")  # who touched the robot, every step
    parts = {
        "physics (pybullet stepSimulation)": physics,
        "world hooks: part firmware (ring, contacts, servos)": world_step - physics - crowd_hook - drive - touching,
        "world hooks: pedestrian drive": drive,
        "world hooks: people touching the robot": touching,
        "crowd: socket round trip (crowd process, transport)": crowd_wait,
        "crowd: bridge client (pack, unpack, Person)": client_tick - crowd_wait,
        "crowd: world side (states, sync, robot)": crowd_hook - client_tick,
        "bus cycles (host + virtual device)": s("runtime/robot/robot.py", "cycle"),
        "controller (guide step)": s("guide_robot.py", "step"),
        "recording (MCAP writes, people states)": s("trial/record/recorder.py", "write")
        + s("trial/record/recorder.py", "close") + s("firmware_sim/embodied/crowd_bridge.py", "states"),
        "setup (crowd start, robot open + scan)": s("trial/task.py", "__init__")
        + s("runtime/robot/robot.py", "open") + s("trial/task.py", "make_task"),
        "teardown (robot close, crowd bye)": s("runtime/robot/robot.py", "close"),
        "report (metrics, picture)": s("trial/report/build.py", "build_report"),
    }
    parts["other (loop bookkeeping, clock, ...)"] = total - sum(parts.values())
    parts["total"] = total
    return parts


def profile_section(duration_s: float, seed: int, out=print) -> dict[str, float]:
    from hil.trial import Trial
    from hil.trial.presets import demo_spec

    with tempfile.TemporaryDirectory(prefix="hil-bench-bridge-prof-") as tmp:
        gc.collect()
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        try:
            Trial(spec=demo_spec(seed=seed, duration=duration_s)).run(Path(tmp))
        finally:
            profiler.disable()
        wall = time.perf_counter() - start
    parts = profile_breakdown(pstats.Stats(profiler))
    total = parts.pop("total")
    out(f"  where a {duration_s:g} s trial's time goes (cProfile, this process; {wall:.2f} s wall with the profiler, "
        f"which inflates the Python parts against pybullet's C calls):")
    for name, seconds in parts.items():
        out(f"    {name:<52} {seconds:7.3f} s {seconds / total:6.1%}")
    parts["total"] = total
    return parts


# --- main ----------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.bridge", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (~10 s): fewer ticks and rounds, one 10 s trial")
    parser.add_argument("--people", type=int, default=50, help="people in the lockstep tick (default 50)")
    parser.add_argument("--ticks", type=int, help="ticks per round, raw and codec sides (default 2000; quick 300)")
    parser.add_argument("--full-ticks", type=int, help="ticks per round, full side (default 300; quick 100)")
    parser.add_argument("--rounds", type=int, help="alternating rounds of the tick sides (default 9; quick 3)")
    parser.add_argument("--trial-seconds", type=float, help="simulated seconds per trial (default 60; quick 10)")
    parser.add_argument("--trial-rounds", type=int, help="alternating trial/bare rounds (default 3; quick 1)")
    parser.add_argument("--profile-seconds", type=float,
                        help="simulated seconds of the profiled trial, 0: none (default 30; quick 5)")
    parser.add_argument("--seed", type=int, default=0, help="trial seed (default 0)")
    parser.add_argument("--only", choices=("tick", "trial"), help="run one part only")
    # a smoke's profile section is left out: tests/test_bench_bridge.py runs it (a 1 s profiled trial)
    args = parse_with_smoke(parser, argv, people=5, ticks=30, full_ticks=10, rounds=1, trial_seconds=2.0,
                            trial_rounds=1, profile_seconds=0.0)

    def pick(value, default, quick):
        return value if value is not None else (quick if args.quick else default)

    results: dict = {}
    if args.only in (None, "tick"):
        results["tick"] = bridge_section(args.people, pick(args.ticks, 2000, 300), pick(args.rounds, 9, 3),
                                         pick(args.full_ticks, 300, 100))
    if args.only in (None, "trial"):
        results["trial"] = trial_section(pick(args.trial_seconds, 60.0, 10.0), pick(args.trial_rounds, 3, 1),
                                         args.seed, pick(args.profile_seconds, 30.0, 5.0), warm=not args.smoke)
    return results


if __name__ == "__main__":
    main()
