"""``hil view``: the crowd-simulation reference's display as a web page served by the product (viser).

One page, three ways in: **live** (attached to a running trial: its clock, its real-time factor, pause / step /
resume on the simulator's clock), **replay** (a trial.mcap: play, pause, scrub, speed) and **run from the page**
(pick map, scenario and seed, press run: the trial API in a worker thread, shown live, its metrics at the end).
The 3D scene is trial/view/scene.py, the robot's camera panel trial/view/camera_panel.py; the panels are HTML
blocks with stable ids (``hil-sim-time``, ``hil-people``, ``hil-script``, ``hil-metrics``, ``hil-camera``...) so a
person reads them and a test can too.

The page is served from viser's own client, which ships inside its wheel (no CDN, no fetch at run time: the tests
load it in a Chromium with background networking off and check every request went to this server). It binds
loopback unless told otherwise.
"""
from __future__ import annotations

import html
import json
import math
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .camera_panel import CameraPanel
from .live import LiveTrial
from .scene import SceneDrawer
from .timeline import Frame, Timeline

FRAME_S = 0.1  # the page is redrawn at most this often (wall time)
LINES_S = 0.5  # ...and the paths at most this often while a trial runs
SPEEDS = ("0.25", "0.5", "1", "2", "4", "8", "16")
DEFAULT_HOST = "127.0.0.1"


def live_state(live: Any) -> str:
    """What the page says of a live trial (a LiveTrial, or the page process's RemoteLive): done, paused or
    running, and why it cannot be paused where it cannot. A trial that ended while paused is done: its pause
    holds nothing back any more."""
    state = "done" if live.done.is_set() else "paused" if live.control.paused else "running"
    if live.control.available is False:
        state += f" ({live.control.why_not})"
    return state

class Viewer:
    """The served page. ``show_live(live)`` / ``show_replay(timeline, metrics)`` choose what it shows;
    ``run_spec`` (a TrialSpec) enables run-from-the-page with that trial as the template."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 8080, *, run_spec: Any = None,
                 out_root: str | Path = "trials/view", label: str = "hil view"):
        import viser

        self.server = viser.ViserServer(host=host, port=port, label=label, verbose=False)
        self.host = host
        self.drawer = SceneDrawer(self.server)
        self.run_spec, self.out_root = run_spec, Path(out_root)
        self.live: LiveTrial | None = None
        self.timeline: Timeline | None = None
        self.metrics: dict[str, Any] | None = None
        self.replay_t, self.playing, self.speed = 0.0, False, 1.0
        self.camera = "top"
        self._drawn: tuple[int, float] | None = None
        self._static_done: set[str] = set()
        self._html: dict[str, str] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._slider_shown = 0.0  # what the viewer last put on the time slider, or took from it as a scrub
        self._lines_due = 0.0
        self._last_frame: Frame | None = None
        self._build_gui()
        self._thread = threading.Thread(target=self._loop, name="hil-view", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.server.get_port()}/"

    # --- what is shown ---------------------------------------------------------------------------------------
    def show_live(self, live: LiveTrial) -> None:
        with self._lock:
            self._switch(live.timeline)
            self.live, self.metrics = live, None
        self._set_mode("live")

    def show_replay(self, timeline: Timeline, metrics: dict[str, Any] | None = None,
                    folder: Path | None = None) -> None:
        """``folder``: the replayed trial's, whose saved states "Retry from here" starts from (trial/state/)."""
        self.replay_folder = Path(folder) if folder is not None else None
        self.b_retry.disabled = self.replay_folder is None or not (self.replay_folder / "states").is_dir()
        with self._lock:
            self._switch(timeline)
            self.live, self.metrics = None, metrics
            self.replay_t, self.playing = 0.0, False
            self.slider.max = max(timeline.end_t, 0.1)
            self._slider_shown = 0.0
            self.slider.value = 0.0
        self._set_mode("replay")

    def _switch(self, timeline: Timeline) -> None:
        self.drawer.reset()
        self.camera_panel.reset()
        self.timeline, self._drawn, self._static_done = timeline, None, set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.server.stop()

    # --- the panels ------------------------------------------------------------------------------------------
    def _build_gui(self) -> None:
        gui = self.server.gui
        self.status = gui.add_html(_status_html(None, None, "waiting for a trial", None, None))
        with gui.add_folder("Live"):
            self.b_pause, self.b_step, self.b_resume = (gui.add_button("Pause"), gui.add_button("Step"),
                                                        gui.add_button("Resume"))
        with gui.add_folder("Replay"):
            self.b_play = gui.add_button("Play")
            self.b_stop = gui.add_button("Stop")
            self.slider = gui.add_slider("time (s)", min=0.0, max=1.0, step=0.1, initial_value=0.0)
            self.speed_box = gui.add_dropdown("speed", SPEEDS, initial_value="1")
            self.b_retry = gui.add_button("Retry from here", disabled=True)
            self.retry_html = gui.add_html("")
        self.camera_panel = CameraPanel(gui)  # the robot's camera: the log's pictures at the page's time
        with gui.add_folder("Camera"):
            self.b_top, self.b_follow = gui.add_button("Top-down"), gui.add_button("Follow robot")
        with gui.add_folder("Run a trial"):
            from hil.devices.config_path import known

            maps = tuple(known("maps")) or ("arcade",)
            scenarios = ("none", *known("scenarios", (".scn",)))
            base = self.run_spec
            self.run_map = gui.add_dropdown("map", maps, initial_value=_pick(maps, getattr(base, "map", None)))
            self.run_scenario = gui.add_dropdown("scenario", scenarios,
                                                 initial_value=_pick(scenarios, _stem(getattr(base, "scenario", None))))
            self.run_seed = gui.add_number("seed", initial_value=int(getattr(base, "seed", 0) or 0), step=1)
            self.b_run = gui.add_button("Run trial", disabled=base is None)
        self.people_html = gui.add_html(_people_html([]))
        self.script_html = gui.add_html(_script_html(None, None))
        self.metrics_html = gui.add_html(_metrics_html(None))
        with gui.add_folder("Ring", expand_by_default=False):
            self.ring_legend_html = gui.add_html(ring_legend_html())
        with gui.add_folder("Objectives", expand_by_default=False):
            self.objectives_html = gui.add_html(_objectives_html())
        self.b_pause.on_click(lambda _: self._control("pause"))
        self.b_step.on_click(lambda _: self._control("step"))
        self.b_resume.on_click(lambda _: self._control("resume"))
        self.b_play.on_click(lambda _: self._play(True))
        self.b_stop.on_click(lambda _: self._play(False))
        self.slider.on_update(self._scrub)
        self.speed_box.on_update(lambda _: setattr(self, "speed", float(self.speed_box.value)))
        self.b_top.on_click(lambda _: self._camera("top"))
        self.b_follow.on_click(lambda _: self._camera("follow"))
        self.b_run.on_click(lambda _: self.run_from_page())
        self.b_retry.on_click(lambda _: self.retry_from_here())
        self.replay_folder: Path | None = None
        self.server.on_client_connect(lambda client: self._aim(client, force=True))
        self._set_mode("idle")

    def _set_mode(self, mode: str) -> None:
        live = mode == "live"
        for button in (self.b_pause, self.b_step, self.b_resume):
            button.disabled = not live
        for widget in (self.b_play, self.b_stop, self.slider, self.speed_box):
            widget.disabled = mode != "replay"

    def _control(self, what: str) -> None:
        live = self.live
        if live is not None and live.control.available is not False:
            getattr(live.control, what)()

    def _play(self, on: bool) -> None:
        with self._lock:
            if on and self.timeline is not None and self.replay_t >= self.timeline.end_t - 1e-9:
                self.replay_t = 0.0  # played to the end: from the start again
            self.playing = on

    def _scrub(self, _event: Any) -> None:
        with self._lock:
            self._take_scrub()

    def _take_scrub(self) -> None:
        """A slider value the viewer did not put there is the user's scrub (called with the lock held).

        viser sets the slider's value on its event loop and calls ``_scrub`` later from a thread pool, so the
        drawing tick may see the user's value first: it takes it as the scrub too, rather than putting the
        replay's time back over it (which lost scrubs on a loaded machine).
        """
        value = float(self.slider.value)
        if value != self._slider_shown:
            self.replay_t, self.playing, self._slider_shown = value, False, value

    def _camera(self, mode: str) -> None:
        self.camera = mode
        for client in self.server.get_clients().values():
            self._aim(client, force=True)

    def _aim(self, client: Any, force: bool = False) -> None:
        """Top-down over the map, or behind and above the robot looking where it heads."""
        x, y = self.drawer.robot_xy
        if self.camera == "follow":
            yaw = self.drawer.robot_yaw
            position = (x - 3.5 * math.cos(yaw), y - 3.5 * math.sin(yaw), 2.6)
            look = (x + 1.0 * math.cos(yaw), y + 1.0 * math.sin(yaw), 0.6)
        elif force:
            cx, cy, span = _map_view(self.drawer.map_msg, (x, y))
            position, look = (cx, cy - 0.01 * span, 1.05 * span), (cx, cy, 0.0)
        else:
            return
        with client.atomic():
            client.camera.up_direction = (0.0, 0.0, 1.0)
            client.camera.position = position
            client.camera.look_at = look

    # --- run from the page -----------------------------------------------------------------------------------
    def run_from_page(self, *, start_paused: bool = False) -> LiveTrial | None:
        """Run the template trial with the page's map, scenario and seed in a worker thread, shown live."""
        if self.run_spec is None or (self.live is not None and not self.live.done.is_set()):
            return None
        scenario = self.run_scenario.value
        seed = int(self.run_seed.value)
        spec = self.run_spec.but(map=self.run_map.value, scenario=None if scenario == "none" else scenario, seed=seed)
        live = LiveTrial(spec.label, start_paused=start_paused)
        out = self.out_root / f"{spec.label}-{self.run_map.value}-{scenario}-{seed}"
        run_trial_in_thread(spec, out, live, on_done=lambda: self._finished(live))
        self.show_live(live)
        return live

    def retry_from_here(self) -> tuple[Path, LiveTrial | None] | None:
        """The replayed trial again from the scrubber's time: a trial file with ``from: FOLDER@T`` written beside
        the trial (its keys, its controller), and, with run-from-the-page on, run and shown live."""
        from ..spec import load_trial_file
        from ..state.retry import retry_command, retry_trial_file

        folder = self.replay_folder
        if folder is None or (self.live is not None and not self.live.done.is_set()):
            return None
        t = round(float(self.replay_t), 1)
        path = retry_trial_file(folder, t, folder / f"retry-from-{t:g}s.yaml")
        self.retry_html.content = (f"<p>wrote <code>{path}</code>; or: <code>{retry_command(folder, t)}</code></p>")
        if self.run_spec is None:
            return path, None
        spec = load_trial_file(path)
        live = LiveTrial(spec.label)
        run_trial_in_thread(spec, self.out_root / f"{spec.label}-from-{t:g}s", live,
                            on_done=lambda: self._finished(live))
        self.show_live(live)
        return path, live

    def attach(self, live: LiveTrial) -> None:
        """Show a trial someone else runs (``hil trial --view``); its metrics when it ends."""
        self.show_live(live)
        threading.Thread(target=lambda: (live.done.wait(), self._finished(live)), daemon=True).start()

    def _finished(self, live: LiveTrial) -> None:
        if live is self.live:
            self.metrics = live.metrics
            if self.metrics is None:
                self.metrics = {"error": live.error or getattr(live.result, "error", None) or "no metrics"}

    # --- the loop --------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(FRAME_S):
            now = time.monotonic()
            try:
                self._tick(now - last)
            except Exception as exc:  # noqa: BLE001 - a drawing bug must not end the page; it says so
                self._put(self.status, f"<div id='hil-error'>viewer error: {html.escape(repr(exc))}</div>")
            last = now

    def _tick(self, dt: float) -> None:
        with self._lock:
            timeline, live = self.timeline, self.live
            if timeline is None:
                return
            self._draw_static(timeline)
            if live is None:
                self._take_scrub()
            if live is None and self.playing:
                self.replay_t = min(self.replay_t + dt * self.speed, timeline.end_t)
                self.playing = self.replay_t < timeline.end_t
            if live is None and abs(round(self.replay_t, 1) - self._slider_shown) > 0.05:
                self._slider_shown = round(self.replay_t, 1)  # first: the setter's own callback is no scrub
                self.slider.value = self._slider_shown
            t = None if live is not None else self.replay_t
            key = (timeline.version, -1.0 if t is None else t)
        if key != self._drawn:
            frame = timeline.frame(t)
            now = time.monotonic()
            lines = live is None or now >= self._lines_due
            if lines:
                self._lines_due = now + LINES_S
            self.drawer.draw(frame, lines=lines)
            self._panels(frame, timeline, live)
            self._drawn, self._last_frame = key, frame
        elif live is not None and self._last_frame is not None:
            self._panels(self._last_frame, timeline, live)  # the state and the real-time factor change
        self.camera_panel.show(timeline, t)  # sends a picture only when it is another one (or another camera)
        if self.camera == "follow":
            for client in self.server.get_clients().values():
                self._aim(client)

    def _draw_static(self, timeline: Timeline) -> None:
        static = timeline.static
        if "/map" in static and "/map" not in self._static_done:
            self.drawer.draw_map(static["/map"])
            self._static_done.add("/map")
            for client in self.server.get_clients().values():
                self._aim(client, force=True)
        if "/robot/model" in static and "/robot/model" not in self._static_done:
            self.drawer.draw_robot(static["/robot/model"])
            self._static_done.add("/robot/model")

    def _panels(self, frame: Frame, timeline: Timeline, live: LiveTrial | None) -> None:
        if live is not None:
            state, rtf = live_state(live), live.rtf
        else:
            state = "playing" if self.playing else "replay paused"
            rtf = self.speed if self.playing else 0.0
        meta = timeline.static.get("/trial/meta", {})
        label = (live.label if live is not None else "") or meta.get("trial", {}).get("name") or "trial"
        mode = frame.robot.get("mode") if frame.robot else None
        self._put(self.status, _status_html(frame, rtf, state, mode, label, timeline.end_t))
        self._put(self.people_html, _people_html(frame.people))
        self._put(self.script_html, _script_html(timeline.static.get("/crowd/scenario"), frame.line,
                                                 meta.get("scenario"), frame.script_error))
        self._put(self.objectives_html, _objectives_html((meta.get("objectives") or {}).get("user")))
        self._put(self.metrics_html, _metrics_html(self.metrics))

    def _put(self, handle: Any, content: str) -> None:
        key = str(id(handle))
        if self._html.get(key) != content:
            self._html[key] = content
            handle.content = content


def run_trial_in_thread(spec: Any, out: Path, live: LiveTrial, on_done: Callable[[], None] | None = None) -> None:
    """``Trial(spec).run(out)`` in a worker thread, fed to ``live``; ``live.done`` is set when it ends."""
    from hil.trial.run import Trial

    def work() -> None:
        try:
            result = Trial(spec=spec).run(out, listeners=live.listeners, hooks=live.hooks, taps=live.taps)
            live.finish(result, result.error)
        except Exception as exc:  # noqa: BLE001 - a bad choice on the page: shown there, the page goes on
            live.finish(None, f"{type(exc).__name__}: {exc}")
        if on_done is not None:
            on_done()

    threading.Thread(target=work, name=f"hil-trial-{spec.label}", daemon=True).start()


# --- HTML of the panels ------------------------------------------------------------------------------------------
def _status_html(frame: Frame | None, rtf: float | None, state: str, mode: str | None, label: str | None,
                 end_t: float | None = None) -> str:
    t = f"{frame.t:.2f}" if frame is not None else "0.00"
    rtf_text = "-" if rtf is None else f"{rtf:.2f}"
    pose = ""
    if frame is not None and frame.robot is not None and "x" in frame.robot:
        r = frame.robot
        pose = f" &middot; robot ({r['x']:+.2f}, {r['y']:+.2f}) m"
    length = f" / {end_t:.1f}" if end_t else ""
    return (f"<div id='hil-status' style='font-size:13px;line-height:1.5'>"
            f"<b id='hil-label'>{html.escape(label or '')}</b> <span id='hil-state'>{html.escape(state)}</span><br>"
            f"sim time <b id='hil-sim-time'>{t}</b>{length} s &middot; real-time factor "
            f"<b id='hil-rtf'>{rtf_text}</b>{pose}<br>controller mode <b id='hil-mode'>"
            f"{html.escape(mode or '-')}</b></div>")


def _people_html(people: list[dict[str, Any]]) -> str:
    from hil.trial.record.palette import doing_rgb

    rows = []
    for p in sorted(people, key=lambda p: p["id"]):
        doing = p.get("doing") or "walking"
        r, g, b = (int(255 * c) for c in doing_rgb(doing))
        who = html.escape(p.get("name") or "")
        rows.append(f"<tr class='hil-person' data-id='{int(p['id'])}' data-doing='{html.escape(doing)}'>"
                    f"<td>{int(p['id'])}</td><td>{html.escape(str(p.get('type', '')))}{' ' + who if who else ''}</td>"
                    f"<td><span style='color:rgb({r},{g},{b})'>&#9679;</span> {html.escape(doing)}</td></tr>")
    body = "".join(rows) or "<tr><td colspan=3>nobody</td></tr>"
    return (f"<div id='hil-people' style='font-size:12px;max-height:180px;overflow:auto'><b>people "
            f"(<span id='hil-people-count'>{len(people)}</span>)</b><table style='width:100%'>{body}</table></div>")


ERROR_STYLE = "color:#c00000;font-weight:bold"  # a script line that failed, on the page (red)


def _script_html(scenario: dict[str, Any] | None, current: int | None, name: str | None = None,
                 failed: dict[str, Any] | None = None) -> str:
    """The script's lines, the one running highlighted; a line that failed red, with the crowd's message."""
    error = (f"<div id='hil-script-error' class='hil-script-error' data-line='{int(failed['line'])}' "
             f"style='{ERROR_STYLE}'>line {int(failed['line'])} failed: {html.escape(failed['error'])}</div>"
             if failed else "")
    if not scenario:
        return (f"<div id='hil-script' style='font-size:12px'><b>script</b>: {html.escape(name or 'none')}"
                f"{error}</div>")
    rows = []
    for number, text in enumerate(scenario.get("lines", []), start=1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        bad = failed is not None and number == int(failed["line"])
        now = number == current and not bad
        style = ERROR_STYLE + ";background:#ffd6d6" if bad else "background:#ffe066;font-weight:bold" if now else \
            "color:#555"
        mark = "&#10007;" if bad else "&#9654;" if now else "&nbsp;"
        rows.append(f"<div class='hil-line{' current' if now else ''}{' failed' if bad else ''}' data-line='{number}' "
                    f"style='{style}'>{mark} {number}: {html.escape(text.strip())}</div>")
    return (f"<div id='hil-script' style='font-size:12px;font-family:monospace;max-height:220px;overflow:auto'>"
            f"<b>script {html.escape(scenario.get('name', ''))}</b>{''.join(rows)}{error}</div>")


def ring_legend_html() -> str:
    """What the ring's colours mean: an echo (real, virtual), and a failed reading by its cause."""
    from hil.trial.record.palette import CAUSE_RGB, CAUSE_TEXT, ECHO_RGB, VIRTUAL_ECHO_RGB

    def swatch(rgb) -> str:
        return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)

    rows = [("echo", "echo", ECHO_RGB), ("virtual", "virtual echo (mixed trial)", VIRTUAL_ECHO_RGB)]
    rows += [(cause, CAUSE_TEXT[cause], rgb) for cause, rgb in CAUSE_RGB.items()]
    items = "".join(f"<div class='hil-cause' data-cause='{cause}' data-rgb='{swatch(rgb)}'>"
                    f"<span style='display:inline-block;width:18px;height:4px;margin-right:6px;vertical-align:middle;"
                    f"background:{swatch(rgb)}'></span>{html.escape(text)}</div>" for cause, text, rgb in rows)
    return f"<div id='hil-ring-legend' style='font-size:11px'><b>ring rays</b>{items}</div>"


def _metrics_html(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "<div id='hil-metrics' style='font-size:12px'><b>metrics</b>: when the run ends</div>"
    if "error" in metrics and len(metrics) == 1:
        return f"<div id='hil-metrics' style='font-size:12px'><b>run failed</b>: {html.escape(str(metrics['error']))}</div>"
    from hil.trial.report.build import format_metrics

    try:
        text = format_metrics(metrics)
    except Exception:  # noqa: BLE001 - an older metrics.json: show it as it is
        text = json.dumps(metrics, indent=1)[:2000]
    from hil.trial.report.build import ALARMS

    body = "\n".join(f"<span class='hil-metric-error' style='{ERROR_STYLE}'>{html.escape(line)}</span>"
                     if line.startswith(ALARMS) else html.escape(line) for line in text.splitlines())
    return (f"<div id='hil-metrics' style='font-size:11px'><b>metrics</b><pre style='white-space:pre-wrap'>"
            f"{body}</pre></div>")


def _objectives_html(user: dict[str, str] | None = None) -> str:
    """The built-in objectives with their parameters, and the trial's own (its rates files' ``objectives.user``,
    from the log's meta: named with the class they come from; the page never imports them)."""
    from hil.crowd.objectives import describe

    user = dict(user or {})
    rows = []
    for name, target in sorted(user.items()):
        rows.append(f"<div class='hil-objective user' data-name='{html.escape(name)}'><b>{html.escape(name)}</b>: "
                    f"the trial's own ({html.escape(target)}, objectives.user of its rates)</div>")
    for o in describe():
        if o["name"] in user:
            continue
        params = ", ".join(f"{k}={v['default']:g}" for k, v in o["params"].items())
        rows.append(f"<div class='hil-objective' data-name='{html.escape(o['name'])}'><b>{html.escape(o['name'])}</b>: "
                    f"{html.escape(o['summary'])}{' (' + html.escape(params) + ')' if params else ''}</div>")
    return f"<div id='hil-objectives' style='font-size:11px'>{''.join(rows)}</div>"


def _map_view(msg: dict[str, Any] | None, fallback: tuple[float, float]) -> tuple[float, float, float]:
    """Centre and span of the map's walls (the robot's surroundings when there is no map)."""
    walls = (msg or {}).get("walls") or []
    if not walls:
        return fallback[0], fallback[1], 12.0
    xs = [v for w in walls for v in (w[0], w[2])]
    ys = [v for w in walls for v in (w[1], w[3])]
    span = max(max(xs) - min(xs), 2 * (max(ys) - min(ys)), 4.0)
    return (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2, span


def _pick(options: tuple[str, ...], wanted: str | None) -> str:
    return wanted if wanted in options else options[0]


def _stem(value: Any) -> str | None:
    return Path(str(value)).stem if value else None
