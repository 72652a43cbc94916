"""Objectives (the crowd-simulation reference's and HuNavSim's behaviours): each one measured in the sim.

Set-up: an open hall, a robot standing at the origin, one adult man (preferred speed 1.38 m/s, radius 0.24 m)
walking from x = -8 toward x = +12 along y = 0 with the objective armed; it takes over when the robot enters his
view (8 m, 200 degrees). Distances are centre to centre. Tolerances are stated at each assertion; all times are
simulated.
"""
from __future__ import annotations

import math
import os
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest
from crowd_helpers import angle_deg, chi2_critical, hall_map

from hil.crowd import objectives
from hil.crowd.agents import AgentSpec
from hil.crowd.objectives import Objective, ObjectiveConfig, ObjectiveManager, Situation
from hil.crowd.script import Scenario
from hil.crowd.sim import CrowdSim
from hil.devices.yaml_source import ConfigError, load_yaml_text

HALL = hall_map()
V0 = 1.38  # adult_man's mean preferred speed: scripted people take the mean


@dataclass
class Trace:
    t: np.ndarray
    pos: np.ndarray
    speed: np.ndarray
    dist: np.ndarray  # to the robot, centre to centre
    look: np.ndarray  # angle between the gaze and the direction to the robot (deg)
    gaze_vs_walk: np.ndarray  # angle between the gaze and the velocity (deg), NaN while standing
    active: list[str]

    def at(self, t: float) -> int:
        return int(np.argmin(abs(self.t - t)))


def trace(objective: str | None, params: dict | None = None, *, robot=(0.0, 0.0, math.pi), start=(-8.0, 0.0),
          goal=(12.0, 0.0), duration_s: float = 30.0) -> Trace:
    sim = CrowdSim(HALL, seed=0)
    sc = Scenario(sim)
    sc.robot(*robot)
    sc.spawn("p", "adult_man", at=start)
    sc.move("p", goal)
    if objective:
        sc.objective("p", objective, **(params or {}))
    rxy = np.array(robot[:2])
    rows = []
    for _ in range(int(round(duration_s / sim.dt))):
        sim.step()
        a = sim.agents
        p, v, g = a.pos[0].copy(), a.vel[0].copy(), a.gaze[0].copy()
        speed = float(np.hypot(*v))
        running = sc.objectives.objective_of(sc.ids["p"])
        rows.append((sim.time_s, p, speed, float(np.hypot(*(rxy - p))), angle_deg(g, rxy - p),
                     angle_deg(g, v) if speed > 0.2 else math.nan, running.name if running else "-"))
    t, pos, speed, dist, look, walk, active = zip(*rows)
    return Trace(np.array(t), np.array(pos), np.array(speed), np.array(dist), np.array(look), np.array(walk),
                 list(active))


# --------------------------------------------------------------------------------------- the crowd-simulation reference
@pytest.mark.parametrize("dstop", [0.6, 0.9, 1.5])
def test_interact_stops_at_dstop_facing_the_robot(dstop):
    tr = trace("interact", {"Dstop": dstop})
    assert tr.active[0] == "interact"  # the robot is in view at 8 m straight ahead: it takes over at once
    end = tr.t >= 20.0
    error = np.abs(tr.dist[end] - dstop).max()
    print(f"interact Dstop={dstop}: distance error {error * 1000:.3f} mm, gaze off the robot "
          f"{tr.look[end].max():.2f} deg, speed {tr.speed[end].max():.4f} m/s after 20 s")
    assert error < 0.02  # within 2 cm of Dstop
    assert tr.look[end].max() < 2.0  # facing the robot
    assert tr.speed[end].max() < 0.02  # standing
    assert tr.dist.min() > 0.54 - 1e-6  # never ran into the robot (0.3 + 0.24)
    assert tr.speed.max() <= V0 * 1.05  # approached at its own pace


def test_observe_stops_at_dobserve_and_watches():
    tr = trace("observe", {"Dobserve": 2.5})
    end = tr.t >= 20.0
    print(f"observe: distance error {np.abs(tr.dist[end] - 2.5).max() * 1000:.3f} mm")
    assert np.abs(tr.dist[end] - 2.5).max() < 0.02
    assert tr.look[end].max() < 2.0 and tr.speed[end].max() < 0.02


def test_a_robot_that_drives_away_is_let_go_not_trailed():
    """Interacting people keep their distance while the robot stands or comes closer; when it drives away for
    LEAVING_S they walk on instead of following it down the passage."""
    sim = CrowdSim(HALL, seed=0)
    sc = Scenario(sim)
    sc.robot(0.0, 0.0, math.pi)
    sc.spawn("p", "adult_man", at=(-8.0, 0.0))
    sc.move("p", (12.0, 0.0))
    sc.objective("p", "interact", Dstop=0.9)
    for _ in range(200):  # 20 s: it stands with the robot
        sim.step()
    agent = sc.ids["p"]
    assert sc.objectives.objective_of(agent).name == "interact"
    x = 0.0
    for k in range(25):  # the robot drives off east at 0.4 m/s for 2.5 s (< LEAVING_S): still interacting
        x += 0.04
        sim.set_robot(x, 0.0, yaw=0.0, vx=0.4, vy=0.0)
        sim.step()
    assert sc.objectives.objective_of(agent).name == "interact"
    for k in range(20):  # ...and on: past LEAVING_S the reaction is over
        x += 0.04
        sim.set_robot(x, 0.0, yaw=0.0, vx=0.4, vy=0.0)
        sim.step()
    running = sc.objectives.objective_of(agent)
    assert running is None or running.name != "interact", "the person let the robot go"
    assert objectives.LEAVING_S <= 4.5


def test_observe_stands_farther_than_interact():
    observe, interact = trace("observe"), trace("interact")
    assert observe.dist[-1] == pytest.approx(2.0, abs=0.02)  # registry defaults
    assert interact.dist[-1] == pytest.approx(0.9, abs=0.02)


def test_pass_by_passes_without_stopping_or_looking():
    tr = trace("pass_by", robot=(0.0, 1.5, math.pi))
    assert "pass_by" in tr.active
    passing = (tr.pos[:, 0] > -4) & (tr.pos[:, 0] < 4)
    print(f"pass_by: slowest {tr.speed[passing].min():.2f} m/s while passing; closest {tr.dist.min():.2f} m")
    assert tr.speed[passing].min() > 0.9 * V0  # never stops or slows much
    assert np.nanmax(tr.gaze_vs_walk[passing]) < 1.0  # looks where it walks
    assert tr.pos[-1, 0] == pytest.approx(12.0, abs=0.2)  # reached its goal
    # and, once the robot is out of sight range, the objective is over
    assert tr.active[-1] == "-"


@pytest.mark.parametrize("factor", [0.5, 0.3])
def test_slow_look_passes_at_the_reduced_speed_looking_at_the_robot(factor):
    tr = trace("slow_look", {"factor": factor}, robot=(0.0, 1.5, math.pi), duration_s=45)
    on = np.array([a == "slow_look" for a in tr.active])
    settled = on & (tr.t > tr.t[on][0] + 2.0)  # 2 s (4 relaxation times) to slow down
    speeds = tr.speed[settled]
    print(f"slow_look factor {factor}: speed {speeds.min():.3f}..{speeds.max():.3f} m/s "
          f"(asked {factor * V0:.3f}), gaze off the robot <= {tr.look[settled].max():.2f} deg")
    assert np.all(np.abs(speeds - factor * V0) < 0.05 * V0)  # within 5 % of the preferred speed
    assert tr.look[settled].max() < 2.0  # the head stays on the robot while passing
    assert tr.pos[settled][-1, 0] > 0.0  # it did pass the robot while looking
    after = ~on & (tr.t > tr.t[on][-1] + 3.0) & (tr.pos[:, 0] < 10.0)
    assert after.any() and tr.speed[after].min() > 0.95 * V0  # back to its own pace after the robot is behind


def test_slow_look_is_slower_than_pass_by():
    slow = trace("slow_look", robot=(0.0, 1.5, math.pi), duration_s=40)
    fast = trace("pass_by", robot=(0.0, 1.5, math.pi), duration_s=40)
    arrive = lambda tr: tr.t[np.argmax(tr.pos[:, 0] > 10.0)]  # noqa: E731
    assert arrive(slow) > arrive(fast) + 4.0


# -------------------------------------------------------------------------------------------- HuNavSim
def test_regular_is_the_core_reaction_untouched():
    """regular adds nothing: the same trajectory as a person with no objective at all (bit for bit)."""
    regular = trace("regular", robot=(0.0, 0.3, math.pi))
    none = trace(None, robot=(0.0, 0.3, math.pi))
    assert "regular" in regular.active
    assert np.array_equal(regular.pos, none.pos)
    assert none.dist.min() > 0.6  # the core's robot force kept him off the robot


def test_impassive_treats_the_robot_as_an_obstacle_only():
    """No social avoidance, no look: he passes closer than a regular walker and never turns his head."""
    impassive = trace("impassive", robot=(0.0, 0.3, math.pi))
    regular = trace("regular", robot=(0.0, 0.3, math.pi))
    print(f"closest approach: impassive {impassive.dist.min():.3f} m, regular {regular.dist.min():.3f} m")
    assert impassive.dist.min() < regular.dist.min() - 0.08
    assert impassive.dist.min() > 0.54  # an obstacle is still not walked through
    on = np.array([a == "impassive" for a in impassive.active])
    assert np.nanmax(impassive.gaze_vs_walk[on]) < 1.0
    assert impassive.pos[-1, 0] == pytest.approx(12.0, abs=0.2)  # got round it


def test_surprised_stops_and_stares_then_walks_on():
    tr = trace("surprised", {"distance": 3.0, "duration_s": 5.0}, robot=(0.0, 1.0, math.pi))
    close = np.argmax(tr.dist <= 3.0)
    t0 = tr.t[close]
    staring = (tr.t > t0 + 1.5) & (tr.t < t0 + 5.0)
    print(f"surprised at {tr.dist[close]:.2f} m, t = {t0:.1f} s; stood at {tr.dist[staring].mean():.2f} m")
    assert tr.speed[:close].min() > 0.2 or tr.t[close] < 1.0  # walking normally before
    assert tr.speed[staring].max() < 0.05  # stopped
    assert tr.look[staring].max() < 2.0  # staring at the robot
    assert 2.0 < tr.dist[staring].mean() < 3.0  # stopped soon after the robot came within 3 m
    later = (tr.t > t0 + 8.0) & (tr.t < t0 + 10.0)
    assert tr.speed[later].min() > 0.8 * V0  # then walks on
    assert tr.pos[-1, 0] > 5.0


def test_surprised_turns_its_head_no_faster_than_the_turn_rate():
    tr = trace("surprised", {"distance": 3.0, "turn_rate": 0.5}, robot=(0.0, 2.5, math.pi))
    close = int(np.argmax(tr.dist <= 3.0))
    turning = tr.look[close:close + 20]
    rates = -np.diff(turning) / 0.1  # deg/s of closing the angle to the robot
    assert rates.max() < math.degrees(0.5) * 1.1 + 2.0  # robot motion relative to a standing man is zero


def test_curious_approaches_slowly_and_stops_at_stop_distance():
    tr = trace("curious", {"stop_distance": 1.5, "max_vel": 1.0}, start=(-7.0, 0.0))
    approach = (tr.dist > 2.0) & (tr.t > 1.0)
    allowed = 1.0 * tr.dist[approach] / 8.0  # HuNavSim: max_vel x distance / view distance
    print(f"curious: speed/allowed max {np.max(tr.speed[approach] / allowed):.3f}; "
          f"final distance {tr.dist[-1]:.3f} m")
    assert np.all(tr.speed[approach] < allowed + 0.06)  # the relaxation lags the falling target by < 6 cm/s
    assert np.all(tr.speed[approach] < 0.7 * V0)  # slower than walking
    far, near = tr.speed[tr.at(2.5)], tr.speed[np.argmax(tr.dist < 2.6)]
    assert near < 0.6 * far  # slower the closer
    end = tr.t >= 25.0
    assert np.abs(tr.dist[end] - 1.5).max() < 0.02 and tr.look[end].max() < 2.0


def test_scared_keeps_away_and_hurries_off():
    scared = trace("scared", robot=(0.0, 0.8, math.pi))
    regular = trace("regular", robot=(0.0, 0.8, math.pi))
    frightened = scared.dist <= 4.0
    print(f"closest approach: scared {scared.dist.min():.2f} m, regular {regular.dist.min():.2f} m; "
          f"top speed while frightened {scared.speed[frightened].max():.2f} m/s")
    assert scared.dist.min() > regular.dist.min() + 0.5  # keeps away from the robot
    assert scared.speed[frightened].max() > 1.3 * V0  # walks away faster (runaway_factor 1.4)
    before = scared.t < scared.t[np.argmax(frightened)]
    assert scared.speed[before].max() < 1.01 * V0  # only once the robot is near
    assert scared.pos[-1, 0] == pytest.approx(12.0, abs=0.2)


def test_scared_goes_round_a_robot_in_its_way_with_a_wide_berth():
    scared = trace("scared", robot=(0.0, 0.1, math.pi))
    regular = trace("regular", robot=(0.0, 0.1, math.pi))
    print(f"robot in the way: scared keeps {scared.dist.min():.2f} m, regular {regular.dist.min():.2f} m")
    assert scared.dist.min() > 1.4 and regular.dist.min() < 0.9
    assert scared.pos[-1, 0] == pytest.approx(12.0, abs=0.2)


def test_threatening_blocks_the_robot_from_the_front_facing_it():
    tr = trace("threatening", {"front_distance": 1.0, "duration_s": 20.0}, robot=(0.0, 0.0, 0.0),
               start=(-6.0, 2.0), goal=(12.0, 2.0))
    block = (tr.t > 10.0) & (tr.t < 19.0)
    front = np.array([1.0, 0.0])  # the robot faces +x
    error = np.hypot(*(tr.pos[block] - front).T).max()
    print(f"threatening: {error * 1000:.0f} mm from the point 1 m in front of the robot; top speed "
          f"{tr.speed.max():.2f} m/s")
    assert error < 0.05
    assert tr.look[block].max() < 2.0  # facing the robot
    assert tr.speed.max() > 1.15 * V0  # hurried there (speed 1.8 > his 1.38)
    assert tr.dist.min() > 0.54  # went round the robot without bumping it
    assert tr.active[tr.at(25.0)] == "-" and tr.pos[-1, 0] > 3.0  # after duration_s he walks on


def test_threatening_front_follows_the_robot_heading():
    tr = trace("threatening", {"front_distance": 1.2, "duration_s": 30.0}, robot=(0.0, 0.0, math.pi / 2),
               start=(-6.0, 2.0), goal=(12.0, 2.0))
    assert tr.pos[-1] == pytest.approx([0.0, 1.2], abs=0.05)


# ------------------------------------------------------------------------------------------------ trigger
def _one_agent(sim: CrowdSim, xy, route, person_type="adult_man") -> int:
    return sim.add_agent(AgentSpec(person_type, 0.24, V0, xy, route=list(route), exit_on_arrival=False))


def _manager(sim, choice, **view) -> ObjectiveManager:
    manager = ObjectiveManager(sim, ObjectiveConfig(choice=choice, params={}, **view))
    sim.hooks.append(manager)
    return manager


def test_trigger_needs_the_view_distance():
    sim = CrowdSim(HALL, seed=1)
    sim.set_robot(6.0, 0.0)
    agent = _one_agent(sim, (-8.0, 0.0), [(12.0, 0.0)])
    manager = _manager(sim, {"adult_man": {"observe": 1.0}}, view_distance=8.0)
    for _ in range(100):
        sim.step()
        if manager.history:
            break
    t, who, name = manager.history[0]
    x = sim.agents.pos[sim.agents.row(agent), 0]  # after the step whose hook fired
    assert (who, name) == (agent, "observe")
    step = 1.3 * V0 * sim.dt  # the most one step can move him (the core's speed cap)
    assert 8.0 - 2 * step < 6.0 - x < 8.0  # it fired on the step the robot came within 8 m, not before


def test_trigger_needs_the_cone_robot_behind_never_triggers():
    sim = CrowdSim(HALL, seed=1)
    sim.set_robot(-3.0, 0.0)
    _one_agent(sim, (0.0, 0.0), [(12.0, 0.0)])  # walks away from the robot
    manager = _manager(sim, {"adult_man": {"interact": 1.0}}, fov_deg=200.0)
    sim.run(5.0)
    assert manager.history == []
    sim2 = CrowdSim(HALL, seed=1)
    sim2.set_robot(-3.0, 0.0)
    _one_agent(sim2, (0.0, 0.0), [(12.0, 0.0)])
    manager2 = _manager(sim2, {"adult_man": {"interact": 1.0}}, fov_deg=360.0)  # eyes in the back of the head
    sim2.run(1.0)
    assert [h[2] for h in manager2.history] == ["interact"]


def test_trigger_needs_a_line_of_sight():
    sim = CrowdSim(HALL, seed=1)
    sim.set_robot(0.0, 3.0)  # south of the screen wall (y = 6, x -3..3)
    agent = _one_agent(sim, (0.0, 8.0), [])
    sim.agents.gaze[sim.agents.row(agent)] = (0.0, -1.0)  # looking south, at the wall
    manager = _manager(sim, {"adult_man": {"observe": 1.0}})
    sim.run(2.0)
    assert manager.history == []  # 5 m away and straight ahead, but behind the wall
    sim.set_robot(5.0, 5.0)  # past the end of the wall: visible
    sim.run(0.2)
    assert [h[2] for h in manager.history] == ["observe"]


def test_choice_follows_the_configured_probabilities_per_type():
    sim = CrowdSim(HALL, seed=9)
    config = ObjectiveConfig(choice={"adult_man": {"interact": 0.5, "observe": 0.2},
                                     "child": {"curious": 0.7, "scared": 0.3}}, params={})
    manager = ObjectiveManager(sim, config)
    n = 6000
    men = [manager._draw("adult_man") for _ in range(n)]
    expected = {"interact": 0.5, "observe": 0.2, "regular": 0.3}  # the rest: regular
    x2 = sum((men.count(k) - n * p) ** 2 / (n * p) for k, p in expected.items())
    assert set(men) == set(expected) and x2 < chi2_critical(2)
    kids = [manager._draw("boy02") for _ in range(2000)]  # a script model counts as its person type
    assert set(kids) == {"curious", "scared"}
    assert kids.count("curious") / 2000 == pytest.approx(0.7, abs=0.04)
    assert {manager._draw("robot_fan") for _ in range(50)} == {"regular"}  # unknown type: no special reaction


def test_each_generated_agent_draws_once_and_scripted_ones_never():
    sim = CrowdSim(HALL, seed=4)
    sim.set_robot(0.0, 0.0)
    manager = _manager(sim, {"adult_man": {"pass_by": 1.0}})
    ids = [_one_agent(sim, (-8.0, y), [(12.0, y)]) for y in (-2.0, 2.0)]
    named = sim.add_agent(AgentSpec("adult_man", 0.24, V0, (-8.0, 4.0), route=[(12.0, 4.0)], name="kid"))
    sim.run(25.0)  # they pass the robot and it goes out of sight behind them: no second draw
    assert sorted(h[1] for h in manager.history) == ids
    assert named not in manager.decided


def test_stochastic_reactions_use_the_rates_file_parameters():
    sim = CrowdSim(HALL, seed=4)
    sim.set_robot(0.0, 0.0)
    config = ObjectiveConfig(choice={"adult_man": {"observe": 1.0}}, params={"observe": {"Dobserve": 3.0}})
    manager = ObjectiveManager(sim, config)
    sim.hooks.append(manager)
    agent = _one_agent(sim, (-8.0, 0.0), [(12.0, 0.0)])
    sim.run(20.0)
    assert manager.objective_of(agent).params["Dobserve"] == 3.0
    assert float(np.hypot(*sim.agents.pos[sim.agents.row(agent)])) == pytest.approx(3.0, abs=0.02)


# ---------------------------------------------------------------------------------------- registry and API
def test_registry_lists_every_objective_with_parameters_and_defaults():
    listed = {item["name"]: item for item in objectives.describe()}
    assert {"interact", "observe", "pass_by", "slow_look", "regular", "impassive", "surprised", "curious",
            "scared", "threatening"} <= set(listed)
    assert listed["interact"]["params"]["Dstop"]["default"] == 0.9
    assert listed["observe"]["params"]["Dobserve"]["default"] == 2.0
    assert listed["slow_look"]["params"]["factor"]["default"] == 0.5
    for item in listed.values():
        assert item["summary"]
        for p in item["params"].values():
            assert p["doc"], item["name"]


def test_a_script_changes_only_the_named_parameters():
    sim = CrowdSim(HALL, seed=0)
    sc = Scenario(sim)
    sc.robot(0.0, 0.0, math.pi)
    sc.spawn("p", "adult_man", at=(-5.0, 0.0))
    sc.objective("p", "interact", Dstop=0.6)
    sc.run(0.2)
    running = sc.objectives.objective_of(sc.ids["p"])
    assert running.params == {"Dstop": 0.6, "speed_factor": 1.0, "duration_s": 0.0}
    sc.objective("p", "interact", duration_s=5.0)  # the running one changes in place; Dstop stays
    assert sc.objectives.objective_of(sc.ids["p"]) is running
    assert running.params == {"Dstop": 0.6, "speed_factor": 1.0, "duration_s": 5.0}


@pytest.mark.parametrize("params, error, phrase", [
    ({"Dstp": 0.6}, KeyError, "no parameter 'Dstp' (its parameters: Dstop, speed_factor, duration_s)"),
    ({"Dstop": -1.0}, ValueError, "must not be negative"),
    ({"Dstop": "near"}, ValueError, "must be a number"),
])
def test_bad_objective_parameters_are_refused(params, error, phrase):
    with pytest.raises(error, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        objectives.make("interact", **params)


class Wave(Objective):
    """A user objective for the tests: stop, wave (look at the robot), for `seconds`."""

    name = "wave"
    summary = "stop and wave at the robot for a while"
    defaults = {"seconds": 3.0}
    param_docs = {"seconds": "how long"}

    def update(self, s: Situation) -> bool:
        if s.elapsed_s >= self.params["seconds"]:
            return False
        s.stop()
        s.look_at_robot()
        return True


def test_register_a_user_objective_and_use_it_from_a_script():
    objectives.register("wave", Wave)
    try:
        sim = CrowdSim(HALL, seed=0)
        sc = Scenario(sim)
        sc.run_script(textwrap.dedent("""
            robot 0 0
            spawn kid = boy02 at -6 0
            move kid to east
            objective kid wave seconds=2
            run 1500ms
        """))
        assert sim.agents.vel[0] == pytest.approx([0.0, 0.0], abs=0.05)
        assert sc.objectives.objective_of(sc.ids["kid"]).params == {"seconds": 2.0}
        sc.run(3.0)
        assert sc.objectives.objective_of(sc.ids["kid"]) is None  # done: walking on
        assert np.hypot(*sim.agents.vel[0]) > 0.5
    finally:
        objectives.REGISTRY.pop("wave", None)


def test_user_objective_from_module_path_in_the_rates_config(tmp_path, monkeypatch):
    (tmp_path / "my_objectives.py").write_text(textwrap.dedent("""
        from hil.crowd.objectives import Objective

        class Dance(Objective):
            name = "dance"
            summary = "dances in front of the robot"
            defaults = {"tempo": 120.0}
            param_docs = {"tempo": "beats per minute"}

            def update(self, s):
                s.stop()
                return True

        class NotAnObjective:
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(objectives, "ALLOWED_USER_MODULES", {"my_objectives", "no_such_module"})
    section = load_yaml_text(textwrap.dedent("""
        user: {dance: "my_objectives:Dance"}
        choice: {child: {dance: 0.5}}
        params: {dance: {tempo: 90}}
    """), "rates.yaml")
    try:
        config = ObjectiveConfig.from_section(section)
        assert objectives.REGISTRY["dance"].__name__ == "Dance"
        assert config.choice["child"] == {"dance": 0.5} and config.params["dance"] == {"tempo": 90.0}
        bad = {'"my_objectives:NotAnObjective"': "not a subclass of crowd.objectives.Objective",
               '"my_objectives:Nope"': "has no 'Nope'", '"no_such_module:X"': "cannot import 'no_such_module'",
               '"my_objectives"': "is not 'module.path:ClassName'"}
        for target, phrase in bad.items():
            with pytest.raises(ConfigError, match=phrase) as err:
                ObjectiveConfig.from_section(load_yaml_text(f"# user objectives\nuser:\n  x: {target}\n",
                                                            "rates.yaml"))
            assert str(err.value).startswith("rates.yaml:3:")
    finally:
        objectives.REGISTRY.pop("dance", None)
        objectives.REGISTRY.pop("x", None)
        sys.modules.pop("my_objectives", None)


def test_a_user_objective_module_is_not_imported_unless_allowed(tmp_path, monkeypatch):
    """`this:Nope` once printed the Zen of Python; a module is imported only after the user's opt-in."""
    (tmp_path / "noisy_objectives.py").write_text("import os\nos.environ['HIL_TEST_IMPORTED'] = '1'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("HIL_TEST_IMPORTED", raising=False)
    monkeypatch.setattr(objectives, "ALLOWED_USER_MODULES", set())
    for target in ("this:Nope", "noisy_objectives:X"):
        with pytest.raises(ConfigError, match=r"^rates\.yaml:2: .*not allowed.*--allow-objectives"):
            ObjectiveConfig.from_section(load_yaml_text(f"\nuser: {{x: \"{target}\"}}\n", "rates.yaml"))
    assert "this" not in sys.modules and "noisy_objectives" not in sys.modules
    assert "HIL_TEST_IMPORTED" not in os.environ


def test_the_reactions_of_the_day_apply_weekday_or_weekend():
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.population import load_rates, parse_start

    sim = CrowdSim(load_crowd_map("arcade"), seed=0)
    sc = Scenario(sim, rates=[load_rates("weekday"), load_rates("weekend")], start_s=parse_start("fri 23:59"))
    sim.step()
    assert sc.objectives.config.choice["child"]["curious"] == 0.20  # Friday: weekday.yaml
    assert sc.objectives.config.params["interact"] == {"duration_s": 45.0}
    sc.run(60.0)
    assert sc.objectives.config.choice["child"]["curious"] == 0.25  # past midnight: Saturday, weekend.yaml
    assert sc.objectives.config.params["interact"] == {"duration_s": 60.0}
