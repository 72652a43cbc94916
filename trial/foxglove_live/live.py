"""A running trial served to Foxglove, and steered from it: ``--foxglove [HOST:]PORT``.

:class:`LiveServer` is handed to ``Trial.run`` as a recorder tap (``taps``: every message the log gets, its bytes
and its channel) and an after-cycle hook (``hooks``). It serves, from foxglove-sdk's WebSocket server:

- **the log's channels, exactly**: every topic the trial writes to its MCAP (the ``hil.*`` JSON topics, the
  Foxglove SceneUpdate / FrameTransforms / LaserScan / Log channels, and any other channel a recorder writes, a
  camera's images included) with the log's schema, stamped with trial time, the bytes the file got. Messages at
  t = 0 (the map, the robot's model, the walls) are kept and sent again to a client that subscribes later.
- **the simulator's time** (Time capability): after each bus cycle, at most every :data:`TIME_EVERY_S` of wall
  time and always when the trial stops, so Foxglove's clock follows the simulator, faster or slower than real
  time.
- **the playback bar** (PlaybackControl): pause and play pause and resume the lockstep as the page's buttons do
  (trial/view/live.py SimControl); a seek forward while paused runs the trial to that time and pauses it again
  (Foxglove's step buttons seek forward); a seek backwards is refused (a live trial keeps no past states yet).
- **parameters** (Parameters): ``robot.params`` as Foxglove parameters; those the controller declared with
  ``robot.declare_changeable`` may be set, checked at once (wrong name or type: refused, the client gets the
  value back, the refusal is in the log), applied between two bus cycles and recorded as ``/trial/params``.
  A client reads them with getParameters; the SDK itself sends an accepted set to the clients subscribed to those
  names. The server never calls the SDK's ``publish_parameter_values``: in foxglove-sdk 0.30 it takes the
  parameter subscriptions' lock holding the GIL, while the SDK's own thread takes that lock first and then waits
  for the GIL to tell our listener of a (un)subscription (a client coming or going). The trial froze within
  ~2 s of wall time under a client subscribing, setting and leaving in a loop (CI hung on it once;
  tests/test_foxglove_live.py keeps that loop). So a value the controller changes itself, and the values at its
  first cycle, are not pushed to subscribers: a client asks again.
- **services**: ``hil/mark`` ("mark this moment", a JSON request ``{"note": "..."}``): a ``/trial/mark`` message
  in the log at the trial time the next cycle has; ``hil/retry`` ("retry from here", retry.py), which with
  ``{"run": true}`` also runs the retry, served on a port of its own.

Cost: the SDK's channels encode and send on the SDK's own (Rust) threads; the trial's thread keeps a cycle's
messages and hands them over together, with the time, after the cycle (:meth:`after_cycle`), and reads nothing
back. The SDK's cost is mostly waking its threads, once per hand-over however many messages it carries: one
hand-over per cycle instead of one per message took the server from 3.4-3.9 % to 1.3-1.5 % of the trial's CPU
with a client subscribed to everything (bench/foxglove.py). Whatever a
client sends is handled on the SDK's threads; what changes the trial is queued and applied by the trial's own
thread in :meth:`after_cycle`, so the trial never blocks on a client and a client never changes it mid-cycle.
Malformed frames and unknown channels are refused by the SDK (a status message to that client; the trial goes
on); everything our callbacks are given is checked, and a callback never raises into the server.
"""
from __future__ import annotations

import json
import queue
import sys
import threading
from typing import Any

from hil.runtime.clock.base import WALL

from ..record.live_tap import LiveTap
from ..view.live import SimControl
from .channels import ServedChannels
from .gate import start_behind_gate, stop_bounded

TIME_EVERY_S = 0.02  # wall seconds between two Time messages while the trial runs
PAUSED_TIME_EVERY_S = 0.5  # and while it is paused (for a client that connects then)
MARK_SERVICE = "hil/mark"
LONGEST_S = 7 * 86400.0  # the playback range of a trial without a duration (trial/spec.py MAX_DURATION_S)
REFUSED = "/trial/refused"


def _capabilities() -> list[Any]:
    from foxglove.websocket import Capability

    return [Capability.Time, Capability.PlaybackControl, Capability.Parameters, Capability.Services]


class LiveServer(LiveTap):
    """Serve one trial to Foxglove. ``Trial.run(out, taps=server.taps, hooks=server.hooks)``; ``close()`` after."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8765, *, label: str = "", start_paused: bool = False,
                 duration_s: float | None = None, err: Any = None, run_retries: bool = True,
                 origins: tuple[str, ...] = (), allow_controller: bool = False):
        import foxglove
        from foxglove.websocket import ServerListener

        self.label = label
        self.err = err if err is not None else sys.stderr
        self.control = SimControl(start_paused=start_paused)
        self.context = foxglove.Context()
        self.channels = ServedChannels(self.context)
        self.rec: Any = None
        self.robot: Any = None
        self.now_s = 0.0  # the trial time of the last /clock the log got
        self.run_to_s: float | None = None  # a seek forward: run until this trial time, then pause
        self.speed = 1.0
        self._latched: dict[str, list[tuple[int, bytes]]] = {}
        self._pending: list[tuple[Any, bytes, int]] = []  # this cycle's messages, handed over after it
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()  # what clients asked, for the trial's thread
        self._last_time_wall = -1.0
        self._last_time_sent: int | None = None
        self._lock = threading.Lock()
        from .retry import RetryRunner

        # the trials {"run": true} retries start, served on ports of their own (None: a sweep's, whose trial
        # process ends with its trial)
        self.retries = RetryRunner(host, allow_controller=allow_controller, origins=origins) if run_retries \
            else None
        listener = type("HilListener", (_Listener, ServerListener), {})(self)
        services = [_mark_service(self), self._retry_service()]
        self.server, self.gate = start_behind_gate(lambda private_host, private_port: foxglove.start_server(
            name=f"hil {label}".strip(), host=private_host, port=private_port, capabilities=_capabilities(),
            server_listener=listener, context=self.context, services=services, supported_encodings=["json"],
            # PlaybackControl needs a range: the trial's, 0 to its duration (the bar shows how far it has come)
            playback_time_range=(0, round((duration_s or LONGEST_S) * 1e9))), host, port, origins, self.err)
        self.host, self.port = host, self.gate.port
        self._closed = threading.Event()
        threading.Thread(target=self._paused_time, name="hil-foxglove-paused-time", daemon=True).start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def _retry_service(self) -> Any:
        """``hil/retry`` at the trial's time now, from the states the trial saves beside its log."""
        from pathlib import Path

        from .retry import retry_service

        def folder():
            path = getattr(self.rec, "path", None)
            return Path(path).parent if path is not None else None

        return retry_service(folder, lambda: self.now_s,
                             lambda why, request: self._refuse("retry", why, f"foxglove client {request.client_id}",
                                                               now=True), self.retries)

    # --- the trial's side (LiveTap: taps, hooks, bind, write) --------------------------------------------------
    def __call__(self, topic: str, t_s: float, data: bytes, info: Any) -> None:
        """A recorder tap: one message of the log, served as is on its channel at its trial time (handed to the
        SDK after the cycle, :meth:`flush`)."""
        channel = self.channels.get(topic, *info)
        log_time = round(t_s * 1e9)
        data = bytes(data)
        if t_s == 0.0:
            with self._lock:
                self._latched.setdefault(topic, []).append((log_time, data))
        self._pending.append((channel, data, log_time))
        if topic == "/clock":
            self.now_s = t_s

    def flush(self) -> None:
        """Hand the messages written since the last flush to the SDK, in the order the log got them."""
        pending, self._pending = self._pending, []
        for channel, data, log_time in pending:
            channel.log(data, log_time=log_time)

    def after_cycle(self, robot: Any) -> None:
        """After each bus cycle, on the trial's thread: apply what clients asked, stop at a seek's time, say the
        time."""
        if self.robot is None:
            self.robot = robot
            self.control.bind(robot)
        while not self._inbox.empty():  # only the trial's thread takes from it
            kind, payload, by = self._inbox.get_nowait()
            self._apply(kind, payload, by)
        if self._pending:
            self.flush()
        if self.run_to_s is not None and self.now_s >= self.run_to_s - 1e-9:
            self.run_to_s = None
            self.control.pause()
            self._broadcast_state("")
        wall = WALL()
        if self.control.paused or wall - self._last_time_wall >= TIME_EVERY_S:
            self._send_time()
            self._last_time_wall = wall

    def _send_time(self) -> None:
        ns = round(self.now_s * 1e9)
        if ns != self._last_time_sent:
            self.server.broadcast_time(ns)
            self._last_time_sent = ns

    def _apply(self, kind: str, payload: dict[str, Any], by: str) -> None:
        from hil.runtime.robot.params import ParamError

        t = self.now_s
        if kind == "params":
            try:
                changed = self.robot.change_params(payload)
            except ParamError as exc:  # checked when asked; the controller may have changed its declaration
                self._refuse(f"set parameters {payload}", str(exc), by)
                return
            self.write("/trial/params", t, {"changed": changed, "params": dict(self.robot.params), "by": by})
        elif kind == "mark":
            self.write("/trial/mark", t, {"note": payload.get("note", ""), "by": by})
        elif kind == "refused":
            self.write(REFUSED, t, {**payload, "by": by})

    def close(self) -> None:
        """Take the server down (the trial's log is complete without it) within a bounded time, whatever its
        clients do (gate.py: a client that stopped reading cannot hold it); a retry being started is answered
        first."""
        self._closed.set()
        self.control.resume()  # never leave a trial paused behind a closed server
        self.flush()  # what the trial wrote after its last cycle (its end)
        self._send_time()
        if self.retries is not None:
            self.retries.settle()
        stop_bounded(self.server, self.gate, self.err)
        self.channels.close()
        if self.retries is not None:  # a retry still running ends its log as on Ctrl-C (close_live waits first)
            self.retries.close()

    # --- the clients' side (the SDK's threads) ----------------------------------------------------------------
    def _refuse(self, request: str, why: str, by: str, *, now: bool = False) -> None:
        """A request refused: the client is told, the user sees it, the log has it (from the trial's thread)."""
        from foxglove.websocket import StatusLevel

        print(f"foxglove: refused {request} from {by}: {why}", file=self.err, flush=True)
        self.server.publish_status(f"hil refused {request}: {why}", StatusLevel.Warning)
        if now:
            self._inbox.put(("refused", {"request": request, "error": why}, by))
        else:
            self.write(REFUSED, self.now_s, {"request": request, "error": why, "by": by})

    def playback(self, request: Any) -> Any:
        from foxglove.websocket import PlaybackCommand

        by = "foxglove"
        if self.control.available is False:
            self._refuse("pause/play", self.control.why_not, by, now=True)
            return self._state(request.request_id)
        seek = request.seek_time
        if seek is not None:
            seek_s = seek / 1e9
            if seek_s < self.now_s - 1e-9:
                self._refuse(f"seek to {seek_s:.3f} s", f"a live trial cannot go back (it is at {self.now_s:.3f} s;"
                             " replay its log with hil view DIR --foxglove to seek anywhere)", by, now=True)
            elif seek_s > self.now_s + 1e-9:
                self.run_to_s = seek_s
                self.control.resume()
                return self._state(request.request_id)
        if request.playback_command == PlaybackCommand.Pause:
            self.run_to_s = None
            self.control.pause()
        else:
            self.control.resume()
        self.speed = float(request.playback_speed) if request.playback_speed > 0 else self.speed
        return self._state(request.request_id)

    def _state(self, request_id: str | None) -> Any:
        from foxglove.websocket import PlaybackState, PlaybackStatus

        running = not self.control.paused or self.run_to_s is not None
        return PlaybackState(status=PlaybackStatus.Playing if running else PlaybackStatus.Paused,
                             current_time=round(self.now_s * 1e9), playback_speed=self.speed, did_seek=False,
                             request_id=request_id)

    def _broadcast_state(self, request_id: str) -> None:
        self.server.broadcast_playback_state(self._state(request_id))

    def params(self, names: list[str]) -> list[Any]:
        import foxglove

        values = dict(self.robot.params) if self.robot is not None else {}
        return [foxglove.Parameter(name, value=_native(value)) for name, value in sorted(values.items())
                if not names or name in names]

    def set_params(self, client_id: int, parameters: list[Any]) -> list[Any]:
        from hil.runtime.robot.params import ParamError, checked_changes

        by = f"foxglove client {client_id}"
        asked = {p.name: p.get_value() for p in parameters}
        kinds = dict(self.robot.changeable) if self.robot is not None else {}
        try:
            applied = checked_changes(kinds, asked)
        except ParamError as exc:
            self._refuse(f"set parameters {asked}", str(exc), by, now=True)
            return self.params(list(asked))
        self._inbox.put(("params", applied, by))
        current = {p.name: p for p in self.params(list(asked))}
        import foxglove

        return [foxglove.Parameter(name, value=value) for name, value in applied.items()] + \
            [p for name, p in current.items() if name not in applied]

    def mark(self, request: Any) -> bytes:
        by = f"foxglove client {request.client_id}"
        note = ""
        if request.payload:
            try:
                doc = json.loads(bytes(request.payload).decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                self._refuse("mark", f"the request must be JSON {{\"note\": \"...\"}}: {exc}", by, now=True)
                raise ValueError(f"the request must be JSON {{\"note\": \"...\"}}: {exc}") from None
            if not isinstance(doc, dict) or not isinstance(doc.get("note", ""), str):
                self._refuse("mark", "the request must be a JSON object with a string 'note'", by, now=True)
                raise ValueError("the request must be a JSON object with a string 'note'")
            note = doc.get("note", "")
        self._inbox.put(("mark", {"note": note}, by))
        return json.dumps({"t": self.now_s, "note": note}).encode()

    def _paused_time(self) -> None:
        """While paused, the time now again every :data:`PAUSED_TIME_EVERY_S`: the trial's thread sends none while
        it waits, and a client that comes then would have no time (the SDK tells Python of no connection)."""
        while not self._closed.wait(PAUSED_TIME_EVERY_S):
            if self.control.paused:
                try:
                    self.server.broadcast_time(round(self.now_s * 1e9))
                except Exception as exc:  # noqa: BLE001 - never the trial's end
                    print(f"foxglove: cannot send the time: {exc}", file=self.err, flush=True)

    def latched(self, topic: str) -> None:
        """A client subscribed: the channel's t = 0 messages again (the map, the model, the walls)."""
        with self._lock:
            messages = list(self._latched.get(topic, ()))
        if not messages:
            return
        channel = self.channels.get_existing(topic)
        for log_time, data in messages:
            channel.log(data, log_time=log_time)


def _native(value: Any) -> Any:
    """A parameter value Foxglove can carry: bool, int, float, str, lists and dicts of them; anything else as text."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_native(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _native(v) for k, v in value.items()}
    return str(value)


class _Listener:
    """The SDK's callbacks, each guarded: whatever a client sends, nothing raises into the server."""

    def __init__(self, live: LiveServer):
        self.live = live

    def _guard(self, what: str, fn, *args, fallback=None):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - a client's request must never take the server down
            print(f"foxglove: {what} failed: {type(exc).__name__}: {exc}", file=self.live.err, flush=True)
            return fallback

    def on_subscribe(self, client: Any, channel: Any) -> None:
        self._guard("subscribe", self.live.latched, channel.topic)

    def on_playback_control_request(self, request: Any) -> Any:
        return self._guard("playback control", self.live.playback, request)

    def on_get_parameters(self, client: Any, param_names: list[str], request_id: str | None = None) -> list[Any]:
        return self._guard("get parameters", self.live.params, list(param_names), fallback=[])

    def on_set_parameters(self, client: Any, parameters: list[Any], request_id: str | None = None) -> list[Any]:
        return self._guard("set parameters", self.live.set_params, client.id, list(parameters), fallback=[])


def _mark_service(live: LiveServer) -> Any:
    import foxglove

    request = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="hil.MarkRequest", encoding="jsonschema",
        data=json.dumps({"type": "object", "properties": {"note": {"type": "string"}}}).encode()))
    return foxglove.Service(MARK_SERVICE, schema=foxglove.ServiceSchema("hil.Mark", request=request),
                            handler=live.mark)
