"""Native programs on the simulator's clock (the simulator-clock reference): the LD_PRELOAD time shim, its relay and
``hil run --native``, with real parts: C programs compiled here with the system compiler, real processes, a real
SOCK_SEQPACKET socket pair, a real pty, a real ZeroMQ clock endpoint and the real pybullet commbot.

The C programs are in tests/native/ (and examples/native/commbot_neck.c); each test says what it expects them to
read. No wall-time assertions: only simulated readings, exit statuses and messages.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from waiting import needs

from hil.bridge.lockstep import ClockServer, LocalParticipant, LockstepCore
from hil.bridge.process import spawn
from hil.runtime.clock import open_clock
from hil.runtime.clock.sim import LockstepClock
from hil.runtime.native import protocol as proto
from hil.runtime.native.build import NativeBuildError, ensure_built, find_compiler
from hil.runtime.native.launch import launch
from hil.runtime.native.relay import ClockRelay
from tests.conftest import hil_command

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCES = {"sixty": HERE / "native" / "sixty_sleeps.c", "threads": HERE / "native" / "two_threads.c",
           "waits": HERE / "native" / "waits.c", "life": HERE / "native" / "lifecycle.c",
           "neck": ROOT / "examples" / "native" / "commbot_neck.c", "cxx": HERE / "native" / "cxx_condvar.cpp"}
EPOCH_NS = 1_700_000_000_000_000_000  # a fixed CLOCK_REALTIME at simulated time 0, for byte-identical traces
S = 1_000_000_000
WAIT_S = 20.0  # bound on waiting for a process to do what it must (a hang fails the test instead)


def _compiler(names: tuple[str, ...] = ("gcc", "cc")) -> str:
    found = next((path for path in map(shutil.which, names) if path), None)
    if found is None:
        needs(f"no compiler ({' or '.join(names)}) on PATH: the native shim tests need one")
    return found


@pytest.fixture(scope="session")
def native_tools(tmp_path_factory):
    """The shim built from the package's sources into a fresh cache (as on first use)."""
    _compiler()
    saved = os.environ.get("HIL_NATIVE_CACHE")
    os.environ["HIL_NATIVE_CACHE"] = str(tmp_path_factory.mktemp("native-cache"))
    try:
        yield ensure_built()
    finally:
        if saved is None:
            os.environ.pop("HIL_NATIVE_CACHE", None)
        else:
            os.environ["HIL_NATIVE_CACHE"] = saved


@pytest.fixture(scope="session")
def programs(native_tools, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("native-programs")
    built = {}
    for name, source in SOURCES.items():
        target = out / name
        compiler = _compiler(("g++", "c++")) if source.suffix == ".cpp" else _compiler()
        subprocess.run([compiler, "-O2", "-pthread", "-Wall", "-o", str(target), str(source)], check=True,
                       capture_output=True)
        built[name] = target
    return built


def bare_clock(name: str) -> LockstepClock:
    """A lockstep master with nothing to step: the clock alone, so only the program's own time is measured."""
    return LockstepClock(LocalParticipant(LockstepCore(lambda t: None), threading.Condition(), name), name)


def run_bare(argv, **kwargs):
    """(NativeRun, stdout, stderr) of ``argv`` on a bare lockstep clock."""
    clock = bare_clock(Path(str(argv[0])).name)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            result = launch([str(a) for a in argv], clock, stdout=out, stderr=err, epoch_ns=EPOCH_NS, **kwargs)
        finally:
            clock.close()
        out.seek(0)
        err.seek(0)
        return result, out.read(), err.read()


# --- acceptance: 60 sleeps of 1 s --------------------------------------------------------------------------------
def test_sixty_one_second_sleeps_read_exactly_sixty_seconds_the_same_way_twice(programs):
    traces = []
    for _ in range(2):
        result, out, err = run_bare([programs["sixty"]])
        assert result.stopped == "exited" and result.returncode == 0, err
        traces.append(out)
    assert traces[0] == traces[1]
    rows = [tuple(int(v) for v in line.split()) for line in traces[0].splitlines()]
    assert [r[0] for r in rows] == list(range(61))
    assert [r[1] for r in rows] == [k * S for k in range(61)]  # monotonic: 0 before the first tick, then 1 s steps
    assert [r[2] - EPOCH_NS for r in rows] == [k * S for k in range(61)]  # realtime moves with it
    assert result.sleeps == 60 and result.clock_s == pytest.approx(60.0)


# --- acceptance: threads -----------------------------------------------------------------------------------------
def test_two_threads_at_different_rates_see_one_simulated_time(programs):
    per_thread_runs = []
    for _ in range(2):
        result, out, err = run_bare([programs["threads"]])
        assert result.returncode == 0, err
        rows = [line.split() for line in out.splitlines()]
        per_thread = {who: [(int(k), int(t)) for w, k, t in rows if w == who] for who in ("fast", "slow", "main")}
        per_thread_runs.append(per_thread)
    fast, slow, main = (per_thread_runs[0][w] for w in ("fast", "slow", "main"))
    # every wake lands exactly on its deadline: neither thread's sleeps moved the other's time
    assert fast == [(k, k * 10_000_000) for k in range(1, 101)]
    assert slow == [(k, k * 25_000_000) for k in range(1, 41)]
    assert main == [(0, 0), (1, S)]
    assert per_thread_runs[0] == per_thread_runs[1]


def test_cxx_condition_variables_and_sleeps_run_on_simulated_time(programs):
    """std::condition_variable::wait_for (pthread_cond_clockwait), notify_one, sleep_for, steady_clock."""
    runs = []
    for _ in range(2):
        result, out, err = run_bare([programs["cxx"]])
        assert result.returncode == 0, err
        runs.append(sorted(tuple(line.split()) for line in out.splitlines()))
    assert runs[0] == runs[1]
    got = {(who, int(k), int(ms)) for who, k, ms in runs[0]}
    assert {(k, ms) for who, k, ms in got if who == "got"} == {(k, 30 * k) for k in range(1, 11)}  # as produced
    assert {(k, ms) for who, k, ms in got if who == "timeout"} == {(1, 70), (2, 140), (3, 210)}  # nobody notified
    assert ("end", 0, 300) in got and not any(who in ("missed", "woken") for who, _, _ in got)


# --- waits with timeouts -----------------------------------------------------------------------------------------
def test_poll_select_epoll_timeouts_are_simulated_and_data_ends_them_early(programs):
    result, out, err = run_bare([programs["waits"]], io_grace_ms=0)
    assert result.returncode == 0, err
    steps = {line.split()[0]: [int(v) for v in line.split()[2::2]] for line in out.splitlines()}
    for kind in ("poll", "select", "epoll"):
        assert steps[f"{kind}-timeout"] == [0, 0, 250_000_000], kind  # rc 0, nothing ready, exactly 250 ms
        assert steps[f"{kind}-data"] == [1, 1, 300_000_000], kind  # the pipe was written at 300 ms of 2 s
    assert steps["spin"] == [0, 0, 50_000_000]  # a busy-wait on the clock still gets its 50 ms, in 1 ms quanta


# --- acceptance: the commbot driven by a C program over the pty --------------------------------------------------
def _twin_trace(ticks: int) -> list[str]:
    sys.path.insert(0, str(ROOT / "examples" / "native"))
    try:
        import commbot_neck
    finally:
        sys.path.pop(0)
    lines: list[str] = []
    commbot_neck.run("sim://commbot?clock=sim", ticks, out=lines.append)
    return lines


def test_c_controller_over_the_pty_gives_the_python_twins_joint_trace(programs):
    ticks = 100
    done = subprocess.run([*hil_command(), "run", "--native", "--profile", "virtual", "--duration", "10", "--",
                           str(programs["neck"]), "{bus}", str(ticks)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    c_trace = [line for line in done.stdout.splitlines() if line.startswith("tick ")]
    assert len(c_trace) == ticks
    assert c_trace == _twin_trace(ticks)
    positions = [int(line.split()[-1]) for line in c_trace]
    assert max(positions) - min(positions) > 500  # the neck really moved (the world stepped between ticks)
    assert "the program exited with status 0" in done.stdout and "/dev/pts/" in done.stdout


# --- failure behaviour -------------------------------------------------------------------------------------------
def test_the_programs_exit_status_and_its_signal_end_the_run_by_name(programs):
    exited, _, _ = run_bare([programs["life"], "exit", "3"])
    assert (exited.stopped, exited.returncode, exited.exit_code) == ("exited", 3, 3)
    assert "exited with status 3" in exited.text()
    crashed, _, _ = run_bare([programs["life"], "crash"])
    assert crashed.returncode == -signal.SIGSEGV and crashed.exit_code == 128 + signal.SIGSEGV
    assert "killed by signal 11 (SIGSEGV)" in crashed.text()


def _profile(tmp_path: Path, **doc) -> Path:
    path = tmp_path / "native.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_real_clock_runs_the_program_untouched_with_its_bus_and_status(programs, tmp_path):
    profile = _profile(tmp_path, bus="socket://127.0.0.1:9", clock="real", native=True)  # native: from the profile
    env_run = subprocess.run([*hil_command(), "run", "--profile", str(profile), "--", "/usr/bin/env"],
                             capture_output=True, text=True, timeout=60)
    assert env_run.returncode == 0, env_run.stderr
    assert "HIL_BUS=socket://127.0.0.1:9" in env_run.stdout.splitlines()
    assert "libhiltime" not in env_run.stdout and "HIL_CLOCK_FD" not in env_run.stdout
    status = subprocess.run([*hil_command(), "run", "--native", "--profile", str(profile), "--",
                             str(programs["life"]), "exit", "3"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 3 and "exited with status 3" in status.stdout


def test_sim_clock_preloads_the_shim(programs):
    result, out, _ = run_bare(["/usr/bin/env"])
    preload = next(line for line in out.splitlines() if line.startswith("LD_PRELOAD="))
    assert preload.split("=", 1)[1].split(":")[0].endswith("libhiltime.so")
    assert f"HIL_CLOCK_EPOCH_NS={EPOCH_NS}" in out.splitlines()


def test_a_vanished_clock_master_fails_the_programs_next_time_call_naming_it(programs):
    server = ClockServer(LockstepCore(lambda t: None), "tcp://127.0.0.1:*")
    clock = open_clock("sim", endpoint=server.endpoint, name="life", stall_timeout_s=0.25)
    lines: list[str] = []

    def close_after_five(process):
        def read():
            for line in process.stdout:
                lines.append(line.decode())
                if len(lines) == 5:
                    server.close()  # the master goes away while the program runs
        threading.Thread(target=read, daemon=True).start()

    with tempfile.TemporaryFile("w+") as err:
        try:
            result = launch([str(programs["life"]), "ticks", "0"], clock, endpoint=server.endpoint,
                            stdout=subprocess.PIPE, stderr=err, on_start=close_after_five)
        finally:
            clock.close()
        err.seek(0)
        message = err.read()
    assert result.stopped == "clock failed" and result.returncode == proto.EXIT_CLOCK_FAILED
    assert f"hil time shim (pid {lines[0].split()[1]}, life)" in message
    assert server.endpoint in message and server.endpoint in result.text()


def test_the_shim_exits_naming_the_relay_when_its_socket_closes(native_tools, programs):
    """The relay (hil) goes away between two sleeps: the next time call says so and exits, it does not hang."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {**os.environ, "HIL_CLOCK_FD": str(theirs.fileno()), "HIL_CLOCK_ENDPOINT": "the test's relay"}
    process = spawn([programs["life"], "ticks", "0"], preload=native_tools.shim, pid_env="HIL_CLOCK_PID", env=env,
                    pass_fds=(theirs.fileno(),), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    theirs.close()
    try:
        ours.settimeout(WAIT_S)
        hello = proto.unpack_request(ours.recv(64))
        assert (hello.op, hello.pid) == (proto.OP_HELLO, process.pid)
        ours.send(proto.pack_reply(proto.WELCOME, 0))
        for k in range(1, 4):  # three sleeps of 10 ms, answered
            sleep = proto.unpack_request(ours.recv(64))
            assert (sleep.op, sleep.t_ns) == (proto.OP_SLEEP, k * 10_000_000)
            ours.send(proto.pack_reply(proto.WAKE, sleep.t_ns))
        proto.unpack_request(ours.recv(64))  # the fourth: the relay vanishes instead of answering
        ours.close()
        _, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == proto.EXIT_CLOCK_FAILED
    assert "the clock relay of hil (the test's relay) went away" in err


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_program_dies_with_hil(programs, tmp_path):
    profile = _profile(tmp_path, bus="socket://127.0.0.1:9", clock="real")
    hil = subprocess.Popen([*hil_command(), "run", "--native", "--profile", str(profile), "--",
                            str(programs["life"]), "block"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(hil.stdout.readline().split()[1])  # the program's first line: its pid
        assert not _dead(pid)
        hil.kill()  # SIGKILL: hil gets no chance to stop it; PR_SET_PDEATHSIG must
        hil.wait(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not _dead(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _dead(pid)
    finally:
        if hil.poll() is None:
            hil.kill()
            hil.wait()


def test_a_program_that_execs_itself_stays_the_participant(programs):
    result, out, err = run_bare([programs["life"], "exec"])
    assert result.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == lines[1] and lines[0].startswith("pid ")  # the same process, announced by both images
    # the old image slept 10 ms; the new one goes on from there (its own first 10 ms, then two ticks)
    assert lines[2:] == ["t 30000000", "t 40000000"]


def test_a_forked_child_runs_on_the_wall_clock_and_says_so(programs):
    result, out, err = run_bare([programs["life"], "fork"])
    assert result.returncode == 0, err
    assert "child 1" in out.splitlines() and "parent 10000000 status 0" in out.splitlines()
    assert "a child of the native controller runs on the wall clock" in err


# --- the relay and the build -------------------------------------------------------------------------------------
def test_the_relay_answers_garbage_with_an_error_and_keeps_serving():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    clock = bare_clock("probe")
    relay = ClockRelay(ours, clock, "probe").start()
    theirs.settimeout(WAIT_S)
    try:
        for garbage in (b"\x00", b"x" * proto.REQUEST.size, proto.pack_request(proto.OP_SLEEP, 1, pid=7)):
            theirs.send(garbage)
            kind, _, _, text = proto.unpack_reply(theirs.recv(2048))
            assert kind == proto.ERROR and text.startswith("bad request")
        theirs.send(proto.pack_request(proto.OP_HELLO, pid=7))
        assert proto.unpack_reply(theirs.recv(2048))[:2] == (proto.WELCOME, 0)
        theirs.send(proto.pack_request(proto.OP_SLEEP, 2 * S, pid=8))  # another process on the participant's socket
        assert "pid 8" in proto.unpack_reply(theirs.recv(2048))[3]
        theirs.send(proto.pack_request(proto.OP_SLEEP, 2 * S, pid=7))
        assert proto.unpack_reply(theirs.recv(2048))[:2] == (proto.WAKE, 2 * S)
        assert len(relay.rejected) == 4
    finally:
        relay.close()
        theirs.close()
        clock.close()


def test_no_compiler_is_named_in_the_error(monkeypatch, tmp_path):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NativeBuildError, match="no C compiler found"):
        find_compiler()
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(NativeBuildError, match="CC='/nonexistent/cc'"):
        ensure_built(tmp_path)


def test_duration_stops_the_program_at_that_much_simulated_time(programs):
    result, out, _ = run_bare([programs["life"], "ticks", "0"], duration_s=0.5)
    assert result.stopped == "duration" and result.exit_code == 0
    assert result.clock_s == pytest.approx(0.5)
    times = [int(line.split()[1]) for line in out.splitlines() if line.startswith("t ")]
    assert times == [k * 10_000_000 for k in range(2, 51)]  # its sleeps up to 0.5 s, then it was stopped


def test_bus_placeholders_in_the_arguments():
    from hil.runtime.native.session import ProgramBus, _substitute

    buses = [ProgramBus("main", "sim://commbot", "/dev/pts/9"), ProgramBus("arm", "socket://h:1", "socket://h:1")]
    assert _substitute(["--port={bus}", "{bus:arm}", "x"], buses) == ["--port=/dev/pts/9", "socket://h:1", "x"]
    with pytest.raises(ValueError, match="no bus named 'leg'"):
        _substitute(["{bus:leg}"], buses)


def test_stray_arguments_and_record_are_refused_with_a_reason(tmp_path, capsys):
    import argparse

    from hil.runtime.native.cli import maybe_run

    profile = _profile(tmp_path, bus="socket://127.0.0.1:9", clock="real")
    args = argparse.Namespace(profile=str(profile), controller="ctrl.py", program_args=["-x"], native=False,
                              record=None, bus=None, duration=None)
    assert maybe_run(args) == 2 and "add --native" in capsys.readouterr().err
    args.program_args, args.native, args.record = [], True, str(tmp_path / "trial")
    assert maybe_run(args) == 2 and "--record does not apply to --native" in capsys.readouterr().err
    args.native, args.record = False, None
    assert maybe_run(args) is None  # a Python controller: the runner goes on
