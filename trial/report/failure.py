"""Why a trial failed: for a trial its verdict failed, one cause from a fixed list for each thing that went wrong,
with the evidence that decided it, read from the log alone (docs/METRICS.md, "Why a trial failed").

The verdict (trial/verdict.py) says *which* criteria a trial missed; this says *why*, so a sweep can count causes
instead of a person opening trials one by one. Each failed criterion leads to the causes that can explain it:

- a collision criterion (``collisions.*``): one cause per collision event it counts. ``person_initiated`` when the
  metrics blame the person; otherwise ``sensed_no_stop`` when the range ring echoed from that person in the
  ``LOOKBACK_S`` before the contact (the controller had the reading and drove on), else ``person_not_sensed``
  with the reason the ring gave: ``angle``, ``range``, ``no_hit``, ``noise`` (the ring's own per-reading causes,
  ``/robot/sensors`` ``ring_cause``), ``occluded`` (a nearer echo: something stood between), ``outside_cone`` (no
  sensor's cone held the person), ``unknown`` (no ring in the log, or only echoes from beyond the person); beside
  the ring's account, each camera's (``/camera/people``): how many of its frames in the lookback showed the
  person, and how large. A camera's sighting is evidence, not a cause: a frame is a picture the controller may
  not have looked at, and a real camera has no labels to tell a person by;
- a goal criterion (``goal.*``, ``time_to_goal_s``) or a trial that did not run to its end: ``part_lost`` (a part
  was lost during the run), ``controller_error`` / ``world_error`` / ``interrupted`` (how the run ended: the
  controller raised or stalled; the world or the crowd failed, by the run's error kept in the verdict; Ctrl-C),
  ``odometry_drift`` (the
  believed and the true position at the end differ by at least ``DRIFT_MIN_M`` and by at least the miss),
  ``blocked`` (no progress at the end and a wall or a person in the way, toward the goal or straight ahead), else
  ``timeout`` (time ran out);
- any other criterion: ``criterion``, naming it.

The causes are listed in time order; the first is the trial's ``cause``. A pure function of the log's messages and
the metrics: the same log gives the same answer.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..record.log import LogMessage

CAUSES = ("person_not_sensed", "sensed_no_stop", "person_initiated", "blocked", "timeout", "odometry_drift",
          "controller_error", "world_error", "part_lost", "interrupted", "criterion")
# what the world or the crowd raises when it fails (bridge/crowd_link.py, bridge/lockstep.py, firmware_sim/world):
# a run they ended failed for a reason of the simulation's, not of the controller's
WORLD_ERRORS = ("CrowdLinkError", "LockstepError", "WorldError")
NOT_SENSED_REASONS = ("occluded", "angle", "range", "noise", "no_hit", "outside_cone", "unknown")  # ties: this order
LOOKBACK_S = 2.0  # what the ring said of a person this long before the contact
ECHO_TOLERANCE_M = 0.15  # a valid reading this close to the person's near surface (or up to their centre) is theirs
DRIFT_MIN_M = 0.1  # believed vs true position at the end: below this it is odometry's noise, not a drift
BLOCK_WINDOW_S = 2.0  # the end of the trial looked at for progress
BLOCK_PROGRESS_M = 0.1  # closer to the goal by less than this over the window: no progress
BLOCK_REACH_M = 1.0  # a wall or a person in the way within this of the robot centre
BLOCK_BEARING_RAD = math.pi / 3  # a wall's nearest point or a person within this of the way counts as in the way
DEFAULT_GOAL_RADIUS_M = 0.5
DEFAULT_PERSON_RADIUS_M = 0.25
_COLUMN = re.compile(r"^\s*([A-Za-z_][\w.]*)")
_EVENTS_OF = {"collisions.robot_initiated": ("robot",), "collisions.person_initiated": ("person",),
              "collisions.unclassified": ("unknown",), "collisions.total": ("robot", "person", "unknown")}


def params() -> dict[str, float]:
    """The thresholds used, written beside the causes."""
    return {"lookback_s": LOOKBACK_S, "echo_tolerance_m": ECHO_TOLERANCE_M, "drift_min_m": DRIFT_MIN_M,
            "block_window_s": BLOCK_WINDOW_S, "block_progress_m": BLOCK_PROGRESS_M, "block_reach_m": BLOCK_REACH_M,
            "block_bearing_deg": math.degrees(BLOCK_BEARING_RAD)}


def classify_failure(messages: Mapping[str, Sequence[LogMessage]], metrics: Mapping[str, Any]) -> dict | None:
    """metrics.json's ``failure`` for a trial whose ``verdict`` failed (None for one that passed): ``cause`` (the
    first cause's label, ``person_not_sensed:angle``), ``causes`` (each with its time and evidence) and ``params``."""
    verdict = metrics.get("verdict") or {}
    if verdict.get("passed", True):
        return None
    trial = _Log(messages)
    status = str(verdict.get("status") or "ok")
    kinds: set[str] = set()
    goal_missed, others = False, []
    for text in verdict.get("failed") or ():
        column = _column(text)
        if column == "status":
            continue  # how the run ended: below, with the goal's causes
        if column in _EVENTS_OF:
            kinds.update(_EVENTS_OF[column])
        elif column.startswith("goal.") or column == "time_to_goal_s":
            goal_missed = True
        else:
            others.append(text)
    causes = [_collision_cause(trial, event) for event in (metrics.get("collisions") or {}).get("events") or ()
              if event.get("by") in kinds]
    if goal_missed or status != "ok":
        causes.append(_stop_cause(trial, status, verdict.get("stopped"), metrics))
    causes += [{"cause": "criterion", "label": "criterion", "t": trial.end_t, "evidence": {"criterion": text}}
               for text in others]
    if not causes:  # a failed verdict always names something; keep the answer total all the same
        causes.append({"cause": "criterion", "label": "criterion", "t": trial.end_t,
                       "evidence": {"criterion": "; ".join(verdict.get("failed") or ())}})
    causes.sort(key=lambda c: c["t"])
    return {"cause": causes[0]["label"], "causes": causes, "params": params()}


def cause_counts(failures: Sequence[Mapping[str, Any] | None]) -> dict[str, int]:
    """How many trials had each first cause (a sweep's count per condition), in the fixed order of the causes."""
    counts = Counter(str(f["cause"]) for f in failures if f)
    return dict(sorted(counts.items(), key=lambda kv: (_rank(kv[0]), kv[0])))


def _rank(label: str) -> int:
    name = label.split(":", 1)[0]
    return CAUSES.index(name) if name in CAUSES else len(CAUSES)


def _column(text: str) -> str:
    match = _COLUMN.match(text)
    return match[1] if match else text


# --- collisions ---------------------------------------------------------------------------------------------------
def _collision_cause(trial: _Log, event: Mapping[str, Any]) -> dict[str, Any]:
    """The cause of one collision event (metrics' ``collisions.events``), with what the ring said of that person."""
    t, pid = float(event["t"]), int(event["person"])
    sensing = trial.sensing(pid, t)
    evidence = {"person": pid, "by": event.get("by"), "robot_approach_mps": event.get("robot_approach_mps"),
                "person_approach_mps": event.get("person_approach_mps"), "ring": sensing,
                "cameras": trial.camera_sightings(pid, t)}
    if event.get("by") == "person":
        return {"cause": "person_initiated", "label": "person_initiated", "t": t, "evidence": evidence}
    if sensing["sensed"]:
        return {"cause": "sensed_no_stop", "label": "sensed_no_stop", "t": t, "evidence": evidence}
    reason = sensing["reason"]
    return {"cause": "person_not_sensed", "reason": reason, "label": f"person_not_sensed:{reason}", "t": t,
            "evidence": evidence}


# --- goals and endings --------------------------------------------------------------------------------------------
def _stop_cause(trial: _Log, status: str, stopped: Any, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Why the robot is not at its goal at the end (or the run did not reach its end)."""
    t = trial.end_t
    lost = trial.lost_parts()
    if lost:
        return _cause("part_lost", t, {"parts": lost, "status": status})
    if status != "ok":
        error = str((metrics.get("verdict") or {}).get("error") or "")
        name = {"failed": "controller_error", "interrupted": "interrupted"}.get(status, "timeout")
        if name == "controller_error" and error.split(":", 1)[0] in WORLD_ERRORS:
            name = "world_error"
        return _cause(name, t, {"status": status, "stopped": stopped, **({"error": error} if error else {})})
    goal = (metrics.get("goal") or {}).get("xy")
    end = trial.end_pose()
    if goal is None or end is None:
        return _cause("timeout", t, {"goal": goal})
    radius = float((metrics.get("params") or {}).get("goal_radius_m") or DEFAULT_GOAL_RADIUS_M)
    true_xy = np.array(end[:2])
    distance = float(np.hypot(*(true_xy - goal)))
    base = {"goal": list(goal), "goal_radius_m": radius, "true_pose": list(end), "distance_to_goal_m": distance,
            "progress_m": trial.progress(goal, BLOCK_WINDOW_S), "still_s": trial.still_for(),
            "nearest_person": trial.nearest_person(goal)}
    believed = trial.end_odometry()
    if believed is not None:
        drift = float(np.hypot(*(np.array(believed[:2]) - true_xy)))
        base.update(believed_pose=list(believed), drift_m=drift,
                    believed_distance_to_goal_m=float(np.hypot(believed[0] - goal[0], believed[1] - goal[1])))
        if drift >= DRIFT_MIN_M and drift >= distance - radius:
            return _cause("odometry_drift", t, base)
    if base["progress_m"] < BLOCK_PROGRESS_M:
        obstacle = trial.in_the_way(goal)
        if obstacle is not None:
            return _cause("blocked", t, {**base, "obstacle": obstacle})
    return _cause("timeout", t, base)


def _cause(name: str, t: float, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"cause": name, "label": name, "t": t, "evidence": evidence}


# --- the log, as these questions need it --------------------------------------------------------------------------
class _Log:
    """The robot's states, the people's tracks, the ring's readings and geometry, the map's walls."""

    def __init__(self, messages: Mapping[str, Sequence[LogMessage]]):
        self.messages = messages
        states = messages.get("/robot/state", ())
        self.states = states
        self.t = np.array([m.t for m in states], dtype=float)
        self.end_t = float(self.t[-1]) if len(self.t) else max(
            (m[-1].t for m in messages.values() if m), default=0.0)
        self._tracks: dict[int, tuple[np.ndarray, np.ndarray, float]] | None = None

    # the robot
    def end_pose(self) -> tuple[float, float, float] | None:
        if not self.states:
            return None
        d = self.states[-1].data
        return float(d["x"]), float(d["y"]), float(d["yaw"])

    def end_odometry(self) -> tuple[float, float, float] | None:
        odometry = self.states[-1].data.get("odometry") if self.states else None
        return tuple(float(v) for v in odometry) if odometry else None  # type: ignore[return-value]

    def pose_at(self, t: float) -> tuple[float, float, float] | None:
        """The last robot state at or before ``t`` (the first when none)."""
        if not self.states:
            return None
        i = max(int(np.searchsorted(self.t, t, side="right")) - 1, 0)
        d = self.states[i].data
        return float(d["x"]), float(d["y"]), float(d["yaw"])

    def progress(self, goal: Sequence[float], window_s: float) -> float:
        """How much closer to the goal the robot came over the last ``window_s`` (the whole run when shorter)."""
        then, now = self.pose_at(self.end_t - window_s), self.end_pose()
        if then is None or now is None:
            return 0.0
        return math.hypot(then[0] - goal[0], then[1] - goal[1]) - math.hypot(now[0] - goal[0], now[1] - goal[1])

    def still_for(self) -> float:
        """How long the robot had stayed within ``BLOCK_PROGRESS_M`` of where it ended (its whole run at most)."""
        end = self.end_pose()
        if end is None:
            return 0.0
        xy = np.array([[m.data["x"], m.data["y"]] for m in self.states], dtype=float)
        away = np.flatnonzero(np.hypot(xy[:, 0] - end[0], xy[:, 1] - end[1]) >= BLOCK_PROGRESS_M)
        since = self.t[away[-1] + 1] if len(away) else self.t[0]
        return float(self.end_t - since)

    def nearest_person(self, goal: Sequence[float]) -> dict[str, Any] | None:
        """The person nearest the robot at the end (the last ``/pedestrians``): id, centre distance, and their
        bearing from the goal's direction (degrees, counter-clockwise); None when nobody was there."""
        end, people = self.end_pose(), self.messages.get("/pedestrians", ())
        if end is None or not people or not people[-1].data.get("people"):
            return None
        person = min(people[-1].data["people"], key=lambda q: math.hypot(q["x"] - end[0], q["y"] - end[1]))
        heading = math.atan2(goal[1] - end[1], goal[0] - end[0])
        bearing = math.atan2(person["y"] - end[1], person["x"] - end[0]) - heading
        return {"person": int(person["id"]), "distance_m": math.hypot(person["x"] - end[0], person["y"] - end[1]),
                "bearing_deg": math.degrees(_wrap(bearing))}

    def camera_sightings(self, pid: int, t: float) -> dict[str, dict[str, int]]:
        """What each camera's frames of the ``LOOKBACK_S`` before ``t`` showed of person ``pid`` (``/camera/people``):
        frames made, frames holding the person, the most pixels they covered. Empty when no frame was made (no
        camera, or nobody asked for a picture): the cameras then reported nothing."""
        out: dict[str, dict[str, int]] = {}
        for m in self.messages.get("/camera/people", ()):
            if not t - LOOKBACK_S - 1e-9 <= m.t <= t + 1e-9:
                continue
            seen = out.setdefault(str(m.data.get("camera")), {"frames": 0, "frames_with_person": 0, "pixels_max": 0})
            seen["frames"] += 1
            pixels = max((int(p.get("pixels", 0)) for p in m.data.get("people") or () if p.get("id") == pid),
                         default=0)
            if pixels:
                seen["frames_with_person"] += 1
                seen["pixels_max"] = max(seen["pixels_max"], pixels)
        return out

    def lost_parts(self) -> list[dict[str, Any]]:
        """Each part lost (or quarantined) during the run: which, when, and when it came back (None: never)."""
        out: list[dict[str, Any]] = []
        for m in self.messages.get("/robot/parts", ()):
            data = m.data if isinstance(m.data, dict) else {}
            if data.get("kind") in ("lost", "quarantined"):
                out.append({"part_id": data.get("part_id"), "bus": data.get("bus"), "kind": data["kind"],
                            "t": m.t, "names": list(data.get("names") or ()), "back_t": None})
            elif data.get("kind") == "back":
                for entry in out:
                    if entry["part_id"] == data.get("part_id") and entry["back_t"] is None:
                        entry["back_t"] = m.t
        return out

    def in_the_way(self, goal: Sequence[float]) -> dict[str, Any] | None:
        """Something in the robot's way at the end, within ``BLOCK_REACH_M`` of its centre, toward the goal or
        straight ahead (where it was trying to go: a detour faces elsewhere): a wall of /map crossing that line,
        or a person within ``BLOCK_BEARING_RAD`` of it; the nearest, with the direction it blocked."""
        end = self.end_pose()
        if end is None:
            return None
        p = np.array(end[:2])
        to_goal = np.array(goal, dtype=float) - p
        reach_goal = min(BLOCK_REACH_M, float(np.hypot(*to_goal)))
        ways = {"goal": (math.atan2(to_goal[1], to_goal[0]), reach_goal), "ahead": (end[2], BLOCK_REACH_M)}
        map_msg = self.messages.get("/map", ())
        walls = (map_msg[0].data.get("walls") or []) if map_msg else []
        people = self.messages.get("/pedestrians", ())
        last = (people[-1].data.get("people") or []) if people else []
        found: list[dict[str, Any]] = []
        for toward, (heading, reach) in ways.items():
            way = reach * np.array([math.cos(heading), math.sin(heading)])
            for wall in walls:
                a, b = np.array(wall[:2], dtype=float), np.array(wall[2:4], dtype=float)
                s, near = _crossing(p, way, a, b), _nearest(p, a, b) - p
                if s is not None:
                    found.append({"kind": "wall", "segment": list(wall), "distance_m": s * reach, "toward": toward})
                elif _ahead(near, heading, reach):  # a corner or a wall met at a slant
                    found.append({"kind": "wall", "segment": list(wall), "distance_m": float(np.hypot(*near)),
                                  "toward": toward})
            for person in last:
                rel = np.array([float(person["x"]), float(person["y"])]) - p
                if _ahead(rel, heading, BLOCK_REACH_M):
                    found.append({"kind": "person", "person": int(person["id"]), "distance_m": float(np.hypot(*rel)),
                                  "toward": toward})
        return min(found, key=lambda f: (f["distance_m"], f["toward"] != "goal")) if found else None

    # the people
    def tracks(self) -> dict[int, tuple[np.ndarray, np.ndarray, float]]:
        """Per person id: sample times, positions (n, 2) and radius."""
        if self._tracks is None:
            raw: dict[int, tuple[list[float], list[tuple[float, float]], float]] = {}
            for m in self.messages.get("/pedestrians", ()):
                for person in m.data.get("people") or ():
                    entry = raw.setdefault(int(person["id"]), ([], [], float(person.get("radius")
                                                                              or DEFAULT_PERSON_RADIUS_M)))
                    if not entry[0] or entry[0][-1] != m.t:
                        entry[0].append(m.t)
                        entry[1].append((float(person["x"]), float(person["y"])))
            self._tracks = {pid: (np.array(t), np.array(xy).reshape(-1, 2), r) for pid, (t, xy, r) in raw.items()}
        return self._tracks

    def person_at(self, pid: int, t: float) -> tuple[np.ndarray, float] | None:
        """The person's position at ``t`` (linear between samples; None outside their track) and radius."""
        track = self.tracks().get(pid)
        if track is None or not len(track[0]) or t < track[0][0] - 0.15 or t > track[0][-1] + 0.15:
            return None
        times, xy, radius = track
        return np.array([np.interp(t, times, xy[:, 0]), np.interp(t, times, xy[:, 1])]), radius

    # the ring
    def sensing(self, pid: int, t_contact: float) -> dict[str, Any]:
        """What the ring reported about person ``pid`` in the ``LOOKBACK_S`` before ``t_contact``: whether a
        sensor echoed from them, else the most frequent reason among the sensors whose cone held them."""
        ring = self._ring(t_contact)
        window = [max(t_contact - LOOKBACK_S, 0.0), t_contact]
        readings = [m for m in self.messages.get("/robot/sensors", ()) if window[0] <= m.t < t_contact]
        out: dict[str, Any] = {"window_s": window, "samples": 0, "in_cone_samples": 0, "sensed": False,
                               "first_sensed_t": None, "sensor": None, "distance_m": None, "observations": {},
                               "reason": None}
        if ring is None or not readings:
            out["reason"] = "unknown"
            return out
        seen: Counter = Counter()
        for m in readings:
            pose, person = self.pose_at(m.t), self.person_at(pid, m.t)
            if pose is None or person is None:
                continue
            out["samples"] += 1
            looks = ring.look(pose, *person, m.data.get("ring") or [], m.data.get("ring_cause") or [])
            if looks:
                out["in_cone_samples"] += 1
            for k, (what, distance) in looks.items():
                seen[what] += 1
                if what == "sensed" and not out["sensed"]:
                    out.update(sensed=True, first_sensed_t=m.t, sensor=k, distance_m=distance)
        out["observations"] = dict(sorted(seen.items()))
        if not out["sensed"]:
            out["reason"] = _reason(seen) if out["samples"] else "unknown"  # never in /pedestrians then
        return out

    def _ring(self, t: float) -> _Ring | None:
        models = [m for m in self.messages.get("/robot/model", ()) if m.t <= t] or \
            list(self.messages.get("/robot/model", ()))[:1]
        ring = models[-1].data.get("ring") if models and isinstance(models[-1].data, dict) else None
        return _Ring(ring) if ring else None


def _reason(seen: Counter) -> str:
    """The reason a person went unseen: the most frequent observation among the sensors that held them (ties in
    ``NOT_SENSED_REASONS`` order); ``outside_cone`` when none did; echoes from beyond them say nothing: ``unknown``."""
    candidates = {what: n for what, n in seen.items() if what in NOT_SENSED_REASONS}
    if not candidates:
        return "unknown" if seen else "outside_cone"
    return max(candidates, key=lambda what: (candidates[what], -NOT_SENSED_REASONS.index(what)))


class _Ring:
    """The ring's geometry from ``/robot/model`` ``ring``, in the ground plane: each sensor's origin and axis in
    the base frame and its cone's horizontal half angle."""

    def __init__(self, ring: Mapping[str, Any]):
        in_base = ring.get("in_base") or {}
        rotation = np.asarray(in_base.get("rotation") or np.eye(3), dtype=float)
        translation = np.asarray(in_base.get("translation") or [0.0, 0.0, 0.0], dtype=float)
        ring_yaw = math.atan2(rotation[1, 0], rotation[0, 0])
        r0 = float(ring.get("origin_radius_m") or 0.0)
        self.axes = np.array([ring_yaw + float(a) for a in ring.get("yaw") or ()])
        self.origins = translation[:2] + r0 * np.column_stack([np.cos(self.axes), np.sin(self.axes)])
        params = ring.get("params") or {}
        self.half_angle = math.radians(float(params.get("cone_half_angle_deg") or 0.0))
        self.max_range = float(ring.get("max_range_m") or math.inf)

    def look(self, pose: tuple[float, float, float], person: np.ndarray, radius: float, ranges: Sequence[Any],
             causes: Sequence[Any]) -> dict[int, tuple[str, float]]:
        """Per sensor whose cone holds the person (their disc overlaps it): what its reading says of them
        (``sensed``, ``occluded``, ``beyond``, the ring's cause of an invalid reading, ``range`` past its
        maximum range) and the distance from the sensor to their near surface."""
        x, y, yaw = pose
        c, s = math.cos(yaw), math.sin(yaw)
        out: dict[int, tuple[str, float]] = {}
        for k, (axis, origin) in enumerate(zip(self.axes, self.origins)):
            o = np.array([x + c * origin[0] - s * origin[1], y + s * origin[0] + c * origin[1]])
            rel = person - o
            d = float(np.hypot(*rel))
            spread = math.asin(min(1.0, radius / d)) if d > 0 else math.pi
            off = abs(_wrap(math.atan2(rel[1], rel[0]) - (yaw + axis)))
            if off > self.half_angle + spread or off >= math.pi / 2 + spread:
                continue
            near = max(d - radius, 0.0)
            out[k] = (self._what(near, d, ranges[k] if k < len(ranges) else None,
                                 causes[k] if k < len(causes) else None), near)
        return out

    def _what(self, near: float, centre: float, reading: Any, cause: Any) -> str:
        if reading is not None:
            if reading < near - ECHO_TOLERANCE_M:
                return "occluded"
            return "sensed" if reading <= centre + ECHO_TOLERANCE_M else "beyond"
        if near > self.max_range:
            return "range"  # out of the sensor's reach whatever it reported
        return str(cause) if cause else "unknown"


def _crossing(p: np.ndarray, way: np.ndarray, a: np.ndarray, b: np.ndarray) -> float | None:
    """Where (fraction of ``way`` from ``p``, in [0, 1]) the segment p..p+way crosses the segment a..b, or None."""
    edge = b - a
    denominator = way[0] * edge[1] - way[1] * edge[0]
    if abs(denominator) < 1e-12:
        return None
    rel = a - p
    s = (rel[0] * edge[1] - rel[1] * edge[0]) / denominator
    u = (rel[0] * way[1] - rel[1] * way[0]) / denominator
    return float(s) if 0.0 <= s <= 1.0 and 0.0 <= u <= 1.0 else None


def _nearest(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The point of the segment a..b nearest to p."""
    edge = b - a
    length2 = float(edge @ edge)
    u = 0.0 if length2 == 0.0 else min(max(float((p - a) @ edge) / length2, 0.0), 1.0)
    return a + u * edge


def _ahead(rel: np.ndarray, heading: float, reach: float) -> bool:
    """Whether the offset ``rel`` lies within ``reach`` and within ``BLOCK_BEARING_RAD`` of ``heading``."""
    return float(np.hypot(*rel)) <= reach and abs(_wrap(math.atan2(rel[1], rel[0]) - heading)) <= BLOCK_BEARING_RAD


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi
