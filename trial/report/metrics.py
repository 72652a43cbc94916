"""Trial metrics from the log: what a developer reads to judge a social navigation run.

Every metric is defined in docs/METRICS.md; the short version:

- distances are centre to centre in the ground plane (the logged robot x, y and person x, y), which is how
  Hall's proxemic distances are stated and does not depend on body models; ``min_clearance_m`` subtracts the
  radii (robot radius from /trial/meta, person radius from /pedestrians) for the gap between bodies;
- motion between samples is linear: robot and person positions are interpolated linearly in time on the union of
  their sample times, so a zone entry, a zone duration or the closest approach between two samples is computed
  exactly for that piecewise-linear motion instead of depending on the logging rate;
- proxemic zones are nested discs: intimate < 0.45 m, personal < 1.2 m, social < 3.6 m (an intimate intrusion
  is also a personal and a social one); per zone, ``entries`` counts each time a person goes from outside to
  inside (a person first seen inside counts once) and ``person_seconds`` adds up the time each person spends
  inside;
- a collision is the start of a contact between the robot and a person: from the physics engine's ground truth
  (/world/contacts) when the log has it, else when the clearance drops to ``contact_margin_m`` or less. It is
  robot-initiated when, at the last samples before the contact began, the robot's speed toward the person
  exceeded the person's speed toward the robot; person-initiated otherwise (ties included);
- time not moving: time with |vx| < ``still_speed_mps`` between the first robot state and the goal (or the last
  state when the goal is never reached).

``compute_metrics`` is a pure function of the messages; floats are rounded to 4 decimals and the JSON written
with sorted keys, so the same log gives byte-identical metrics.json.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..record.log import LogMessage

PROXEMIC_ZONES: tuple[tuple[str, float], ...] = (("intimate", 0.45), ("personal", 1.2), ("social", 3.6))
DEFAULT_GOAL_RADIUS_M = 0.5
DEFAULT_ROBOT_RADIUS_M = 0.3
DEFAULT_PERSON_RADIUS_M = 0.25
STILL_SPEED_MPS = 0.05
CONTACT_MARGIN_M = 0.02
DECIMALS = 4
_TINY = 1e-18  # squared metres: relative motion below a nanometre is no motion


def compute_metrics(messages: Mapping[str, Sequence[LogMessage]], *, still_speed_mps: float = STILL_SPEED_MPS,
                    contact_margin_m: float = CONTACT_MARGIN_M) -> dict[str, Any]:
    """All metrics of one trial from its messages by topic (``read_log(path).messages``), rounded."""
    map_msg = _first(messages, "/map")
    meta = _first(messages, "/trial/meta") or {}
    robot_radius = float(meta.get("robot_radius") or DEFAULT_ROBOT_RADIUS_M)
    goal = map_msg.get("goal") if map_msg else None
    goal_radius = float((map_msg or {}).get("goal_radius") or DEFAULT_GOAL_RADIUS_M)

    robot = _RobotTrack(messages.get("/robot/state", ()))
    tracks = _person_tracks(messages.get("/pedestrians", ()))

    out: dict[str, Any] = {
        "params": {"goal_radius_m": goal_radius, "robot_radius_m": robot_radius, "still_speed_mps": still_speed_mps,
                   "contact_margin_m": contact_margin_m, "zones_m": {name: r for name, r in PROXEMIC_ZONES}},
        "meta": meta,
        "samples": {"robot_states": len(robot.t), "pedestrian_ticks": len(messages.get("/pedestrians", ())),
                    "people_seen": len(tracks)},
    }
    out["duration_s"] = float(robot.t[-1] - robot.t[0]) if len(robot.t) else None
    out["path_length_m"] = float(np.sum(np.hypot(np.diff(robot.x), np.diff(robot.y)))) if len(robot.t) else None
    goal_t = robot.time_to_goal(goal, goal_radius)
    out["goal"] = {"xy": list(goal) if goal is not None else None, "reached": goal_t is not None}
    out["time_to_goal_s"] = goal_t
    out["time_not_moving_s"] = robot.time_not_moving(still_speed_mps, goal_t)
    out.update(_people_metrics(robot, tracks, messages, robot_radius, contact_margin_m))
    out["sensors"] = sensor_faults(messages)
    out["parts"] = part_event_counts(messages.get("/robot/parts", ()))
    out["script"] = script_counts(messages.get("/crowd/script", ()))
    return rounded(out)


def sensor_faults(messages: Mapping[str, Sequence[LogMessage]]) -> dict[str, Any]:
    """Why readings failed, per sensor: the ring's own cause counters and the depth cameras' invalid pixels by
    cause over the trial (last minus first ``/robot/sensor_faults``; a camera also says how many frames and pixels
    were counted), and how many of its readings the host saw invalid, per sensor of the ring."""
    faults = messages.get("/robot/sensor_faults", ())
    out: dict[str, Any] = {}
    if faults:
        first, last = faults[0].data["sensors"], faults[-1].data["sensors"]
        for name, end in last.items():
            start = first.get(name, {})
            invalid = {cause: int(n) - int(start.get(cause, 0)) for cause, n in sorted(end.items())}
            invalid["total"] = sum(invalid.values())
            out[name] = {"invalid": invalid}
        seen_first, seen_last = faults[0].data.get("frames") or {}, faults[-1].data.get("frames") or {}
        for name, end in seen_last.items():
            start = seen_first.get(name, {})
            camera = out.setdefault(name, {"invalid": {"total": 0}})
            for key in ("frames", "pixels"):
                camera[key] = int(end.get(key, 0)) - int(start.get(key, 0))
    readings = [m.data.get("ring") or [] for m in messages.get("/robot/sensors", ())]
    if readings and readings[0]:
        ring = out.setdefault("ring", {})
        ring["readings"] = len(readings)
        ring["invalid_per_sensor"] = [sum(r[k] is None for r in readings if k < len(r)) for k in range(len(readings[0]))]
    return out


def script_counts(lines: Sequence[LogMessage]) -> dict[str, Any]:
    """The staged script: how many lines ran, how many failed (a failed line stops the script: 0 or 1), and the
    first failure (``line N: source:line: message``) or None."""
    failed = [m.data for m in lines if isinstance(m.data, dict) and m.data.get("error")]
    return {"lines": len(lines) - len(failed), "errors": len(failed),
            "first_error": f"line {failed[0].get('line', 0)}: {failed[0]['error']}" if failed else None}


def part_event_counts(events: Sequence[LogMessage]) -> dict[str, int]:
    """How many parts were lost, back, new, changed, quarantined during the run (``/robot/parts``)."""
    counts = dict.fromkeys(("lost", "back", "new", "changed", "quarantined"), 0)
    for message in events:
        kind = message.data.get("kind") if isinstance(message.data, dict) else None
        if kind in counts:
            counts[kind] += 1
    return counts


def metrics_json(metrics: Mapping[str, Any]) -> str:
    """The canonical text of metrics.json: sorted keys, two-space indent, newline at the end."""
    return json.dumps(metrics, sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_metrics(metrics: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(metrics_json(metrics))


# ---------------------------------------------------------------------------------------------------------------
def _first(messages: Mapping[str, Sequence[LogMessage]], topic: str) -> dict[str, Any] | None:
    items = messages.get(topic, ())
    return items[0].data if items else None


class _RobotTrack:
    """The robot's logged states as arrays (time order)."""

    def __init__(self, states: Sequence[LogMessage]):
        self.t = np.array([m.t for m in states], dtype=float)
        self.x = np.array([m.data["x"] for m in states], dtype=float)
        self.y = np.array([m.data["y"] for m in states], dtype=float)
        self.yaw = np.array([m.data["yaw"] for m in states], dtype=float)
        self.vx = np.array([m.data["vx"] for m in states], dtype=float)

    def time_to_goal(self, goal: Sequence[float] | None, radius: float) -> float | None:
        """First time (from the first state) the robot centre is within ``radius`` of the goal, or None."""
        if goal is None or not len(self.t):
            return None
        rel = np.column_stack([self.x - goal[0], self.y - goal[1]])
        entries, _ = disc_crossings(self.t, rel, radius, inclusive=True)
        return float(entries[0] - self.t[0]) if entries else None

    def time_not_moving(self, still_speed: float, goal_t: float | None) -> float | None:
        """Seconds with |vx| below the threshold, each state holding until the next, up to the goal or the end."""
        if not len(self.t):
            return None
        end = self.t[0] + goal_t if goal_t is not None else self.t[-1]
        starts, stops = self.t[:-1], np.minimum(self.t[1:], end)
        held = np.clip(stops - starts, 0.0, None)
        return float(np.sum(held[np.abs(self.vx[:-1]) < still_speed]))

    def velocity_before(self, t: float) -> tuple[np.ndarray, np.ndarray] | None:
        """Position and world-frame velocity of the last state logged strictly before ``t`` (else the first)."""
        if not len(self.t):
            return None
        i = max(int(np.searchsorted(self.t, t, side="left")) - 1, 0)
        v = self.vx[i] * np.array([math.cos(self.yaw[i]), math.sin(self.yaw[i])])
        return np.array([self.x[i], self.y[i]]), v

    def position_at(self, times: np.ndarray) -> np.ndarray:
        return np.column_stack([np.interp(times, self.t, self.x), np.interp(times, self.t, self.y)])


class _PersonTrack:
    """One person's samples: ``tick`` is the index of the /pedestrians message (to find gaps in the track)."""

    def __init__(self, pid: int):
        self.id = pid
        self.tick: list[int] = []
        self.t: list[float] = []
        self.pos: list[tuple[float, float]] = []
        self.vel: list[tuple[float, float]] = []
        self.radius = DEFAULT_PERSON_RADIUS_M

    def runs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Contiguous stretches (present in consecutive ticks): (times, positions) each."""
        ticks, t, pos = np.array(self.tick), np.array(self.t), np.array(self.pos, dtype=float).reshape(-1, 2)
        cuts = np.flatnonzero(np.diff(ticks) != 1) + 1
        return [(t[a:b], pos[a:b]) for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(ticks)])]

    def sample_before(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        i = max(int(np.searchsorted(np.array(self.t), t, side="left")) - 1, 0)
        return np.array(self.pos[i], dtype=float), np.array(self.vel[i], dtype=float)


def _person_tracks(ticks: Sequence[LogMessage]) -> dict[int, _PersonTrack]:
    tracks: dict[int, _PersonTrack] = {}
    for k, msg in enumerate(ticks):
        for person in msg.data["people"]:
            pid = int(person["id"])
            track = tracks.get(pid)
            if track is None:
                track = tracks[pid] = _PersonTrack(pid)
                track.radius = float(person.get("radius") or DEFAULT_PERSON_RADIUS_M)
            if track.tick and track.tick[-1] == k:
                continue  # the same id twice in one tick: keep the first
            track.tick.append(k)
            track.t.append(msg.t)
            track.pos.append((float(person["x"]), float(person["y"])))
            track.vel.append((float(person["vx"]), float(person["vy"])))
    return dict(sorted(tracks.items()))


def disc_crossings(times: np.ndarray, rel: np.ndarray, radius: float, *,
                   inclusive: bool = False) -> tuple[list[float], float]:
    """Entries into and time inside the disc |rel| < radius (<= with ``inclusive``), rel linear between samples.

    ``times`` (m,) increasing, ``rel`` (m, 2). Returns (entry times, seconds inside). Being inside at the first
    sample is an entry at that time. Within one linear segment the inside set is a single interval (the disc is
    convex), so each segment has at most one entry, and none when it starts inside (that entry came earlier).
    """
    times = np.asarray(times, dtype=float)
    rel = np.asarray(rel, dtype=float).reshape(-1, 2)
    r2 = radius * radius
    d2 = np.sum(rel * rel, axis=1)
    inside = d2 <= r2 if inclusive else d2 < r2
    entries: list[float] = [float(times[0])] if len(times) and inside[0] else []
    if len(times) < 2:
        return entries, 0.0
    r0, dr, dt = rel[:-1], np.diff(rel, axis=0), np.diff(times)
    a = np.sum(dr * dr, axis=1)
    b = 2.0 * np.sum(r0 * dr, axis=1)
    c = d2[:-1] - r2
    moving = a > _TINY
    disc = b * b - 4.0 * a * c
    root = np.sqrt(np.where(moving & (disc > 0), disc, 0.0))
    safe_a = np.where(moving, a, 1.0)
    lo = np.clip((-b - root) / (2 * safe_a), 0.0, 1.0)
    hi = np.clip((-b + root) / (2 * safe_a), 0.0, 1.0)
    crosses = moving & (disc > 0) & (hi > lo)
    still_inside = ~moving & inside[:-1]
    lo = np.where(still_inside, 0.0, lo)
    hi = np.where(still_inside, 1.0, hi)
    has = crosses | still_inside
    seconds = float(np.sum(np.where(has, (hi - lo) * dt, 0.0)))
    # Each segment's inside interval (a segment that only touches the boundary at its end, inclusive mode: that
    # instant); an entry is the start of a run of intervals that meet. Not "the segment starts outside": a sample
    # on the boundary may test outside while the quadratic puts the previous segment's interval up to it, and
    # that one crossing would count twice.
    starts = times[:-1] + np.where(has, lo, 1.0) * dt
    ends = times[:-1] + np.where(has, hi, 1.0) * dt
    reached = has | inside[1:]
    end = times[0] if entries else -np.inf
    tolerance = 1e-9 * max(1.0, float(times[-1] - times[0]))
    for start, stop in zip(starts[reached].tolist(), ends[reached].tolist()):
        if start > end + tolerance:
            entries.append(float(start))
        end = max(end, stop)
    return entries, seconds


def closest_approach(rel: np.ndarray) -> float:
    """Minimum of |rel| over the piecewise-linear motion through the samples."""
    rel = np.asarray(rel, dtype=float).reshape(-1, 2)
    if len(rel) < 2:
        return float(np.hypot(*rel[0]))
    r0, dr = rel[:-1], np.diff(rel, axis=0)
    a = np.sum(dr * dr, axis=1)
    u = np.clip(-np.sum(r0 * dr, axis=1) / np.where(a > _TINY, a, 1.0), 0.0, 1.0)
    u = np.where(a > _TINY, u, 0.0)
    closest = r0 + u[:, None] * dr
    return float(min(np.min(np.hypot(closest[:, 0], closest[:, 1])), np.hypot(*rel[-1])))


def _people_metrics(robot: _RobotTrack, tracks: dict[int, _PersonTrack],
                    messages: Mapping[str, Sequence[LogMessage]], robot_radius: float,
                    contact_margin: float) -> dict[str, Any]:
    zones = {name: {"radius_m": r, "entries": 0, "person_seconds": 0.0} for name, r in PROXEMIC_ZONES}
    min_dist: float | None = None
    min_clearance: float | None = None
    geometric_contacts: list[tuple[float, int]] = []
    if len(robot.t):
        for track in tracks.values():
            for times, pos in track.runs():
                lo, hi = max(times[0], robot.t[0]), min(times[-1], robot.t[-1])
                if lo > hi:
                    continue
                grid = np.unique(np.concatenate([times, robot.t]))
                grid = grid[(grid >= lo) & (grid <= hi)]
                person = np.column_stack([np.interp(grid, times, pos[:, 0]), np.interp(grid, times, pos[:, 1])])
                rel = person - robot.position_at(grid)
                d = closest_approach(rel)
                min_dist = d if min_dist is None else min(min_dist, d)
                gap = d - robot_radius - track.radius
                min_clearance = gap if min_clearance is None else min(min_clearance, gap)
                for name, radius in PROXEMIC_ZONES:
                    entries, seconds = disc_crossings(grid, rel, radius)
                    zones[name]["entries"] += len(entries)
                    zones[name]["person_seconds"] += seconds
                touch, _ = disc_crossings(grid, rel, robot_radius + track.radius + contact_margin, inclusive=True)
                geometric_contacts.extend((t, track.id) for t in touch)

    nearest = []  # distance to the nearest person at each pedestrian tick with someone present
    if len(robot.t):
        for msg in messages.get("/pedestrians", ()):
            people = msg.data["people"]
            if people and robot.t[0] <= msg.t <= robot.t[-1]:
                rx, ry = robot.position_at(np.array([msg.t]))[0]
                nearest.append(min(math.hypot(float(p["x"]) - rx, float(p["y"]) - ry) for p in people))

    if messages.get("/world/contacts"):
        source, starts = "contacts", _contact_starts(messages["/world/contacts"])
    else:
        source, starts = "geometry", sorted(geometric_contacts)
    events = [_classify(t, pid, robot, tracks.get(pid)) for t, pid in starts]
    by = [e["by"] for e in events]
    return {
        "min_distance_m": min_dist,
        "mean_distance_m": float(np.mean(nearest)) if nearest else None,
        "min_clearance_m": min_clearance,
        "intrusions": zones,
        "collisions": {"source": source, "robot_initiated": by.count("robot"), "person_initiated": by.count("person"),
                       "unclassified": by.count("unknown"), "events": events},
    }


def _contact_starts(contacts: Sequence[LogMessage]) -> list[tuple[float, int]]:
    """(time, person id) of every contact that begins: an id present in a message and absent from the previous."""
    starts, previous = [], set()
    for msg in contacts:
        current = {int(pid) for pid in msg.data["people"]}
        starts.extend((msg.t, pid) for pid in sorted(current - previous))
        previous = current
    return starts


def _classify(t: float, pid: int, robot: _RobotTrack, track: _PersonTrack | None) -> dict[str, Any]:
    """Who ran into whom: approach speeds along the line between the centres, from the samples before ``t``."""
    event: dict[str, Any] = {"t": t, "person": pid, "by": "unknown", "robot_approach_mps": None,
                             "person_approach_mps": None}
    robot_sample = robot.velocity_before(t)
    if robot_sample is None or track is None:
        return event
    (rp, rv), (pp, pv) = robot_sample, track.sample_before(t)
    offset = pp - rp
    norm = float(np.hypot(*offset))
    if norm > 0.0:
        u = offset / norm
        robot_toward, person_toward = float(rv @ u), float(-(pv @ u))
    else:  # centres coincide: no direction, compare speeds
        robot_toward, person_toward = float(np.hypot(*rv)), float(np.hypot(*pv))
    event.update(by="robot" if robot_toward > person_toward else "person", robot_approach_mps=robot_toward,
                 person_approach_mps=person_toward)
    return event


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        r = round(value, DECIMALS)
        return 0.0 if r == 0 else r  # no "-0.0"
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    if isinstance(value, np.generic):
        return rounded(value.item())
    return value
