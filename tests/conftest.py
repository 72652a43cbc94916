"""Shared fixtures: the virtual bus device as a real subprocess (pty or TCP), and our host over every transport.

Every fixture here is function-scoped: each test gets a freshly started device (17 XM430-compatible servos,
IDs 1..17, factory state), so no test depends on what another one wrote. Starting ``hil sim`` takes well under
a tenth of a second, which keeps that affordable.

Nothing may hang: the first stdout line is awaited with a deadline, a device that does not say where it
listens is killed, and teardown escalates from SIGTERM to SIGKILL with bounded waits.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hil.bridge.process import spawn
from hil.runtime.bus import BusHost
from hil.runtime.transports import open_transport

def pytest_sessionstart(session) -> None:
    """Compile the crowd's step (numba) once, before any test starts a crowd process that must answer within a
    deadline: the first compile after an install takes ~15 s, later processes load the disk cache in ~0.4 s."""
    from hil.crowd.sim import warm_up

    warm_up()
    if not hasattr(session.config, "workerinput"):  # the controller (or the one process of -n 0)
        start_background_builds(session.config)


# Folders built once per run (tests/once.py) that mostly wait on the real clock: test file -> (folder, builder).
# Started when the session starts, in the background, so they overlap with CPU-bound tests instead of holding a
# worker idle (the mixed calibration's three real-clock runs take ~2 min, nearly all of it waiting).
BACKGROUND_BUILDS = {"test_calibration_mixed.py": ("calibrate-mixed", "test_calibration_mixed:record_runs")}
_background: list[subprocess.Popen] = []


def runs_test_file(config: pytest.Config, name: str) -> bool:
    """Whether this session's arguments select the test file ``name`` (itself or a folder holding it) with no -k or
    -m that may deselect it: only then is its background build worth starting."""
    if config.option.keyword or config.option.markexpr or config.option.collectonly:
        return False
    target = Path(__file__).resolve().parent / name
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path == target or path in target.parents:
            return True
    return False


def start_background_builds(config: pytest.Config) -> None:
    from once import start_in_background

    for name, (folder, builder) in BACKGROUND_BUILDS.items():
        if runs_test_file(config, name):
            _background.append(start_in_background(config, folder, builder))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of a background build run last (a stable move, the same in every worker): the build then has the
    whole run to overlap with, where the file's place in the alphabet would have them wait on it early on."""
    items.sort(key=lambda item: item.path.name in BACKGROUND_BUILDS)


def pytest_sessionfinish(session) -> None:
    """A background build still running when the session ends (a -x stop, an interrupt) ends with it."""
    for child in _background:
        if child.poll() is None:
            child.kill()
        child.wait()


ASSEMBLY = "servo_chain"
SERVO_IDS = tuple(range(1, 18))
XM430_MODEL = 1020
FIRMWARE_VERSION = 46

STARTUP_TIMEOUT_S = 15.0  # generous: a loaded CI machine may be slow to import; a healthy start takes ~0.1 s
STOP_TIMEOUT_S = 5.0
HOST_TIMEOUT_S = 0.1  # per attempt; the device answers in well under a millisecond when nothing is emulated


def hil_command() -> list[str]:
    """The ``hil`` entry point of this interpreter (the package is installed in editable mode)."""
    script = Path(sys.executable).with_name("hil")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "hil"]


class SimProcess:
    """One ``hil sim`` subprocess; :attr:`where` is the first line it printed (pty path or socket:// URL)."""

    def __init__(self, *args: str, assembly: str = ASSEMBLY):
        self._stderr = tempfile.TemporaryFile()
        self.proc = spawn([*hil_command(), "sim", assembly, *args], stdin=subprocess.DEVNULL,  # dies with us
                          stdout=subprocess.PIPE, stderr=self._stderr)
        self._buf = b""
        try:
            self.where = self._first_line(STARTUP_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise

    def next_line(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        """The next line the device printed (after its address), e.g. ``clock tcp://...`` with --clock sim."""
        return self._first_line(timeout_s)

    def _first_line(self, timeout_s: float) -> str:
        fd = self.proc.stdout.fileno()
        os.set_blocking(fd, False)
        buf = self._buf
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(f"hil sim printed no address within {timeout_s} s; stderr: {self.stderr()!r}")
                if not sel.select(remaining):
                    continue
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.proc.wait(timeout=STOP_TIMEOUT_S)
                    raise RuntimeError(f"hil sim exited with {self.proc.returncode} before printing an address; "
                                       f"stderr: {self.stderr()!r}")
                buf += chunk
        line, self._buf = buf.split(b"\n", 1)
        line = line.decode().strip()
        if not line:
            raise RuntimeError(f"hil sim printed an empty first line; stderr: {self.stderr()!r}")
        return line

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited in time; returns the exit code."""
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        if proc.stdout is not None:
            proc.stdout.close()
        self._stderr.close()
        return proc.returncode


@pytest.fixture
def sim_pty_process():
    """A fresh ``hil sim servo_chain --pty`` subprocess (the :class:`SimProcess`)."""
    sim = SimProcess("--pty")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def sim_tcp_process():
    """A fresh ``hil sim servo_chain --tcp 0`` subprocess (the :class:`SimProcess`)."""
    sim = SimProcess("--tcp", "0")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def sim_pty(sim_pty_process) -> str:
    """Path of the pty a fresh virtual device serves (a real serial path, e.g. /dev/pts/3)."""
    path = sim_pty_process.where
    assert path.startswith("/dev/"), path
    return path


@pytest.fixture
def sim_tcp(sim_tcp_process) -> str:
    """socket://127.0.0.1:PORT URL of a fresh virtual device served on TCP."""
    url = sim_tcp_process.where
    assert url.startswith("socket://127.0.0.1:"), url
    return url


TRANSPORTS = ("sim", "pty", "tcp")


@pytest.fixture(params=TRANSPORTS)
def bus_url(request) -> str:
    """The URL of a fresh device, over each transport our host supports: in-process, pty, TCP."""
    if request.param == "sim":
        return f"sim://{ASSEMBLY}"  # open_transport builds a new in-process device for every open
    if request.param == "pty":
        return request.getfixturevalue("sim_pty")
    return request.getfixturevalue("sim_tcp")


@pytest.fixture
def bus(bus_url):
    """Our host controller on a fresh device, over each of the three transports."""
    host = BusHost(open_transport(bus_url), timeout_s=HOST_TIMEOUT_S)
    try:
        yield host
    finally:
        host.close()


# --- "real" robots for mixed and multi-bus tests: virtual devices in other processes, on the real clock ----------
ARCADE_WEST_HALL = (-18.0, 0.0, 0.0)  # facing east down the arcade's middle passage: nothing real within 4 m ahead


@pytest.fixture(scope="module")
def real_robot():
    """The commbot's "real" stand-in: a virtual device in another process on a pty, paced to wall time, standing
    at ARCADE_WEST_HALL in the arcade."""
    pose = ",".join(f"{v:g}" for v in ARCADE_WEST_HALL)
    sim = SimProcess("--pty", "--clock", "real", "--map", "arcade", f"--pose={pose}", assembly="commbot")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def arm():
    """The left arm alone served by another process on a pty, on the real clock (no world: alone it would fall)."""
    sim = SimProcess("--pty", "--no-world", assembly="left_arm")
    try:
        yield sim
    finally:
        sim.stop()



SHORT_DEMO_S = 7.0  # the staged kid is spawned at 5 s: script lines, a person walking, the robot driving


@pytest.fixture(scope="session")
def short_demo_log(tmp_path_factory):
    """trial.mcap of a 7 s demo (seed 0), recorded once per run of the suite for the Foxglove and viewer tests
    (tests/once.py: they only read it)."""
    from once import once_per_run

    def record(folder: Path) -> None:
        from hil.trial.presets import demo_spec
        from hil.trial.run import Trial

        spec = demo_spec(duration=SHORT_DEMO_S, camera_rate=5.0)  # with its cameras' pictures
        result = Trial(spec=spec).run(folder / "demo")
        assert result.status == "ok", result.error

    return once_per_run(tmp_path_factory, "short-demo", record) / "demo" / "trial.mcap"
