"""The trial log as Foxglove reads it, and what the viewer needs from it.

A short demo trial is recorded once; then every message of its log is checked against the schema its channel
carries: hil.* JSON messages with jsonschema, foxglove.* messages decoded (protobuf) with the FileDescriptorSet
in the file (re-encoding gives the same bytes: nothing unknown, nothing lost). The Foxglove channels hold the
walls, the people, the robot's frames, the ring as a scan in the ring's frame (and its rays, coloured by why a
reading failed) and the script lines as logs.
The same trial paused, stepped and resumed on the lockstep master (the viewer's controls) gives the same bytes.
"""
from __future__ import annotations

import json
import math
import threading
import time

import pytest

from conftest import SHORT_DEMO_S as DURATION_S


@pytest.fixture
def demo_log(short_demo_log):
    return short_demo_log


def _protobuf_class(schema):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    files = descriptor_pb2.FileDescriptorSet.FromString(schema.data)
    pool = descriptor_pool.DescriptorPool()
    pending = list(files.file)
    while pending:  # dependencies first, whatever order the set lists them in
        for fd in list(pending):
            if all(dep in {f.name for f in files.file if f not in pending} for dep in fd.dependency):
                pool.Add(fd)
                pending.remove(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))


def test_every_message_matches_its_schema(demo_log):
    import jsonschema
    from mcap.reader import make_reader

    classes, validators, decoded = {}, {}, {}
    with open(demo_log, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            if channel.message_encoding == "json":
                validator = validators.get(schema.id)
                if validator is None:
                    validator = validators[schema.id] = jsonschema.Draft202012Validator(json.loads(schema.data))
                validator.validate(json.loads(message.data))
            else:
                assert channel.message_encoding == "protobuf" and schema.encoding == "protobuf", channel.topic
                assert schema.name.startswith("foxglove."), schema.name
                cls = classes.get(schema.id) or classes.setdefault(schema.id, _protobuf_class(schema))
                parsed = cls.FromString(message.data)
                assert parsed.SerializeToString(deterministic=True) == message.data, channel.topic
                decoded.setdefault(channel.topic, []).append(parsed)
    schemas = {topic: msgs[0].DESCRIPTOR.full_name for topic, msgs in decoded.items()}
    assert schemas == {"/foxglove/scene": "foxglove.SceneUpdate", "/foxglove/tf": "foxglove.FrameTransforms",
                       "/foxglove/ring": "foxglove.LaserScan", "/foxglove/log": "foxglove.Log",
                       "/foxglove/ring_rays": "foxglove.SceneUpdate",
                       # the eyes' cameras at 5 Hz (short_demo_log asks for them: conftest.py)
                       **{f"/foxglove/{eye}/{what}": schema for eye in ("head_camera", "right_camera")
                          for what, schema in (("image", "foxglove.CompressedImage"),
                                               ("calibration", "foxglove.CameraCalibration"))}}

    entities = [e for update in decoded["/foxglove/scene"] for e in update.entities]
    ids = {e.id for e in entities}
    walls = next(e for e in entities if e.id == "walls")
    assert len(walls.cubes) > 10 and walls.frame_id == "map"
    assert "goal" in ids
    robot = [e for e in entities if e.id.startswith("robot/")]
    assert len(robot) > 20 and all(e.frame_locked for e in robot)
    people = [e for e in entities if e.id.startswith("person/")]
    assert people and all(e.cylinders for e in people)
    assert {kv.key for kv in people[-1].metadata} == {"type", "doing"}

    transforms = [t for msg in decoded["/foxglove/tf"] for t in msg.transforms]
    to_base = [t for t in transforms if t.parent_frame_id == "map"]
    assert len(to_base) > 10 and to_base[-1].translation.x > -18.0  # the robot drove east from (-18, 0)
    frames = {t.child_frame_id for t in transforms}
    assert {e.frame_id for e in robot} <= frames | {to_base[0].child_frame_id}  # every robot entity has a frame

    scans = decoded["/foxglove/ring"]
    assert scans[0].frame_id in frames and len(scans[0].ranges) == 12
    rays = [update.entities[0] for update in decoded["/foxglove/ring_rays"]]
    assert len(rays) == len(scans) and rays[0].frame_id == scans[0].frame_id and len(rays[0].lines[0].points) == 24
    assert scans[0].end_angle > scans[0].start_angle
    lines = [log.message for log in decoded["/foxglove/log"] if log.name == "crowd/script"]
    assert any(line.startswith("line ") and "spawn kid" in line for line in lines), lines


def test_the_log_carries_what_the_viewer_draws(demo_log):
    from hil.trial.record.log import read_log
    from hil.trial.record.robot_model import LinkPoser

    log = read_log(demo_log)
    model = log.messages["/robot/model"][0].data
    assert model["ring"]["link"] in {link["name"] for link in model["links"]} and len(model["ring"]["yaw"]) == 12
    poser = LinkPoser(model)
    state = log.messages["/robot/state"][-1].data
    frames = poser.world(state["x"], state["y"], state["yaw"], state["joints"])
    assert abs(frames[0][0, 3] - state["x"]) < 1e-9  # the base link is where the robot is
    assert all(name in state["joints"] for name in poser.q_names if name)  # every moving joint is logged
    lines = log.messages["/crowd/scenario"][0].data["lines"]
    ran = log.messages["/crowd/script"]
    assert all(lines[event.data["line"] - 1].strip().startswith(event.data["text"].split()[0]) for event in ran)
    kid = [p for msg in log.messages["/pedestrians"] for p in msg.data["people"] if p.get("name") == "kid"]
    assert kid and {p["doing"] for p in kid} <= {"scripted", "interact", "walking"} and kid[0]["height"] > 0


def test_a_paused_and_stepped_trial_writes_the_same_log(demo_log, tmp_path):
    """Pause, step and resume from another thread while the trial runs: only wall time passes."""
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial
    from hil.trial.view.live import LiveTrial

    live = LiveTrial("demo")
    seen: list[tuple[float, float]] = []

    def drive() -> None:
        while not live.control.available and not live.done.is_set():
            time.sleep(0.01)
        while live.timeline.end_t < 2.0 and not live.done.is_set():
            time.sleep(0.01)
        live.control.pause()
        time.sleep(0.5)
        held = live.timeline.end_t
        time.sleep(0.5)
        seen.append((held, live.timeline.end_t))
        for _ in range(3):
            live.control.step()
            time.sleep(0.1)
        live.control.resume()

    driver = threading.Thread(target=drive)
    driver.start()
    result = Trial(spec=demo_spec(duration=DURATION_S, camera_rate=5.0)).run(  # as short_demo_log
        tmp_path / "paused", listeners=live.listeners, hooks=live.hooks)
    live.finish(result)
    driver.join(timeout=60)
    assert result.status == "ok", result.error
    assert live.control.available
    assert seen and seen[0][0] == seen[0][1] and seen[0][0] < DURATION_S  # nothing was written while paused
    assert (tmp_path / "paused" / "trial.mcap").read_bytes() == demo_log.read_bytes()


def test_the_rings_rays_are_coloured_by_why_a_reading_failed(tmp_path):
    """/foxglove/ring_rays draws what hil view draws (tests/test_view_ring_causes.py): an echo's ray to the echo in
    the echo's colour, a failed reading's ray to the range limit in its cause's colour (its cause in the entity's
    metadata), a mixed trial's virtual echoes in their own colour; written through a real recorder, decoded with
    the log's own descriptors."""
    from mcap.reader import make_reader

    from hil.trial.record.foxglove import FoxgloveChannels, RAYS
    from hil.trial.record.palette import CAUSE_RGB, CAUSE_TEXT, ECHO_RGB, RAY_RGB, VIRTUAL_ECHO_RGB
    from hil.trial.record.recorder import TrialRecorder

    yaws = [0.0, math.pi / 2, math.pi, 3 * math.pi / 2]
    model = {"links": [{"name": "ring", "parent": -1, "part": 4, "body": "ring", "joint": None, "visuals": []}],
             "stand_z": 0.0, "ring": {"name": "ring", "link": "ring", "yaw": yaws, "origin_radius_m": 0.2,
                                      "origin_z_m": 0.3, "min_range_m": 0.03, "max_range_m": 4.0}}
    with TrialRecorder(tmp_path) as rec:
        rec.listeners.append(FoxgloveChannels(rec))
        rec.write("/robot/model", 0.0, model)
        rec.write("/robot/sensors", 1.0, {"ring": [1.5, None, None, None], "contacts": [],
                                          "ring_cause": [None, "angle", "noise", "no_hit"]})
        rec.write("/robot/sensors", 2.0, {"ring": [1.5, 0.8, None, None], "contacts": [],  # a mixed trial
                                          "ring_real": [1.5, None, None, None], "ring_virtual": [None, 0.8, None, None],
                                          "ring_cause": [None, "range", None, None]})
    updates = []
    with open(tmp_path / "trial.mcap", "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages(topics=[RAYS]):
            updates.append((message.log_time / 1e9, _protobuf_class(schema).FromString(message.data)))
    assert [t for t, _ in updates] == [1.0, 2.0]

    def rgb(color):
        return tuple(round(v, 6) for v in (color.r, color.g, color.b))

    (entity,) = updates[0][1].entities
    assert entity.id == "ring/rays" and entity.frame_id == "ring" and entity.frame_locked
    (line,) = entity.lines
    assert len(line.points) == 8 and len(line.colors) == 8  # 4 rays, a start and an end each
    want = [ECHO_RGB, CAUSE_RGB["angle"], CAUSE_RGB["noise"], RAY_RGB]
    assert [rgb(c) for c in line.colors[1::2]] == [tuple(round(v, 6) for v in w) for w in want]
    ends = [math.hypot(p.x, p.y) for p in line.points[1::2]]
    assert ends == pytest.approx([1.7, 4.2, 4.2, 4.2]) and all(p.z == 0.3 for p in line.points)
    assert {kv.key: kv.value for kv in entity.metadata} == {"sensor 1": CAUSE_TEXT["angle"],
                                                             "sensor 2": CAUSE_TEXT["noise"],
                                                             "sensor 3": CAUSE_TEXT["no_hit"]}
    (line,) = updates[1][1].entities[0].lines
    assert len(line.points) == 10  # the real side's 4 rays and the virtual side's one echo
    assert rgb(line.colors[3]) == tuple(round(v, 6) for v in CAUSE_RGB["range"])  # the real side's own cause
    assert rgb(line.colors[-1]) == tuple(round(v, 6) for v in VIRTUAL_ECHO_RGB)
    assert math.hypot(line.points[-1].x, line.points[-1].y) == pytest.approx(1.0)
