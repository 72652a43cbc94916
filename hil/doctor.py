"""``hil doctor``: what this machine has for each of hil's features, and what to install or change, one line each.

Core (a trial on the virtual robot needs it): the Python version, the core dependencies, a pybullet world, the
built-in config and a crowd that compiles once (numba's cache). Optional (one feature each): the real robot's
serial ports (permissions, FTDI latency timers), the cameras (EGL for moderngl, Pillow to record), the viewer
(viser; Chromium for its browser tests), ROS 2 (a Python where rclpy imports), sweeps, pytest, a C compiler for
native controllers, a display for ``--gui``.

Exit status 0 when every core thing works (optional ones may be missing: the last line says so), 1 when a core
thing is broken. Only this module is imported for ``hil doctor`` (hil/cli.py), and each check imports what it
checks inside a ``try``: the doctor must answer on the machine where hil is broken.
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OK, MISSING, WARN, BROKEN = "ok", "missing", "warn", "BROKEN"
CORE_MODULES = ("numpy", "pybullet", "zmq", "msgpack", "msgspec", "mcap", "numba", "yaml", "serial", "usb",
                "scipy", "foxglove", "cryptography")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SERIAL_GLOBS = ("ttyUSB*", "ttyACM*")


@dataclass(frozen=True)
class Finding:
    status: str  # OK, MISSING (an optional feature lacks it), WARN (works, but not as it should), BROKEN (core)
    what: str  # the thing checked
    detail: str  # what was found, and for anything not OK what to install or change

    def line(self) -> str:
        return f"{self.status:<8} {self.what}: {self.detail}"


def _imports(name: str) -> str | None:
    """None when ``name`` imports, else why not (one line)."""
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything, not only ImportError
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


# ---- core ----------------------------------------------------------------------------------------------------------

def check_python() -> list[Finding]:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 10):
        return [Finding(BROKEN, "python", f"{version} at {sys.executable}: hil needs 3.10 or later")]
    return [Finding(OK, "python", f"{version} at {sys.executable}")]


def check_core_modules() -> list[Finding]:
    broken = {name: why for name in CORE_MODULES if (why := _imports(name)) is not None}
    if broken:
        names = ", ".join(f"{name} ({why})" for name, why in broken.items())
        return [Finding(BROKEN, "core dependencies", f"{names}: pip install hil (or pip install -e . in a checkout) "
                                                     "installs them")]
    return [Finding(OK, "core dependencies", f"{len(CORE_MODULES)} import ({', '.join(CORE_MODULES)})")]


def check_pybullet() -> list[Finding]:
    try:
        import pybullet

        client = pybullet.connect(pybullet.DIRECT)
        try:
            body = pybullet.createMultiBody(baseMass=1.0)
        finally:
            pybullet.disconnect(client)
    except Exception as exc:  # noqa: BLE001
        return [Finding(BROKEN, "pybullet", f"no world starts ({type(exc).__name__}: {exc}): pip install --force-"
                                            "reinstall pybullet")]
    return [Finding(OK, "pybullet", f"a DIRECT world starts (body {body}); the virtual robot's physics")]


def check_config() -> list[Finding]:
    try:
        from hil.devices.config_path import builtin_examples, builtin_root

        root = builtin_root()
        missing = [p for p in ("robots/commbot.yaml", "maps/arcade.yaml", "profiles/virtual.yaml")
                   if not (root / p).is_file()]
        if not (builtin_examples() / "guide_robot.py").is_file():
            missing.append("examples/guide_robot.py")
    except Exception as exc:  # noqa: BLE001
        return [Finding(BROKEN, "built-in config", f"{type(exc).__name__}: {exc}")]
    if missing:
        return [Finding(BROKEN, "built-in config", f"{', '.join(missing)} missing under {root.parent}: the install "
                                                   "is incomplete; pip install --force-reinstall hil")]
    return [Finding(OK, "built-in config", f"robots, maps, profiles and examples in {root.parent}")]


def numba_cache_dir(kernel: Path, environ: dict[str, str] | None = None) -> Path:
    """Where numba keeps the crowd's compiled step, as numba chooses it: $NUMBA_CACHE_DIR, else the __pycache__
    beside the source when writable, else the user's cache folder."""
    environ = os.environ if environ is None else environ
    if environ.get("NUMBA_CACHE_DIR"):
        return Path(environ["NUMBA_CACHE_DIR"])
    beside = kernel.parent / "__pycache__"
    if _writable(beside):
        return beside
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba"


def _writable(folder: Path) -> bool:
    probe = folder if folder.exists() else folder.parent
    return os.access(probe, os.W_OK | os.X_OK)


def check_numba_cache() -> list[Finding]:
    try:
        import hil.crowd as crowd  # the package alone: its kernel compiles on import of crowd.sim

        kernel = Path(crowd.__file__).resolve().parent / "kernel.py"
    except Exception as exc:  # noqa: BLE001
        return [Finding(BROKEN, "crowd compile cache", f"hil.crowd does not import ({exc})")]
    folder = numba_cache_dir(kernel)
    if not _writable(folder):
        return [Finding(WARN, "crowd compile cache", f"{folder} is not writable: every crowd process compiles its "
                                                     "step again (~15 s); set NUMBA_CACHE_DIR to a writable folder")]
    compiled = any(folder.glob("kernel.*.nbi")) if folder.is_dir() else False
    if not compiled:
        return [Finding(OK, "crowd compile cache", f"{folder} is writable; not compiled yet: the first crowd takes "
                                                   "~15 s (python -c 'from hil.crowd.sim import warm_up; "
                                                   "warm_up()' does it now)")]
    return [Finding(OK, "crowd compile cache", f"{folder}: compiled, a crowd starts in under a second")]


# ---- the real robot ------------------------------------------------------------------------------------------------

def serial_devices(dev: Path = Path("/dev")) -> list[Path]:
    return sorted(p for pattern in SERIAL_GLOBS for p in dev.glob(pattern))


def check_serial_permissions(dev: Path = Path("/dev")) -> list[Finding]:
    what = "serial permissions (real robot)"
    devices = serial_devices(dev)
    if os.geteuid() == 0:
        return [Finding(OK, what, "running as root: every serial port opens")]
    closed = [str(p) for p in devices if not os.access(p, os.R_OK | os.W_OK)]
    if closed:
        return [Finding(MISSING, what, f"{', '.join(closed)} not open to you: sudo usermod -aG "
                                       f"{_serial_group(devices)} $USER, then log in again")]
    if devices:
        return [Finding(OK, what, f"{', '.join(map(str, devices))} open to you")]
    group = _serial_group(devices)
    if _in_group(group):
        return [Finding(OK, what, f"no serial adapter plugged in; you are in {group}, so one will open")]
    return [Finding(MISSING, what, f"no serial adapter plugged in, and you are not in {group}: sudo usermod -aG "
                                   f"{group} $USER, then log in again (for the real robot only)")]


def _serial_group(devices: list[Path]) -> str:
    import grp

    for device in devices:
        try:
            return grp.getgrgid(device.stat().st_gid).gr_name
        except (KeyError, OSError):
            continue
    for name in ("dialout", "uucp"):  # Debian and Fedora's, Arch's
        try:
            grp.getgrnam(name)
            return name
        except KeyError:
            continue
    return "dialout"


def _in_group(name: str) -> bool:
    import grp

    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        return False
    return gid in os.getgroups() or gid == os.getgid()


def check_latency_timers() -> list[Finding]:
    what = "FTDI latency timers (real robot)"
    try:
        from hil.runtime.ports import list_adapters

        adapters = list_adapters()
    except Exception as exc:  # noqa: BLE001
        return [Finding(WARN, what, f"cannot list serial adapters ({type(exc).__name__}: {exc})")]
    timed = [a for a in adapters if a.latency_timer_ms is not None]
    if not timed:
        return [Finding(OK, what, "no FTDI adapter plugged in: nothing to set (hil ports lists adapters)")]
    findings = []
    for adapter in timed:
        if adapter.warnings:
            findings.append(Finding(WARN, what, f"{adapter.device}: {adapter.warnings[0]}"))
        else:
            findings.append(Finding(OK, what, f"{adapter.device}: {adapter.latency_timer_ms} ms"))
    return findings


# ---- optional features ---------------------------------------------------------------------------------------------

def check_cameras() -> list[Finding]:
    what = "cameras (EGL, moderngl)"
    try:
        from hil.firmware_sim.render.gl import RendererUnavailable, open_context

        ctx = open_context()
        renderer = ctx.info.get("GL_RENDERER", "?")
        ctx.release()
        found = [Finding(OK, what, f"an EGL OpenGL context renders ({renderer})")]
    except RendererUnavailable as exc:
        found = [Finding(MISSING, what, f"{exc}; without it cameras draw with pybullet's TinyRenderer")]
    except Exception as exc:  # noqa: BLE001
        found = [Finding(MISSING, what, f"{type(exc).__name__}: {exc}; pip install 'hil[camera]'")]
    why = _imports("PIL")
    found.append(Finding(OK, "camera recording (Pillow)", "trials can record camera images") if why is None else
                 Finding(MISSING, "camera recording (Pillow)", "trials record no camera images: pip install "
                                                               "'hil[camera]'"))
    return found


def check_viewer(which: Callable[[str], str | None] = shutil.which) -> list[Finding]:
    found = [Finding(OK, "viewer (viser)", "hil view serves its page") if _imports("viser") is None else
             Finding(MISSING, "viewer (viser)", "hil view needs it: pip install 'hil[view]'")]
    browser = next((path for name in CHROMIUM_NAMES if (path := which(name))), None)
    if browser:
        found.append(Finding(OK, "Chromium (the viewer's tests)", browser))
    else:
        found.append(Finding(MISSING, "Chromium (the viewer's tests)", "not on PATH: sudo apt-get install chromium "
                                                                        "(hil view itself works in any browser)"))
    return found


def check_ros() -> list[Finding]:
    what = "ROS 2 (rclpy)"
    try:
        from hil.trial.ros_link.launch import RosUnavailable, find_ros_python

        python = find_ros_python()
    except RosUnavailable as exc:
        return [Finding(MISSING, what, str(exc).removeprefix("hil ros: "))]
    except Exception as exc:  # noqa: BLE001
        return [Finding(MISSING, what, f"{type(exc).__name__}: {exc}")]
    return [Finding(OK, what, f"rclpy imports in {python} (hil ros, hil trial --ros)")]


def check_extras(which: Callable[[str], str | None] = shutil.which) -> list[Finding]:
    found = []
    for what, modules, fix in (("sweeps (dask, matplotlib)", ("distributed", "matplotlib"), "pip install 'hil[sweep]'"),
                               ("scenario tests (pytest)", ("pytest",), "pip install 'hil[pytest]'")):
        missing = [m for m in modules if _imports(m) is not None]
        found.append(Finding(OK, what, "installed") if not missing else
                     Finding(MISSING, what, f"{', '.join(missing)} not installed: {fix}"))
    compiler = which("cc") or which("gcc") or which("clang")
    found.append(Finding(OK, "C compiler (native controllers)", compiler) if compiler else
                 Finding(MISSING, "C compiler (native controllers)", "no cc on PATH: sudo apt-get install gcc "
                                                                      "(hil run --native builds its clock shim)"))
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    found.append(Finding(OK, "display (--gui)", display) if display else
                 Finding(MISSING, "display (--gui)", "DISPLAY is not set: --gui needs a desktop session (or "
                                                     "xvfb-run); trials run the same without it"))
    return found


CORE: tuple[Callable[[], list[Finding]], ...] = (check_python, check_core_modules, check_pybullet, check_config,
                                                   check_numba_cache)
OPTIONAL: tuple[Callable[[], list[Finding]], ...] = (check_serial_permissions, check_latency_timers, check_cameras,
                                                       check_viewer, check_ros, check_extras)


def diagnose() -> tuple[list[Finding], list[Finding]]:
    """(core findings, optional findings). A check that fails in a way it did not foresee is itself a finding."""
    def run(checks, status):
        found = []
        for check in checks:
            try:
                found += check()
            except Exception as exc:  # noqa: BLE001 - the doctor reports, never crashes
                found.append(Finding(status, check.__name__.removeprefix("check_"), f"{type(exc).__name__}: {exc}"))
        return found
    return run(CORE, BROKEN), run(OPTIONAL, WARN)


def cmd_doctor(args: argparse.Namespace) -> int:
    core, optional = diagnose()
    for finding in [*core, *optional]:
        print(finding.line(), flush=True)
    broken = [f for f in core if f.status == BROKEN]
    missing = [f for f in optional if f.status != OK]
    if broken:
        print(f"hil doctor: {len(broken)} core thing(s) broken: trials cannot run until they are fixed")
        return 1
    print(f"hil doctor: the core works (trials on the virtual robot run); {len(missing)} optional thing(s) "
          f"missing or to change{': only the features named need them' if missing else ''}")
    return 0


def register(sub) -> None:
    doctor = sub.add_parser("doctor", help="check this machine for what hil's features need, and say what to "
                                           "install or change", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    doctor.set_defaults(func=cmd_doctor)
