"""What watching costs: the demo's real-time factor with a live viewer connected vs without, side by side in one
run; how long a replay of a 110 s demo log takes to open; pybullet's --gui start-up against DIRECT.

  python -m bench.viewer [--duration S] [--rounds 2] [--replay-s 110] [--no-gui] [--modes viewer,browser]
                         [--pin] [--browser-nice N] [--privileged-browser]

Real-time factor = simulated seconds / wall seconds of the same trial (seed 0), after one uncounted warm-up trial:
plain; with ``--view``'s page process (fed the log's messages, the scene redrawn at 10 Hz) and no browser; with a
headless Chromium connected and rendering it (software WebGL, on the same cores); and, ``in-process``, the page
served from a thread of the trial's own process as before; alternated so all see the same machine load. Target:
the viewer costs at most 10 %. Beside it, the CPU the trial's own process spends per simulated second, and who
used the cores while the trial ran, as shares of a core: the trial's process, its crowd, the page's process,
Chromium's processes (from /proc and getrusage). As root, Chromium is started without CAP_SYS_NICE, as a
desktop user's browser runs (``--privileged-browser`` keeps it: its GPU threads then go to nice -8).
``--pin`` puts the trial (and the crowd it starts) on CPU 0 and the browser on CPU 1; ``--browser-nice N`` starts
Chromium at that niceness. The replay figure is from reading the log to the first frame drawn on the server (a
browser connecting then receives the scene as it is); target under 3 s. The GUI figure is the time to open the
robot in the arcade (``Robot.open``) under Xvfb with ``gui=1`` and without, in fresh processes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._proc import process_jiffies
from bench._smoke import parse_with_smoke

GUI_OPEN = """
import json, time
t = time.perf_counter()
from hil.runtime.robot import Robot
with Robot.open({"bus": "sim://commbot?clock=sim&map=arcade&pose=-18,0,0%s", "clock": "sim"}) as robot:
    opened = time.perf_counter() - t
    for tick in robot.loop(hz=10):
        if tick.time >= 1.0:
            break
    print(json.dumps({"open_s": opened, "first_sim_s_wall": time.perf_counter() - t - opened}))
"""


MODES = ("plain", "viewer", "browser", "in-process")
WHAT = {"viewer": "the page's process, no browser", "browser": "the page's process + Chromium",
        "in-process": "the page served from the trial's own process (before) + Chromium"}


def _cpu_s() -> float:
    """CPU seconds of this process so far (every thread; children not included)."""
    times = os.times()
    return times.user + times.system


def _children_cpu_s() -> float:
    """CPU seconds of the children that ended and were waited for (the trial's crowd, once the trial is over)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _proc_cpu_s(pids) -> float:
    """CPU seconds so far of these live processes (from /proc; one that ended meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            total += process_jiffies(pid)
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


class _Shares:
    """Who used the two cores while one trial ran, as shares of a core: the trial's process, its crowd, the
    page's process and Chromium's processes."""

    def __init__(self, page_pid: int | None, browser: "_Browser | None"):
        self._page, self._browser = [page_pid] if page_pid else [], browser
        self._start = self._now()
        self._t0 = time.perf_counter()

    def _now(self) -> dict[str, float]:
        return {"trial": _cpu_s(), "crowd": _children_cpu_s(), "page": _proc_cpu_s(self._page),
                "Chromium": self._browser.cpu_s() if self._browser is not None else 0.0}

    def stop(self) -> dict[str, float]:
        """CPU seconds each used since the start, and ``wall``: the wall seconds that took."""
        now = self._now()
        return {**{who: now[who] - self._start[who] for who in now}, "wall": time.perf_counter() - self._t0}


def _trial(duration: float | None, out: Path, mode: str, pin: bool = False, nice: int = 0,
           privileged: bool = False):
    """One demo trial in ``mode``: (its TrialResult, the browser or None, who used the cores meanwhile)."""
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial

    spec = demo_spec() if duration is None else demo_spec(duration=duration)
    if mode == "plain":
        shares = _Shares(None, None)
        result = Trial(spec=spec).run(out)
        return result, None, shares.stop()
    if mode == "in-process":
        from hil.trial.view.app import Viewer
        from hil.trial.view.live import LiveTrial

        viewer, feed = Viewer(port=0, run_spec=spec), LiveTrial("demo")
        viewer.attach(feed)
    else:  # what --view does
        from hil.trial.view.remote import ViewerProcess

        viewer = feed = ViewerProcess("127.0.0.1", 0, run_spec=spec, label="demo")
    browser = _Browser(viewer.url if mode != "viewer" else None, pin, nice, privileged)
    try:
        proc = getattr(viewer, "proc", None)
        shares = _Shares(proc.pid if proc is not None else None, browser)
        result = Trial(spec=spec).run(out, listeners=feed.listeners, hooks=feed.hooks)
        feed.finish(result)
        used = shares.stop()
    finally:
        browser.close()
        viewer.close()
    return result, browser, used


def _launcher(folder: str, nice: int, privileged: bool) -> str:
    """The Chromium to start: /usr/bin/chromium, or a wrapper that starts it at ``nice`` and, when this runs as
    root, without CAP_SYS_NICE. Why: a privileged Chromium raises its GPU and compositor threads to nice -8,
    above the trial, which no desktop user's browser can do (an unprivileged process cannot go below nice 0);
    ``privileged`` keeps that, to compare."""
    steps = []
    if os.geteuid() == 0 and not privileged and shutil.which("setpriv"):
        steps.append("setpriv --bounding-set -sys_nice --inh-caps -sys_nice")
    if nice:
        steps.append(f"nice -n {int(nice)}")
    if not steps:
        return "/usr/bin/chromium"
    wrapper = os.path.join(folder, "chromium")
    Path(wrapper).write_text(f"#!/bin/sh\nexec {' '.join(steps)} /usr/bin/chromium \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper


class _Browser:
    """A headless Chromium showing the page for the whole trial (when there is one)."""

    def __init__(self, url: str | None, pin: bool = False, nice: int = 0, privileged: bool = False):
        self.how = "no browser (Chromium or Playwright missing): the server side only"
        self._pw = self._context = self._profile = None
        if url is None:
            self.how = "the page served, no browser connected"
            return
        if not os.path.exists("/usr/bin/chromium"):
            return
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            return
        trial_cpus = os.sched_getaffinity(0)
        if pin:  # the driver and Chromium inherit the affinity of the thread that starts them
            os.sched_setaffinity(0, {1})
        self._profile = tempfile.mkdtemp(prefix="hil-bench-chromium-")
        executable = _launcher(self._profile, nice, privileged)
        try:
            self._pw = sync_playwright().start()
            self._context = self._pw.chromium.launch_persistent_context(
                os.path.join(self._profile, "profile"), executable_path=executable, headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync",
                      "--enable-unsafe-swiftshader"])
        finally:
            os.sched_setaffinity(0, trial_cpus)
        page = self._context.new_page()
        page.goto(url)
        page.wait_for_selector("#hil-sim-time", timeout=120_000)
        self.how = ("headless Chromium connected (software WebGL" + (", on its own CPU" if pin else "")
                    + (f", nice {nice}" if nice else "")
                    + (", as root" if privileged and os.geteuid() == 0 else "") + ")")

    @property
    def connected(self) -> bool:
        return self._context is not None

    def cpu_s(self) -> float:
        """CPU seconds so far of every Chromium process of this profile (the browser, GPU, renderer...)."""
        if not self.connected:
            return 0.0
        pids = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if self._profile in cmdline.read_text(errors="replace"):
                    pids.append(int(cmdline.parent.name))
            except OSError:  # a process that ended meanwhile
                continue
        return _proc_cpu_s(pids)

    def close(self) -> None:
        if self._context is not None:
            self._context.close()
            self._pw.stop()
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)


def _shares_text(used: dict[str, float]) -> str:
    """``used`` (CPU seconds by process and the wall seconds) as shares of a core."""
    shares = {who: cpu / used["wall"] for who, cpu in used.items() if who != "wall"}
    return " + ".join(f"{who} {100 * share:.0f}" for who, share in shares.items() if share > 0.005) + " % of a core"


def bench_rtf(duration: float | None, rounds: int, pin: bool = False, modes: tuple[str, ...] = MODES,
              nice: int = 0, privileged: bool = False, warm: bool = True) -> None:
    """Each mode's trials alternated over ``rounds``, after a warm-up trial unless ``warm`` is False (the smoke run:
    its first trial pays the imports, and its figures mean nothing)."""
    length = "the whole demo" if duration is None else f"{duration:g} s of sim time"
    print(f"demo, seed 0, {length}; " + " / ".join(modes) + f", alternated {rounds}x"
          + ("; the trial on CPU 0, the browser on CPU 1" if pin else ""))
    if pin:
        os.sched_setaffinity(0, {0})  # this thread; the trial's threads and its crowd process inherit it
    rtfs: dict[str, list[float]] = {mode: [] for mode in modes}
    cpus: dict[str, list[float]] = {mode: [] for mode in modes}
    used: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if warm:
            _trial(2.0, Path(tmp) / "warm-up", "plain")  # imports and first-use caches: run 1 of plain is not slower
        for k in range(rounds):
            for mode in modes:
                result, browser, shares = _trial(duration, Path(tmp) / f"{k}-{mode}", mode, pin, nice, privileged)
                cpu = shares["trial"] / result.sim_s
                rtf = result.sim_s / result.wall_s
                rtfs[mode].append(rtf)
                cpus[mode].append(cpu)
                used[mode].append(shares)
                notes[mode] = browser.how if browser is not None else ""
                print(f"  {mode:10s} run {k + 1}: {result.sim_s:6.1f} s sim in {result.wall_s:6.1f} s wall -> "
                      f"real-time factor {rtf:5.2f}; the trial's process {1000 * cpu:5.1f} ms CPU per sim s; "
                      f"{_shares_text(shares)}", flush=True)
    plain = sum(rtfs["plain"]) / rounds
    plain_cpu = sum(cpus["plain"]) / rounds
    for mode in modes:
        mean_used = {who: sum(u[who] for u in used[mode]) / rounds for who in used[mode][0]}
        if mode == "plain":
            print(f"  plain: real-time factor {plain:.2f}; {_shares_text(mean_used)}")
            continue
        mean = sum(rtfs[mode]) / rounds
        cpu = sum(cpus[mode]) / rounds
        print(f"  {mode} ({WHAT[mode]}; {notes[mode]}): real-time factor {mean:.2f} against {plain:.2f} plain "
              f"(runs {', '.join(f'{100 * (1 - r / plain):+.0f}' for r in rtfs[mode])} %): the viewer costs "
              f"{100 * (1 - mean / plain):+.1f} % (target <= 10 %); the trial's process "
              f"{100 * (cpu / plain_cpu - 1):+.1f} % CPU per sim s; {_shares_text(mean_used)}")


def bench_replay(replay_s: float) -> None:
    from hil.trial.presets import demo_spec
    from hil.trial.run import Trial
    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        result = Trial(spec=demo_spec(duration=replay_s)).run(out)
        size = (out / "trial.mcap").stat().st_size
        viewer = Viewer(port=0)
        try:
            start = time.perf_counter()
            timeline = Timeline.from_log(out)
            loaded = time.perf_counter() - start
            viewer.show_replay(timeline, json.loads((out / "metrics.json").read_text()))
            viewer.replay_t = timeline.end_t / 2
            while viewer._drawn is None:  # noqa: SLF001 - the loop's first frame of this timeline
                time.sleep(0.005)
            shown = time.perf_counter() - start
        finally:
            viewer.close()
    print(f"replay of a {result.sim_s:.0f} s demo log ({size / 1e6:.1f} MB): read in {loaded:.2f} s, first frame "
          f"drawn {shown:.2f} s after opening (target < 3 s)")


def bench_gui() -> None:
    xvfb = shutil.which("xvfb-run")
    if xvfb is None:
        print("gui: xvfb-run not installed; skipped")
        return
    figures = {}
    for label, extra, prefix in (("DIRECT", "", []), ("GUI", "&gui=1", [xvfb, "-a"])):
        proc = subprocess.run([*prefix, sys.executable, "-c", GUI_OPEN % extra], capture_output=True, text=True,
                              timeout=900)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
        if line is None:
            print(f"gui: {label} failed: {proc.stderr[-500:]}")
            return
        figures[label] = json.loads(line)
    d, g = figures["DIRECT"], figures["GUI"]
    print(f"pybullet start-up (Robot.open in the arcade): DIRECT {d['open_s']:.1f} s, GUI under Xvfb "
          f"{g['open_s']:.1f} s ({g['open_s'] / d['open_s']:.1f}x; 91 s when pybullet drew while building); "
          f"first simulated second: DIRECT {d['first_sim_s_wall']:.1f} s, GUI {g['first_sim_s_wall']:.1f} s of wall time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.viewer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=None,
                        help="sim seconds per RTF trial (default: the whole demo, ~110 s)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of plain / viewer / browser (2)")
    parser.add_argument("--replay-s", type=float, default=110.0, help="length of the replayed demo (110 s)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"which of {','.join(MODES)} to run (plain always runs; default all)")
    parser.add_argument("--no-gui", action="store_true", help="skip the --gui start-up figure")
    parser.add_argument("--pin", action="store_true", help="the trial on CPU 0, the browser on CPU 1")
    parser.add_argument("--browser-nice", type=int, default=0, metavar="N", help="start Chromium at niceness N")
    parser.add_argument("--privileged-browser", action="store_true",
                        help="as root, let Chromium keep CAP_SYS_NICE (its GPU threads then run at nice -8)")
    args = parse_with_smoke(parser, argv, duration=0.5, rounds=1, replay_s=0.5, modes="viewer", no_gui=True)
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        parser.error("--pin needs two CPUs")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    modes = ("plain", *(m for m in args.modes.split(",") if m in MODES and m != "plain"))
    bench_rtf(args.duration, args.rounds, args.pin, modes, args.browser_nice, args.privileged_browser,
              warm=not args.smoke)
    bench_replay(args.replay_s)
    if not args.no_gui:
        bench_gui()
    return 0


if __name__ == "__main__":
    sys.exit(main())
