"""Controller parameters: those a controller declares (``PARAMS``), and those that may be changed while it runs
(Foxglove's Parameters panel, live).

A controller declares the parameters it reads, with their defaults, once at the top of its file::

    PARAMS = {"cruise_m_s": 0.4, "avoid_m": 0.5}   # read without running the file: literals or top-level constants

A run then refuses any other name (``--param cruize_m_s=0.5``: the declared ones are named) and gives the
controller the defaults for those it was not given, so ``robot.params["avoid_m"]`` is always there. A controller
without ``PARAMS`` gets whatever it was given, unchecked.

``robot.params`` is the run's parameters, read-only to the controller (a trial's ``params:``). A controller that
wants some of them tunable while it runs says so, once, with their defaults::

    robot.declare_changeable(cruise_m_s=0.6, avoid_m=0.5)   # in the controller, before its loop
    ...
    speed = robot.params["cruise_m_s"]                       # read every tick: a change shows up here

Only declared names may change, and only to a value of the declared type (the default's type, or the trial's
value's when it gave one: bool, int, float, str; an int is accepted for a float). A change is checked whole and
applied whole (:func:`checked_changes`), never half; it is applied by whoever steers the trial between two bus
cycles (trial/foxglove_live), so the controller sees a consistent set from one tick to the next, and it is
recorded in the log as a parameter event.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KINDS = (bool, int, float, str)


class ParamError(ValueError):
    """A parameter change refused: which parameter, what was given, what it takes."""


def declared_kinds(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, type]:
    """The type each declared name takes: of the run's value when it has one, else of the default."""
    kinds = {}
    for name, default in defaults.items():
        value = params.get(name, default)
        kind = type(value)
        if kind not in KINDS:
            raise ParamError(f"parameter {name!r}: only bool, int, float or str may be changeable, not "
                             f"{kind.__name__} ({value!r})")
        kinds[name] = kind
    return kinds


def checked_changes(kinds: Mapping[str, type], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as the values to apply, each converted to its declared type; ParamError for the first that is
    not declared changeable or has the wrong type (nothing applied)."""
    out = {}
    for name, value in changes.items():
        kind = kinds.get(name)
        if kind is None:
            changeable = ", ".join(sorted(kinds)) or "none"
            raise ParamError(f"parameter {name!r} is not changeable while the controller runs (changeable: "
                             f"{changeable})")
        out[name] = _as_kind(name, kind, value)
    return out


def _as_kind(name: str, kind: type, value: Any) -> Any:
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ParamError(f"parameter {name!r}: {value!r} is not a finite number")
        return float(value)
    if type(value) is kind:
        return value
    raise ParamError(f"parameter {name!r} takes a {kind.__name__}, not {type(value).__name__} ({value!r})")


# --- the parameters a controller declares: PARAMS = {"name": default, ...} at the top of its file -------------
PARAMS_NAME = "PARAMS"


def declared_params(controller: Any) -> dict[str, Any] | None:
    """The ``PARAMS`` a controller (runtime.robot.runner.Controller) declares, read without running it: a file's or
    a module's top-level ``PARAMS = {...}`` (keys text; each default a literal or a top-level constant of the same
    file), a callable's ``PARAMS`` attribute. None: it declares none (any parameter is passed unchecked)."""
    if controller.function is not None:
        declared = getattr(controller.function, PARAMS_NAME, None)
        return dict(declared) if isinstance(declared, Mapping) else None
    path = controller.path
    if path is None and controller.module is not None:
        import importlib.util

        found = importlib.util.find_spec(controller.module)
        origin = getattr(found, "origin", None)
        path = Path(origin) if origin and origin.endswith(".py") else None
    return _params_in_file(Path(path)) if path is not None else None


def _params_in_file(path: Path) -> dict[str, Any] | None:
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return None  # the runner says what is wrong with the file when it loads it
    constants: dict[str, ast.AST] = {}
    declared = None
    for node in tree.body:
        target, value = _assignment(node)
        if target is None:
            continue
        constants[target] = value
        if target == PARAMS_NAME:
            declared = (node, value)
    if declared is None:
        return None
    node, value = declared
    where = f"{path}:{node.lineno}"
    if not isinstance(value, ast.Dict) or any(k is None for k in value.keys):
        raise ParamError(f"{where}: PARAMS must be a dict literal {{'name': default, ...}}")
    out = {}
    for key, default in zip(value.keys, value.values):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            raise ParamError(f"{where}: a PARAMS name must be text, not {ast.unparse(key)}")
        out[key.value] = _literal(default, constants, where, key.value)
    return out


def _assignment(node: Any) -> tuple[str | None, Any]:
    import ast

    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None, None


def _literal(node: Any, constants: Mapping[str, Any], where: str, name: str) -> Any:
    """A default: a literal, or the name of a top-level constant of the file that is one."""
    import ast

    if isinstance(node, ast.Name) and node.id in constants and node.id != PARAMS_NAME:
        node = constants[node.id]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ParamError(f"{where}: PARAMS[{name!r}]: a default is a literal (0.4, [1, 2], 'text') or a "
                         f"top-level constant of the file that is one, not {ast.unparse(node)}") from None


def check_declared(given: Mapping[str, Any], declared: Mapping[str, Any] | None, label: str) -> dict[str, Any]:
    """The run's parameters: the declared defaults with ``given`` on top; ParamError naming the first name
    ``given`` has that ``declared`` lacks, and the declared ones. Undeclared (None): ``given`` as it is."""
    if declared is None:
        return dict(given)
    for name in given:
        if name not in declared:
            import difflib

            close = difflib.get_close_matches(name, list(declared), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ParamError(f"{label} declares no parameter {name!r}; {hint}it declares "
                             f"{', '.join(declared) or 'none'} (its PARAMS)")
    return {**declared, **given}
