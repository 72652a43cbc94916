"""The folder tree's promise: imports point down, and no module imports itself round a circle.

Read from the sources (ast), so a lazy import inside a function counts as much as one at the top (a circle that
only closes at run time is still a circle), and so does an import under ``if TYPE_CHECKING:`` (a module that
needs only a type of a higher one names it by a small Protocol instead, as runtime/robot/view.py does). The
layers, lowest first:

    devices -> bridge -> firmware_sim, crowd -> runtime -> trial -> hil (the command line), hil.gym

Every module is named as it is imported, hil.runtime.robot.robot; a layer is the name after ``hil.`` (``hil``
itself for hil/cli.py and hil/__init__.py; ``gym`` for hil/gym/, the Gymnasium environment, which sits on top
beside the command line and which nothing imports). An import of a bare old name (``runtime.x``) is no module of ours and
is reported too.

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
SUBPACKAGES = PACKAGES[:-1]
ALLOWED = {
    "devices": {"devices", "hil"},  # hil: importlib.resources anchor of the built-in config (config_path.py)
    "bridge": {"bridge", "devices"},
    "firmware_sim": {"firmware_sim", "devices", "bridge"},
    "crowd": {"crowd", "bridge", "devices"},
    "runtime": {"runtime", "devices", "bridge", "firmware_sim"},
    "trial": {"trial", "runtime", "firmware_sim", "crowd", "bridge", "devices", "hil"},
    "hil": set(PACKAGES),
    "gym": {"gym", *PACKAGES},  # hil/gym: the environment over trials; no layer (nor the command line) imports it
}
# where a lower layer may reach a higher one, and why (each is lazy, inside a function)
EXCEPTIONS = {
    ("runtime", "firmware_sim"): {"runtime/transports/sim.py", "runtime/robot/overlay.py",
                                  "runtime/native/session.py"},  # serves an in-process device on a pty
    ("devices", "hil"): {"devices/config_path.py"},
    ("trial", "hil"): {"trial/versions.py"},
}
# the crowd reads config through these: YAML with lines, the map format, config paths, the surface table (a
# scripted person's clothing is checked against it)
CROWD_FROM_DEVICES = {"hil.devices.yaml_source", "hil.devices.map_format", "hil.devices.config_path", "hil.devices",
                      "hil.devices.surfaces"}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ours by its import name (hil.runtime.robot.robot), read from the folders under ``root``."""
    found = {}
    for package in SUBPACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = ("hil",) + path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in (root / "hil").glob("*.py"):
        found["hil" if path.stem == "__init__" else f"hil.{path.stem}"] = path
    for path in (root / "hil" / "gym").rglob("*.py"):
        parts = ("hil",) + path.relative_to(root / "hil").with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _layer(name: str) -> str:
    """hil.runtime.robot -> runtime; hil.gym.env -> gym; hil.cli and hil -> hil."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] == "gym":
        return "gym"
    return parts[1] if len(parts) > 1 and parts[1] in SUBPACKAGES else "hil"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports (absolute and relative; at the top, inside functions, or under
    ``if TYPE_CHECKING:``, which the type checker follows as it follows any other)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
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
            if target.split(".")[0] in SUBPACKAGES:
                out.add(f"(bare) {target}")  # the old top-level names are gone: such an import fails
                continue
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target.split(".")[0] == "hil":
                out.add(target)
    out.discard(name)
    return out


def test_imports_point_down():
    wrong = _wrong_layers(_modules())
    assert not wrong, "\n".join(sorted(wrong))


def _wrong_layers(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    wrong = []
    for name, path in modules.items():
        package = _layer(name)
        rel = str(path.relative_to(root))
        for target in _imports(name, path, modules):
            if target.startswith("(bare) "):
                wrong.append(f"{rel} imports {target[7:]}: the package is hil.{target[7:]}")
                continue
            other = _layer(target)
            if other in ALLOWED[package] and rel not in EXCEPTIONS.get((package, other), {rel}) and \
                    (package, other) in EXCEPTIONS:
                wrong.append(f"{rel} imports {target} (only {sorted(EXCEPTIONS[(package, other)])} may)")
            elif other not in ALLOWED[package]:
                wrong.append(f"{rel} imports {target}")
            if package == "crowd" and other == "devices" and target not in CROWD_FROM_DEVICES:
                wrong.append(f"{rel} imports {target} (the crowd reads only devices' config helpers)")
    return wrong


def test_no_module_imports_itself_round_a_circle():
    cycles = _cycles(_modules())
    assert not cycles, "\n".join(cycles)


def _cycles(modules: dict[str, Path]) -> list[str]:
    """Every circle of imports among ``modules``, each as "a -> b -> a" (one per back edge of a depth-first walk)."""
    graph = {name: {t for t in _imports(name, path, modules) if not t.startswith("(bare) ")}
             for name, path in modules.items()}
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
    return cycles


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """A synthetic source tree under ``root`` (path -> text), read as the real one is."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return _modules(root)


def test_a_circle_closed_only_by_type_checking_and_function_local_imports_is_found(tmp_path):
    modules = _tree(tmp_path, {
        "runtime/__init__.py": "",
        "runtime/robot/__init__.py": "",
        "runtime/robot/robot.py": "from .presence import watch\n",
        "runtime/robot/presence.py": ("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from .adoption import adopt\n"),
        "runtime/robot/adoption.py": "def adopt():\n    from hil.runtime.robot import robot\n",
        "runtime/robot/view.py": "from typing import Protocol\nclass RobotView(Protocol): ...\n",
    })
    assert _cycles(modules) == ["hil.runtime.robot.adoption -> hil.runtime.robot.robot -> "
                                "hil.runtime.robot.presence -> hil.runtime.robot.adoption"]
    (tmp_path / "runtime/robot/adoption.py").write_text("from .view import RobotView\n", encoding="utf-8")
    assert _cycles(modules) == [], "the circle is gone once adoption names the robot by a Protocol"


def test_an_upward_import_under_type_checking_is_found(tmp_path):
    modules = _tree(tmp_path, {
        "bridge/__init__.py": "",
        "bridge/link.py": ("from typing import TYPE_CHECKING\n"
                           "if TYPE_CHECKING:\n    from hil.runtime.robot import Robot\n"),
        "runtime/__init__.py": "",
        "runtime/robot.py": "class Robot: ...\n",
    })
    assert _wrong_layers(modules, tmp_path) == ["bridge/link.py imports hil.runtime.robot"]
