"""The live page served from its own process, so that watching a trial does not slow it down.

``--view`` used to serve the page from a thread of the trial's own process: viser's event loop, the scene's
drawing and the websocket's encoding then shared the trial's interpreter lock and woke up beside its lockstep
loop (bench/viewer.py measured it: ~5 % of the real-time factor with no browser at all). Now the trial process
only hands the messages its log gets to a child process over a pipe, once per bus cycle at most every
:data:`FLUSH_S`, without ever blocking on it; the child (``python -m hil.trial.view.remote``) holds the
:class:`~trial.view.app.Viewer` and runs at a lower priority (:data:`NICE`), so when the machine is busy the
trial comes first and the page catches up.

Pause / step / resume pressed on the page come back over a second pipe to a thread of the trial process that
applies them to its lockstep master (:class:`~trial.view.live.SimControl`) and answers with the clock's state.

The child dies with the trial process (bridge.process.spawn) and ends when the pipe closes. If it dies first
the trial goes on: nothing is ever lost from the log, the page is only a copy of it.

Wire (parent -> child): a msgpack stream of maps ``{"m": [[topic, t, payload], ...], "s": {state}}`` (payload: the
JSON message, or for a camera's picture topic its protobuf bytes, from a recorder tap) and at the end
``{"done": {...}}``; (child -> parent): JSON lines, the first ``{"url": ...}`` or ``{"error": ...}``, then
``{"control": "pause" | "step" | "resume"}``. No pickle: both ends only ever decode plain data.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from hil.runtime.clock.base import WALL

from .camera_panel import is_camera_topic
from .live import LiveTrial
from .timeline import Timeline

FLUSH_S = 0.02  # the trial's messages reach the page at most this often (wall time); the page draws at 10 Hz
NICE = 10  # the page's process yields the CPU to the trial's (a woken trial thread preempts it at once)
START_TIMEOUT_S = 120.0  # the page's process must say where it serves within this (viser's start is ~1 s)
OUTBOX_LIMIT_B = 64 << 20  # a page that stopped reading is given up on (the trial goes on) beyond this backlog
CONTROLS = ("pause", "step", "resume")
DRAIN_S = 30.0  # at the trial's end, the page's process is given this long to take what the pipe held back


def _packable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return str(value)


class ViewerProcess:
    """``--view``: the page in a child process, fed by this one. Give ``listeners`` and ``hooks`` to
    ``Trial.run``; ``finish(result)`` when it ends; ``close()`` takes the page down."""

    def __init__(self, host: str, port: int, *, run_spec: Any = None, out_root: str = "trials/view",
                 label: str = "", start_paused: bool = False):
        import msgpack

        from hil.bridge.process import spawn

        self.live = LiveTrial(label, start_paused=start_paused)  # its clock control and real-time factor
        self._pack = msgpack.Packer(default=_packable, use_bin_type=True).pack
        control_r, control_w = os.pipe()
        config = {"host": host, "port": port, "out_root": str(out_root), "label": label, "control_fd": control_w,
                  "run_spec": _spec_kwargs(run_spec)}
        try:
            self.proc = spawn([sys.executable, "-m", "hil.trial.view.remote", json.dumps(config)], stdin=-1,
                              pass_fds=(control_w,))
        finally:
            os.close(control_w)
        self._control = os.fdopen(control_r, "r", encoding="utf-8")
        self._out = self.proc.stdin.fileno()
        os.set_blocking(self._out, False)
        self._outbox = bytearray()
        self._batch: list[list[Any]] = []
        self._lock = threading.Lock()
        self._next_flush = 0.0
        self._gone: str | None = None
        self.url = self._started()
        self._thread = threading.Thread(target=self._controls, name="hil-view-control", daemon=True)
        self._thread.start()

    def _started(self) -> str:
        ready, _, _ = select.select([self._control], [], [], START_TIMEOUT_S)
        line = self._control.readline() if ready else ""
        try:
            first = json.loads(line) if line else {}
        except json.JSONDecodeError:
            first = {"error": f"unreadable start line {line[:200]!r}"}
        if "url" not in first:
            self.close()
            why = first.get("error") or (f"no answer within {START_TIMEOUT_S:g} s" if not ready else "it exited")
            raise ValueError(f"the viewer's process did not start: {why}")
        return str(first["url"])

    # --- what Trial.run is given -----------------------------------------------------------------------------
    @property
    def listeners(self) -> tuple:
        return (self._listen,)

    @property
    def taps(self) -> tuple:
        """Give these to ``Trial.run(taps=...)``: the cameras' pictures, as the log gets them, for the camera panel."""
        return (self._tap,)

    @property
    def hooks(self) -> tuple:
        return (self.live.after_cycle, self._after_cycle)

    def _listen(self, topic: str, t: float, payload: dict[str, Any]) -> None:
        with self._lock:
            self._batch.append([topic, t, payload])

    def _tap(self, topic: str, t: float, data: bytes, _channel: Any = None) -> None:
        if is_camera_topic(topic):
            with self._lock:
                self._batch.append([topic, t, bytes(data)])

    def _after_cycle(self, _robot: Any) -> None:
        now = WALL()
        if now >= self._next_flush or self.live.control.paused:
            self._next_flush = now + FLUSH_S
            self.flush()

    def finish(self, result: Any = None, error: str | None = None) -> None:
        """The trial ended: its last messages, its metrics or its error, to the page."""
        self.live.finish(result, error)
        self.flush({"done": {"metrics": self.live.metrics, "error": error or getattr(result, "error", None),
                             "status": getattr(result, "status", None)}})
        self._drain(DRAIN_S)

    def _drain(self, timeout_s: float) -> None:
        """Write what a full pipe held back (the trial has ended: waiting here slows nothing), for at most
        ``timeout_s``; a page that does not read by then is left as it is."""
        end = WALL() + timeout_s
        while True:
            with self._lock:
                if not self._outbox or self._gone is not None:
                    return
                try:
                    written = os.write(self._out, self._outbox)
                    del self._outbox[:written]
                    continue
                except BlockingIOError:
                    pass
                except (BrokenPipeError, OSError) as exc:
                    self._give_up(f"it ended ({type(exc).__name__})")
                    return
            left = end - WALL()
            if left <= 0:
                return
            select.select([], [self._out], [], min(left, 0.5))

    # --- the pipe --------------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        control = self.live.control
        return {"rtf": self.live.rtf, "available": control.available, "why_not": control.why_not,
                "paused": control.paused}

    def flush(self, extra: dict[str, Any] | None = None) -> None:
        """Send what the log got since the last flush, and the clock's state; never blocks (a full pipe keeps the
        rest for the next call)."""
        with self._lock:
            if self._gone is not None:
                return
            batch, self._batch = self._batch, []
            item = {"m": batch, "s": self._state(), **(extra or {})}
            self._outbox += self._pack(item)
            try:
                while self._outbox:
                    written = os.write(self._out, self._outbox)
                    del self._outbox[:written]
            except BlockingIOError:
                if len(self._outbox) > OUTBOX_LIMIT_B:
                    self._give_up(f"it stopped reading ({len(self._outbox) >> 20} MB behind)")
            except (BrokenPipeError, OSError) as exc:
                self._give_up(f"it ended ({type(exc).__name__})")

    def _give_up(self, why: str) -> None:
        self._gone = why
        self._outbox.clear()
        print(f"viewer: the page's process is gone: {why}; the trial goes on (its log is complete)",
              file=sys.stderr, flush=True)

    def _controls(self) -> None:
        """Pause / step / resume from the page, applied to this process's lockstep master."""
        try:
            for line in self._control:
                self._apply_control(line)
        except (OSError, ValueError):
            pass  # closed: the page is down

    def _apply_control(self, line: str) -> None:
        try:
            what = json.loads(line).get("control")
        except (json.JSONDecodeError, AttributeError):
            return
        if what in CONTROLS and self.live.control.available is not False:
            getattr(self.live.control, what)()
            time.sleep(0.05 if what == "step" else 0.0)  # the step's cycle reaches the page with its state
            self.flush()

    def close(self) -> None:
        """Take the page down (the pipe closes; the child ends; killed if it does not within 5 s)."""
        with self._lock:
            self._gone = self._gone or "closed"
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5.0)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it would not go
            self.proc.kill()
            self.proc.wait()
        self._control.close()


def _spec_kwargs(spec: Any) -> dict[str, Any] | None:
    """The run-from-the-page template as JSON keywords (None when it cannot cross: a callable controller)."""
    if spec is None:
        return None
    from hil.trial.spec import trial_kwargs

    kwargs = trial_kwargs(spec)
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError):
        return None
    return kwargs if isinstance(kwargs.get("controller"), str) else None


# --- the child -------------------------------------------------------------------------------------------------
class RemoteControl:
    """The page's view of the trial's clock control: the state it was last told, commands sent back."""

    def __init__(self, send):
        self.available: bool | None = None
        self.why_not = ""
        self.paused = False
        self._send = send

    def pause(self) -> None:
        self._send("pause")

    def step(self) -> None:
        self._send("step")

    def resume(self) -> None:
        self._send("resume")


class RemoteLive:
    """A trial running in another process, as the :class:`~trial.view.app.Viewer` reads a LiveTrial."""

    def __init__(self, label: str, send):
        self.label = label
        self.timeline = Timeline()
        self.control = RemoteControl(send)
        self.rtf: float | None = None
        self.metrics: dict[str, Any] | None = None
        self.error: str | None = None
        self.result = None
        self.done = threading.Event()

    def apply(self, item: Any) -> None:
        """One item of the stream; anything malformed is skipped (the parent is ours, but a page must not die)."""
        if not isinstance(item, dict):
            return
        for message in item.get("m") or ():
            if not (isinstance(message, list) and len(message) == 3 and isinstance(message[0], str)
                    and isinstance(message[1], (int, float))):
                continue
            topic, t, payload = message
            if isinstance(payload, dict) or (isinstance(payload, bytes) and is_camera_topic(topic)):
                self.timeline.add(topic, float(t), payload)
        state = item.get("s")
        if isinstance(state, dict):
            self.rtf = state.get("rtf")
            control = self.control
            control.available, control.why_not = state.get("available"), str(state.get("why_not") or "")
            control.paused = bool(state.get("paused"))
        done = item.get("done")
        if isinstance(done, dict):
            self.metrics = done.get("metrics") if isinstance(done.get("metrics"), dict) else None
            self.error = done.get("error")
            self.done.set()


def main(argv: list[str] | None = None) -> int:
    import msgpack

    config = json.loads((argv or sys.argv[1:])[0])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trial's to handle; it closes the pipe
    try:
        os.nice(NICE)
    except OSError:
        pass
    control = os.fdopen(config["control_fd"], "w", encoding="utf-8")
    lock = threading.Lock()

    def say(message: dict[str, Any]) -> None:
        with lock:
            try:
                control.write(json.dumps(message) + "\n")
                control.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    try:
        from hil.trial.spec import make_spec

        from .app import Viewer

        run_spec = make_spec(**config["run_spec"]) if config.get("run_spec") else None
        viewer = Viewer(config["host"], int(config["port"]), run_spec=run_spec, out_root=config["out_root"])
    except ImportError as exc:
        say({"error": f"the viewer needs viser ({exc}); pip install 'hil[view]'"})
        return 2
    except Exception as exc:  # noqa: BLE001 - a port in use, a bad host: the trial's process says it
        say({"error": f"{type(exc).__name__}: {exc}"})
        return 2
    say({"url": viewer.url})
    live = RemoteLive(config.get("label") or "", lambda what: say({"control": what}))
    viewer.attach(live)
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=OUTBOX_LIMIT_B)
    stdin = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
    try:
        while chunk := stdin.read(1 << 16):
            unpacker.feed(chunk)
            for item in unpacker:
                live.apply(item)
    except (msgpack.exceptions.ExtraData, ValueError) as exc:
        print(f"viewer: unreadable data from the trial ({exc}); the page stops following it", file=sys.stderr)
    finally:
        viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
