"""A recorded trial served to Foxglove with seek, play and speed: ``hil view DIR --foxglove [HOST:]PORT``.

For a log too large to drag into Foxglove, or one on a remote machine (``ssh -L 8765:localhost:8765``). The
server advertises the log's data start and end (PlaybackControl's range), every channel with its schema, and
plays the log's own bytes at their log times: a player thread advances the position by wall time times the
requested speed, sends what lies before it and the server's time. Foxglove's playback bar pauses, plays, sets
the speed and seeks; after a seek the t = 0 messages (map, model, walls) are sent again, since Foxglove clears
its panels on a seek. A seek outside the log's range is refused (a status to the client, a line on stderr) and
playback stays where it was.

The log is read once into memory (its messages' bytes; a 4-minute demo is ~40 MB), from the MCAP reader in file
order, sorted by log time.
"""
from __future__ import annotations

import bisect
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .channels import ServedChannels
from .gate import start_behind_gate, stop_bounded

TICK_S = 0.01  # the player's period (wall time)


def read_messages(path: Path) -> tuple[list[tuple[int, str, bytes]], dict[str, tuple[str, str, str, bytes]]]:
    """The log's messages as (log time ns, topic, bytes) sorted by time, and each topic's channel description."""
    from mcap.reader import make_reader

    messages, channels = [], {}
    with open(path, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages(log_time_order=False):
            if channel.topic not in channels:
                channels[channel.topic] = (channel.message_encoding, schema.name if schema else "",
                                           schema.encoding if schema else "", bytes(schema.data) if schema else b"")
            messages.append((message.log_time, channel.topic, bytes(message.data)))
    messages.sort(key=lambda m: m[0])
    return messages, channels


class ReplayServer:
    """Serve ``DIR/trial.mcap`` (or a .mcap file) to Foxglove; starts paused at the log's start."""

    def __init__(self, log: str | Path, host: str = "127.0.0.1", port: int = 8765, *, err: Any = None,
                 origins: tuple[str, ...] = (), allow_controller: bool = False):
        import foxglove
        from foxglove.websocket import Capability, ServerListener

        path = Path(log)
        self.path = path / "trial.mcap" if path.is_dir() else path
        self.err = err if err is not None else sys.stderr
        self.messages, described = read_messages(self.path)
        if not self.messages:
            raise ValueError(f"{self.path}: no messages to replay")
        self.times = [m[0] for m in self.messages]
        self.start_ns, self.end_ns = self.times[0], self.times[-1]
        self.context = foxglove.Context()
        self.channels = ServedChannels(self.context)
        for topic, info in sorted(described.items()):
            self.channels.get(topic, *info)
        self.position_ns = self.start_ns
        self.cursor = 0  # index of the next message to send
        self.playing = False
        self.speed = 1.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        from .retry import RetryRunner

        # the trials {"run": true} retries start, served on ports of their own
        self.retries = RetryRunner(host, allow_controller=allow_controller, origins=origins)
        listener = type("HilReplayListener", (_ReplayListener, ServerListener), {})(self)
        services = [self._retry_service()]
        self.server, self.gate = start_behind_gate(lambda private_host, private_port: foxglove.start_server(
            name=f"hil replay {self.path.parent.name}", host=private_host, port=private_port,
            capabilities=[Capability.Time, Capability.PlaybackControl, Capability.Services], server_listener=listener,
            context=self.context, playback_time_range=(self.start_ns, self.end_ns), supported_encodings=["json"],
            services=services), host, port, origins, self.err)
        self.host, self.port = host, self.gate.port
        self._thread = threading.Thread(target=self._play, name="hil-foxglove-replay", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def _retry_service(self) -> Any:
        """``hil/retry`` at the playback position, from the states saved beside the log (the viewer's button)."""
        from .retry import retry_service

        def refused(why: str, request: Any) -> None:
            print(f"foxglove replay: retry refused: {why}", file=self.err, flush=True)

        return retry_service(lambda: self.path.parent, lambda: self.position_ns / 1e9, refused, self.retries)

    # --- the player ---------------------------------------------------------------------------------------------
    def _play(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK_S):
            now = time.monotonic()
            with self._lock:
                if self.playing:
                    self.position_ns = min(self.end_ns, self.position_ns + round((now - last) * self.speed * 1e9))
                    self._send_through(self.position_ns)
                    self.server.broadcast_time(self.position_ns)
                    if self.position_ns >= self.end_ns:
                        self.playing = False
                        self.server.broadcast_playback_state(self._state("", ended=True))
            last = now

    def _send_through(self, until_ns: int) -> None:
        messages, k = self.messages, self.cursor
        while k < len(messages) and messages[k][0] <= until_ns:
            log_time, topic, data = messages[k]
            self.channels.get_existing(topic).log(data, log_time=log_time)
            k += 1
        self.cursor = k

    def _state(self, request_id: str | None, *, did_seek: bool = False, ended: bool = False) -> Any:
        from foxglove.websocket import PlaybackState, PlaybackStatus

        status = PlaybackStatus.Ended if ended else PlaybackStatus.Playing if self.playing else PlaybackStatus.Paused
        return PlaybackState(status=status, current_time=self.position_ns, playback_speed=self.speed,
                             did_seek=did_seek, request_id=request_id)

    # --- the clients' requests (the SDK's threads) ------------------------------------------------------------
    def request(self, request: Any) -> Any:
        from foxglove.websocket import PlaybackCommand, StatusLevel

        with self._lock:
            did_seek = False
            seek = request.seek_time
            if seek is not None:
                if not self.start_ns <= seek <= self.end_ns:
                    why = (f"seek to {seek / 1e9:.3f} s refused: the log runs from {self.start_ns / 1e9:.3f} to "
                           f"{self.end_ns / 1e9:.3f} s")
                    print(f"foxglove replay: {why}", file=self.err, flush=True)
                    self.server.publish_status(why, StatusLevel.Warning)
                    return self._state(request.request_id)
                self._seek(seek)
                did_seek = True
            speed = float(request.playback_speed)
            if speed > 0 and speed == speed and speed != float("inf"):
                self.speed = speed
            self.playing = request.playback_command == PlaybackCommand.Play and self.position_ns < self.end_ns
            return self._state(request.request_id, did_seek=did_seek)

    def _seek(self, seek_ns: int) -> None:
        """Move to ``seek_ns``: the t = 0 messages again (Foxglove clears its panels on a seek), then on from
        there."""
        self.position_ns = seek_ns
        first = bisect.bisect_right(self.times, self.start_ns)
        for log_time, topic, data in self.messages[:first]:
            self.channels.get_existing(topic).log(data, log_time=log_time)
        self.cursor = max(first, bisect.bisect_left(self.times, seek_ns))
        self.server.broadcast_time(seek_ns)

    def close(self) -> None:
        """Within a bounded time whatever clients do (gate.py); a retry being started is answered first."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.retries.settle()
        stop_bounded(self.server, self.gate, self.err)
        self.channels.close()
        self.retries.close()  # a retry still running ends its log as on Ctrl-C


class _ReplayListener:
    def __init__(self, replay: ReplayServer):
        self.replay = replay

    def on_playback_control_request(self, request: Any) -> Any:
        try:
            return self.replay.request(request)
        except Exception as exc:  # noqa: BLE001 - a client's request must never take the server down
            print(f"foxglove replay: playback control failed: {type(exc).__name__}: {exc}", file=self.replay.err)
            return None
