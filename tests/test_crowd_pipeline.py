"""The crowd's tick pipelined: the crowd computes tick N+1 while the world steps tick N.

Real parts: a ``hil crowd --serve`` subprocess, pybullet in this process, the lockstep sim clock. Pipelined,
the intents the world applies at tick N are the crowd's answer to the state it measured at tick N-1 (one-tick
lag, docs/ARCHITECTURE.md); the same seed still gives the same bytes, and the crowd's clock stays on the world's.
"""
from __future__ import annotations

import textwrap

from hil.trial import Trial
from hil.trial.record.log import read_log

EAST = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            ahead = robot.sensors["ring"].nearest(-0.5, 0.5)
            robot.base.drive(v=0.0 if ahead is not None and ahead < 0.8 else 0.3, w=0.0)
''')


def _people(path):
    log = read_log(path).messages
    return [(round(m.log_time * 1e-9, 6) if hasattr(m, "log_time") else None, m.data["people"])
            for m in log["/pedestrians"]]


def test_a_pipelined_trial_gives_the_same_bytes_twice_and_its_people_walk(tmp_path):
    (tmp_path / "east.py").write_text(EAST)
    trial = Trial(tmp_path / "east.py", map="arcade", crowd="weekday", crowd_scale=3.0, start=(-18, 0, 0), seed=2,
                  duration=6, crowd_pipeline=True)
    first, second = trial.run(tmp_path / "a"), trial.run(tmp_path / "b")
    assert first.ok and second.ok, (first.error, second.error)
    for name in ("trial.mcap", "metrics.json", "topdown.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    people = [p for _, p in _people(tmp_path / "a" / "trial.mcap")]
    assert any(people), "the crowd's people are in the world"
    moved = {}
    for frame in people:
        for person in frame:
            moved.setdefault(person["id"], []).append((person["x"], person["y"]))
    assert any(abs(xy[-1][0] - xy[0][0]) + abs(xy[-1][1] - xy[0][1]) > 0.5 for xy in moved.values()), \
        "the intents the pipelined crowd sends move people"


def test_pipelined_and_lockstep_start_alike_and_then_differ_by_the_lag(tmp_path):
    """The crowd's clock stays on the world's: a person the crowd lets in at crowd time t appears in the world at
    t in both modes, where and as the crowd placed them. Afterwards the pipelined world applies intents computed
    from states one tick older, so the walks differ slightly (both deterministic)."""
    (tmp_path / "east.py").write_text(EAST)
    base = dict(map="arcade", crowd="weekday", crowd_scale=3.0, start=(-18, 0, 0), seed=2, duration=4)
    lock = Trial(tmp_path / "east.py", **base).run(tmp_path / "lock")
    pipe = Trial(tmp_path / "east.py", crowd_pipeline=True, **base).run(tmp_path / "pipe")
    assert lock.ok and pipe.ok, (lock.error, pipe.error)
    a, b = _people(tmp_path / "lock" / "trial.mcap"), _people(tmp_path / "pipe" / "trial.mcap")
    first_a = next(i for i, (_, people) in enumerate(a) if people)
    first_b = next(i for i, (_, people) in enumerate(b) if people)
    assert first_a == first_b, "the first person appears at the same world time"
    assert a[first_a][1] == b[first_b][1], "where and as the crowd placed them"
    later = [(x, y) for (_, x), (_, y) in zip(a[first_a + 1:], b[first_b + 1:]) if x and y]
    assert later and any(x != y for x, y in later), "later ticks apply answers to one-tick-older states"
    for x, y in later:  # the same people, close to each other: a lag, not another crowd
        assert [p["id"] for p in x] == [p["id"] for p in y]
        assert max(abs(p["x"] - q["x"]) + abs(p["y"] - q["y"]) for p, q in zip(x, y)) < 0.5
