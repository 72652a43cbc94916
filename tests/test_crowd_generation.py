"""Generation by appearance rates (the crowd-simulation reference): Poisson arrivals per type, per day and time band,
per entrance; groups from their size distribution, sharing one route and staying together; rates files checked.

Statistics: counts per (day set, band, type) cell are independent Poisson variables, so
X^2 = sum (O - E)^2 / E over all cells is chi-square with df = number of cells (no total is fixed). Multinomial
splits (entrances, group sizes, kinds) use df = cells - 1, cells pooled until E >= 5. Every test rejects at
p < 0.001 (Wilson-Hilferty quantile); the sim is seeded, so the outcome is fixed, and the tests also show the
statistic *would* reject a 15 % rate error, so they can fail.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from crowd_helpers import chi2_critical, merge_small

from hil.crowd.maps import load_crowd_map
from hil.crowd.population import DAY_S, Generator, Party, load_rates, parse_start
from hil.crowd.sim import CrowdSim
from hil.devices.yaml_source import ConfigError

ARCADE = load_crowd_map("arcade")
WEEKDAY = load_rates("weekday")
WEEKEND = load_rates("weekend")
DRAW_DT = 60.0  # band edges are whole minutes, so no draw straddles two bands


@pytest.fixture(scope="module")
def week():
    """One simulated week of draws (Monday 00:00 to Sunday 24:00) with both rates files; the parties, not stepped."""
    sim = CrowdSim(ARCADE, seed=2024)
    gen = Generator(sim, [WEEKDAY, WEEKEND], start_s=parse_start("mon 00:00"))
    parties = []
    for k in range(int(7 * DAY_S / DRAW_DT)):
        parties += gen.draw(k * DRAW_DT, DRAW_DT)
    return gen, parties


def _cells(gen: Generator, parties, scale: float = 1.0):
    """Observed and expected leader counts per (day set, band, type) over the week."""
    observed: Counter = Counter()
    for p in parties:
        day, tod = gen.week_time(p.time_s)
        table = gen.table_for(day)
        observed[(table.name, table.band_at(tod).name, p.types[0])] += 1
    expected = {}
    for table in (WEEKDAY, WEEKEND):
        for band in table.bands:
            hours = (band.end_s - band.start_s) / 3600.0 * len(table.days)
            for ptype, rate in band.rates.items():
                expected[(table.name, band.name, ptype)] = rate * hours * scale
    return observed, expected


def test_arrivals_per_type_day_and_band_match_the_rates(week):
    gen, parties = week
    observed, expected = _cells(gen, parties)
    assert set(observed) <= set(expected)  # nobody of an unlisted type or outside a band
    x2 = sum((observed[c] - e) ** 2 / e for c, e in expected.items())
    df = len(expected)
    print(f"arrival chi-square {x2:.1f} on {df} cells (critical {chi2_critical(df):.1f} at p=0.001); "
          f"{len(parties)} parties in the week")
    assert x2 < chi2_critical(df)
    for cell, e in expected.items():  # and no single cell is off by more than 4.5 sigma
        assert abs(observed[cell] - e) < 4.5 * math.sqrt(e), (cell, observed[cell], e)
    # Power: the same counts against rates 15 % too high are rejected, so this test can fail.
    _, wrong = _cells(gen, parties, scale=1.15)
    assert sum((observed[c] - e) ** 2 / e for c, e in wrong.items()) > chi2_critical(df)


def test_the_hook_at_the_sim_step_brings_people_at_the_rates():
    """The hook as the sim calls it (every 0.1 s, clock already at the step's end), for two simulated hours of a
    weekend afternoon; the people are spawned (not walked: this is about who comes, not how they move)."""
    sim = CrowdSim(ARCADE, seed=77)
    gen = Generator(sim, WEEKEND, start_s=parse_start("sat 14:00"))
    for k in range(1, int(2 * 3600 / sim.dt) + 1):
        sim.time_s = k * sim.dt
        gen(sim)
    band = WEEKEND.band_at(15 * 3600.0)
    leaders = Counter(p.types[0] for p in gen.parties)
    x2 = sum((leaders[t] - 2 * r) ** 2 / (2 * r) for t, r in band.rates.items())
    print(f"hook arrivals {dict(leaders)} in 2 h, chi-square {x2:.1f} (df {len(band.rates)})")
    assert x2 < chi2_critical(len(band.rates))
    assert len(sim.agents) == sum(len(p.types) for p in gen.parties)  # every one of them spawned
    assert min(p.time_s for p in gen.parties) >= 0.0 and max(p.time_s for p in gen.parties) < 7200.0


def test_nobody_comes_outside_the_bands_and_weekend_rates_apply_on_weekends(week):
    gen, parties = week
    for p in parties:
        day, tod = gen.week_time(p.time_s)
        table = gen.table_for(day)
        assert table.band_at(tod) is not None
        assert (table is WEEKEND) == (day >= 5)
    # Saturday 08:00 is before the weekend opening (09:00) although weekdays are open then.
    assert gen.rates_at(parse_start("sat 08:00")) == {}
    assert gen.rates_at(parse_start("tue 08:00")) == WEEKDAY.bands[0].rates


def test_arrivals_are_poisson_over_time(week):
    """Counts in 10-minute windows of one long band: variance / mean (index of dispersion) is 1 for Poisson."""
    gen, parties = week
    band = next(b for b in WEEKEND.bands if b.name == "afternoon")  # 14:00-18:00, Saturday and Sunday
    windows = Counter()
    for p in parties:
        day, tod = gen.week_time(p.time_s)
        if day >= 5 and band.start_s <= tod < band.end_s:
            windows[(day, int((tod - band.start_s) // 600))] += 1
    counts = np.array([windows[(d, w)] for d in (5, 6) for w in range(24)], dtype=float)
    dispersion = counts.var(ddof=1) / counts.mean()
    # (n - 1) * D ~ chi-square(n - 1): two-sided bounds at p = 0.001 for n = 48 windows
    n = len(counts)
    low = chi2_critical(n - 1, z=-3.29) / (n - 1)
    high = chi2_critical(n - 1, z=3.29) / (n - 1)
    print(f"index of dispersion {dispersion:.2f} (accept {low:.2f}..{high:.2f}), mean {counts.mean():.1f} per 10 min")
    assert low < dispersion < high
    assert counts.mean() == pytest.approx(sum(band.rates.values()) / 6, rel=0.1)


def test_entrances_are_used_by_their_weights(week):
    _, parties = week
    counts = Counter(p.entrance for p in parties)
    names = ARCADE.entrance_names()
    expected = len(parties) / len(names)  # the shipped files give no weights: all equal
    x2 = sum((counts[n] - expected) ** 2 / expected for n in names)
    assert x2 < chi2_critical(len(names) - 1)
    for p in parties:
        assert p.exit != p.entrance  # nobody turns round at the door they came in by


def test_weighted_entrances_and_exits(tmp_path):
    weights = "\nentrances: {west_gate: 3.0, east_gate: 1.0}\nexits: {north_gate: 1.0}\n"
    text = Path(WEEKDAY.source).read_text() + weights
    path = tmp_path / "weighted.yaml"
    path.write_text(text)
    table = load_rates(path)
    sim = CrowdSim(ARCADE, seed=5)
    gen = Generator(sim, table, start_s=parse_start("mon 12:00"))
    parties = [p for k in range(90) for p in gen.draw(k * DRAW_DT, DRAW_DT)]
    counts = Counter(p.entrance for p in parties)
    assert set(counts) == {"west_gate", "east_gate"}
    total = counts["west_gate"] + counts["east_gate"]
    x2 = (counts["west_gate"] - 0.75 * total) ** 2 / (0.75 * total) + \
         (counts["east_gate"] - 0.25 * total) ** 2 / (0.25 * total)
    assert x2 < chi2_critical(1)
    assert {p.exit for p in parties} == {"north_gate"}


def test_group_sizes_match_their_distribution(week):
    _, parties = week
    for table in (WEEKDAY, WEEKEND):
        for ptype in table.person_types:
            sizes = Counter(len(p.types) for p in parties if p.types[0] == ptype and _table_of(p) is table)
            n = sum(sizes.values())
            dist = table.size_distribution(ptype)
            support = sorted(dist)
            assert set(sizes) <= set(support), (table.name, ptype, sizes)
            obs, exp = merge_small([sizes[s] for s in support], [n * dist[s] for s in support])
            x2 = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
            df = max(len(obs) - 1, 1)
            print(f"{table.name} {ptype}: {n} parties, sizes {dict(sorted(sizes.items()))}, "
                  f"chi-square {x2:.1f} (df {df}, critical {chi2_critical(df):.1f})")
            assert x2 < chi2_critical(df)


def _table_of(party):
    day = int((parse_start("mon 00:00") + party.time_s) // DAY_S) % 7
    return WEEKEND if day >= 5 else WEEKDAY


def test_companions_follow_the_group_member_data(week):
    _, parties = week
    kinds = Counter(p.kind for p in parties)
    assert {"alone", "couple", "family", "friends", "parent_child", "senior_couple"} <= set(kinds)
    for p in parties:
        if p.kind == "friends":
            assert set(p.types) == {p.types[0]}  # friends are of the leader's kind ("same")
        elif p.kind in ("family", "parent_child"):
            assert p.types[1] in ("adult_man", "adult_woman")  # the first companion of a family is an adult
        elif p.kind == "senior_couple":
            assert p.types == ["elderly", "elderly"]
        elif p.kind == "alone":
            assert len(p.types) == 1
    children_alone = sum(1 for p in parties if p.types[0] == "child" and p.kind == "alone")
    children = sum(1 for p in parties if p.types[0] == "child")
    assert children_alone / children < 0.1  # children mostly come with company (5 % and 3 % alone)


def test_spawned_parties_share_route_goal_pace_and_group_and_stay_together():
    sim = CrowdSim(ARCADE, seed=11)
    gen = Generator(sim, WEEKEND, start_s=parse_start("sat 15:00"))
    sim.hooks.append(gen)
    spread: dict[int, float] = {}
    for _ in range(3000):  # 300 s at the busiest weekend hour: whole walks, gate to gate, round corners
        sim.step()
        a = sim.agents
        for g in set(a.group[a.group >= 0].tolist()):
            members = a.pos[a.group == g]
            if len(members) > 1:
                span = float(np.max(np.hypot(*(members[:, None, :] - members[None, :, :]).transpose(2, 0, 1))))
                spread[g] = max(spread.get(g, 0.0), span)
    groups = [p for p in gen.parties if len(p.types) > 1]
    assert len(groups) >= 10
    exits = {n: ARCADE.point(n) for n in ARCADE.exit_names()}
    entrances = {n: ARCADE.point(n) for n in ARCADE.entrance_names()}
    for party in gen.parties:
        rows = [sim.agents.row(i) for i in party.ids if i in set(sim.agents.ids.tolist())]
        if not rows:
            continue
        assert len({int(sim.agents.group[r]) for r in rows}) == 1
        assert len({float(sim.agents.v0[r]) for r in rows}) == 1  # one pace: the slowest member's
        goals = {tuple(np.round(sim.agents.routes[r][-1], 6)) for r in rows if sim.agents.routes[r]}
        assert len(goals) <= 1
        if goals:
            assert goals.pop() == pytest.approx(exits[party.exit])
        assert all(sim.agents.exit_on_arrival[r] for r in rows)
        assert party.entrance in entrances
    # Together: no member of any group ever more than 4 m from another (spawned 0.6 m apart, in file order).
    worst = max(spread.values())
    print(f"{len(groups)} groups, largest spread within a group {worst:.2f} m")
    assert worst < 4.0


def test_generator_off_brings_nobody_and_on_brings_people_at_the_entrances():
    sim = CrowdSim(ARCADE, seed=3)
    gen = Generator(sim, WEEKDAY, start_s=parse_start("mon 12:00"), enabled=False)
    sim.hooks.append(gen)
    for _ in range(300):
        sim.step()
    assert len(sim.agents) == 0 and not gen.parties
    gen.enabled = True
    for _ in range(300):
        sim.step()
    assert gen.parties
    assert gen.parties[0].time_s >= 30.0
    assert all(party.ids for party in gen.parties)  # every drawn party was spawned


def test_a_party_appears_inside_its_entrance_side_by_side_and_walks_in():
    sim = CrowdSim(ARCADE, seed=4)
    gen = Generator(sim, WEEKEND, start_s=parse_start("sat 15:00"))
    party = Party(0.0, "family", ["child", "adult_woman", "child", "adult_man", "elderly"], "west_gate", "east_gate")
    ids = gen.spawn(party)
    rows = [sim.agents.row(i) for i in ids]
    pos = sim.agents.pos[rows]
    gate = np.array(ARCADE.point("west_gate"))  # the route leaves the west gate eastward (+x)
    assert pos[:3, 0] == pytest.approx(gate[0] + 0.3) and pos[3:, 0] == pytest.approx(gate[0] + 0.9)
    assert pos[:3, 1] == pytest.approx([-0.6, 0.0, 0.6]) and pos[3:, 1] == pytest.approx([-0.3, 0.3])
    assert sim.agents.types[rows[0]] == "child" and sim.agents.radius[rows[0]] < 0.23
    sim.run(10.0)
    assert np.all(sim.agents.pos[:, 0] > gate[0] + 5.0)  # all of them walked in, together


def test_same_seed_same_crowd_different_seed_different_crowd():
    def crowd(seed):
        sim = CrowdSim(ARCADE, seed=seed)
        gen = Generator(sim, WEEKDAY, start_s=parse_start("mon 17:30"))
        sim.hooks.append(gen)
        for _ in range(200):
            sim.step()
        return [(p.time_s, tuple(p.types), p.entrance, p.exit) for p in gen.parties], sim.agents.pos.copy()

    a, pos_a = crowd(7)
    b, pos_b = crowd(7)
    c, _ = crowd(8)
    assert a == b and np.array_equal(pos_a, pos_b)
    assert a != c


# ------------------------------------------------------------------------------------------- rates file errors
GOOD = Path(WEEKDAY.source).read_text()


@pytest.mark.parametrize("old, new, phrase", [
    ('from: "09:30", to: "12:00"', 'from: "09:30", to: 12:00', "quoted 'HH:MM'"),  # YAML 1.1 reads 720
    ('from: "12:00", to: "13:30"', 'from: "12:00", to: "11:00"', "'to' must be after 'from'"),
    ('from: "13:30", to: "17:00"', 'from: "13:00", to: "17:00"', "overlaps time band 'lunch'"),
    ("rates: {adult_man: 150,", "rates: {adult_mann: 150,", "unknown person type 'adult_mann'"),
    ("adult_man: 150,", "adult_man: -1,", "outside"),
    ("days: [mon, tue, wed, thu, fri]", "days: [mon, tue, wed, thu, fry]", "'fry' is not one of"),
    ("child:       {family: 0.45, parent_child: 0.40, friends: 0.10}",
     "child:       {family: 0.65, parent_child: 0.40, friends: 0.10}", "more than 1"),
    ("child:       {family: 0.45,", "child:       {famly: 0.45,", "unknown kind 'famly'"),
    ("{size: {2: 1.0}, companions: [{adult_man: 0.5, adult_woman: 0.5}]}",
     "{size: {2: 1.0}, companions: [{adult_man: 0.5, adult_woman: 0.6}]}", "sum to 1.1, not 1"),
    ("{size: {2: 1.0}, companions: [{elderly: 1.0}]}", "{size: {1: 1.0}, companions: [{elderly: 1.0}]}",
     "from 2 to MAX_PARTY_SIZE"),
    ("speed: {mean: 1.38, sd: 0.20, min: 0.70", "speed: {mean: 1.38, sd: 0.20, min: 1.50", "outside [min"),
    ("interact: {duration_s: 45}", "interact: {duraton_s: 45}", "no parameter 'duraton_s'"),
    ("observe: 0.08, interact: 0.03,", "observe: 0.08, interactt: 0.03,", "unknown objective 'interactt'"),
])
def test_bad_rates_files_say_file_line_and_what(tmp_path, old, new, phrase):
    assert old in GOOD, old
    text = GOOD.replace(old, new, 1)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if new in row)
    with pytest.raises(ConfigError) as err:
        table = load_rates(path)
        from hil.crowd.objectives import config_from_table
        config_from_table(table.objectives)
    message = str(err.value)
    assert phrase in message
    assert message.startswith(f"{path}:")
    # the line named is the bad one, or (for a mapping-level problem) the line its mapping starts on
    named = int(message.split(":")[1])
    assert abs(named - line) <= 1, (message, line)


def test_rates_naming_an_entrance_the_map_lacks(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(GOOD + "\nentrances:\n  west_gate: 1.0\n  side_door: 1.0\n")
    table = load_rates(path)
    with pytest.raises(ConfigError, match="the map arcade has no 'side_door'") as err:
        Generator(CrowdSim(ARCADE), table)
    assert str(err.value).startswith(f"{path}:{len(GOOD.splitlines()) + 4}: entrances:")


def test_unknown_rates_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="weekday, weekend"):
        load_rates("holiday")
