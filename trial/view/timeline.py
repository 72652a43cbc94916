"""What the viewer shows at a trial time, from the log's own messages: live (fed as the log is written) or replayed.

A :class:`Timeline` holds a trial's messages by topic, in time order. Live, the trial's recorder hands it every
message as it writes it (``Trial.run(listeners=(timeline.add,))``); replayed, :meth:`Timeline.from_log` fills it
from trial.mcap. Either way :meth:`frame` gives the :class:`Frame` at a time (the latest message of each topic at
or before it), so the live page and a replay draw the same data the same way, and what was seen live is what a
replay of the log shows.

The cameras' pictures (``/foxglove/NAME/image``, ``/foxglove/NAME/depth``: protobuf bytes) are kept too, for the
camera panel (trial/view/camera_panel.py); live they come through :meth:`Timeline.tap`, a recorder tap, since the
recorder's listeners see only its JSON topics.
"""
from __future__ import annotations

import bisect
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from .camera_panel import CAMERA_TOPIC, is_camera_topic

STATIC = ("/map", "/robot/model", "/trial/meta", "/crowd/scenario")
TRAIL_S = 8.0  # how far back the people's trails reach
TRAIL_STEP_S = 0.5


@dataclass
class Frame:
    """The trial at time ``t``: the robot's latest state and sensors, the people, the script's last line run."""

    t: float
    robot: dict[str, Any] | None = None
    sensors: dict[str, Any] | None = None
    people: list[dict[str, Any]] = field(default_factory=list)
    line: int | None = None  # the script line that ran last (1-based)
    script_error: dict[str, Any] | None = None  # the line that failed by t ({line, error}), shown red
    path: list[tuple[float, float]] = field(default_factory=list)  # the robot's path so far
    trails: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # each person's recent path
    lost_parts: frozenset = frozenset()  # IDs of the parts lost at t (/robot/parts), drawn grey
    model: dict[str, Any] | None = None  # the /robot/model in effect at t (a new or swapped part logs another)


class Timeline:
    """A trial's messages by topic; thread-safe (the trial's thread adds, the viewer's thread reads)."""

    def __init__(self) -> None:
        self.static: dict[str, dict[str, Any]] = {}
        self._times: dict[str, list[float]] = {}
        self._data: dict[str, list[Any]] = {}
        self._path_x: list[float] = []
        self._path_y: list[float] = []
        self._lock = threading.Lock()
        self.end_t = 0.0
        self.version = 0  # bumped by every add: a reader redraws only when it changed

    @classmethod
    def from_log(cls, path: str | os.PathLike[str]) -> Timeline:
        """A trial.mcap (or the folder holding it), complete or cut short."""
        from hil.trial.record.log import read_log
        from hil.trial.record.recorder import LOG_NAME

        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, LOG_NAME)
        log = read_log(path)
        timeline = cls()
        for topic, messages in log.messages.items():
            if topic.startswith("/foxglove/") and not is_camera_topic(topic):
                continue  # the same data again, for Foxglove
            for message in messages:
                timeline.add(topic, message.t, message.data)
        return timeline

    def add(self, topic: str, t: float, payload: Any) -> None:
        """One message (a recorder listener: called as the log writes it). Messages come in time order. The
        payload is the JSON message, or a camera picture's bytes."""
        with self._lock:
            if topic == "/robot/model":  # the first is drawn at once; later ones (a part swapped, a new part) from
                self.static.setdefault(topic, payload)  # their time on, so a replay shows each when it happened
                self._times.setdefault(topic, []).append(t)
                self._data.setdefault(topic, []).append(payload)
            elif topic in STATIC:
                self.static[topic] = payload
            else:
                self._times.setdefault(topic, []).append(t)
                self._data.setdefault(topic, []).append(payload)
                if topic == "/robot/state":
                    self._path_x.append(payload["x"])
                    self._path_y.append(payload["y"])
            if t > self.end_t:
                self.end_t = t
            self.version += 1

    def tap(self, topic: str, t: float, data: bytes, _channel: Any = None) -> None:
        """A recorder tap (``Trial.run(taps=...)``): keeps the cameras' pictures, as the log got them."""
        if is_camera_topic(topic):
            self.add(topic, t, bytes(data))

    def cameras(self) -> tuple[str, ...]:
        """The names of the cameras with pictures in the timeline (sorted)."""
        with self._lock:
            return tuple(sorted({m.group(1) for topic in self._times if (m := CAMERA_TOPIC.match(topic))}))

    def has_topic(self, topic: str) -> bool:
        with self._lock:
            return bool(self._times.get(topic))

    def latest_at(self, topic: str, t: float) -> tuple[float, Any] | None:
        """(time, message) of the last message of ``topic`` at or before ``t`` (None before the first)."""
        with self._lock:
            times = self._times.get(topic)
            k = bisect.bisect_right(times, t + 1e-9) if times else 0
            return (times[k - 1], self._data[topic][k - 1]) if k else None

    def latest_matching(self, topic: str, t: float, key: str, value: Any,
                        look_back: int = 64) -> tuple[float, Any] | None:
        """(time, message) of the last message of ``topic`` at or before ``t`` whose ``key`` is ``value`` (one
        camera's among several), looking at most ``look_back`` messages back; None if none."""
        with self._lock:
            times = self._times.get(topic)
            k = bisect.bisect_right(times, t + 1e-9) if times else 0
            data = self._data.get(topic, [])
            for i in range(k - 1, max(-1, k - 1 - look_back), -1):
                if isinstance(data[i], dict) and data[i].get(key) == value:
                    return times[i], data[i]
            return None

    def latest(self, topic: str, t: float) -> Any:
        """The last message of ``topic`` at or before ``t`` (None before the first)."""
        with self._lock:
            return self._latest(topic, t)

    def _latest(self, topic: str, t: float) -> Any:
        times = self._times.get(topic)
        if not times:
            return None
        k = bisect.bisect_right(times, t + 1e-9)
        return self._data[topic][k - 1] if k else None

    def frame(self, t: float | None = None) -> Frame:
        """The trial at ``t`` (None: the latest time)."""
        with self._lock:
            t = self.end_t if t is None else min(max(t, 0.0), self.end_t)
            robot = self._latest("/robot/state", t) or self._latest("/robot/joints", t)
            people_msg = self._latest("/pedestrians", t)
            script = self._latest("/crowd/script", t)
            failed = script if script and script.get("error") else None
            n = bisect.bisect_right(self._times.get("/robot/state", []), t + 1e-9)
            stride = max(1, n // 2000)  # a long trial's path drawn with at most ~2000 points
            path = list(zip(self._path_x[:n:stride], self._path_y[:n:stride]))
            return Frame(t=t, robot=robot, sensors=self._latest("/robot/sensors", t),
                         people=list(people_msg["people"]) if people_msg else [],
                         line=int(script["line"]) if script else None, path=path, trails=self._trails(t),
                         script_error={"line": int(failed["line"]), "error": str(failed["error"])} if failed else None,
                         lost_parts=self._lost_parts(t),
                         model=self._latest("/robot/model", t) or self.static.get("/robot/model"))

    def _lost_parts(self, t: float) -> frozenset:
        """Parts lost and not back (nor replaced) at ``t``, from ``/robot/parts``."""
        times = self._times.get("/robot/parts")
        if not times:
            return frozenset()
        lost: set[int] = set()
        for event in self._data["/robot/parts"][:bisect.bisect_right(times, t + 1e-9)]:
            (lost.add if event.get("kind") == "lost" else lost.discard)(event.get("part_id"))
        return frozenset(lost)

    def _trails(self, t: float) -> dict[int, list[tuple[float, float]]]:
        times = self._times.get("/pedestrians")
        if not times:
            return {}
        trails: dict[int, list[tuple[float, float]]] = {}
        lo = bisect.bisect_left(times, t - TRAIL_S)
        hi = bisect.bisect_right(times, t + 1e-9)
        next_t = -1.0
        for k in range(lo, hi):
            if times[k] < next_t and k != hi - 1:
                continue
            next_t = times[k] + TRAIL_STEP_S
            for person in self._data["/pedestrians"][k]["people"]:
                trails.setdefault(int(person["id"]), []).append((person["x"], person["y"]))
        return trails

    def script_lines(self, upto: float | None = None) -> list[dict[str, Any]]:
        """The script lines that ran, up to ``upto`` (None: all so far)."""
        with self._lock:
            times, data = self._times.get("/crowd/script", []), self._data.get("/crowd/script", [])
            n = len(times) if upto is None else bisect.bisect_right(times, upto + 1e-9)
            return list(data[:n])
