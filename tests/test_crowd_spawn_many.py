"""Crowds placed by one script line (``spawn N MODEL at WHERE spread LENGTH [as group G]``), people named by prefix
(``crowd*``), and ``end``: placements that do not overlap, fixed by the seed; bad input named by file:line; a real
trial that ends at its script's ``end`` line.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from hil.crowd.maps import load_crowd_map
from hil.crowd.population import DEFAULT_TYPES
from hil.crowd.script import Scenario, ScriptError, end_time_s, parse
from hil.crowd.sim import CrowdSim
from hil.trial import Trial
from hil.trial.record import read_log

ARCADE = load_crowd_map("arcade")
FOUNTAIN = (0.0, -2.8)  # the arcade's place in front of the fountain's basin (a 3 x 3 m block of walls at 0, 0)
ROBOT = (1.0, -4.0, 0.3)  # x, y, radius
ADULT_R = DEFAULT_TYPES["adult_man"].radius.mean
CROWD_40 = "robot 1.0 -4.0\nspawn bystander = woman01 at -1.0 -3.5\nspawn 40 adult_man at fountain spread 3m\n"


def play(text, seed: int = 0, source: str = "t.scn") -> tuple[CrowdSim, Scenario]:
    sim = CrowdSim(ARCADE, seed=seed)
    sc = Scenario(sim)
    sc.run_script(text, source)
    return sim, sc


def wall_distance(points: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest wall centre line, computed here from the map's wall list."""
    best = np.full(len(points), np.inf)
    for wall in ARCADE.walls:
        a, b = np.array(wall.start), np.array(wall.end)
        t = np.clip((points - a) @ (b - a) / ((b - a) @ (b - a)), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(points - (a + t[:, None] * (b - a)), axis=1))
    return best


def crowd_positions(sim: CrowdSim, sc: Scenario, prefix: str = "crowd") -> np.ndarray:
    return np.array([sim.agents.pos[sim.row(sc.ids[f"{prefix}{k}"])] for k in range(1, 41)])


def test_one_line_places_40_people_apart_inside_the_spread_and_off_walls_robot_and_bystander():
    sim, sc = play(CROWD_40)
    assert [name for name in sc.ids if name != "bystander"] == [f"crowd{k}" for k in range(1, 41)]
    pos = crowd_positions(sim, sc)
    gaps = np.linalg.norm(pos[:, None] - pos[None], axis=2) + np.eye(40) * 1e9
    assert gaps.min() >= 2 * ADULT_R, "two bodies overlap"
    assert np.linalg.norm(pos - FOUNTAIN, axis=1).max() <= 3.0
    assert np.linalg.norm(pos - ROBOT[:2], axis=1).min() >= ROBOT[2] + ADULT_R
    bystander = sim.agents.pos[sim.row(sc.ids["bystander"])]
    assert np.linalg.norm(pos - bystander, axis=1).min() >= ADULT_R + sim.agents.radius[sim.row(sc.ids["bystander"])]
    assert wall_distance(pos).min() >= 0.1 + ADULT_R  # half the walls' 0.2 m thickness + a body
    inside_basin = (np.abs(pos[:, 0]) < 1.5) & (np.abs(pos[:, 1]) < 1.5)
    assert not inside_basin.any(), "someone was put inside the fountain's walls"
    assert (np.linalg.norm(pos - FOUNTAIN, axis=1) > 1.5).sum() >= 10, "the spread covers its disc, not a clump"


def test_the_seed_fixes_the_placement_and_another_seed_changes_it():
    a = crowd_positions(*play(CROWD_40, seed=4))
    b = crowd_positions(*play(CROWD_40, seed=4))
    c = crowd_positions(*play(CROWD_40, seed=5))
    assert np.array_equal(a, b)
    assert np.linalg.norm(a - c, axis=1).min() > 1e-6  # every one of the 40 is somewhere else


def test_groups_are_named_by_their_prefix_and_numbers_go_on():
    sim, sc = play("spawn 3 child at kiosk spread 2m as group kids\nspawn 2 adult_woman at plaza spread 2m\n"
                   "spawn 2 adult_man at plaza spread 2m\nspawn 2 child at kiosk spread 2m as group kids\n")
    assert list(sc.ids) == ["kids1", "kids2", "kids3", "crowd1", "crowd2", "crowd3", "crowd4", "kids4", "kids5"]
    groups = {name: int(sim.agents.group[sim.row(i)]) for name, i in sc.ids.items()}
    assert len({groups[f"kids{k}"] for k in range(1, 6)}) == 1 and groups["kids1"] >= 0  # one walking group
    assert all(groups[f"crowd{k}"] == -1 for k in range(1, 5))  # people spawned by number alone walk alone


def test_a_prefix_names_everyone_it_starts_in_move_objective_and_wait():
    sim, sc = play("robot 8 0\nspawn 6 adult_man at plaza spread 2m\nspawn 2 child at kiosk spread 1.5m as group G\n"
                   "spawn w1 = man01 at plaza\nspawn w2 = woman01 at shop_a\nmove crowd* to east_hall\n"
                   "objective G* observe\nmove w1 to fountain\nmove w2 to kiosk\nwait w* arrived timeout 2min\n")
    east = ARCADE.point("east_hall")
    for k in range(1, 7):
        assert sim.agents.routes[sim.row(sc.ids[f"crowd{k}"])][-1] == pytest.approx(east)
    manager = sc.objectives
    assert {i for i in manager.decided} == {sc.ids["G1"], sc.ids["G2"]}
    for name, place in (("w1", "fountain"), ("w2", "kiosk")):
        assert math.dist(sim.agents.pos[sim.row(sc.ids[name])], ARCADE.point(place)) < 0.5


def test_a_spawn_that_does_not_fit_names_its_line_and_how_many_fit_and_spawns_nobody():
    sim = CrowdSim(ARCADE, seed=0)
    sc = Scenario(sim)
    with pytest.raises(ScriptError) as err:
        sc.run_script("spawn a = man01 at plaza\nrun 1s\nspawn 60 adult_man at kiosk spread 1m\nrun 1s\n", "big.scn")
    match = re.match(r"^big\.scn:3: spawn: only (\d+) of 60 people fit within 1 m of kiosk \(clear of the walls and "
                     r"the 1 people already there\); nobody was spawned", str(err.value))
    assert match, str(err.value)
    # discs of ADULT_R inside a disc of 1 m + ADULT_R: at most the area ratio of them can ever fit
    assert 1 <= int(match[1]) <= ((1.0 + ADULT_R) / ADULT_R) ** 2
    assert list(sc.ids) == ["a"] and len(sim.agents) == 1 and sim.time_s == pytest.approx(1.0)


CHECK_ERRORS = [
    ("spawn 3 adult_man at plaza spread 1m\nmove crew* to east_hall", 3, 6, "crew* matches no one spawned before this "
                                                                       "line (spawned: crowd1, crowd2, crowd3)"),
    ("objective nobody* observe", 2, 11, "nobody* matches no one"),
    ("wait crowd* arrived", 2, 6, "crowd* matches no one"),
    ("spawn 3 adult_man at plaza spread 1m\nplace crowd* 1 1", 3, 7, "place puts one person on a point, and crowd* "
                                                                    "names 3 (crowd1, crowd2, crowd3)"),
    ("spawn 3 dragon at plaza spread 1m", 2, 9, "unknown person model 'dragon'"),
    ("spawn 3 adult_man at nowhere spread 1m", 2, 22, "no place, node, entrance or plaza 'nowhere'"),
    ("end\nrun 1s", 3, 1, "this line would never run: the script ends at line 2 ('end')"),
]


@pytest.mark.parametrize("text, line, column, phrase", CHECK_ERRORS, ids=[c[0] for c in CHECK_ERRORS])
def test_prefixes_and_spawns_are_checked_before_anything_runs(text, line, column, phrase):
    sim = CrowdSim(ARCADE, seed=0)
    with pytest.raises(ScriptError) as err:
        Scenario(sim).run_script(f"run 1s\n{text}\nrun 1s", "c.scn")
    assert (err.value.source, err.value.line, err.value.column) == ("c.scn", line, column), str(err.value)
    assert phrase in err.value.message
    assert sim.time_s == 0.0 and len(sim.agents) == 0


BAD_LINES = [
    ("spawn 0 adult_man at plaza spread 1m", 7, "'0': spawn takes a whole number of people from 1 to"),
    ("spawn 2.5 adult_man at plaza spread 1m", 7, "'2.5': spawn takes a whole number"),
    ("spawn 4 adult_man at plaza", 27, "missing 'spread'"),
    ("spawn 4 adult_man at plaza spread 3", 35, "'3' is not a length: write e.g. 3m"),
    ("spawn 4 adult_man at plaza spread 0m", 35, "a spread is more than 0 m"),
    ("spawn 4 adult_man at plaza spread 3m as G", 41, "expected 'group', found 'G'"),
    ("spawn 4 adult_man at plaza spread 3m as group robot", 47, "'robot' is a reserved word"),
    ("move crowd** to east", 6, "'crowd**' is not a name prefix"),
    ("move cr*wd to east", 6, "'cr*wd' is not a name"),
    ("end now", 5, "unexpected 'now'"),
]


@pytest.mark.parametrize("text, column, phrase", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_every_malformed_new_line_names_its_line_and_column(text, column, phrase):
    with pytest.raises(ScriptError) as err:
        parse(f"run 1s\n{text}\n", "b.scn")
    assert str(err.value).startswith(f"b.scn:2:{column}: "), str(err.value)
    assert phrase in err.value.message


def test_end_stops_the_script_at_its_time_and_its_time_is_known_when_only_runs_come_before():
    sim, sc = play("spawn 2 adult_man at plaza spread 1m\nrun 2500ms\nend\n")
    assert sim.time_s == pytest.approx(2.5) and sc.ended_at == pytest.approx(2.5)
    assert end_time_s(parse("run 2s\nspawn a = man01 at plaza\nrun 1500ms\nend"), 0.1) == pytest.approx(3.5)
    assert end_time_s(parse("spawn a = man01 at plaza\nmove a to east\nwait a arrived\nend"), 0.1) is None
    assert end_time_s(parse("run 2s"), 0.1) is None


# ------------------------------------------------------------------------------------------- a real trial
def _stand_still(robot):
    for _ in robot.loop(hz=20):
        pass


def _trial(tmp_path, name: str, script: str):
    scn = tmp_path / f"{name}.scn"
    scn.write_text(script)
    result = Trial(_stand_still, robot="commbot", map="lab", scenario=str(scn), start=(-2.5, 0.0, 0.0),
                   duration=30.0, seed=0).run(tmp_path / name)
    assert result.ok, result.summary_line()
    return result, read_log(tmp_path / name / "trial.mcap").messages


def test_a_trial_ends_at_its_scripts_end_line(tmp_path):
    result, log = _trial(tmp_path, "timed", "spawn 12 adult_man at centre spread 2m\nrun 3s\nend\n")
    assert result.stopped == "script_end" and result.sim_s == pytest.approx(3.0)
    last = log["/clock"][-1].data["t"]
    assert 2.9 < last <= 3.0 + 1e-9  # the last 20 Hz cycle before 3 s; the run's 30 s never came
    people = log["/pedestrians"][-1].data["people"]
    assert sorted(p["name"] for p in people) == sorted(f"crowd{k}" for k in range(1, 13))
    first = next(m.data["people"] for m in log["/pedestrians"] if m.data["people"])
    xy = np.array([[p["x"], p["y"]] for p in first])
    assert len(xy) == 12
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=2) + np.eye(12) * 1e9
    assert gaps.min() >= 2 * ADULT_R - 0.02  # apart from the start, in the physics world too

    # after a wait the time is known only when the line runs: the run ends once the world hears of it
    result, log = _trial(tmp_path, "waited", "spawn 3 adult_man at centre spread 1m\nmove crowd1 to 1.5 1.5\n"
                                             "wait crowd1 arrived\nend\n")
    ends = [m.data for m in log["/crowd/script"] if m.data.get("text") == "end"]
    assert len(ends) == 1 and result.stopped == "script_end"
    period, cycle = 0.1, 0.05  # the crowd's tick, the controller's cycle
    assert ends[0]["t"] <= log["/clock"][-1].data["t"] <= ends[0]["t"] + period + cycle + 1e-9
    assert result.sim_s < 30.0 / 2


def test_the_shipped_plaza_crowd_scene_plays_to_its_end():
    from hil.crowd.script import load_script

    sim, sc = play(load_script("plaza_crowd"))
    assert len(sc.ids) == 46 and len(sim.agents) == 46
    assert sc.ended_at == pytest.approx(60.0) and sim.time_s == pytest.approx(60.0)
    fountain = np.array(ARCADE.point("fountain"))
    near = [math.dist(sim.agents.pos[sim.row(sc.ids[f"class{k}"])], fountain) for k in range(1, 7)]
    assert max(near) < 3.0, near  # the class walked from the middle passage to the fountain, together
