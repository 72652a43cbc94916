"""The folder tree's promise: imports point down, and no module imports itself round a circle.

Read from the sources (ast), so a lazy import inside a function counts as much as one at the top: a circle that
only closes at run time is still a circle. The layers, lowest first:

    devices -> bridge -> firmware_sim, crowd -> runtime -> trial -> hil

with the departures docs/ARCHITECTURE.md records: crowd reads devices' YAML loader, map format and config search
path; runtime reaches firmware_sim only in the sim:// transport, the mixed-trial overlay and the native
launcher's pty of an in-process device (lazily); hil's
package is also the anchor of the built-in data (devices.config_path, trial.versions read it, no code).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("devices", "bridge", "firmware_sim", "crowd", "runtime", "trial", "hil")
ALLOWED = {
    "devices": {"devices", "hil"},  # hil: importlib.resources anchor of the built-in config (config_path.py)
    "bridge": {"bridge", "devices"},
    "firmware_sim": {"firmware_sim", "devices", "bridge"},
    "crowd": {"crowd", "bridge", "devices"},
    "runtime": {"runtime", "devices", "bridge", "firmware_sim"},
    "trial": {"trial", "runtime", "firmware_sim", "crowd", "bridge", "devices", "hil"},
    "hil": set(PACKAGES),
}
# where a lower layer may reach a higher one, and why (each is lazy, inside a function)
EXCEPTIONS = {
    ("runtime", "firmware_sim"): {"runtime/transports/sim.py", "runtime/robot/overlay.py",
                                  "runtime/native/session.py"},  # serves an in-process device on a pty
    ("devices", "hil"): {"devices/config_path.py"},
    ("trial", "hil"): {"trial/versions.py"},
}
CROWD_FROM_DEVICES = {"devices.yaml_source", "devices.map_format", "devices.config_path", "devices"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports (absolute and relative, top level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    out = set()
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for stmt in block.body for n in ast.walk(stmt)}  # annotations only: never run
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - node.level + 1]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target.split(".")[0] in PACKAGES:
                out.add(target)
    out.discard(name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def test_imports_point_down():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        package = name.split(".")[0]
        rel = str(path.relative_to(ROOT))
        for target in _imports(name, path, modules):
            other = target.split(".")[0]
            if other in ALLOWED[package] and rel not in EXCEPTIONS.get((package, other), {rel}) and \
                    (package, other) in EXCEPTIONS:
                wrong.append(f"{rel} imports {target} (only {sorted(EXCEPTIONS[(package, other)])} may)")
            elif other not in ALLOWED[package]:
                wrong.append(f"{rel} imports {target}")
            if package == "crowd" and other == "devices" and target not in CROWD_FROM_DEVICES:
                wrong.append(f"{rel} imports {target} (the crowd reads only devices' config helpers)")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_imports_itself_round_a_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ re-exporting its own modules is not a circle of dependencies between modules
    for name in graph:
        graph[name] = {t for t in graph[name] if not (t != name and name.startswith(t + ".") and
                                                      modules[t].name == "__init__.py")}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)
