"""Who comes in, when, and with whom: appearance rates (the crowd-simulation reference, "appearance rate data" and
"group member data").

A rates file (``config/crowd/weekday.yaml``, ``weekend.yaml``) holds, for the days of the week it covers:

- ``person_types``: body radius and preferred walking speed of each type, as truncated normal distributions;
- ``time_bands``: from/to times of day, and in each the *appearance rate* of every type in persons per hour
  (summed over all entrances; a person appearing may bring company, see ``groups``); outside every band nobody comes;
- ``entrances`` / ``exits``: optional relative weights of the map's entrances and exits (default: all equal);
- ``groups``: the kinds of company (couple, family, friends...) with their size distribution and who the companions
  are, and for every type the probability of appearing in each kind of company (the rest: alone);
- ``objectives``: how people react when the robot comes into view (read by :mod:`crowd.objectives`).

Arrivals are a Poisson process per (type, entrance): each step of length dt draws Poisson(rate * weight * dt)
appearances, which is exact for a rate that is constant over the step. All members of a party share one entrance,
one exit and one route, walk at the pace of the slowest of them, and carry one group id, so the group forces of the
crowd core keep them together. Every random draw comes from ``sim.rng``: one seed, one crowd.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hil.devices.map_format import surface as surface_name
from hil.devices.yaml_source import ConfigError, SourceDict, SourceList, check_keys

from . import configfile
from .agents import AgentSpec

if TYPE_CHECKING:  # the core is imported lazily so this module also loads without it
    from .sim import CrowdSim

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_S = 86400.0
WEEK_S = 7 * DAY_S
SPACING_M = 0.6  # distance between the members of a party when they appear, side by side and row behind row
INSIDE_M = 0.3  # people appear this far inside the gate, off the line of the wall it is cut in
MAX_ABREAST = 3
# Bounds on what a rates file may ask for (1e9 persons/h once filled 12.9 GB in two minutes). The busiest
# station concourses see ~20,000 persons/h through all entrances together; parties beyond 20 are a crowd of their own.
MAX_RATE_PER_H = 20000.0
MAX_PARTY_SIZE = 20
MAX_PEOPLE = 5000  # people present at once: past this, generation waits until some have left (counted)
RATES_KEYS = ("name", "days", "person_types", "time_bands", "groups", "objectives", "entrances", "exits")
BAND_KEYS = ("name", "from", "to", "rates")
GROUP_KEYS = ("kinds", "by_type")
KIND_KEYS = ("size", "companions")


@dataclass(frozen=True)
class Distribution:
    """A normal distribution truncated to [low, high]; scripted people take the mean (exact reproduction)."""

    mean: float
    sd: float
    low: float
    high: float

    def draw(self, rng: np.random.Generator, n: int = 1) -> np.ndarray:
        """Clipping keeps the rare tails physical (no 3 m/s toddlers) at the cost of small atoms at the bounds."""
        return np.clip(rng.normal(self.mean, self.sd, n), self.low, self.high)


@dataclass(frozen=True)
class PersonType:
    name: str
    radius: Distribution  # m
    speed: Distribution  # preferred walking speed, m/s
    surface: str | None = None  # what range sensors see of them (clothing, devices/surfaces.py); None: the default


@dataclass(frozen=True)
class TimeBand:
    name: str
    start_s: float  # seconds since midnight, inclusive
    end_s: float  # exclusive
    rates: dict[str, float]  # person type -> appearances per hour (all entrances together)


@dataclass(frozen=True)
class GroupKind:
    """A kind of company. ``companions[i]`` gives the type weights of the (i+1)-th companion; the last repeats."""

    name: str
    sizes: dict[int, float]  # party size (leader included) -> probability
    companions: list[dict[str, float]]  # type (or "same": the leader's type) -> probability


@dataclass
class RateTable:
    """One rates file: the appearance data for the days it lists."""

    name: str
    days: tuple[int, ...]  # indices into DAYS
    person_types: dict[str, PersonType]
    bands: list[TimeBand]
    entrances: dict[str, float] | None  # None: all the map's entrances, equally
    exits: dict[str, float] | None
    kinds: dict[str, GroupKind]
    company: dict[str, dict[str, float]]  # person type -> kind -> probability (rest: alone)
    objectives: SourceDict = field(default_factory=SourceDict)  # raw, read by crowd.objectives
    source: str = "<rates>"
    lines: dict[str, int] = field(default_factory=dict)  # "entrances.west_gate" -> its line, for map checks

    def band_at(self, time_of_day_s: float) -> TimeBand | None:
        for band in self.bands:
            if band.start_s <= time_of_day_s < band.end_s:
                return band
        return None

    def size_distribution(self, person_type: str) -> dict[int, float]:
        """P(party size) for a party led by ``person_type``: the mixture over its kinds of company (1 = alone)."""
        company = self.company.get(person_type, {})
        out: dict[int, float] = {1: 1.0 - sum(company.values())}
        for kind, p_kind in company.items():
            for size, p_size in self.kinds[kind].sizes.items():
                out[size] = out.get(size, 0.0) + p_kind * p_size
        return {size: p for size, p in sorted(out.items()) if p > 0}


# Script model names (the reference's child scene spawns "boy02") map to person types by their leading word.
MODEL_PREFIXES = {"boy": "child", "girl": "child", "kid": "child", "child": "child", "man": "adult_man",
                  "woman": "adult_woman", "oldman": "elderly", "oldwoman": "elderly", "elder": "elderly",
                  "senior": "elderly"}
DEFAULT_TYPES = {  # used when no rates file is loaded (a pure script); means from gait studies
    "adult_man": PersonType("adult_man", Distribution(0.24, 0.02, 0.19, 0.30), Distribution(1.38, 0.20, 0.70, 2.00)),
    "adult_woman": PersonType("adult_woman", Distribution(0.22, 0.02, 0.18, 0.28),
                              Distribution(1.30, 0.18, 0.65, 1.90)),
    "child": PersonType("child", Distribution(0.17, 0.02, 0.13, 0.22), Distribution(1.10, 0.20, 0.50, 1.80)),
    "elderly": PersonType("elderly", Distribution(0.23, 0.02, 0.18, 0.28), Distribution(1.00, 0.15, 0.50, 1.40)),
}


def type_of_model(model: str, known: dict[str, PersonType] | None = None) -> str:
    """The person type of a script's model name: a type name itself, or ``boy02`` -> child, ``woman1`` -> adult_woman.

    Scripts name models the way the reference's child scene does (``boy02``); the word before the number says the person
    type."""
    known = known or DEFAULT_TYPES
    if model in known:
        return model
    word = re.sub(r"[\d_\-]+$", "", model.lower())
    if word in MODEL_PREFIXES and MODEL_PREFIXES[word] in known:
        return MODEL_PREFIXES[word]
    raise KeyError(f"unknown person model {model!r}: use a person type ({', '.join(sorted(known))}) or a model "
                   f"name starting with {', '.join(sorted(MODEL_PREFIXES))} (e.g. boy02)")


def scripted_spec(model: str, position: tuple[float, float], name: str,
                  types: dict[str, PersonType] | None = None, surface: str | None = None) -> AgentSpec:
    """A scripted person: the mean body and speed of its type, so a script gives the same person for every seed;
    ``surface``: what their clothing is made of (devices/surfaces.py; None: the default surface)."""
    types = types or DEFAULT_TYPES
    ptype = types[type_of_model(model, types)]
    return AgentSpec(person_type=model, radius=ptype.radius.mean, preferred_speed=ptype.speed.mean,
                     position=(float(position[0]), float(position[1])), name=name, exit_on_arrival=False,
                     surface=surface)


# ----------------------------------------------------------------------------------------------------- loading
_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")


def _time_of_day(band: SourceDict, key: str, what: str) -> float:
    value = band.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        raise band.error(key, f"{what}: write {key} as a quoted 'HH:MM' string (YAML reads an unquoted HH:MM "
                              f"as the number {value})")
    match = _TIME.match(value) if isinstance(value, str) else None
    if not match or int(match[1]) > 24 or int(match[2]) > 59 or (int(match[1]) == 24 and int(match[2])):
        raise band.error(key if key in band else None, f"{what}: {key} must be 'HH:MM' (00:00 to 24:00), "
                                                       f"not {value!r}")
    return int(match[1]) * 3600.0 + int(match[2]) * 60.0


def _distribution(parent: SourceDict, key: str, what: str, low_limit: float, high_limit: float) -> Distribution:
    """A bounded normal in [low_limit, high_limit] (metres for radius, m/s for speed: a person, not a car)."""
    spec = configfile.mapping(parent, key, what)
    check_keys(spec, ("mean", "sd", "min", "max"), f"{what}.{key}")
    bounds = {"low": low_limit, "high": high_limit}
    mean = configfile.number(spec, "mean", f"{what}.{key}", **bounds)
    sd = configfile.number(spec, "sd", f"{what}.{key}", low=0.0, high=high_limit)
    low = configfile.number(spec, "min", f"{what}.{key}", **bounds, default=max(low_limit, mean - 3 * sd))
    high = configfile.number(spec, "max", f"{what}.{key}", **bounds, default=min(high_limit, mean + 3 * sd))
    if not low <= mean <= high:
        raise spec.error(None, f"{what}.{key}: mean {mean} is outside [min {low}, max {high}]")
    return Distribution(mean, sd, low, high)


def _person_types(data: SourceDict) -> dict[str, PersonType]:
    table = configfile.mapping(data, "person_types", "rates")
    if not table:
        raise table.error(None, "person_types: at least one type is needed")
    out = {}
    for name in table:
        what = f"person_types.{name}"
        if not isinstance(table[name], SourceDict):
            raise table.error(name, f"{what} must be a mapping with radius and speed")
        check_keys(table[name], ("radius", "speed", "surface"), what)
        surface = surface_name(table[name], "surface", what) if "surface" in table[name] else None
        out[name] = PersonType(name, _distribution(table[name], "radius", what, 0.05, 1.0),
                               _distribution(table[name], "speed", what, 0.05, 10.0), surface)
    return out


def _bands(data: SourceDict, types: dict[str, PersonType]) -> list[TimeBand]:
    bands = data.get("time_bands")
    if not isinstance(bands, SourceList) or not bands:
        raise data.error("time_bands" if "time_bands" in data else None, "time_bands: a non-empty list is needed")
    out: list[TimeBand] = []
    for i, band in enumerate(bands):
        if not isinstance(band, SourceDict):
            raise ConfigError(bands.source, bands.line_of(i), "time_bands: each band must be a mapping")
        check_keys(band, BAND_KEYS, f"time_bands[{i}]")
        name = band.get("name", f"band{i}")
        what = f"time band {name!r}"
        start, end = _time_of_day(band, "from", what), _time_of_day(band, "to", what)
        if end <= start:
            raise band.error("to", f"{what}: 'to' must be after 'from' (bands do not wrap past midnight)")
        rates_table = configfile.mapping(band, "rates", what)
        rates = {}
        for ptype in rates_table:
            if ptype not in types:
                raise rates_table.error(ptype, f"{what}: unknown person type {ptype!r} (known: {', '.join(types)})")
            rates[ptype] = configfile.number(rates_table, ptype, f"{what} rates (persons/h, MAX_RATE_PER_H)",
                                             low=0.0, high=MAX_RATE_PER_H)
        for other in out:
            if start < other.end_s and other.start_s < end:
                raise band.error("from", f"{what} overlaps time band {other.name!r}")
        out.append(TimeBand(str(name), start, end, rates))
    return out


def _weights(data: SourceDict, key: str) -> dict[str, float] | None:
    if key not in data:
        return None
    table = configfile.mapping(data, key, "rates")
    out = {name: configfile.number(table, name, key, low=0.0, high=1e6) for name in table}
    if not out or sum(out.values()) <= 0:
        raise data.error(key, f"{key}: at least one positive weight is needed")
    return out


def _groups(data: SourceDict, types: dict[str, PersonType]) -> tuple[dict[str, GroupKind], dict[str, dict]]:
    groups = configfile.mapping(data, "groups", "rates", required=False)
    check_keys(groups, GROUP_KEYS, "groups")
    kinds_table = configfile.mapping(groups, "kinds", "groups", required=False)
    kinds: dict[str, GroupKind] = {}
    for name in kinds_table:
        spec = kinds_table[name]
        what = f"groups.kinds.{name}"
        if not isinstance(spec, SourceDict):
            raise kinds_table.error(name, f"{what} must be a mapping with size and companions")
        check_keys(spec, KIND_KEYS, what)
        size_table = configfile.mapping(spec, "size", what)
        for size in size_table:
            if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= MAX_PARTY_SIZE:
                raise size_table.error(size, f"{what}.size: sizes are whole numbers from 2 to MAX_PARTY_SIZE="
                                             f"{MAX_PARTY_SIZE}, not {size!r}")
        sizes = configfile.probabilities(size_table, f"{what}.size", total=1.0)
        companions = spec.get("companions")
        if not isinstance(companions, SourceList) or not companions:
            raise spec.error("companions" if "companions" in spec else None,
                             f"{what}: companions must be a non-empty list of type weights")
        comp_out = []
        for i, entry in enumerate(companions):
            if entry == "same":
                comp_out.append({"same": 1.0})
                continue
            if not isinstance(entry, SourceDict):
                raise ConfigError(companions.source, companions.line_of(i),
                                  f"{what}.companions: each entry is a mapping type -> weight, or 'same'")
            for ptype in entry:
                if ptype != "same" and ptype not in types:
                    raise entry.error(ptype, f"{what}.companions: unknown person type {ptype!r}")
            comp_out.append(configfile.probabilities(entry, f"{what}.companions", total=1.0))
        kinds[str(name)] = GroupKind(str(name), {int(k): v for k, v in sizes.items()}, comp_out)
    by_type = configfile.mapping(groups, "by_type", "groups", required=False)
    company: dict[str, dict[str, float]] = {}
    for ptype in by_type:
        if ptype not in types:
            raise by_type.error(ptype, f"groups.by_type: unknown person type {ptype!r}")
        table = by_type[ptype]
        if not isinstance(table, SourceDict):
            raise by_type.error(ptype, f"groups.by_type.{ptype} must map kinds to probabilities")
        for kind in table:
            if kind not in kinds:
                raise table.error(kind, f"groups.by_type.{ptype}: unknown kind {kind!r} (known: {', '.join(kinds)})")
        company[ptype] = configfile.probabilities(table, f"groups.by_type.{ptype}")
    return kinds, company


def user_objectives(tables: list[RateTable] | tuple[RateTable, ...]) -> dict[str, str]:
    """The user objectives the rates files name (``objectives.user``: name -> ``"module.path:ClassName"``), read
    without importing anything (crowd.objectives imports them, where the user allowed it)."""
    out: dict[str, str] = {}
    for table in tables:
        user = table.objectives.get("user") if isinstance(table.objectives, dict) else None
        if isinstance(user, dict):
            out.update({str(name): str(target) for name, target in user.items()})
    return out


def load_rates(name_or_path: str | Path) -> RateTable:
    """Read and check a rates file (a name under config/crowd/ or a path); errors say file:line: what."""
    data = configfile.load(name_or_path, "crowd")
    check_keys(data, RATES_KEYS, "rates")
    days_value = data.get("days")
    if not isinstance(days_value, SourceList) or not days_value:
        raise data.error("days" if "days" in data else None, f"days: a list of {', '.join(DAYS)} is needed")
    days = []
    for i, day in enumerate(days_value):
        if day not in DAYS:
            raise ConfigError(days_value.source, days_value.line_of(i), f"days: {day!r} is not one of {DAYS}")
        days.append(DAYS.index(day))
    types = _person_types(data)
    kinds, company = _groups(data, types)
    objectives = configfile.mapping(data, "objectives", "rates", required=False)
    lines = {f"{key}.{name}": data[key].line_of(name) for key in ("entrances", "exits")
             if isinstance(data.get(key), SourceDict) for name in data[key]}
    return RateTable(name=str(data.get("name", Path(str(name_or_path)).stem)), days=tuple(days), person_types=types,
                     bands=_bands(data, types), entrances=_weights(data, "entrances"), exits=_weights(data, "exits"),
                     kinds=kinds, company=company, objectives=objectives, source=data.source, lines=lines)


def parse_start(text: str) -> float:
    """'mon 08:00' -> seconds since Monday 00:00; the clock the generator reads day of week and time band from."""
    parts = text.lower().split()
    match = _TIME.match(parts[1]) if len(parts) == 2 else None
    if not match or parts[0] not in DAYS or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f"start time {text!r}: expected 'DAY HH:MM' with DAY one of {', '.join(DAYS)}")
    return DAYS.index(parts[0]) * DAY_S + int(match[1]) * 3600.0 + int(match[2]) * 60.0


# -------------------------------------------------------------------------------------------------- generation
@dataclass
class Party:
    """People who appear together: ``types[0]`` is the one whose appearance rate fired."""

    time_s: float
    kind: str  # "alone" or a group kind
    types: list[str]
    entrance: str
    exit: str
    ids: list[int] = field(default_factory=list)  # filled in when spawned


MAX_RATE_SCALE = 100.0  # beyond this a rates file is the wrong tool: write one with those rates


class Generator:
    """The person generation module: a sim hook that brings people in by the appearance rates.

    ``start_s`` is the week time (seconds since Monday 00:00, see :func:`parse_start`) at sim time 0. With several
    tables, the one listing the current day applies; on a day no table lists, nobody comes. ``rate_scale``
    multiplies every appearance rate (a denser or sparser crowd of the same mix: sweeps vary it).
    """

    def __init__(self, sim: CrowdSim, tables: RateTable | list[RateTable], *, start_s: float | None = None,
                 enabled: bool = True, rate_scale: float = 1.0) -> None:
        if not (isinstance(rate_scale, (int, float)) and 0.0 <= rate_scale <= MAX_RATE_SCALE):
            raise ValueError(f"rate_scale must be a number in [0, {MAX_RATE_SCALE:g}], not {rate_scale!r}")
        self.rate_scale = float(rate_scale)
        self.sim = sim
        self.tables = [tables] if isinstance(tables, RateTable) else list(tables)
        if not self.tables:
            raise ValueError("the generator needs at least one rates table")
        first = self.tables[0]
        self.start_s = start_s if start_s is not None else first.days[0] * DAY_S + first.bands[0].start_s
        self.enabled = enabled
        self.parties: list[Party] = []  # every party that appeared, in order
        self.turned_away = 0  # parties not spawned because MAX_PEOPLE were present
        self._next_group = 0
        self.entrance_points = gate_points(sim.map, exits=False)
        self.exit_points = gate_points(sim.map, exits=True)
        for table in self.tables:
            self._check_against_map(table)
            for ptype in table.person_types.values():
                if ptype.surface is not None:
                    sim.surface_of_type[ptype.name] = ptype.surface

    # -- the map's side ------------------------------------------------------------------------------------
    def _check_against_map(self, table: RateTable) -> None:
        """Entrance and exit weights must name the map's gates: a typo would silently close a door."""
        for key, names in (("entrances", self.entrance_points), ("exits", self.exit_points)):
            if not names:
                raise ConfigError(table.source, None, f"the map has no {key}: nobody can be generated")
            for name in getattr(table, key) or {}:
                if name not in names:
                    raise ConfigError(table.source, table.lines.get(f"{key}.{name}"),
                                      f"{key}: the map {self.sim.map.name} has no {name!r} "
                                      f"(it has {', '.join(names)})")

    def _entrance_weights(self, table: RateTable) -> tuple[list[str], np.ndarray]:
        names = list(table.entrances) if table.entrances else list(self.entrance_points)
        w = np.array([table.entrances[n] if table.entrances else 1.0 for n in names], dtype=float)
        return names, w / w.sum()

    def _choose_exit(self, table: RateTable, entrance: str) -> str:
        """Any exit but the door one came in by (unless it is the only one)."""
        here = np.asarray(self.entrance_points[entrance], dtype=float)
        names = [n for n in (table.exits or self.exit_points)
                 if np.hypot(*(np.asarray(self.exit_points[n], dtype=float) - here)) > 1.0] or list(self.exit_points)
        w = np.array([table.exits.get(n, 0.0) if table.exits else 1.0 for n in names], dtype=float)
        if w.sum() <= 0:
            w = np.ones(len(names))
        return names[int(self.sim.rng.choice(len(names), p=w / w.sum()))]

    # -- the clock -----------------------------------------------------------------------------------------
    def week_time(self, sim_time_s: float) -> tuple[int, float]:
        """(day index, seconds since midnight) at a sim time."""
        t = (self.start_s + sim_time_s) % WEEK_S
        return int(t // DAY_S), t % DAY_S

    def table_for(self, day: int) -> RateTable | None:
        return next((t for t in self.tables if day in t.days), None)

    def rates_at(self, sim_time_s: float) -> dict[str, float]:
        """Appearances per hour per type at a sim time (all entrances together)."""
        day, tod = self.week_time(sim_time_s)
        table = self.table_for(day)
        band = table.band_at(tod) if table else None
        return {k: v * self.rate_scale for k, v in band.rates.items()} if band else {}

    # -- drawing and spawning --------------------------------------------------------------------------------
    def draw(self, time_s: float, dt: float) -> list[Party]:
        """The parties that appear in [time_s, time_s + dt): Poisson per (type, entrance), then company and exit."""
        day, tod = self.week_time(time_s)
        table = self.table_for(day)
        band = table.band_at(tod) if table else None
        if band is None or not band.rates:
            return []
        rng = self.sim.rng
        types = list(band.rates)
        entrances, weights = self._entrance_weights(table)
        lam = np.outer([band.rates[t] for t in types], weights) * (self.rate_scale * dt / 3600.0)
        counts = rng.poisson(lam)
        parties = []
        for i, j in zip(*np.nonzero(counts)):
            for _ in range(int(counts[i, j])):
                parties.append(self._party(table, time_s, types[i], entrances[j]))
        return parties

    def _party(self, table: RateTable, time_s: float, leader: str, entrance: str) -> Party:
        rng = self.sim.rng
        company = table.company.get(leader, {})
        kinds = ["alone", *company]
        p = np.array([1.0 - sum(company.values()), *company.values()])
        kind = kinds[int(rng.choice(len(kinds), p=p / p.sum()))]
        types = [leader]
        if kind != "alone":
            spec = table.kinds[kind]
            sizes = list(spec.sizes)
            size = sizes[int(rng.choice(len(sizes), p=np.array(list(spec.sizes.values()))))]
            for k in range(size - 1):
                weights = spec.companions[min(k, len(spec.companions) - 1)]
                names = [leader if n == "same" else n for n in weights]
                pw = np.array(list(weights.values()))
                types.append(names[int(rng.choice(len(names), p=pw / pw.sum()))])
        return Party(time_s, kind, types, entrance, self._choose_exit(table, entrance))

    def spawn(self, party: Party, table: RateTable | None = None) -> list[int]:
        """Put a party just inside its entrance, on one route and one group id.

        Members stand side by side, up to three abreast (as groups walk, Moussaid et al. 2010), rows one behind
        the other as the gate's width allows. A party in exact single file along its way would be a degenerate
        start for the group gaze force (the ones in front must look straight back), so a file is staggered.
        """
        sim = self.sim
        table = table or self.table_for(self.week_time(party.time_s)[0]) or self.tables[0]
        start = self.entrance_points[party.entrance]
        route = [tuple(float(v) for v in wp) for wp in sim.map.route(start, party.exit)]
        heading = _first_direction(start, route)
        width = float(getattr(sim.map.entrances.get(party.entrance), "width", 1.0))
        places = _formation(start, heading, len(party.types), width)
        types = [table.person_types.get(t) or DEFAULT_TYPES[t] for t in party.types]
        radii = [float(pt.radius.draw(sim.rng)[0]) for pt in types]
        speeds = [float(pt.speed.draw(sim.rng)[0]) for pt in types]
        pace = min(speeds)  # a party walks at its slowest member's pace, or it would not stay together
        group = -1
        if len(types) > 1:
            group = self._next_group
            self._next_group += 1
        ids = []
        for k, (ptype, radius) in enumerate(zip(party.types, radii)):
            spec = AgentSpec(person_type=ptype, radius=radius, preferred_speed=pace if group >= 0 else speeds[k],
                             position=places[k], route=list(route), group=group, exit_on_arrival=True)
            ids.append(sim.add_agent(spec))
        party.ids = ids
        return ids

    def __call__(self, sim: CrowdSim) -> None:
        """The hook: draw this step's parties and bring them in (nothing when generation is off)."""
        if not self.enabled:
            return
        for party in self.draw(sim.time_s - sim.dt, sim.dt):  # hooks run after the clock moved to the step's end
            if len(sim.agents) + len(party.types) > MAX_PEOPLE:
                self.turned_away += 1  # the place is full: memory and step time stay bounded whatever the rates
                continue
            self.spawn(party)
            self.parties.append(party)


def gate_points(crowd_map: Any, *, exits: bool) -> dict[str, tuple[float, float]]:
    """Name -> (x, y) of the map's entrances (or exits), in file order."""
    names = crowd_map.exit_names() if exits else crowd_map.entrance_names()
    return {n: (float(crowd_map.point(n)[0]), float(crowd_map.point(n)[1])) for n in names}


def _formation(start: tuple[float, float], heading: tuple[float, float], n: int,
               gate_width: float) -> list[tuple[float, float]]:
    """Where n people of a party appear: rows across the heading, centred on the gate, the first row INSIDE_M in."""
    abreast = max(1, min(MAX_ABREAST, n, int((gate_width - 0.5) / SPACING_M) + 1))
    hx, hy = heading
    nx, ny = -hy, hx  # across the way
    out = []
    for k in range(n):
        row, col = divmod(k, abreast)
        in_row = min(abreast, n - row * abreast)
        side = (col - (in_row - 1) / 2) * SPACING_M if in_row > 1 else 0.1 * (-1) ** row
        ahead = INSIDE_M + row * SPACING_M
        out.append((start[0] + hx * ahead + nx * side, start[1] + hy * ahead + ny * side))
    return out


def _first_direction(start: tuple[float, float], route: list[tuple[float, float]]) -> tuple[float, float]:
    """Unit vector from the entrance toward the first waypoint that is not at the entrance itself."""
    for wp in route:
        dx, dy = wp[0] - start[0], wp[1] - start[1]
        d = float(np.hypot(dx, dy))
        if d > 0.3:
            return dx / d, dy / d
    return 0.0, 0.0

