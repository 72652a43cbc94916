"""A trial's ``faults:``: what happens to the virtual robot's parts, and when.

    faults:
      - {at: 5, unplug: right_arm.elbow}      # a part by blueprint name, tree path or bus ID
      - {at: 8, plug: right_arm.elbow}
      - {at: 10, reboot: head.neck_pitch}
      - {at: 12, swap: 28, with: wheel_motor}  # another catalog part at that ID
      - {at: 14, plug: 60, part: speaker, parent: 37, port: speaker}   # a new part on a free port
      - {at: 20, noise: {bitflip: 1e-3, for_s: 2}}
      - {at: 22, overload: head.neck_yaw}   # the servo latches an overload error (Alert) until a reboot

:func:`parse_faults` checks the entries as a whole before anything runs (keys, times within the duration, a plug
only of a part unplugged before, or a new part with its catalog entry) and names file:line; :meth:`FaultPlan.bind`
resolves names once the robot is open (a name the robot lacks is refused at its line, before the first tick);
:meth:`FaultPlan.attach` runs each action in the world's pre-step hook at its simulated time (hotplug.py), so a
seed and a plan give the same run every time.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hil.devices.catalog import load_part, part_names
from hil.devices.yaml_source import ConfigError

from . import hotplug
from .faults import FaultInjector

ACTIONS = ("unplug", "plug", "reboot", "swap", "noise", "overload")
KEYS = {"at", *ACTIONS, "with", "part", "parent", "port", "line"}  # line: where a stored entry came from


@dataclass(frozen=True)
class FaultAction:
    at_s: float
    kind: str  # one of ACTIONS
    target: Any = None  # a name or a bus ID (None for noise)
    new_part: str | None = None  # swap's `with:`, a new part's `part:`
    parent: Any = None  # a new part's parent (name or ID) and port
    port: str | None = None
    bitflip: float = 0.0
    for_s: float = 0.0
    source: str = "<python>"
    line: int | None = None
    device_id: int | None = None  # the target's bus ID, once bound
    parent_id: int | None = None

    def error(self, message: str) -> ConfigError:
        return ConfigError(self.source, self.line, f"faults: {message}")


def parse_faults(entries: Any, source: str, line: int | None, duration_s: float | None,
                 lines: Callable[[int], int | None] | None = None) -> tuple[FaultAction, ...]:
    """Checked actions, in time order. ``lines(i)``: the line of entry i (a YAML list's)."""
    if entries is None:
        return ()
    if not isinstance(entries, (list, tuple)):
        raise ConfigError(source, line, "faults must be a list such as [{at: 5, unplug: right_arm.elbow}]")
    actions = []
    for index, entry in enumerate(entries):
        where = (getattr(entry, "line", None) or (entry.get("line") if isinstance(entry, dict) else None)
                 or (lines(index) if lines else None) or line)
        actions.append(_action(entry, index, source, where, duration_s))
    actions.sort(key=lambda a: a.at_s)
    unplugged: set[Any] = set()
    for action in actions:
        if action.kind == "unplug":
            unplugged.add(action.target)
        elif action.kind == "plug" and action.new_part is None:
            if action.target not in unplugged:
                raise action.error(f"plug {action.target!r} at {action.at_s:g} s: that part is not unplugged before "
                                   "(plug a new part with part:, parent: and port:)")
            unplugged.discard(action.target)
    return tuple(actions)


def stored_faults(entries: Any) -> tuple[dict, ...]:
    """Plain, JSON-safe copies of checked entries that remember their lines (a spec keeps these)."""
    from hil.devices.yaml_source import plain

    return tuple({**plain(entry), **({"line": entry.line} if getattr(entry, "line", None) else {})}
                 for entry in entries or ())


def _action(entry: Any, index: int, source: str, line: int | None, duration_s: float | None) -> FaultAction:
    def error(message: str) -> ConfigError:
        return ConfigError(source, line, f"faults #{index + 1}: {message}")

    if not isinstance(entry, dict):
        raise error(f"each fault is a mapping such as {{at: 5, unplug: right_arm.elbow}}, not {entry!r}")
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise error(f"unknown key {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    kinds = [k for k in ACTIONS if k in entry]
    if len(kinds) != 1:
        raise error(f"give exactly one of {', '.join(ACTIONS)}")
    at = entry.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or at < 0:
        raise error(f"at must be a time in seconds >= 0, not {at!r}")
    if duration_s is not None and at > duration_s:
        raise error(f"at {at:g} s is past the trial's duration ({duration_s:g} s)")
    kind = kinds[0]
    action = FaultAction(float(at), kind, source=source, line=line)
    if kind == "noise":
        noise = entry["noise"]
        if not isinstance(noise, dict) or set(noise) - {"bitflip", "for_s"} or "bitflip" not in noise:
            raise error("noise must be {bitflip: RATE, for_s: SECONDS}")
        rate, for_s = noise["bitflip"], noise.get("for_s", math.inf)
        if not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise error(f"noise bitflip must be a probability per bit in [0, 1], not {rate!r}")
        if not isinstance(for_s, (int, float)) or not for_s > 0:
            raise error(f"noise for_s must be seconds > 0, not {for_s!r}")
        return replace(action, bitflip=float(rate), for_s=float(for_s))
    target = entry[kind]
    if isinstance(target, bool) or not isinstance(target, (int, str)) or target == "":
        raise error(f"{kind} names a part by blueprint name, tree path or bus ID, not {target!r}")
    action = replace(action, target=target)
    new_part = entry.get("with") if kind == "swap" else entry.get("part")
    if kind == "swap" and new_part is None:
        raise error("swap needs with: (the catalog part put in its place)")
    if new_part is not None:
        if not isinstance(new_part, str) or new_part not in part_names():
            raise error(f"no catalog part {new_part!r}; known: {', '.join(part_names())}")
        load_part(new_part)
        action = replace(action, new_part=new_part)
    if kind == "plug" and new_part is not None:
        if not isinstance(target, int) or "parent" not in entry or not isinstance(entry.get("port"), str):
            raise error("a new part needs its bus ID (plug: 60), parent: (name or ID) and port:")
        action = replace(action, parent=entry["parent"], port=entry["port"])
    elif {"parent", "port"} & set(entry) or (kind not in ("swap", "plug") and new_part is not None):
        raise error("parent:, port: and part: belong to plug of a new part only")
    return action


@dataclass
class FaultPlan:
    """The actions of one trial, bound to one robot's bus IDs and run at their times on its world."""

    actions: tuple[FaultAction, ...]
    done: list[tuple[float, str]] = field(default_factory=list)  # (world time, what was done)

    def bind(self, resolve: Callable[[Any], int | None]) -> None:
        """Every name to its bus ID (``resolve``: name or ID -> ID, None if the robot has no such part)."""
        bound = []
        for action in self.actions:
            if action.kind == "noise":
                bound.append(action)
                continue
            fresh_id = action.kind == "plug" and action.new_part is not None
            device_id = action.target if fresh_id else resolve(action.target)
            if device_id is None:
                raise action.error(f"{action.kind} {action.target!r}: the robot has no such part (give a blueprint "
                                   "name, a tree path or a bus ID)")
            if fresh_id and resolve(action.target) is not None:
                raise action.error(f"plug {action.target}: id {action.target} is already taken")
            parent_id = resolve(action.parent) if fresh_id else None
            if fresh_id and parent_id is None:
                raise action.error(f"plug {action.target}: no parent part {action.parent!r}")
            bound.append(replace(action, device_id=device_id, parent_id=parent_id))
        self.actions = tuple(bound)

    def attach(self, world: Any, device: Any, seed: int = 0) -> None:
        """Run each action in the pre-step hook of the world step at or after its time."""
        self._world, self._device, self._made_injector = world, device, False
        self._arm(seed)
        world.add_pre_step(self._step)

    @property
    def restartable(self) -> bool:
        """Whether :meth:`restart` can put the plan back: no action changes which parts the robot is made of (a
        swap, a plug of a new part), so a world put back to its start is the world the plan started on."""
        return not any(a.kind == "swap" or (a.kind == "plug" and a.new_part is not None) for a in self.actions)

    def restart(self, seed: int) -> None:
        """Every action pending again, from the world's time now, the noise off and its generator drawn from
        ``seed``: for a world just put back to its start state (the gym's reset), whose parts' power and silence
        the caller has put back too (the device's ``silent_until``)."""
        if not self.restartable:
            raise ValueError("a plan that swaps or adds parts cannot start over on the same world")
        if self._made_injector:
            self._device.faults, self._made_injector = None, False  # made again, from ``seed``, by the first noise
        self._arm(seed)

    def _arm(self, seed: int) -> None:
        self._pending, self._noise_ends, self._seed = list(self.actions), [], seed
        self._start_s = self._world.time_s
        self.done.clear()

    def _step(self, w: Any) -> None:
        t = w.time_s - self._start_s
        device, noise_ends, pending = self._device, self._noise_ends, self._pending
        while noise_ends and t >= noise_ends[0] - 1e-9:
            noise_ends.pop(0)
            device.faults.bit_flip_rate = 0.0
            self.done.append((t, "noise off"))
        while pending and t >= pending[0].at_s - 1e-9:
            action = pending.pop(0)
            self._apply(action, device, self._seed, noise_ends, t)

    def _apply(self, action: FaultAction, device: Any, seed: int, noise_ends: list[float], t: float) -> None:
        kind, device_id = action.kind, action.device_id
        if kind == "noise":
            if device.faults is None:
                device.faults, self._made_injector = FaultInjector(seed=seed), True
            device.faults.bit_flip_rate = action.bitflip
            noise_ends.append(t + action.for_s)
            noise_ends.sort()
        elif kind == "plug" and action.new_part is not None:
            hotplug.add(device, device_id, action.new_part, action.parent_id, action.port)
        else:
            hotplug.act(device, kind, device_id, new_part=action.new_part)
        self.done.append((t, f"{kind} {action.target}" + (f" with {action.new_part}" if action.new_part else "")))


def load_fault_file(path: str, duration_s: float | None = None) -> FaultPlan:
    """``hil sim --faults FILE``: a YAML list of the same entries (or a mapping with ``faults:``), checked at
    file:line."""
    from hil.devices.yaml_source import load_yaml_file

    doc = load_yaml_file(path)
    entries = doc.get("faults") if isinstance(doc, dict) else doc
    line = getattr(doc, "line", None)
    lines = getattr(entries, "line_of", None)
    return FaultPlan(parse_faults(entries, str(path), line, duration_s, lines))


def assembly_resolver(parts: Any, semantics_path: str | None = None) -> Callable[[Any], int | None]:
    """Name -> bus ID on a served device (or an assembly not yet opened: a sweep checks its conditions' faults
    with it at load): a bus ID, a tree path (port names from the root, as ``hil scan`` shows them; ``PATH:JOINT``
    names a joint of the part there, as the runtime's default joint names do) or, with a semantics file, a
    blueprint name (its target: a tree path or ``serial:HEX``, optionally ``:JOINT``)."""
    from hil.devices.yaml_source import load_yaml_file

    parts = list(parts)
    ids = {p.id for p in parts}
    parent_of = {child: (p.id, port) for p in parts for port, child in hotplug._children(p).items()}
    paths = {}
    for p in parts:
        names, cur = [], p.id
        while cur in parent_of:
            cur, port = parent_of[cur]
            names.append(port)
        paths["/".join(reversed(names)) or "root"] = p.id
    by_serial = {getattr(p, "serial_number", None): p.id for p in parts}
    named: dict[str, int | None] = {}
    if semantics_path:
        doc = load_yaml_file(semantics_path) or {}
        for group in ("joints", "sensors"):
            for name, target in (doc.get(group) or {}).items():
                text = str(target)
                if text.startswith("serial:"):
                    try:
                        named[str(name)] = by_serial.get(int(text[len("serial:"):].split(":")[0], 16))
                    except ValueError:
                        named[str(name)] = None
                else:
                    named[str(name)] = paths.get(text.split(":")[0])

    def resolve(name: Any) -> int | None:
        if isinstance(name, int):
            return name if name in ids else None
        if name in named:
            return named[name]
        return paths.get(str(name).split(":")[0])

    return resolve
