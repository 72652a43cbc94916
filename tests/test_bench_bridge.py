"""bench/bridge.py at tiny sizes: the functions run end to end (real sockets, server subprocesses, a real trial,
real pybullet) and return sane structured results. No timing is judged here: the benchmark reports, it never
asserts, and neither do these tests on wall-clock figures."""
from __future__ import annotations

import math

from bench.bridge import BareWorld, bridge_section, messages, trial_section


def test_tick_sides_move_the_same_bytes_and_count_their_ticks():
    lines: list[str] = []
    result = bridge_section(people=3, ticks=5, rounds=2, full_ticks=4, out=lines.append)
    request, reply = messages(3)
    assert (result["request_bytes"], result["reply_bytes"]) == (len(request), len(reply))
    raw, codec = result["seen"]["raw"], result["seen"]["codec"]
    assert (raw["request_bytes"], raw["reply_bytes"]) == (len(request), len(reply)), "raw: the bytes of a 3-person tick"
    assert (codec["request_bytes"], codec["reply_bytes"]) == (raw["request_bytes"], raw["reply_bytes"]), \
        "the bridge side moved exactly the raw side's bytes"
    warm = 300  # WARMUP_TICKS, every side
    assert result["ticks"] == {"raw": warm + 2 * 5, "codec": warm + 2 * 5, "full": warm + 2 * 4}
    assert result["agents"] == 3 and result["replied"] == {"codec": 3, "full": 3}
    for key in ("raw_us", "codec_us", "full_us", "crowd_us", "ratio"):
        assert result[key] > 0 and math.isfinite(result[key]), key
    assert all(v > 0 for v in result["codec_cpu_us"].values())
    typed = result["typed_decode"]
    assert typed["legacy_us"] > 0 and typed["typed_us"] > 0 and math.isfinite(typed["ratio"]) and typed["ratio"] > 0
    assert any("msgspec typed decode" in line for line in lines)
    assert any("target: bridge/raw <= 1.8x" in line for line in lines)


def test_trial_against_bare_pybullet_of_the_same_world():
    lines: list[str] = []
    result = trial_section(duration_s=2.0, rounds=1, seed=0, profile_s=1.0, out=lines.append)
    assert result["steps"] == 480 and result["crowd_ticks"] == 20
    assert result["walls"] == 36  # the arcade's
    assert result["capsules"] == round(result["mean_people"]) >= 0
    assert result["bare_bodies"] == 1 + result["walls"] + 1 + result["capsules"]  # floor, walls, robot, people
    for key in ("trial_rtf", "trial_loop_rtf", "bare_rtf", "ratio"):
        assert result[key] > 0 and math.isfinite(result[key]), key
    parts = dict(result["profile"])
    total = parts.pop("total")
    assert total > 0 and parts["physics (pybullet stepSimulation)"] > 0
    assert math.isclose(sum(parts.values()), total, rel_tol=1e-9)
    assert any("target: trial RTF >= 50% of bare" in line for line in lines)


def test_bare_world_holds_the_bodies_asked_for():
    bare = BareWorld(capsules=4)
    try:
        assert bare.capsules == 4 and bare.bodies == 1 + bare.walls + 1 + 4
        assert bare.run(10) > 0
    finally:
        bare.close()
