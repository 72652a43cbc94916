"""The viewer's robot as batched meshes: every visual shape of a real trial's robot is drawn where pybullet had its
body at the time of the logged joints (read from pybullet itself during the trial: getLinkState), and a frame in
which links moved costs a few scene messages (one update per batch touched), not a position and an orientation per
moved link (a real viser server on port 0; the messages counted where viser queues them)."""
from __future__ import annotations

import numpy as np
import pybullet as p
import viser

from hil.trial import Trial
from hil.trial.record.log import read_log
from hil.trial.view.scene import SceneDrawer
from hil.trial.view.timeline import Timeline

def turning(seen: dict):
    """Drive round a circle (the wheels turn, their links move every frame), and at every tick take each body's
    frame from pybullet itself, as the physics has it (not from anything the viewer computes)."""

    def main(robot):
        world = robot.bus.transport.embodied.robot  # the in-process world's multibody
        for tick in robot.loop(hz=10):
            robot.base.drive(0.2, 0.6)
            seen[round(tick.time, 6)] = {(link.part_id, link.body): _pybullet_frame(world, link)
                                         for link in world.links}

    return main


def _pybullet_frame(world, link) -> np.ndarray:
    """A body's 4x4 world frame straight from pybullet: getLinkState's link frame (the base: its CoM pose and
    inertial frame from getDynamicsInfo), then the body's place in that link (bodies merged into one link)."""
    body, client = world.body_id, world.client
    if link.index == -1:
        com_pos, com_orn = p.getBasePositionAndOrientation(body, physicsClientId=client)
        inertial_pos, inertial_orn = p.getDynamicsInfo(body, -1, physicsClientId=client)[3:5]
        frame = p.multiplyTransforms(com_pos, com_orn, *p.invertTransform(inertial_pos, inertial_orn))
    else:
        state = p.getLinkState(body, link.index, computeForwardKinematics=True, physicsClientId=client)
        frame = (state[4], state[5])
    return _matrix(*p.multiplyTransforms(*frame, *link.offset))


def _matrix(position, orientation) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = np.reshape(p.getMatrixFromQuaternion(orientation), (3, 3))
    out[:3, 3] = position
    return out


def test_every_shape_is_where_the_physics_has_it_and_a_frame_costs_a_few_messages(tmp_path):
    seen: dict = {}
    assert Trial(turning(seen), robot="commbot", map="lab", start=(0, 0, 0), duration=2.0).run(tmp_path / "t").ok
    log = read_log(tmp_path / "t" / "trial.mcap")
    timeline = Timeline()
    for topic, messages in log.messages.items():
        for m in messages:
            timeline.add(topic, m.t, m.data)
    state_times = [m.t for m in log.messages["/robot/state"]]
    model = log.messages["/robot/model"][0].data
    server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
    try:
        drawer = SceneDrawer(server)
        drawer.draw_robot(model)
        shapes = [(i, k) for i, link in enumerate(model["links"]) for k, _ in enumerate(link["visuals"])]
        queued = []
        scene = server.scene
        real = scene._queue_scene_message
        scene._queue_scene_message = lambda message: (queued.append(message), real(message))[1]
        counts, moved_links = [], []
        for t in (0.5, 1.0, 1.5, 2.0):
            frame = timeline.frame(t)
            before = [s.copy() for s in drawer._sent]
            queued.clear()
            drawer.draw(frame, lines=False)
            robot_messages = [m for m in queued if getattr(m, "name", "").startswith("/robot")]
            counts.append(len(robot_messages))
            moved_links.append(sum(float(np.abs(a - b).max()) > 1e-4 for a, b in zip(before, drawer._sent)))
            state_t = round(max(s for s in state_times if s <= t + 1e-9), 6)  # the state the frame shows
            physics = seen[state_t]
            base = np.linalg.inv(physics[(model["links"][0]["part"], model["links"][0]["body"])])
            for i, k in shapes:
                entry, visual = model["links"][i], model["links"][i]["visuals"][k]
                placement = _matrix(visual["xyz"], p.getQuaternionFromEuler(visual["rpy"]))
                want = base @ physics[(entry["part"], entry["body"])] @ placement
                got = drawer.drawn_pose(i, k)
                assert got is not None, (i, k)
                # the joints logged are the servos' registers (4096 steps a turn): a link 0.5 m out is within 1 mm
                assert np.allclose(got, want, atol=2e-3), f"link {i} ({entry['name']}) visual {k} at t={t}"
        scene._queue_scene_message = real
    finally:
        server.stop()
    print("robot messages per frame", counts, "links moved", moved_links)
    assert max(moved_links) >= 4, f"the wheels and joints moved: {moved_links}"
    batches = len({id(drawer._where[s][0]) for s in shapes})
    assert batches <= 3, "one batched mesh per kind of shape"
    for n_messages, n_moved in zip(counts, moved_links):
        assert n_messages <= 2 + 2 * batches, (counts, moved_links)  # the base's pose + each batch's poses
        assert n_messages < 2 * n_moved, (counts, moved_links)  # what per-link setters cost
