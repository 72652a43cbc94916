"""Scripts (the crowd-simulation reference's script language): its child scene reproduced, every command, every
malformed line with its line and column, nothing run after an error, determinism, and ``hil crowd`` as a subprocess.
"""
from __future__ import annotations

import json
import math
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import hil_command
from crowd_helpers import angle_deg, hall_map

from hil.crowd.cli import main as crowd_main
from hil.crowd.maps import load_crowd_map
from hil.crowd.population import load_rates, parse_start
from hil.crowd.record import TrajectoryRecorder
from hil.crowd.script import Scenario, ScriptError, load_script, parse
from hil.crowd.sim import CrowdSim

ARCADE = load_crowd_map("arcade")
HALL = hall_map()
CHILD = load_rates("weekday").person_types["child"]
SUBPROCESS_TIMEOUT_S = 60


def scenario(crowd_map=HALL, **kwargs) -> tuple[CrowdSim, Scenario]:
    sim = CrowdSim(crowd_map, seed=0)
    return sim, Scenario(sim, **kwargs)


# --------------------------------------------------------------------------------------------- the child scene
def test_the_staged_child_walks_waits_then_interacts_at_dstop():
    script = load_script("child_interacts")
    assert [c.op for c in script.commands] == ["robot", "run", "spawn", "place", "move", "wait", "move",
                                               "objective", "run"]
    sim, sc = scenario(ARCADE)
    rec = TrajectoryRecorder(sim)
    sim.hooks.append(rec)
    seen: dict[int, dict] = {}

    def after(cmd) -> None:  # the state after each line, as the reference's script reports it
        row = sim.agents.row(sc.ids["kid"]) if "kid" in sc.ids else None
        seen[cmd.line] = {"t": sim.time_s, "n": len(sim.agents), "op": cmd.op,
                          "pos": sim.agents.pos[row].copy() if row is not None else None}

    sc.run_script(script, on_line=after)
    by_op = [(v["op"], v) for _, v in sorted(seen.items())]
    robot = np.array([7.0, 0.0])
    assert (sim.robot.x, sim.robot.y, sim.robot.yaw) == pytest.approx((7.0, 0.0, 3.1416))
    run1, spawn, place, move1, wait, move2, objective, run2 = [v for _, v in by_op[1:]]
    # 1. run 5s: five seconds of simulated time, nobody there (a script starts with generation off)
    assert run1["t"] == pytest.approx(5.0) and run1["n"] == 0
    # 2. spawn kid = boy02 at west_gate: a child at the gate, regardless of the rates (no time passes)
    assert spawn["t"] == pytest.approx(5.0) and spawn["n"] == 1
    assert spawn["pos"] == pytest.approx(ARCADE.point("west_gate"))
    kid = sim.agents.row(sc.ids["kid"])
    assert sim.agents.types[kid] == "boy02"
    assert (sim.agents.radius[kid], sim.agents.v0[kid]) == pytest.approx((CHILD.radius.mean, CHILD.speed.mean))
    # 3. place kid -18 -5
    assert place["pos"] == pytest.approx([-18.0, -5.0])
    # 4-5. move to the plaza, wait until arrived: the time the walk takes at a child's pace
    plaza = np.array(ARCADE.point("plaza"))
    route = [(-18.0, -5.0), *ARCADE.route((-18.0, -5.0), "plaza")]
    length = sum(math.dist(a, b) for a, b in zip(route, route[1:]))
    walked = wait["t"] - move1["t"]
    print(f"child scene: walk to the plaza {length:.1f} m in {walked:.1f} s "
          f"(straight at v0: {length / CHILD.speed.mean:.1f} s)")
    # lower bound 0.85: people cut the corners of the waypoint polyline (they pass a waypoint within 2 m)
    assert 0.85 * length / CHILD.speed.mean <= walked <= 1.25 * length / CHILD.speed.mean + 2.0
    assert np.hypot(*(wait["pos"] - plaza)) <= 0.25
    # 6-7. move kid to robot; objective kid interact Dstop=0.6 (no time passes)
    assert move2["t"] == objective["t"] == wait["t"]
    # 8. run 5min: the run ends at the last line, 300 s later
    assert run2["t"] == pytest.approx(wait["t"] + 300.0)
    track = rec.agents[sc.ids["kid"]]["samples"]
    t = np.array([s[0] for s in track])
    pos = np.array([s[1:3] for s in track])
    gaze = np.array([s[5:7] for s in track])
    dist = np.hypot(*(pos - robot).T)
    at_dstop = np.flatnonzero((t > wait["t"]) & (np.abs(dist - 0.6) < 0.02))
    reached = t[at_dstop[0]]
    print(f"child scene: at Dstop {reached - wait['t']:.1f} s after leaving the plaza "
          f"({math.dist(plaza, robot):.1f} m away); final distance {dist[-1]:.4f} m")
    assert reached - wait["t"] <= (math.dist(plaza, robot) - 0.6) / CHILD.speed.mean + 15.0
    after_reach = t >= reached
    assert np.abs(dist[after_reach] - 0.6).max() < 0.02  # stays at Dstop (2 cm) to the end
    assert dist.min() >= 0.3 + CHILD.radius.mean - 1e-6  # never into the robot
    for g, p in zip(gaze[after_reach], pos[after_reach]):
        assert angle_deg(g, robot - p) < 2.0  # facing the robot
    assert sc.objectives.objective_of(sc.ids["kid"]).params["Dstop"] == 0.6


# ------------------------------------------------------------------------------------------ every command
def test_run_counts_simulated_time_in_ms_s_min_and_h():
    sim, sc = scenario()
    sc.run_script("run 2500ms\nrun 1.5s\nrun .5min")
    assert sim.time_s == pytest.approx(34.0)
    assert parse("run 1h").commands[0].args["duration_s"] == 3600.0


def test_spawn_at_a_place_or_a_point_and_place():
    sim, sc = scenario()
    sc.run_script(textwrap.dedent("""
        spawn a = woman01 at east
        spawn b=oldman02 at -3.5 2     # '=' needs no spaces
        spawn c = adult_man at 0 0
        place c 4 -3
    """))
    rows = {n: sim.agents.row(i) for n, i in sc.ids.items()}
    assert sim.agents.pos[rows["a"]] == pytest.approx(HALL.point("east"))
    assert sim.agents.pos[rows["b"]] == pytest.approx([-3.5, 2.0])
    assert sim.agents.pos[rows["c"]] == pytest.approx([4.0, -3.0])
    types = load_rates("weekday").person_types
    assert sim.agents.v0[rows["a"]] == pytest.approx(types["adult_woman"].speed.mean)
    assert sim.agents.v0[rows["b"]] == pytest.approx(types["elderly"].speed.mean)
    assert sim.agents.names == ["a", "b", "c"] and not any(sim.agents.exit_on_arrival)


def test_move_to_a_place_a_point_and_the_robot_and_wait_arrived():
    sim, sc = scenario()
    sc.run_script(textwrap.dedent("""
        robot 5 5
        spawn p = man01 at 0 0
        move p to east
        wait p arrived
    """))
    p = sim.agents.row(sc.ids["p"])
    assert np.hypot(*(sim.agents.pos[p] - HALL.point("east"))) < 0.25
    assert 12.0 / 1.38 <= sim.time_s <= 12.0 / 1.38 + 3.0
    sc.run_script("move p to -2 -4\nwait p arrived timeout 30s")
    assert np.hypot(*(sim.agents.pos[p] - (-2.0, -4.0))) < 0.25
    sc.run_script("move p to robot\nwait p arrived")
    gap = np.hypot(*(sim.agents.pos[p] - (5.0, 5.0))) - 0.3 - sim.agents.radius[p]
    assert 0.0 <= gap < 0.45  # the robot is solid: he walks up to it


def test_objective_generate_and_robot_commands():
    sim = CrowdSim(ARCADE, seed=2)
    sc = Scenario(sim, rates=load_rates("weekday"), start_s=parse_start("mon 12:00"), generate=True)
    sc.run_script("run 60s")  # a script starts with generation off, whatever the scenario was built with
    assert len(sim.agents) == 0 and not sc.objectives.stochastic
    sc.run_script("robot -3 0 1.5\ngenerate on\nrun 60s")
    assert (sim.robot.x, sim.robot.y, sim.robot.yaw) == (-3.0, 0.0, 1.5)
    assert sc.generator.parties and sc.objectives.stochastic
    count = len(sc.generator.parties)
    sc.run_script("run 60s")  # a new script: off again
    assert len(sc.generator.parties) == count
    sc.run_script("generate on\nrun 30s\ngenerate off\nrun 60s")
    assert all(p.time_s <= 210.0 + 1e-9 for p in sc.generator.parties[count:])
    sc.run_script("spawn kid = girl03 at plaza\nobjective kid observe Dobserve=2.5 speed_factor=0.5")
    assert sc.objectives.armed[sc.ids["kid"]] == "observe"
    assert sc.objectives.custom[sc.ids["kid"]]["observe"] == {"Dobserve": 2.5, "speed_factor": 0.5}


def test_comments_and_blank_lines_are_ignored():
    script = parse("# header\n\n   \nrun 1s   # trailing\n#run 5s\n")
    assert [(c.op, c.line) for c in script.commands] == [("run", 4)]


# ---------------------------------------------------------------------------------------------- bad lines
BAD_LINES = [
    ("jump kid", 1, "unknown command 'jump'"),
    ("run", 4, "missing a duration"),
    ("run 5", 5, "'5' needs a unit"),
    ("run 5sec", 6, "unknown time unit 'sec'"),
    ("run fast", 5, "'fast' is not a duration"),
    ("spawn 1kid = boy02 at west", 7, "'1kid' is not a name"),
    ("spawn robot = boy02 at west", 7, "'robot' is a reserved word"),
    ("spawn kid boy02 at west", 11, "expected '=', found 'boy02'"),
    ("spawn kid = boy02 west", 19, "expected 'at', found 'west'"),
    ("spawn kid = boy02 at", 21, "missing a place, 'robot' or X Y"),
    ("spawn kid = boy02 at robot", 22, "not at the robot"),
    ("spawn kid = boy02 at 3", 23, "missing y"),
    ("place kid 3.0", 14, "missing y"),
    ("place kid 3.0 abc", 15, "y: 'abc' is not a number"),
    ("place kid inf 0", 11, "'inf' is not a finite number"),
    ("place kid 3.0 12.5 7", 20, "unexpected '7'"),
    ("move kid plaza", 10, "expected 'to', found 'plaza'"),
    ("move kid to", 12, "missing a place"),
    ("move kid to 3..5 1", 13, "'3..5' is not a place name"),
    ("wait kid", 9, "missing 'arrived'"),
    ("wait kid arrived soon", 18, "expected 'timeout', found 'soon'"),
    ("wait kid arrived timeout", 25, "missing a duration"),
    ("objective kid dance", 15, "unknown objective 'dance'"),
    ("objective kid interact Dstp=0.6", 24, "no parameter 'Dstp' (its parameters: Dstop, speed_factor, duration_s)"),
    ("objective kid interact Dstop 0.6", 30, "expected '=' after 'Dstop', found '0.6'"),
    ("objective kid interact Dstop=", 30, "missing value of Dstop"),
    ("objective kid interact Dstop=near", 30, "value of Dstop: 'near' is not a number"),
    ("objective kid interact Dstop=-1", 30, "Dstop must not be negative"),
    ("objective kid interact Dstop=0.6 Dstop=0.7", 34, "Dstop is given twice"),
    ("objective kid pass_by speed=1", 23, "no parameter 'speed' (its parameters: none)"),
    ("generate maybe", 10, "generate takes 'on' or 'off'"),
    ("generate", 9, "missing 'on' or 'off'"),
    ("robot 1", 8, "missing y"),
    ("robot 1 2 north", 11, "yaw (rad): 'north' is not a number"),
]


@pytest.mark.parametrize("text, column, phrase", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_every_malformed_line_names_its_line_and_column(text, column, phrase):
    script = f"# a script\nrun 1s\n  {text}   # the bad one\nrun 1s\n"
    with pytest.raises(ScriptError) as err:
        parse(script, "t.scn")
    e = err.value
    assert (e.line, e.column) == (3, column + 2), str(e)  # +2: the line is indented by two spaces
    assert phrase in e.message
    assert str(e).startswith(f"t.scn:3:{column + 2}: ")


CHECK_ERRORS = [
    ("move kid to east", 2, 6, "no person named 'kid' has been spawned before this line"),
    ("spawn kid = boy02 at nowhere\n", 2, 22, "has no place, node, entrance or plaza 'nowhere'"),
    ("spawn kid = dragon01 at east", 2, 13, "unknown person model 'dragon01'"),
    ("spawn kid = boy02 at east\nspawn kid = girl01 at east", 3, 7, "'kid' is already spawned (line 2)"),
    ("spawn kid = boy02 at east\nmove kid to nowhere", 3, 13, "'nowhere'"),
    ("generate on", 2, 10, "no rates file is loaded"),
]


@pytest.mark.parametrize("text, line, column, phrase", CHECK_ERRORS, ids=[c[0] for c in CHECK_ERRORS])
def test_names_places_and_models_are_checked_before_anything_runs(text, line, column, phrase):
    sim, sc = scenario()
    with pytest.raises(ScriptError) as err:
        sc.run_script(f"run 10s\n{text}\nrun 10s", "t.scn")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert phrase in err.value.message
    assert sim.time_s == 0.0 and len(sim.agents) == 0  # not even the first line ran


def test_a_parse_error_anywhere_means_nothing_runs():
    sim, sc = scenario()
    with pytest.raises(ScriptError, match=r"^s\.scn:5:5: 'ten' is not a duration"):
        sc.run_script("robot 0 0\nrun 5s\nspawn a = boy01 at east\nmove a to west\nrun ten", "s.scn")
    assert sim.time_s == 0.0 and len(sim.agents) == 0 and sim.robot is None


def test_a_runtime_error_names_its_line_and_stops_the_script_there():
    sim, sc = scenario()
    with pytest.raises(ScriptError) as err:
        sc.run_script("spawn a = boy01 at west\nmove a to east\nwait a arrived timeout 3s\nspawn b = boy02 at east",
                      "r.scn")
    assert str(err.value) == "r.scn:3: wait: a did not arrive within 3 s of simulated time"
    assert sim.time_s == pytest.approx(3.0)
    assert "b" not in sc.ids and len(sim.agents) == 1  # line 4 never ran
    sim2, sc2 = scenario()
    with pytest.raises(ScriptError, match=r"^r\.scn:2: move: there is no robot yet"):
        sc2.run_script("spawn a = boy01 at west\nmove a to robot\nrun 1s", "r.scn")
    assert sim2.time_s == 0.0


def test_python_api_matches_the_script():
    """The same operations from Python give the same trajectory as the script lines."""
    def via_script():
        sim, sc = scenario()
        sc.run_script("robot 0 0 3.1416\nspawn kid = boy02 at west\nmove kid to east\n"
                      "objective kid interact Dstop=0.7\nrun 20s")
        return sim.agents.pos.copy()

    def via_python():
        sim, sc = scenario()
        sc.robot(0.0, 0.0, 3.1416)
        sc.spawn("kid", "boy02", at="west")
        sc.move("kid", "east")
        sc.objective("kid", "interact", Dstop=0.7)
        sc.run(20.0)
        return sim.agents.pos.copy()

    a, b = via_script(), via_python()
    assert np.array_equal(a, b)
    assert np.hypot(*a[0]) == pytest.approx(0.7, abs=0.02)


# --------------------------------------------------------------------------------------------- determinism
def _cli_json(tmp_path: Path, name: str, *args: str) -> bytes:
    out = tmp_path / name
    assert crowd_main(["--map", "arcade", "--json", str(out), *args]) == 0
    return out.read_bytes()


def test_same_seed_same_trajectories_json(tmp_path):
    args = ("--robot=-3,0", "--start", "sat 15:00", "--duration", "40")
    a = _cli_json(tmp_path, "a.json", "--seed", "5", *args)
    b = _cli_json(tmp_path, "b.json", "--seed", "5", *args)
    c = _cli_json(tmp_path, "c.json", "--seed", "6", *args)
    assert a == b
    assert a != c
    doc = json.loads(a)
    assert doc["format"] == "hil.crowd.trajectories/1" and doc["seed"] == 5
    assert doc["summary"]["people_appeared"] > 0 and len(doc["agents"]) == doc["summary"]["people_appeared"]
    s1 = json.loads(_cli_json(tmp_path, "s1.json", "--script", "child_interacts"))
    s2 = json.loads(_cli_json(tmp_path, "s2.json", "--script", "child_interacts", "--seed", "99"))
    assert s1["agents"] == s2["agents"] and s1["seed"] != s2["seed"]  # a script is exact whatever the seed


# -------------------------------------------------------------------------------------------------- the CLI
def _hil(*args: str, timeout: float = SUBPROCESS_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([*hil_command(), "crowd", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_hil_crowd_subprocess_writes_trajectories(tmp_path):
    out = tmp_path / "child_interacts.json"
    done = _hil("--map", "arcade", "--script", "child_interacts", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 scripted" in done.stdout and str(out) in done.stdout
    doc = json.loads(out.read_text())
    (kid,) = doc["agents"]
    assert kid["name"] == "kid" and kid["type"] == "boy02"
    last = kid["samples"][-1]
    assert last[0] == pytest.approx(doc["summary"]["simulated_s"])
    assert math.dist(last[1:3], (7.0, 0.0)) == pytest.approx(0.6, abs=0.02)
    assert doc["robot"][-1][1:] == pytest.approx([7.0, 0.0, 3.1416])


def test_hil_crowd_objectives_lists_the_registry():
    done = _hil("objectives")
    assert done.returncode == 0, done.stderr
    for name in ("interact", "observe", "pass_by", "slow_look", "regular", "impassive", "surprised", "curious",
                 "scared", "threatening"):
        assert f"\n{name}: " in "\n" + done.stdout
    assert "    Dstop = 0.9" in done.stdout
    listed = json.loads(_hil("objectives", "--format", "json").stdout)
    assert {i["name"] for i in listed} >= {"interact", "threatening"}




def test_hil_crowd_reports_a_bad_script_with_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.scn"
    bad.write_text("run 1s\nspawn kid = boy02 at west_gate\nobjective kid interact Dstop=0.6 color=3\n")
    out = tmp_path / "never.json"
    done = _hil("--map", "arcade", "--script", str(bad), "--json", str(out))
    assert done.returncode == 2
    assert f"{bad}:3:34: objective 'interact' has no parameter 'color'" in done.stderr
    assert not out.exists()  # nothing ran, nothing written
    done = _hil("--map", "nowhere")
    assert done.returncode == 2 and "no map of that name" in done.stderr


def test_a_script_failing_while_running_still_writes_what_was_simulated(tmp_path, capsys):
    scn = tmp_path / "late.scn"
    scn.write_text("robot 7 0\nspawn kid = boy02 at west_gate\nmove kid to east_gate\nwait kid arrived timeout 4s\n"
                   "run 10s\n")
    out = tmp_path / "late.json"
    assert crowd_main(["--map", "arcade", "--script", str(scn), "--json", str(out)]) == 2
    assert f"{scn}:4: wait: kid did not arrive within 4 s" in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["summary"]["error"].startswith(f"{scn}:4:")
    assert doc["summary"]["simulated_s"] == pytest.approx(4.0)  # line 5 never ran
    assert doc["agents"][0]["samples"][-1][0] == pytest.approx(4.0)


# --- the robot in scripts ------------------------------------------------------------------------------------
WAITS_FOR_ROBOT = "spawn kid = boy02 at 0 0\nwait robot timeout 5s\nmove kid to robot\nrun 3s\n"


def test_move_to_robot_before_there_is_one_fails_naming_its_line():
    with pytest.raises(ScriptError, match=r"^a\.scn:2: move: there is no robot yet .*'wait robot'"):
        Scenario(CrowdSim(ARCADE, seed=0)).run_script("spawn kid = boy02 at 0 0\nmove kid to robot\n", "a.scn")


def test_wait_robot_waits_for_the_worlds_first_pose_then_the_line_that_needs_it_runs():
    sim = CrowdSim(ARCADE, seed=0)
    lines = Scenario(sim).play(WAITS_FOR_ROBOT, "w.scn", world_robot=True)  # served: the world sends the robot
    for _ in range(10):
        assert next(lines).op == "wait"
        sim.step()
    assert np.allclose(sim.agents.vel[0], 0.0), "the person stands while the robot is unknown"
    sim.set_robot(3.0, 0.0)  # what the first world message does
    for _ in range(5):
        next(lines)
        sim.step()
    assert sim.agents.vel[0][0] < -0.3 or sim.agents.vel[0][0] > 0.3, "it walks to the robot once it is known"


def test_wait_robot_times_out_with_its_line_and_standalone_it_fails_at_once():
    sim = CrowdSim(ARCADE, seed=0)
    with pytest.raises(ScriptError, match=r"^w\.scn:2: wait: no robot pose came within 5 s"):
        for _ in Scenario(sim).play(WAITS_FOR_ROBOT, "w.scn", world_robot=True):
            sim.step()
    with pytest.raises(ScriptError, match=r"^w\.scn:2: wait: a standalone crowd has no world"):
        Scenario(CrowdSim(ARCADE, seed=0)).run_script(WAITS_FOR_ROBOT, "w.scn")
    with_robot = Scenario(CrowdSim(ARCADE, seed=0))
    with_robot.run_script("robot 3 0\n" + WAITS_FOR_ROBOT, "w.scn")  # a robot line satisfies it standalone
