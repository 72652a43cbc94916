"""The viewer's robot as batched meshes (issue 28): every visual shape of a real trial's robot is drawn where the
model's forward kinematics puts it at the logged joints, and a frame in which links moved costs a few scene
messages (one update per batch touched), not a position and an orientation per moved link (a real viser server
on port 0; the messages counted where viser queues them)."""
from __future__ import annotations

import textwrap

import numpy as np
import viser

from hil.trial import Trial
from hil.trial.record.log import read_log
from hil.trial.record.robot_model import LinkPoser, shape_matrix
from hil.trial.view.scene import SceneDrawer
from hil.trial.view.timeline import Timeline

TURNING = textwrap.dedent('''\
    """Drive round a circle: the wheels turn, and their links move every frame."""
    def main(robot):
        for tick in robot.loop(hz=10):
            robot.base.drive(0.2, 0.6)
''')


def test_every_shape_is_where_the_kinematics_puts_it_and_a_frame_costs_a_few_messages(tmp_path):
    (tmp_path / "turning.py").write_text(TURNING)
    assert Trial(tmp_path / "turning.py", map="lab", start=(0, 0, 0), duration=2.0).run(tmp_path / "t").ok
    log = read_log(tmp_path / "t" / "trial.mcap")
    timeline = Timeline()
    for topic, messages in log.messages.items():
        for m in messages:
            timeline.add(topic, m.t, m.data)
    model = log.messages["/robot/model"][0].data
    poser = LinkPoser(model)
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
            local = poser.local(frame.robot.get("joints"))
            for i, k in shapes:
                want = local[i] @ shape_matrix(model["links"][i]["visuals"][k])
                got = drawer.drawn_pose(i, k)
                assert got is not None, (i, k)
                assert np.allclose(got, want, atol=1e-4), f"link {i} visual {k} at t={t}"
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
