"""The guide robot: through the arcade from the west gate's hall to the east gate's hall, along the middle passage
and around the fountain, on odometry waypoints. It slows down and stops when the ring sees someone (or something)
close ahead, turns its head toward the nearest thing the ring sees close by, and, as in the crowd-simulation
reference, goes toward a person who stopped near it (someone who may be interested in the robot), faces them for
a while, then goes on. Bus data only: odometry, ring ranges, joint targets.

    hil demo                                     # the full trial: crowd, world, this controller, report
    hil run examples/guide_robot.py --profile config/profiles/virtual.yaml \
        --bus "sim://commbot?clock=sim&map=arcade&pose=-18,0,0" --duration 120

The start pose is where the robot is put in the map (the odometry is reset to it), so waypoints are map points.
``Guide.mode`` says what it is doing: ``route`` (following the waypoints), ``engage`` (turning to and closing on
someone who stopped near it), ``dwell`` (standing with them), ``detour`` (going around someone who stays in its
way), ``done`` (at the last waypoint).
"""
from __future__ import annotations

import math
from collections import deque

HZ = 10.0
START = (-18.0, 0.0, 0.0)  # the west hall, facing east along the middle passage
# mid_west, the plaza's west side, north of the fountain, the plaza's east side, mid_east, the east hall
WAYPOINTS = ((-10.0, 0.0), (-4.2, 0.0), (-2.5, 3.0), (2.5, 3.0), (4.2, 0.0), (10.0, 0.0), (18.0, 0.0))
REACHED_M = 0.4
CRUISE_M_S = 0.45
# the parameters a trial may set (--param NAME=VALUE, params: in a trial file); any other name is refused
PARAMS = {
    "start": START,  # [x, y, yaw]: where the odometry starts (the trial's start pose)
    "waypoints": WAYPOINTS,  # [[x, y], ...]: the route, the last one the goal
    "cruise_m_s": CRUISE_M_S,  # the speed on a free path
}
TURN_GAIN = 1.5
MAX_TURN_RAD_S = 0.8
SENSOR_RADIUS_M = 0.20  # the ring's sensor faces are this far from its centre (the range is measured from there)
PATH_HALF_WIDTH_M = 0.45  # what lies within this of the robot's centre line is in its way (body + margin)
SLOW_M = 1.6  # something in the way closer ahead than this: slow down
STOP_M = 0.6  # closer than this: stop
LOOK_M = 1.5  # the head turns toward the nearest reading closer than this (the passage walls are ~1.8 m away)
HEAD = "head.neck_yaw"

# keeping odometry honest: wheels slip in turns, so the believed y drifts (up to 1 m over the route). Where the middle
# passage has walls on both sides, their echoes at 90 and 270 degrees give the robot's offset from the centre line.
PASSAGE_X = ((-16.0, -11.5), (-8.5, -5.5), (5.5, 8.5), (11.5, 16.0))  # both walls there (not at alleys or the plaza)
PASSAGE_Y = 0.0  # centre line
PASSAGE_FACES_M = 1.9  # wall faces at +-1.9 m (walls at +-2 m, 0.2 m thick)
LATERAL_GAIN = 0.2  # per tick: blend the measured offset into odometry slowly (one bad echo cannot yank it)
MAX_HEADING_ERR = math.radians(8)  # only when running along the passage

# S7: someone who stopped near the robot
FRONT_HALF = math.radians(65)  # where an interested person is looked for (the ring's front sensors)
ENGAGE_M = 1.2  # nearer than this...
STILL_S = 2.0  # ...and still (the reading moving less than STILL_M) this long while the robot stood or crept
STILL_M = 0.15
CREEP_M_S = 0.1  # the robot counts as standing below this speed
APPROACH_M = 0.35  # close in until the reading is this short (the person keeps their own distance too)
APPROACH_M_S = 0.15
APPROACH_MAX_S = 4.0
DWELL_S = 8.0  # time spent facing the person (an utterance would go here on the real robot)
COOLDOWN_S = 20.0  # after a dwell, this long on the route before engaging again
LOST_S = 1.0  # an engaged person not seen this long: back to the route

# going around: someone who stays in the way after the robot was with them (or while it may not engage again)
BLOCKED_S = 4.0  # stopped by something in the way this long: go around it
DETOUR_TURN_RAD = math.radians(70)  # turn this far toward the freer side...
DETOUR_M = 1.2  # ...and drive this far before heading for the waypoint again
DETOUR_M_S = 0.3
DETOUR_STOP_M = 0.15  # on a detour, only this close ahead stops the robot (people who keep a distance step back)
DETOUR_MAX_S = 15.0


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


class Guide:
    """One decision per tick: ``step(robot)`` sets the base's twist and the head's target; ``done`` at the end."""

    def __init__(self, robot, start=START, waypoints=WAYPOINTS, hz: float = HZ, cruise_m_s: float = CRUISE_M_S):
        self.waypoints = list(waypoints)
        self.cruise_m_s = cruise_m_s
        self.period_s = 1.0 / hz
        self.t = 0.0
        self.mode = "route"
        self.engagements = 0
        self.detours = 0
        self.corrections = 0
        self._front: deque[tuple[float | None, float]] = deque(maxlen=max(1, round(STILL_S * hz)))
        self._mode_since = 0.0
        self._seen_at = 0.0
        self._cooldown_until = 0.0
        self._blocked_since: float | None = None
        self._detour: tuple[float, float, float] | None = None  # heading, start x, start y
        robot.base.reset_odometry(*start)

    @property
    def done(self) -> bool:
        return self.mode == "done"

    def step(self, robot) -> tuple[float, float]:
        self.t += self.period_s
        ring = robot.sensors["ring"]
        person = _nearest_in(ring, -FRONT_HALF, FRONT_HALF)
        self._front.append((person[0] if person else None, abs(robot.base.velocity.v)))
        v, w = {"route": self._route, "engage": self._engage, "dwell": self._dwell, "detour": self._go_around,
                "done": lambda robot, person: (0.0, 0.0)}[self.mode](robot, person)
        robot.base.drive(v, w)
        if self.mode not in ("engage", "dwell"):
            self.look(robot)
        return v, w

    def _set(self, mode: str) -> None:
        self.mode, self._mode_since = mode, self.t

    # --- route: waypoints, slowing for what is ahead ------------------------------------------------------------
    def _route(self, robot, person) -> tuple[float, float]:
        self.correct_lateral(robot)
        if self._someone_waits() and self.t >= self._cooldown_until:
            self._set("engage")
            self.engagements += 1
            self._seen_at = self.t
            return self._engage(robot, person)
        x, y, yaw = robot.base.odometry
        while self.waypoints and math.hypot(self.waypoints[0][0] - x, self.waypoints[0][1] - y) < REACHED_M:
            self.waypoints.pop(0)
        if not self.waypoints:
            self._set("done")
            return 0.0, 0.0
        wx, wy = self.waypoints[0]
        error = _wrap(math.atan2(wy - y, wx - x) - yaw)
        w = max(-MAX_TURN_RAD_S, min(MAX_TURN_RAD_S, TURN_GAIN * error))
        v = self.cruise_m_s * max(0.0, math.cos(error))
        front = _clearance_ahead(robot.sensors["ring"])
        if front is not None and front < SLOW_M:
            v *= max(0.0, (front - STOP_M) / (SLOW_M - STOP_M))
        if front is not None and front < STOP_M:
            self._blocked_since = self.t if self._blocked_since is None else self._blocked_since
            if self.t - self._blocked_since >= BLOCKED_S:
                return self._start_detour(robot)
        else:
            self._blocked_since = None
        return v, w

    def correct_lateral(self, robot) -> bool:
        """Pull odometry's y toward the offset the passage walls' echoes give; True when it did. Both side echoes
        must be there and add up to the passage's width (a person beside the robot does not), and the robot must
        be running along the passage."""
        x, y, yaw = robot.base.odometry
        along = min(abs(_wrap(yaw)), abs(_wrap(yaw - math.pi)))
        if along > MAX_HEADING_ERR or not any(lo <= x <= hi for lo, hi in PASSAGE_X):
            return False
        ring = robot.sensors["ring"]
        left = _nearest_in(ring, math.radians(85), math.radians(95))
        right = _nearest_in(ring, math.radians(-95), math.radians(-85))
        if left is None or right is None:
            return False
        width = 2 * PASSAGE_FACES_M - 2 * SENSOR_RADIUS_M  # what the two echoes add up to, centred or not
        if abs(left[0] + right[0] - width) > 0.15:
            return False
        offset = (right[0] - left[0]) / 2  # left of the centre line is +y when heading east
        measured = PASSAGE_Y + (offset if abs(_wrap(yaw)) < math.pi / 2 else -offset)
        robot.base.reset_odometry(x, y + LATERAL_GAIN * (measured - y), yaw)
        self.corrections += 1
        return True

    # --- going around what stays in the way ----------------------------------------------------------------------
    def _start_detour(self, robot) -> tuple[float, float]:
        """Turn toward the side with more room (the ring's readings 30 to 90 degrees left against right)."""
        ring = robot.sensors["ring"]
        left = _nearest_in(ring, math.radians(25), math.radians(95))
        right = _nearest_in(ring, math.radians(-95), math.radians(-25))
        room_left = left[0] if left else math.inf
        room_right = right[0] if right else math.inf
        x, y, yaw = robot.base.odometry
        side = 1.0 if room_left >= room_right else -1.0
        self.detours += 1
        if self.detours % 3 == 0:  # the freer side did not work twice: try the other one
            side = -side
        self._detour = (_wrap(yaw + side * DETOUR_TURN_RAD), x, y)
        self._blocked_since = None
        self._set("detour")
        return 0.0, 0.0

    def _go_around(self, robot, person) -> tuple[float, float]:
        heading, x0, y0 = self._detour
        x, y, yaw = robot.base.odometry
        error = _wrap(heading - yaw)
        w = max(-MAX_TURN_RAD_S, min(MAX_TURN_RAD_S, TURN_GAIN * error))
        if abs(error) > math.radians(15):
            return 0.0, w
        front = _clearance_ahead(robot.sensors["ring"])
        if math.hypot(x - x0, y - y0) >= DETOUR_M or self.t - self._mode_since > DETOUR_MAX_S:
            self._detour = None
            self._set("route")
            return 0.0, 0.0
        if front is not None and front < DETOUR_STOP_M:  # people close around: creep, they make way
            return 0.0, w
        return DETOUR_M_S * min(1.0, (front if front is not None else SLOW_M) / SLOW_M) + 0.05, w

    def _someone_waits(self) -> bool:
        """Something stood within ENGAGE_M in front, still, for STILL_S while the robot stood or crept: a person
        who stopped near the robot (a wall does not come that close to a robot following the passage)."""
        if len(self._front) < self._front.maxlen:
            return False
        ranges = [r for r, _ in self._front]
        if any(r is None or r > ENGAGE_M for r in ranges):
            return False
        return max(ranges) - min(ranges) < STILL_M and all(speed < CREEP_M_S for _, speed in self._front)

    # --- S7: go toward the person, then stay with them -----------------------------------------------------------
    def _engage(self, robot, person) -> tuple[float, float]:
        if person is None or person[0] > ENGAGE_M + 0.5:
            if self.t - self._seen_at > LOST_S:
                self._leave()
            return 0.0, 0.0
        self._seen_at = self.t
        distance, bearing = person
        self._look_at(robot, bearing)
        w = max(-MAX_TURN_RAD_S, min(MAX_TURN_RAD_S, TURN_GAIN * bearing))
        facing = abs(bearing) < math.radians(20)
        if distance <= APPROACH_M or self.t - self._mode_since > APPROACH_MAX_S:
            self._set("dwell")
            return 0.0, w
        return (APPROACH_M_S if facing else 0.0), w

    def _dwell(self, robot, person) -> tuple[float, float]:
        if person is not None:
            self._look_at(robot, person[1])
        if self.t - self._mode_since >= DWELL_S:
            self._leave()
        return 0.0, 0.0

    def _leave(self) -> None:
        self._cooldown_until = self.t + COOLDOWN_S
        self._front.clear()
        self._set("route")

    # --- the head ----------------------------------------------------------------------------------------------
    def look(self, robot) -> None:
        """Head toward the nearest close reading (back to straight ahead when nothing is close)."""
        close = _nearest_in(robot.sensors["ring"], -math.pi, math.pi)
        self._look_at(robot, close[1] if close and close[0] < LOOK_M else 0.0)

    def _look_at(self, robot, bearing: float) -> None:
        head = robot.joints.get(HEAD)
        if head is not None:
            head.target = max(-1.2, min(1.2, _wrap(bearing)))


def _clearance_ahead(ring) -> float | None:
    """How far ahead the nearest echo in the robot's way is: each reading becomes a point (the range is measured
    from the sensor face), and points within PATH_HALF_WIDTH_M of the centre line count by their distance ahead.
    A person 40 degrees off the nose at 0.3 m is in the way; a wall 2 m to the side is not."""
    ahead = []
    for angle, rng in zip(ring.angles, ring.ranges):
        if rng is None or abs(_wrap(angle)) > math.pi / 2:
            continue
        reach = SENSOR_RADIUS_M + rng
        if abs(reach * math.sin(angle)) < PATH_HALF_WIDTH_M:
            ahead.append(reach * math.cos(angle) - SENSOR_RADIUS_M)
    return min(ahead) if ahead else None


def _nearest_in(ring, lo: float, hi: float) -> tuple[float, float] | None:
    """(range, bearing) of the shortest valid reading among the sensors pointing between lo and hi, or None."""
    found = [(r, _wrap(a)) for a, r in zip(ring.angles, ring.ranges) if r is not None and lo <= _wrap(a) <= hi]
    return min(found) if found else None


def main(robot) -> None:
    """Run the guide with ``robot.params`` (PARAMS above: a trial gives their defaults for those it does not set).
    ``robot.mode`` says what it is doing (trials record it)."""
    params = {**PARAMS, **getattr(robot, "params", {})}  # hil run of an older hil, or a robot without params
    guide = Guide(robot, start=tuple(params["start"]), waypoints=[tuple(w) for w in params["waypoints"]],
                  cruise_m_s=float(params["cruise_m_s"]))
    robot.mode = guide.mode
    for tick in robot.loop(hz=HZ):
        guide.step(robot)
        robot.mode = guide.mode
        if guide.done:
            x, y, _ = robot.base.odometry
            print(f"t={tick.time:6.2f} s  arrived at x={x:.2f} y={y:.2f} m after {guide.engagements} "
                  f"engagement(s)", flush=True)
            robot.cycle()
            return
