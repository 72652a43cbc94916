"""Test scripts (the crowd-simulation reference's script language): a line language above the objectives that reproduces
a situation.

One command per line; ``#`` starts a comment; durations are simulated time with a unit (``500ms``, ``5s``,
``5min``, ``1h``); coordinates are metres in the map frame::

    robot X Y [YAW]                          put the robot there (a standalone run has no robot program)
    run DURATION                             let the simulation run
    spawn NAME = MODEL at PLACE | at X Y [surface S]
                                             a person of a model (boy02, woman01, elderly...), regardless of rates
    spawn N MODEL at PLACE | at X Y spread LENGTH [as group G] [surface S]
                                             N people of a model within LENGTH (3m, 150cm) of the place, apart
                                             from each other, the people there, the robot and the walls, drawn
                                             with the crowd's seed; named crowd1, crowd2... (numbers go on after
                                             the highest crowdK there is), or with ``as group G`` G1, G2... and
                                             walking as one group
                                             ``surface S``: what their clothing is made of as depth sensors see it
                                             (one of the surface table's, config/surfaces/*.yaml: fabric, skin...;
                                             without it: the default surface)
    place NAME X Y                           set where a person stands
    move WHO to PLACE | to X Y | to robot    start walking there (along the passage graph)
    wait WHO arrived [timeout DURATION]      run until the person (everyone WHO names) has arrived (default
                                             timeout 10min)
    wait robot [timeout DURATION]            run until the crowd knows where the robot is (served in real time,
                                             its first pose comes with the world's stream; default 10min)
    objective WHO OBJECTIVE [KEY=VALUE...]   the reaction to the robot; only the named parameters change
    generate on | off                        stochastic generation and reactions (a script starts with them off)
    end                                      the script ends here, and a trial playing it ends at this time

WHO is a person's name, or a prefix with ``*`` (``crowd*``, ``G*``): everyone spawned so far whose name starts
with the prefix, in the order they were spawned; a prefix that matches no one is an error at its line. ``place``
takes one person (a prefix that matches more is an error: one point holds one body).

The whole script is parsed and checked (names spawned before use, places on the map, objectives and their
parameters) before anything runs, so a bad line costs nothing; the error says ``file:line:column: what``.
Errors only a run can find (a wait that times out) name their line too, and stop the script there. The run ends
after the last line, or at ``end`` (nothing may follow it). :class:`Scenario` is the same set of operations for
Python.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from . import objectives as objectives_mod
from .objectives import ObjectiveConfig, ObjectiveManager
from .population import DEFAULT_TYPES, Generator, PersonType, RateTable, scripted_spec, type_of_model
from .spread import spread_positions

if TYPE_CHECKING:
    from .sim import CrowdSim

DEFAULT_WAIT_TIMEOUT_S = 600.0
MAX_DURATION_S = 7 * 86400.0  # one line may ask for a week of simulated time at most
UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([a-z]+)$")
_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*$")
_LENGTH = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([a-z]+)$")
_TOKEN = re.compile(r"[^\s=#]+|=")
RESERVED = {"robot", "to", "at", "arrived", "timeout", "on", "off"}
COMMANDS = ("run", "spawn", "place", "move", "wait", "objective", "generate", "robot", "end")
LENGTH_UNITS = {"cm": 0.01, "m": 1.0}
MAX_SPAWN = 2000  # people one spawn line may place
MAX_SPREAD_M = 100.0
DEFAULT_PREFIX = "crowd"  # the names of people spawned by number without ``as group``
SCRIPT_GROUP_BASE = 1_000_000  # group ids of ``as group`` (the generator numbers its parties from 0)


class ScriptError(ValueError):
    """A bad script line: ``source:line:column: message`` (the column is left out for errors found while running)."""

    def __init__(self, source: str, line: int, column: int | None, message: str) -> None:
        self.source, self.line, self.column, self.message = source, line, column, message
        where = (f"{source}:{line}" if line else source) + (f":{column}" if line and column else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Token:
    text: str
    column: int  # 1-based


@dataclass
class Command:
    """One parsed line: ``op`` and its checked arguments; ``columns`` says where each argument was written."""

    op: str
    args: dict[str, Any]
    line: int
    text: str
    columns: dict[str, int] = field(default_factory=dict)


@dataclass
class Script:
    source: str
    commands: list[Command]


# -------------------------------------------------------------------------------------------------------- parse
class _Line:
    """The tokens of one line, consumed left to right; every complaint carries the column it is about."""

    def __init__(self, source: str, number: int, text: str) -> None:
        self.source, self.lineno, self.text = source, number, text
        code = text.split("#", 1)[0]
        self.tokens = [Token(m.group(), m.start() + 1) for m in _TOKEN.finditer(code)]
        self.pos = 0
        self.end_column = len(code.rstrip()) + 1

    def error(self, column: int | None, message: str) -> ScriptError:
        return ScriptError(self.source, self.lineno, column, message)

    def next(self, what: str) -> Token:
        if self.pos >= len(self.tokens):
            raise self.error(self.end_column, f"missing {what}")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def keyword(self, word: str) -> Token:
        tok = self.next(f"'{word}'")
        if tok.text != word:
            raise self.error(tok.column, f"expected '{word}', found {tok.text!r}")
        return tok

    def name(self, what: str = "a person's name") -> Token:
        tok = self.next(what)
        if not _NAME.match(tok.text):
            raise self.error(tok.column, f"{tok.text!r} is not a name (letters, digits, _; not starting with a digit)")
        if tok.text in RESERVED:
            raise self.error(tok.column, f"{tok.text!r} is a reserved word and cannot name a person")
        return tok

    def person(self) -> Token:
        """A person's name, or a prefix with ``*`` naming everyone whose name starts with it."""
        tok = self.peek()
        if tok is not None and tok.text.endswith("*"):
            self.pos += 1
            if not _PREFIX.match(tok.text):
                raise self.error(tok.column, f"{tok.text!r} is not a name prefix (a name's start, then one '*')")
            return tok
        return self.name()

    def count(self) -> tuple[int, Token]:
        tok = self.next("how many people")
        if not tok.text.isdigit() or not 1 <= int(tok.text) <= MAX_SPAWN:
            raise self.error(tok.column, f"{tok.text!r}: spawn takes a whole number of people from 1 to "
                                         f"MAX_SPAWN={MAX_SPAWN}")
        return int(tok.text), tok

    def length(self) -> tuple[float, Token]:
        tok = self.next("a length (e.g. 3m, 150cm)")
        match = _LENGTH.match(tok.text)
        if not match or match[2] not in LENGTH_UNITS:
            raise self.error(tok.column, f"{tok.text!r} is not a length: write e.g. 3m, 2.5m, 150cm")
        metres = float(match[1]) * LENGTH_UNITS[match[2]]
        if not 0 < metres <= MAX_SPREAD_M:
            raise self.error(tok.column, f"{tok.text}: a spread is more than 0 m and at most "
                                         f"MAX_SPREAD_M={MAX_SPREAD_M:g} m")
        return metres, tok

    def number(self, what: str) -> tuple[float, Token]:
        tok = self.next(what)
        try:
            value = float(tok.text)
        except ValueError:
            raise self.error(tok.column, f"{what}: {tok.text!r} is not a number") from None
        if not math.isfinite(value):
            raise self.error(tok.column, f"{what}: {tok.text!r} is not a finite number")
        return value, tok

    def duration(self) -> tuple[float, Token]:
        tok = self.next("a duration (e.g. 5s, 500ms, 5min)")
        match = _DURATION.match(tok.text)
        if not match:
            try:
                float(tok.text)
                problem = "needs a unit"
            except ValueError:
                problem = "is not a duration"
            raise self.error(tok.column, f"{tok.text!r} {problem}: write e.g. 5s, 500ms, 5min")
        if match[2] not in UNITS:
            unit_col = tok.column + len(match[1])
            raise self.error(unit_col, f"unknown time unit {match[2]!r} (use {', '.join(UNITS)})")
        seconds = float(match[1]) * UNITS[match[2]]
        if seconds > MAX_DURATION_S:
            raise self.error(tok.column, f"{tok.text} is longer than MAX_DURATION_S={MAX_DURATION_S:g} s (a week)")
        return seconds, tok

    def target(self) -> tuple[Any, Token]:
        """A place name, ``robot``, or ``X Y``."""
        tok = self.peek()
        if tok is None:
            raise self.error(self.end_column, "missing a place, 'robot' or X Y")
        if _NAME.match(tok.text):
            self.pos += 1
            return tok.text, tok
        try:
            float(tok.text)
        except ValueError:
            raise self.error(tok.column, f"{tok.text!r} is not a place name, 'robot' or a coordinate") from None
        x, _ = self.number("x")
        y, _ = self.number("y")
        return (x, y), tok

    def done(self) -> None:
        if self.pos < len(self.tokens):
            tok = self.tokens[self.pos]
            raise self.error(tok.column, f"unexpected {tok.text!r} at the end of the line")


def parse(text: str, source: str = "<script>") -> Script:
    """Parse a whole script (syntax only); the first bad line raises :class:`ScriptError`."""
    commands = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _Line(source, number, raw)
        if not line.tokens:
            continue
        commands.append(_parse_line(line))
    return Script(source, commands)


def _parse_line(line: _Line) -> Command:
    op_tok = line.next("a command")
    op = op_tok.text
    args: dict[str, Any] = {}
    cols: dict[str, int] = {"op": op_tok.column}
    if op == "run":
        args["duration_s"], tok = line.duration()
        cols["duration_s"] = tok.column
    elif op == "spawn":
        _parse_spawn(line, args, cols)
    elif op == "place":
        tok = line.person()
        args["name"], cols["name"] = tok.text, tok.column
        x, tok = line.number("x")
        y, _ = line.number("y")
        args["xy"], cols["xy"] = (x, y), tok.column
    elif op == "move":
        tok = line.person()
        args["name"], cols["name"] = tok.text, tok.column
        line.keyword("to")
        args["to"], tok = line.target()
        cols["to"] = tok.column
    elif op == "wait":
        nxt = line.peek()
        if nxt is not None and nxt.text == "robot":
            line.next("robot")
            args["robot"], cols["robot"] = True, nxt.column
        else:
            tok = line.person()
            args["name"], cols["name"] = tok.text, tok.column
            line.keyword("arrived")
        args["timeout_s"] = DEFAULT_WAIT_TIMEOUT_S
        if line.peek() is not None:
            line.keyword("timeout")
            args["timeout_s"], tok = line.duration()
            cols["timeout_s"] = tok.column
    elif op == "objective":
        tok = line.person()
        args["name"], cols["name"] = tok.text, tok.column
        tok = line.next("an objective")
        if tok.text not in objectives_mod.REGISTRY:
            raise line.error(tok.column, f"unknown objective {tok.text!r} (known: "
                                         f"{', '.join(sorted(objectives_mod.REGISTRY))})")
        args["objective"], cols["objective"] = tok.text, tok.column
        cls = objectives_mod.REGISTRY[tok.text]
        params: dict[str, float] = {}
        while line.peek() is not None:
            key = line.next("KEY=VALUE")
            if key.text not in cls.defaults:
                raise line.error(key.column, f"objective {cls.name!r} has no parameter {key.text!r} "
                                             f"(its parameters: {', '.join(cls.defaults) or 'none'})")
            eq = line.next("'=' after the parameter name")
            if eq.text != "=":
                raise line.error(eq.column, f"expected '=' after {key.text!r}, found {eq.text!r}")
            value, vtok = line.number(f"value of {key.text}")
            if value < 0:
                raise line.error(vtok.column, f"{key.text} must not be negative")
            if key.text in params:
                raise line.error(key.column, f"{key.text} is given twice")
            params[key.text] = value
            cols[f"param:{key.text}"] = key.column
        args["params"] = params
    elif op == "generate":
        tok = line.next("'on' or 'off'")
        if tok.text not in ("on", "off"):
            raise line.error(tok.column, f"generate takes 'on' or 'off', not {tok.text!r}")
        args["on"], cols["on"] = tok.text == "on", tok.column
    elif op == "robot":
        x, tok = line.number("x")
        y, _ = line.number("y")
        args["xy"], cols["xy"] = (x, y), tok.column
        args["yaw"] = 0.0
        if line.peek() is not None:
            args["yaw"], tok = line.number("yaw (rad)")
            cols["yaw"] = tok.column
    elif op != "end":
        raise line.error(op_tok.column, f"unknown command {op!r} (commands: {', '.join(COMMANDS)})")
    line.done()
    return Command(op, args, line.lineno, line.text, cols)


def _parse_spawn(line: _Line, args: dict[str, Any], cols: dict[str, int]) -> None:
    """``spawn NAME = MODEL at WHERE`` or ``spawn N MODEL at WHERE spread LENGTH [as group G]``."""
    first = line.peek()
    many = first is not None and re.fullmatch(r"[\d.]+", first.text) is not None  # a count, not a name
    if many:
        args["count"], tok = line.count()
        cols["count"] = tok.column
    else:
        tok = line.name()
        args["name"], cols["name"] = tok.text, tok.column
        line.keyword("=")
    tok = line.next("a person model (e.g. boy02, woman01, adult_man)")
    if not _NAME.match(tok.text):
        raise line.error(tok.column, f"{tok.text!r} is not a model name")
    args["model"], cols["model"] = tok.text, tok.column
    line.keyword("at")
    args["at"], tok = line.target()
    cols["at"] = tok.column
    if args["at"] == "robot":
        raise line.error(tok.column, "spawn at a place or X Y, not at the robot")
    args["surface"] = None
    if many:
        line.keyword("spread")
        args["spread_m"], tok = line.length()
        cols["spread_m"] = tok.column
        args["group"] = None
        nxt = line.peek()
        if nxt is not None and nxt.text != "surface":
            line.keyword("as")
            line.keyword("group")
            tok = line.name("a group's name")
            args["group"], cols["group"] = tok.text, tok.column
    if line.peek() is not None:
        line.keyword("surface")
        tok = line.next("a surface's name (fabric, skin...)")
        if not _NAME.match(tok.text):
            raise line.error(tok.column, f"{tok.text!r} is not a surface name (letters, digits, _)")
        args["surface"], cols["surface"] = tok.text, tok.column


def check(script: Script, crowd_map: Any, *, types: dict[str, PersonType] | None = None,
          can_generate: bool = True, known: Iterable[str] = ()) -> None:
    """Everything that can be known before running: names spawned before use and only once, places on the map,
    models known, generation possible. ``known``: names that exist already (spawned by an earlier script or from
    Python). Raises :class:`ScriptError` at the first problem."""
    spawned: dict[str, int | None] = {name: None for name in known}
    ended = None
    for cmd in script.commands:
        def err(key: str, message: str, cmd: Command = cmd) -> ScriptError:
            return ScriptError(script.source, cmd.line, cmd.columns.get(key), message)

        if ended is not None:
            raise err("op", f"this line would never run: the script ends at line {ended.line} ('end')")
        ended = cmd if cmd.op == "end" else None
        name = cmd.args.get("name")
        if cmd.op == "spawn":
            if name in spawned:
                where = f"line {spawned[name]}" if spawned[name] else "before this script"
                raise err("name", f"{name!r} is already spawned ({where})")
            try:
                type_of_model(cmd.args["model"], types or DEFAULT_TYPES)
            except KeyError as exc:
                raise err("model", exc.args[0]) from None
            if cmd.args.get("surface") is not None:
                why = surface_error(cmd.args["surface"])
                if why is not None:
                    raise err("surface", why)
        elif name is not None:
            who = matching(name, spawned)
            if not who:
                raise err("name", f"no person named {name!r} has been spawned before this line" if not
                          name.endswith("*") else f"{name} matches no one spawned before this line (spawned: "
                                                  f"{_listed(spawned)})")
            if cmd.op == "place" and len(who) > 1:
                raise err("name", f"place puts one person on a point, and {name} names {len(who)} "
                                  f"({_listed(who)}); spawn them with a spread, or place them one by one")
        for key in ("at", "to"):
            where = cmd.args.get(key)
            if isinstance(where, str) and where != "robot":
                try:
                    crowd_map.point(where)
                except KeyError as exc:
                    raise err(key, exc.args[0]) from None
        if cmd.op == "generate" and cmd.args["on"] and not can_generate:
            raise err("on", "generate on: no rates file is loaded (give --rates)")
        if cmd.op == "spawn":
            for new in [name] if name is not None else spawn_names(cmd.args, spawned):
                spawned[new] = cmd.line


def surface_error(name: str) -> str | None:
    """Why ``name`` is no surface the surface table knows (None: it is one); the table is read only when a
    script names a surface."""
    from hil.devices.surfaces import load_surfaces

    table = load_surfaces()
    if name in table.laws:
        return None
    return f"unknown surface {name!r}; known surfaces: {', '.join(table.names)} (config/surfaces/*.yaml)"


def matching(who: str, names: Iterable[str]) -> list[str]:
    """The names ``who`` stands for, in the order of ``names``: itself if it is one, or with a trailing ``*``
    every name that starts with the prefix."""
    if who.endswith("*"):
        return [name for name in names if name.startswith(who[:-1])]
    return [who] if who in names else []


def spawn_names(args: dict[str, Any], taken: Iterable[str]) -> list[str]:
    """The names of a ``spawn N`` line's people: its group's name (else ``crowd``) numbered on from the highest
    number any name of that form already has, so two lines never give the same name."""
    prefix = args.get("group") or DEFAULT_PREFIX
    form = re.compile(re.escape(prefix) + r"(\d+)$")
    start = max((int(m[1]) for m in map(form.match, taken) if m), default=0)
    return [f"{prefix}{start + k}" for k in range(1, args["count"] + 1)]


def _listed(names: Iterable[str], most: int = 8) -> str:
    names = list(names)
    if not names:
        return "none"
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def end_time_s(script: Script, dt: float) -> float | None:
    """When the script's ``end`` line runs, if that is known before it runs: every line before it takes a fixed
    time (``run`` its whole steps of ``dt``, the others none). None without an ``end``, or with a ``wait`` before
    it (how long that takes depends on the run)."""
    steps = 0
    for cmd in script.commands:
        if cmd.op == "end":
            return round(steps * dt, 9)
        if cmd.op == "wait":
            return None
        if cmd.op == "run":
            steps += int(round(cmd.args["duration_s"] / dt))
    return None


def load_script(path: str | Path) -> Script:
    """Read and parse a .scn file (a path, or a name under config/scenarios/)."""
    from .configfile import resolve

    from hil.devices.yaml_source import ConfigError, read_text

    resolved = resolve(path, "scenarios", suffix=".scn")
    try:
        text = read_text(resolved, "scenario")  # a binary file is refused at the line of its first bad byte
    except ConfigError as exc:
        raise ScriptError(exc.source, exc.line or 0, None, exc.message) from None
    script = parse(text, str(resolved))
    if not script.commands:
        raise ScriptError(str(resolved), 1, None, "the script has no commands (an empty scenario would be a 0 s run)")
    return script


# --------------------------------------------------------------------------------------------------------- run
class Scenario:
    """The script's operations for Python, on one sim; also where its hooks are registered.

    Hook order each step: the generator (new people), then the objective manager (reactions), then any recorder
    the caller adds, so what is recorded at time t is the state the step starts from.
    """

    def __init__(self, sim: CrowdSim, *, rates: RateTable | list[RateTable] | None = None,
                 start_s: float | None = None, objectives: ObjectiveConfig | None = None,
                 generate: bool = False, rate_scale: float = 1.0) -> None:
        self.sim = sim
        tables = [rates] if isinstance(rates, RateTable) else list(rates or [])
        self.types: dict[str, PersonType] = {**DEFAULT_TYPES, **(tables[0].person_types if tables else {})}
        self.generator = Generator(sim, tables, start_s=start_s, enabled=generate,
                                   rate_scale=rate_scale) if tables else None
        config_at = None
        if objectives is None and tables:  # each rates file's own reactions, on the days it covers
            configs = [objectives_mod.config_from_table(t.objectives) for t in tables]
            objectives = configs[0]
            gen = self.generator

            def config_at(time_s: float) -> ObjectiveConfig | None:
                table = gen.table_for(gen.week_time(time_s)[0])
                return configs[tables.index(table)] if table is not None else None

        self.objectives = ObjectiveManager(sim, objectives, stochastic=generate, config_at=config_at)
        if self.generator is not None:
            sim.hooks.append(self.generator)
        sim.hooks.append(self.objectives)
        self.ids: dict[str, int] = {}
        self.groups: dict[str, int] = {}  # ``as group G`` -> its group id
        self.ended_at: float | None = None  # the sim time at which an ``end`` line ran
        self._world_robot = False  # play(world_robot=True): the world sends the robot, so 'wait robot' can wait

    # -- helpers ---------------------------------------------------------------------------------------------
    def id_of(self, name: str) -> int:
        if name not in self.ids:
            raise KeyError(f"no person named {name!r} (spawned: {', '.join(self.ids) or 'none'})")
        return self.ids[name]

    def ids_of(self, who: str) -> list[int]:
        """The ids of everyone ``who`` names: a name, or a prefix with ``*`` (in the order they were spawned)."""
        names = matching(who, self.ids)
        if not names:
            raise KeyError(f"{who} matches no one (spawned: {_listed(self.ids)})" if who.endswith("*")
                           else f"no person named {who!r} (spawned: {_listed(self.ids)})")
        return [self.ids[name] for name in names]

    def _point(self, where: str | tuple[float, float]) -> tuple[float, float]:
        if isinstance(where, str):
            p = self.sim.map.point(where)
            return float(p[0]), float(p[1])
        return float(where[0]), float(where[1])

    # -- the operations --------------------------------------------------------------------------------------
    def robot(self, x: float, y: float, yaw: float = 0.0) -> None:
        """Put the robot there (standalone runs have no robot program to move it)."""
        self.sim.set_robot(x, y, yaw=yaw)

    def run(self, duration_s: float) -> None:
        """Step the sim for ``duration_s`` of simulated time (rounded to whole steps)."""
        self.sim.run(duration_s)

    def spawn(self, name: str, model: str, at: str | tuple[float, float], surface: str | None = None) -> int:
        """A named person of a model at a place or point, regardless of the rates (the reference's second instruction).
        It stands until moved, and stays when it arrives (scripted people do not leave by themselves). ``surface``:
        what their clothing is made of (a surface table's name; None: the default surface)."""
        if name in self.ids:
            raise KeyError(f"{name!r} is already spawned")
        _check_surface(surface)
        agent_id = self.sim.add_agent(scripted_spec(model, self._point(at), name, self.types, surface))
        self.ids[name] = agent_id
        return agent_id

    def spawn_many(self, count: int, model: str, at: str | tuple[float, float], spread_m: float,
                   group: str | None = None, surface: str | None = None) -> list[str]:
        """``count`` people of a model within ``spread_m`` of a place or point, none overlapping anyone, the robot
        or a wall (crowd/spread.py; drawn with the sim's seed); all of them or, when they do not fit, nobody
        (crowd.spread.NoRoom says how many fit). Named ``crowdK`` or, in a ``group``, ``groupK`` (spawn_names), and
        a group walks as one (one group id); ``surface``: their clothing's (as :meth:`spawn`). Returns their names."""
        _check_surface(surface)
        names = spawn_names({"count": count, "group": group}, self.ids)
        specs = [scripted_spec(model, (0.0, 0.0), name, self.types, surface) for name in names]
        where = at if isinstance(at, str) else f"({at[0]:g}, {at[1]:g})"
        spots = spread_positions(self.sim, self._point(at), count, specs[0].radius, spread_m, where)
        if group is not None:
            group_id = self.groups.setdefault(group, SCRIPT_GROUP_BASE + len(self.groups))
        for name, spec, spot in zip(names, specs, spots):
            spec.position = (float(spot[0]), float(spot[1]))
            if group is not None:
                spec.group = group_id
            self.ids[name] = self.sim.add_agent(spec)
        return names

    def place(self, name: str, x: float, y: float) -> None:
        """Set where the person stands (velocity zero); a route it had is kept."""
        self.sim.place(self.id_of(name), x, y)

    def move(self, who: str, to: str | tuple[float, float]) -> None:
        """Walk along the passage graph to a place, a point, or ``"robot"`` (up to where the robot stands now);
        ``who``: a name or a prefix with ``*`` (everyone it names goes)."""
        agent_ids = self.ids_of(who)
        if to == "robot" and self.sim.robot is None:
            raise ValueError("there is no robot yet (a served crowd hears of it with the world's first state): "
                             "put 'wait robot' before this line")
        if isinstance(to, str):
            if to != "robot":
                self.sim.map.point(to)  # an unknown name fails here, before the agent is touched
        else:
            to = (float(to[0]), float(to[1]))
        for agent_id in agent_ids:
            self.sim.move(agent_id, to)

    def wait_arrived(self, who: str, timeout_s: float = DEFAULT_WAIT_TIMEOUT_S) -> float:
        """Run until the person (everyone ``who`` names) has arrived; returns the simulated seconds waited.
        TimeoutError past the timeout."""
        t0 = self.sim.time_s
        for _ in self._wait_arrived(who, timeout_s):
            self.sim.step()
        return self.sim.time_s - t0

    def _wait_arrived(self, who: str, timeout_s: float) -> Iterator[None]:
        agent_ids = self.ids_of(who)

        def all_there() -> bool:
            return all(self.sim.arrived(agent_id) for agent_id in agent_ids)

        for _ in range(int(round(timeout_s / self.sim.dt))):
            if all_there():
                return
            yield
        if not all_there():
            late = sum(not self.sim.arrived(agent_id) for agent_id in agent_ids)
            whom = who if len(agent_ids) == 1 else f"{late} of the {len(agent_ids)} people {who} names"
            raise TimeoutError(f"{whom} did not arrive within {timeout_s:g} s of simulated time")

    def objective(self, who: str, objective: str, **params: float) -> None:
        """Arm ``objective`` for the person (everyone ``who`` names), changing only the named parameters."""
        for agent_id in self.ids_of(who):
            self.objectives.assign(agent_id, objective, params)

    def generate(self, on: bool) -> None:
        """Stochastic generation and stochastic reactions together on or off (the reference's special mode for
        scripts)."""
        if on and self.generator is None:
            raise ValueError("generate on: no rates file is loaded")
        if self.generator is not None:
            self.generator.enabled = on
        self.objectives.stochastic = on

    # -- scripts ---------------------------------------------------------------------------------------------
    def run_script(self, script: Script | str, source: str = "<script>",
                   on_line: Callable[[Command], None] | None = None, generate: bool = False) -> None:
        """Parse and check the whole script first, then execute it line by line; the run ends at the last line.

        ``on_line`` is called after each line has run (the reference's display and report step); ``generate``
        keeps stochastic generation on alongside the script (see :meth:`play`).
        """
        for _ in self.play(script, source, on_line=on_line, generate=generate):
            self.sim.step()

    def play(self, script: Script | str, source: str = "<script>", *,
             on_line: Callable[[Command], None] | None = None, generate: bool = False,
             world_robot: bool = False) -> Iterator[Command]:
        """The script as a generator that yields (the line being run) each time it needs one sim step, and steps
        nothing itself: whoever owns time steps the sim between yields. Standalone that is :meth:`run_script`;
        served to a world (crowd/serve.py) it is the world's tick, so ``run 5s`` lasts 5 s of the world's time.

        The whole script is checked before the first line runs. ``generate``: stochastic generation and reactions
        stay on alongside the script (as if its first line were ``generate on``). ``world_robot``: the world
        places the robot, so ``robot`` lines are skipped.
        """
        if isinstance(script, str):
            script = parse(script, source)
        check(script, self.sim.map, types=self.types, can_generate=self.generator is not None, known=self.ids)
        self._world_robot = world_robot
        self.generate(generate)  # a script starts in its own mode: no stochastic transitions, as in the reference
        self.ended_at = None
        for cmd in script.commands:
            if world_robot and cmd.op == "robot":
                continue
            if cmd.op == "end":
                self.ended_at = self.sim.time_s
                if on_line is not None:
                    on_line(cmd)
                return
            try:
                for _ in self._steps(cmd):
                    yield cmd
            except (KeyError, ValueError, TimeoutError) as exc:
                message = exc.args[0] if exc.args else str(exc)
                raise ScriptError(script.source, cmd.line, None, f"{cmd.op}: {message}") from None
            if on_line is not None:
                on_line(cmd)

    def _steps(self, cmd: Command) -> Iterator[None]:
        """Run one line, yielding once per sim step it needs (``run`` and ``wait``); other lines take no time."""
        a = cmd.args
        if cmd.op == "run":
            for _ in range(int(round(a["duration_s"] / self.sim.dt))):
                yield
        elif cmd.op == "wait" and a.get("robot"):
            if self.sim.robot is None and not self._world_robot:
                raise ValueError("a standalone crowd has no world to send the robot: place it with a 'robot' "
                                 "line or --robot")
            for _ in range(int(round(a["timeout_s"] / self.sim.dt))):
                if self.sim.robot is not None:
                    return
                yield
            if self.sim.robot is None:
                raise TimeoutError(f"no robot pose came within {a['timeout_s']:g} s of simulated time")
        elif cmd.op == "wait":
            yield from self._wait_arrived(a["name"], a["timeout_s"])
        else:
            self._execute(cmd)

    def _execute(self, cmd: Command) -> None:
        a = cmd.args
        if cmd.op == "run":
            self.run(a["duration_s"])
        elif cmd.op == "spawn" and "count" in a:
            self.spawn_many(a["count"], a["model"], a["at"], a["spread_m"], a["group"], a.get("surface"))
        elif cmd.op == "spawn":
            self.spawn(a["name"], a["model"], a["at"], a.get("surface"))
        elif cmd.op == "place":
            self.place(a["name"], *a["xy"])
        elif cmd.op == "move":
            self.move(a["name"], a["to"])
        elif cmd.op == "wait" and a.get("robot"):
            if self.sim.robot is None:
                raise ValueError("there is no robot (place it with a 'robot' line or --robot)")
        elif cmd.op == "wait":
            self.wait_arrived(a["name"], a["timeout_s"])
        elif cmd.op == "objective":
            self.objective(a["name"], a["objective"], **a["params"])
        elif cmd.op == "generate":
            self.generate(a["on"])
        elif cmd.op == "robot":
            self.robot(*a["xy"], yaw=a["yaw"])


def _check_surface(surface: str | None) -> None:
    """ValueError naming the known surfaces when ``surface`` is none of them (None: the default, always fine)."""
    if surface is not None:
        why = surface_error(surface)
        if why is not None:
            raise ValueError(why)
