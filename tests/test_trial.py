"""Trial recording and reporting (trial/record, trial/report): the MCAP log, crash survival, metrics, the picture, ``hil report``.

Synthetic trials with straight-line motion give metrics computable by hand: a person passing the robot at offset
d with relative speed v stays inside a disc of radius R for 2 sqrt(R^2 - d^2) / v seconds; the tests state
those formulas rather than reusing the code under test.
"""
from __future__ import annotations

import ast
import json
import math
import os
import selectors
import signal
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from hil.trial.record import TrialRecorder, read_log
from hil.trial.report import topdown
from hil.trial.record.log import parse_log
from hil.trial.report.metrics import compute_metrics
from hil.trial.report.build import build_report

REPO = Path(__file__).resolve().parents[1]
META = {"seed": 7, "scenario": "synthetic", "profile": "virtual", "versions": {"hil": "test"}, "robot_radius": 0.3}
WALLS = [[-6.0, -4.0, 6.0, -4.0], [6.0, 4.0, -6.0, 4.0], [-6.0, 4.0, -6.0, -4.0], [6.0, -4.0, 6.0, 4.0]]
DEADLINE_S = 60.0  # only a guard against a hang; nothing is timed


# ---------------------------------------------------------------------------------------------------------------
# helpers
def hil_command() -> list[str]:
    script = Path(sys.executable).with_name("hil")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hil"]


def robot_state(x: float, y: float = 0.0, vx: float = 0.0, yaw: float = 0.0) -> dict:
    return {"x": x, "y": y, "yaw": yaw, "vx": vx, "w": 0.0, "joints": {"head.neck_yaw": 0.0}}


def person(pid: int, x: float, y: float, vx: float = 0.0, vy: float = 0.0) -> dict:
    return {"id": pid, "type": "adult_man", "x": x, "y": y, "vx": vx, "vy": vy, "gaze": 0.0, "radius": 0.25}


def write_trial(out_dir: Path, robot, people_at, *, goal=(9.0, 0.0), goal_radius=0.5, steps=201, dt=0.1,
                contacts_at=None, flush_every_s: float = 1.0) -> Path:
    """Record a synthetic trial: ``robot(t) -> state``, ``people_at(t) -> list of people`` every ``dt``."""
    with TrialRecorder(out_dir, flush_every_s=flush_every_s) as rec:
        rec.write("/trial/meta", 0.0, META)
        rec.write("/map", 0.0, {"name": "box", "walls": WALLS, "places": {"centre": [0.0, 0.0]},
                                "entrances": {"west": [-6.0, 0.0]}, "goal": list(goal) if goal else None,
                                "goal_radius": goal_radius})
        for k in range(steps):
            t = k * dt
            rec.write("/clock", t, {"t": t})
            rec.write("/robot/state", t, robot(t))
            rec.write("/pedestrians", t, {"people": people_at(t)})
            rec.write("/robot/sensors", t, {"ring": [None] * 11 + [2.5], "contacts": []})
            if contacts_at is not None:
                rec.write("/world/contacts", t, {"people": contacts_at(t)})
            if k % 10 == 0:
                rec.write("/bus/stats", t, {"transactions": k, "latency_p50_ms": float("nan")})
    return out_dir / "trial.mcap"


def metrics_of(path: Path) -> dict:
    return compute_metrics(read_log(path).messages)


def decode_png(data: bytes) -> np.ndarray:
    """An independent reader for what our encoder writes: 8-bit RGB, filter type 0 on every row."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack_from(">I", data, pos + 8 + length)
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, interlace) == (8, 2, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    rows = np.frombuffer(raw, np.uint8).reshape(height, 1 + 3 * width)
    assert not rows[:, 0].any(), "filter types other than 0"
    return rows[:, 1:].reshape(height, width, 3)


# ---------------------------------------------------------------------------------------------------------------
# the recorder and the reader
def test_recorder_round_trips_every_topic_and_the_official_reader_agrees(tmp_path):
    path = write_trial(tmp_path, lambda t: robot_state(0.5 * t, vx=0.5), lambda t: [person(1, 3.0, 1.0)], steps=31)
    log = read_log(path)
    assert log.complete and log.stopped is None
    counts = {topic: len(msgs) for topic, msgs in log.messages.items()}
    assert counts == {"/trial/meta": 1, "/map": 1, "/clock": 31, "/robot/state": 31, "/pedestrians": 31,
                      "/robot/sensors": 31, "/bus/stats": 4}
    assert log.messages["/trial/meta"][0].data == META
    assert log.messages["/robot/state"][12] == (pytest.approx(1.2), robot_state(0.5 * (12 * 0.1), vx=0.5))
    assert log.messages["/pedestrians"][3].data["people"] == [person(1, 3.0, 1.0)]
    assert log.messages["/bus/stats"][1].data == {"transactions": 10, "latency_p50_ms": None}  # NaN -> null
    assert log.schemas["/robot/state"]["required"] == ["x", "y", "yaw", "vx", "w"]

    with open(path, "rb") as f:  # Foxglove's reader, through the summary and indexes
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary.statistics.message_count == sum(counts.values())
        assert {c.topic for c in summary.channels.values()} == set(counts)
        assert {c.message_encoding for c in summary.channels.values()} == {"json"}
        assert {s.encoding for s in summary.schemas.values()} == {"jsonschema"}
        states = [json.loads(m.data) for _, c, m in reader.iter_messages(topics=["/robot/state"])]
    assert states == [m.data for m in log.messages["/robot/state"]]


def test_the_logs_json_is_canonical_whatever_types_a_payload_holds():
    """encode_json's copy (recorder._plain) takes built-in types by a fast path and the rest (numpy, subclasses) by
    the generic one: both give the canonical bytes, NaN and infinities null, keys as strings sorted as strings."""
    from enum import IntEnum

    from hil.trial.record.recorder import encode_json

    class Level(IntEnum):
        HIGH = 2

    class Name(str):
        pass

    payload = {"people": [{"id": 7, "x": 1.5, "vx": math.nan, "gaze": (1.0, -math.inf), "surface": None,
                           "on": True}],
               10: "ten", 9: "nine", Name("n"): Level.HIGH, "np": {"f": np.float64(0.25), "i": np.int64(3),
                                                                    "a": np.array([1.0, np.nan])},
               "sub": [Name("s"), np.float32(0.5), (2, [math.inf])]}
    assert encode_json(payload) == (
        b'{"10":"ten","9":"nine","n":2,"np":{"a":[1.0,null],"f":0.25,"i":3},'
        b'"people":[{"gaze":[1.0,null],"id":7,"on":true,"surface":null,"vx":null,"x":1.5}],'
        b'"sub":["s",0.5,[2,[null]]]}')


def test_messages_come_back_in_time_order_and_bad_writes_are_refused(tmp_path):
    with TrialRecorder(tmp_path) as rec:
        for t in (2.0, 0.5, 1.0):
            rec.write("/clock", t, {"t": t})
        with pytest.raises(ValueError, match="lacks vx"):
            rec.write("/robot/state", 0.0, {"x": 0, "y": 0, "yaw": 0, "w": 0})
        with pytest.raises(ValueError, match=r"people\[1\] lacks y"):
            rec.write("/pedestrians", 0.0, {"people": [person(1, 0, 0), {"id": 2, "x": 1, "vx": 0, "vy": 0}]})
        with pytest.raises(ValueError, match=">= 0"):
            rec.write("/clock", -1.0, {"t": -1.0})
        with pytest.raises(ValueError, match="starting with '/'"):
            rec.write("clock", 1.0, {"t": 1.0})
        with pytest.raises(TypeError, match="cannot record"):
            rec.write("/custom", 1.0, {"thing": object()})
        rec.write("/custom", 1.5, {"array": np.arange(3), "value": np.float32(0.5)})  # numpy values become JSON
    log = read_log(tmp_path / "trial.mcap")
    assert [m.t for m in log.messages["/clock"]] == [0.5, 1.0, 2.0]
    assert log.messages["/custom"][0].data == {"array": [0, 1, 2], "value": 0.5}
    with pytest.raises(ValueError, match="closed"):
        rec.write("/clock", 3.0, {"t": 3.0})


def test_a_log_cut_at_any_byte_reads_as_a_clean_prefix(tmp_path):
    path = write_trial(tmp_path, lambda t: robot_state(t, vx=1.0), lambda t: [person(1, 2.0, 0.0)], steps=12,
                       flush_every_s=0.25)
    data = path.read_bytes()
    full = parse_log(data)
    assert full.complete
    order = sorted(((m.t, topic, json.dumps(m.data, sort_keys=True)) for topic, msgs in full.messages.items()
                    for m in msgs))
    counts = set()
    rng = np.random.default_rng(1)
    for cut in range(8, len(data) + 1):
        part = parse_log(data[:cut])
        got = sorted(((m.t, topic, json.dumps(m.data, sort_keys=True)) for topic, msgs in part.messages.items()
                      for m in msgs))
        # what is there is everything up to some time: chunks hold consecutive stretches of the trial
        assert got == order[:len(got)], cut
        counts.add(len(got))
        if not part.complete:
            assert part.stopped
        if cut % 97 == 0:  # a torn write: garbage after the cut stops the reader, it does not crash it
            torn = parse_log(data[:cut] + rng.integers(0, 256, 200, dtype=np.uint8).tobytes())
            assert torn.count() <= len(order)
    assert len(counts) > 5  # several chunks, each adding messages
    with pytest.raises(ValueError, match="not an MCAP file"):
        parse_log(b"hello world")


def test_sigkilled_recording_is_readable_up_to_the_last_flush(tmp_path):
    """A real process records, flushes three times, is SIGKILLed with a chunk open: the flushed part is all there."""
    script = tmp_path / "record.py"
    script.write_text(textwrap.dedent("""
        import sys
        from hil.trial.record import TrialRecorder
        rec = TrialRecorder(sys.argv[1], flush_every_s=1.0)
        rec.write("/map", 0.0, {"walls": [[0, 0, 1, 0]], "goal": [1, 0]})
        for k in range(36):                 # t = 0.0 .. 3.5; flushes when t reaches 1.0, 2.0, 3.0
            t = k / 10
            rec.write("/clock", t, {"t": t, "k": k})
            rec.write("/robot/state", t, {"x": t, "y": 0.0, "yaw": 0.0, "vx": 1.0, "w": 0.0})
        print(rec.flushed_through_s, flush=True)
        sys.stdin.read()                    # wait to be killed, t 3.0 .. 3.5 unflushed in the open chunk
    """))
    out = tmp_path / "trial"
    proc = subprocess.Popen([sys.executable, str(script), str(out)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=DEADLINE_S), "the recorder never reported"
        line = proc.stdout.readline()
        assert line.strip() == "3.0", (line, proc.stderr.read() if proc.poll() is not None else "")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()

    log = read_log(out / "trial.mcap")
    assert not log.complete and log.stopped
    assert [m.data["k"] for m in log.messages["/clock"]] == list(range(30))  # every message with t < 3.0, no more
    assert len(log.messages["/robot/state"]) == 30
    assert log.messages["/map"][0].data["goal"] == [1, 0]

    metrics = build_report(out)  # the report of a crashed trial says how far the log goes
    assert metrics["log"]["complete"] is False
    assert metrics["log"]["end_s"] == 2.9
    assert metrics["path_length_m"] == 2.9
    assert (out / "topdown.png").stat().st_size > 0


# ---------------------------------------------------------------------------------------------------------------
# metrics
def pause_walk_pause(t: float) -> dict:
    """Still for 2 s at x = 0, 0.5 m/s along +x for 8 s, still at x = 4 from t = 10 s."""
    if t < 2.0 - 1e-9:
        return robot_state(0.0)
    if t < 10.0 - 1e-9:
        return robot_state(0.5 * (t - 2.0), vx=0.5)
    return robot_state(4.0)


def test_path_length_time_to_goal_and_time_not_moving(tmp_path):
    # Goal at x = 4.33, radius 0.5: the robot's centre reaches x = 3.83 at t = 2 + 3.83 / 0.5 = 9.66 s, between
    # two samples (linear interpolation of the path finds it exactly).
    m = metrics_of(write_trial(tmp_path / "a", pause_walk_pause, lambda t: [], goal=(4.33, 0.0), steps=121))
    assert m["path_length_m"] == 4.0
    assert m["duration_s"] == 12.0
    assert m["time_to_goal_s"] == 9.66 and m["goal"]["reached"]
    assert m["time_not_moving_s"] == 2.0  # the 2 s pause before leaving; the stop after the goal does not count

    # Never reached: the stop at the end counts too (2 s + 2 s)
    m = metrics_of(write_trial(tmp_path / "b", pause_walk_pause, lambda t: [], goal=(6.0, 0.0), steps=121))
    assert m["time_to_goal_s"] is None and not m["goal"]["reached"]
    assert m["time_not_moving_s"] == 4.0
    assert m["min_distance_m"] is None and m["intrusions"]["social"]["entries"] == 0

    # Reached exactly at a sample: x = 3.5 at t = 9.0 for a goal at 4.0 (within the radius counts)
    m = metrics_of(write_trial(tmp_path / "c", pause_walk_pause, lambda t: [], goal=(4.0, 0.0), steps=121))
    assert m["time_to_goal_s"] == 9.0


def passers(t: float) -> list[dict]:
    """Around a robot standing at the origin: #1 walks along y = 1.0 at 1 m/s (x -5 -> 5, t 0..10), #2 along
    y = -0.3 at 1.5 m/s (x 6.05 -> -5.95, t 0..8; closest at t = 4.0333, between samples), #3 stands at (0, 2)."""
    people = []
    if t <= 10.0 + 1e-9:
        people.append(person(1, -5.0 + t, 1.0, vx=1.0))
    if t <= 8.0 + 1e-9:
        people.append(person(2, 6.05 - 1.5 * t, -0.3, vx=-1.5))
    people.append(person(3, 0.0, 2.0))
    return people


def inside_s(radius: float, offset: float, speed: float) -> float:
    """Seconds a straight pass at ``offset`` and ``speed`` spends within ``radius``."""
    return 2.0 * math.sqrt(radius ** 2 - offset ** 2) / speed if radius > offset else 0.0


def test_distances_and_proxemic_intrusions_of_people_passing_at_known_offsets(tmp_path):
    m = metrics_of(write_trial(tmp_path, lambda t: robot_state(0.0), passers, steps=201))
    assert m["min_distance_m"] == 0.3  # #2's closest approach, between samples
    assert m["min_clearance_m"] == round(0.3 - 0.3 - 0.25, 4)
    zones = m["intrusions"]
    assert zones["intimate"]["entries"] == 1  # #2 only (0.3 < 0.45)
    assert zones["intimate"]["person_seconds"] == round(inside_s(0.45, 0.3, 1.5), 4)  # 0.4472
    assert zones["personal"]["entries"] == 2  # #1 and #2; #3 stands at 2 m
    assert zones["personal"]["person_seconds"] == pytest.approx(inside_s(1.2, 1.0, 1.0) + inside_s(1.2, 0.3, 1.5),
                                                                abs=2e-4)  # 1.3266 + 1.5492
    assert zones["social"]["entries"] == 3  # #3 counts once, from its first sample
    assert zones["social"]["person_seconds"] == pytest.approx(
        inside_s(3.6, 1.0, 1.0) + inside_s(3.6, 0.3, 1.5) + 20.0, abs=2e-4)  # 6.9166 + 4.7833 + 20
    # mean distance to the nearest person over the ticks (everyone present at each tick, robot at the origin)
    nearest = [min(math.hypot(p["x"], p["y"]) for p in passers(k * 0.1)) for k in range(201)]
    assert m["mean_distance_m"] == round(float(np.mean(nearest)), 4)
    assert m["samples"]["people_seen"] == 3
    # #2 walks into the standing robot: a person-initiated contact (geometry: clearance <= 2 cm)
    c = m["collisions"]
    assert (c["source"], c["robot_initiated"], c["person_initiated"]) == ("geometry", 0, 1)
    assert c["events"][0]["person"] == 2 and c["events"][0]["by"] == "person"
    assert c["events"][0]["t"] == round((6.05 - math.sqrt(0.57 ** 2 - 0.09)) / 1.5, 4)


def test_a_person_leaving_and_coming_back_enters_again(tmp_path):
    # #5 stands 1 m from the robot, is missing from the ticks at t in [3, 5), then is back at the same place
    def blinking(t: float) -> list[dict]:
        return [] if 3.0 - 1e-9 <= t < 5.0 - 1e-9 else [person(5, 1.0, 0.0)]

    m = metrics_of(write_trial(tmp_path, lambda t: robot_state(0.0), blinking, steps=101))
    zone = m["intrusions"]["personal"]
    assert zone["entries"] == 2
    assert zone["person_seconds"] == pytest.approx(2.9 + 5.0, abs=1e-4)  # samples 0..2.9 and 5.0..10.0


def chase(t: float) -> list[dict]:
    """The robot drives +x at 0.5 m/s from the origin. #1 stands at (3, 0): the robot runs into it. #2 comes from
    behind along y = 0 at 1.5 m/s (x = -5 + 1.5 t): it runs into the robot."""
    return [person(1, 3.0, 0.0), person(2, -5.0 + 1.5 * t, 0.0, vx=1.5)]


def test_collisions_each_way_from_geometry(tmp_path):
    m = metrics_of(write_trial(tmp_path, lambda t: robot_state(0.5 * t, vx=0.5), chase, steps=101))
    c = m["collisions"]
    assert (c["source"], c["robot_initiated"], c["person_initiated"], c["unclassified"]) == ("geometry", 1, 1, 0)
    first, second = c["events"]
    # contact when the centres are 0.3 + 0.25 + 0.02 = 0.57 m apart: #2 at 5 - t = 0.57, #1 at 3 - 0.5 t = 0.57
    assert (first["person"], first["by"], first["t"]) == (2, "person", round(5 - 0.57, 4))
    assert (second["person"], second["by"], second["t"]) == (1, "robot", round((3 - 0.57) / 0.5, 4))
    assert (first["robot_approach_mps"], first["person_approach_mps"]) == (-0.5, 1.5)
    assert (second["robot_approach_mps"], second["person_approach_mps"]) == (0.5, 0.0)


def test_a_tie_is_person_initiated_and_a_contact_from_the_first_sample_counts(tmp_path):
    # #4 stands 0.5 m from the standing robot from the start: in contact (0.5 <= 0.57), nobody approaching
    m = metrics_of(write_trial(tmp_path, lambda t: robot_state(0.0), lambda t: [person(4, 0.5, 0.0)], steps=11))
    c = m["collisions"]
    assert (c["robot_initiated"], c["person_initiated"]) == (0, 1)
    assert c["events"] == [{"t": 0.0, "person": 4, "by": "person", "robot_approach_mps": 0.0,
                            "person_approach_mps": 0.0}]
    assert m["intrusions"]["personal"] == {"radius_m": 1.2, "entries": 1, "person_seconds": 1.0}


def test_collisions_from_the_physics_ground_truth_when_logged(tmp_path):
    def touching(t: float) -> list[int]:
        ids = []
        if 4.5 - 1e-9 <= t <= 4.7 + 1e-9:
            ids.append(2)
        if 4.9 - 1e-9 <= t <= 5.2 + 1e-9 or 6.0 - 1e-9 <= t <= 6.3 + 1e-9:  # #1 touched twice
            ids.append(1)
        return ids

    m = metrics_of(write_trial(tmp_path, lambda t: robot_state(0.5 * t, vx=0.5), chase, steps=101,
                               contacts_at=touching))
    c = m["collisions"]
    assert (c["source"], c["robot_initiated"], c["person_initiated"]) == ("contacts", 2, 1)
    assert [(e["t"], e["person"], e["by"]) for e in c["events"]] == [(4.5, 2, "person"), (4.9, 1, "robot"),
                                                                    (6.0, 1, "robot")]


# ---------------------------------------------------------------------------------------------------------------
# the picture, the report, determinism
def test_topdown_png_decodes_with_walls_robot_path_and_markers(tmp_path):
    path = write_trial(tmp_path, lambda t: robot_state(-4.0 + 0.4 * t, 1.5, vx=0.4), passers, steps=201,
                       goal=(4.0, 1.5))
    log = read_log(path)
    view = topdown.write_topdown(log.messages, tmp_path / "topdown.png", compute_metrics(log.messages))
    img = decode_png((tmp_path / "topdown.png").read_bytes())
    assert img.shape == (view.height, view.width, 3)
    assert max(img.shape[0], img.shape[1]) >= 900 and max(img.shape[:2]) <= 1200  # the 12 m world fits ~1000 px

    def pixel(x, y):
        c, r = view.to_px(x, y)
        return tuple(int(v) for v in img[round(float(r)), round(float(c))])

    assert pixel(0.0, -4.0) == topdown.WALL  # middle of the south wall
    assert pixel(-6.0, -2.0) == topdown.WALL  # west wall
    assert pixel(-1.0, 1.5) == topdown.ROBOT  # on the robot's path, away from people and markers
    assert pixel(-4.0, 1.5) == topdown.START
    assert pixel(4.0, 1.5) == topdown.GOAL
    assert pixel(-2.5, -0.3) == topdown.PEOPLE[2 % len(topdown.PEOPLE)]  # person #2's path
    assert pixel(-3.0, -3.0) == topdown.BACKGROUND or pixel(-3.0, -3.0) == topdown.GRID
    assert tuple(int(v) for v in img[img.shape[0] - 1, img.shape[1] - 1]) == topdown.BACKGROUND
    colours = {tuple(int(v) for v in px) for px in img.reshape(-1, 3)[::7]}
    assert topdown.TEXT in colours  # the header and the scale bar were written


def assert_metrics_from_the_log(metrics: dict, log) -> None:
    """metrics.json against numbers worked out here from the log's messages by brute force (positions sampled
    every 0.1 ms along the linear motion between samples, as docs/METRICS.md defines it), not by the metrics
    module: path, duration, samples, goal, nearest and closest distances, zone entries and person-seconds, the
    ring's invalid readings per sensor."""
    states, ticks = log.messages["/robot/state"], log.messages["/pedestrians"]
    t_robot = np.array([m.t for m in states])
    robot = np.array([[m.data["x"], m.data["y"]] for m in states])
    assert metrics["duration_s"] == pytest.approx(t_robot[-1] - t_robot[0], abs=1e-4)
    assert metrics["path_length_m"] == pytest.approx(np.hypot(*np.diff(robot, axis=0).T).sum(), abs=1e-4)
    ids = sorted({p["id"] for m in ticks for p in m.data["people"]})
    assert metrics["samples"] == {"robot_states": len(states), "pedestrian_ticks": len(ticks), "people_seen": len(ids)}
    goal = np.array(log.messages["/map"][0].data["goal"])
    reached = bool((np.hypot(*(robot - goal).T) <= 0.5).any())
    assert metrics["goal"]["reached"] is reached and (metrics["time_to_goal_s"] is None) is not reached
    nearest = []
    for m in ticks:
        rx, ry = np.interp(m.t, t_robot, robot[:, 0]), np.interp(m.t, t_robot, robot[:, 1])
        nearest.append(min(math.hypot(p["x"] - rx, p["y"] - ry) for p in m.data["people"]))
    assert metrics["mean_distance_m"] == pytest.approx(np.mean(nearest), abs=1e-4)
    fine = np.arange(t_robot[0], t_robot[-1] + 1e-9, 1e-4)
    here = np.column_stack([np.interp(fine, t_robot, robot[:, 0]), np.interp(fine, t_robot, robot[:, 1])])
    closest, zones = math.inf, {name: [0, 0.0] for name in ("intimate", "personal", "social")}
    for pid in ids:
        t_person = np.array([m.t for m in ticks])
        track = np.array([[p["x"], p["y"]] for m in ticks for p in m.data["people"] if p["id"] == pid])
        there = np.column_stack([np.interp(fine, t_person, track[:, 0]), np.interp(fine, t_person, track[:, 1])])
        distance = np.hypot(*(there - here).T)
        closest = min(closest, float(distance.min()))
        for name, radius in (("intimate", 0.45), ("personal", 1.2), ("social", 3.6)):
            inside = distance < radius
            zones[name][0] += int(inside[0]) + int(np.sum(inside[1:] & ~inside[:-1]))
            zones[name][1] += float(inside.sum()) * 1e-4
    assert metrics["min_distance_m"] == pytest.approx(closest, abs=1e-3)
    for name, (entries, seconds) in zones.items():
        assert metrics["intrusions"][name]["entries"] == entries, (name, metrics["intrusions"][name], entries)
        assert metrics["intrusions"][name]["person_seconds"] == pytest.approx(seconds, abs=2e-3), name
    rings = [m.data["ring"] for m in log.messages["/robot/sensors"]]
    invalid = [sum(ring[k] is None for ring in rings) for k in range(len(rings[0]))]
    assert metrics["sensors"]["ring"] == {"readings": len(rings), "invalid_per_sensor": invalid}


def test_hil_report_rebuilds_identical_files(tmp_path):
    write_trial(tmp_path, lambda t: robot_state(0.5 * t, vx=0.5), chase, steps=101)
    built = build_report(tmp_path)
    metrics_bytes = (tmp_path / "metrics.json").read_bytes()
    png_bytes = (tmp_path / "topdown.png").read_bytes()
    written = json.loads(metrics_bytes)
    assert written == built and list(written) == sorted(written)
    assert_metrics_from_the_log(written, read_log(tmp_path / "trial.mcap"))
    (tmp_path / "metrics.json").unlink()
    (tmp_path / "topdown.png").unlink()

    done = subprocess.run([*hil_command(), "report", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr
    assert "time to goal" in done.stdout and "1 robot-initiated, 1 person-initiated" in done.stdout
    assert (tmp_path / "metrics.json").read_bytes() == metrics_bytes
    assert (tmp_path / "topdown.png").read_bytes() == png_bytes
    assert built["log"] == {"complete": True, "messages": 4 * 101 + 11 + 2, "stopped": None, "end_s": 10.0,
                            "repaired": None}

    missing = subprocess.run([*hil_command(), "report", str(tmp_path / "nowhere")], cwd=REPO, capture_output=True,
                             text=True, timeout=DEADLINE_S, check=False)
    assert missing.returncode == 2 and "no trial log" in missing.stderr


def test_same_trial_gives_byte_identical_log_metrics_and_picture(tmp_path):
    outputs = []
    for name in ("one", "two"):
        write_trial(tmp_path / name, lambda t: robot_state(0.5 * t, 0.2 * math.sin(t), vx=0.5), passers, steps=151)
        build_report(tmp_path / name)
        outputs.append([(tmp_path / name / f).read_bytes() for f in ("trial.mcap", "metrics.json", "topdown.png")])
    assert outputs[0] == outputs[1]
    text = outputs[0][1].decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"  # sorted keys, canonical form


def test_the_log_and_its_report_import_neither_the_world_nor_the_crowd():
    for source in sorted([*(REPO / "trial" / "record").glob("*.py"), *(REPO / "trial" / "report").glob("*.py")]):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert not name.removeprefix("hil.").split(".")[0] in ("firmware_sim", "crowd", "pybullet"), \
                    (source.name, name)
    code = ("import sys, hil.trial.report.build, hil.trial.report.topdown, hil.trial.record; "
            "print(sorted({m.removeprefix('hil.').split('.')[0] for m in sys.modules} & "
            "{'firmware_sim', 'crowd', 'pybullet'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=DEADLINE_S,
                          check=False)
    assert done.stdout.strip() == "[]", done.stderr
