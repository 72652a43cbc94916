"""The crowd as a scheduled part of the world's time (lockstep only).

``attach_crowd(embodied, endpoint)`` connects the world to a served crowd (``hil crowd --serve``) and adds a
pre-step hook: whenever the world's step count reaches the next crowd tick (every ``period_s`` of world time,
counted in whole physics steps so the schedule never drifts), the robot's base state and the people's *actual*
states (after physics) go to the crowd in one :meth:`bridge.crowd_link.CrowdClient.tick`, and its answer (each
person's intended velocity, who appeared, who left) goes into :meth:`Pedestrians.sync`. The physics then drives
the capsules toward those velocities until the next tick.

The world waits for the crowd: the tick is a blocking request. A crowd that does not answer within ``timeout_s``
raises :class:`bridge.crowd_link.CrowdLinkError` naming its endpoint (out of the step, so out of whoever advanced
the world: the lockstep clock's participant, i.e. the trial fails clearly instead of hanging).

``pipelined=True`` (the trial's default, docs/ARCHITECTURE.md "The crowd's tick pipelined") lets the
crowd compute while the world steps: at tick N the world takes the answer to the request it sent at tick N-1,
applies it, and sends the state it measured now with the time of tick N+1; the crowd steps to N+1 from that
state while the world steps N to N+1. The crowd's message sequence is the same as in lockstep (the same state,
one period forward, one step) but its clock runs one period ahead of what it saw, so every intent is applied one
tick later than in lockstep (a one-tick lag in what the crowd observes). The very first tick (t = 0) is an
exchange as in lockstep, so the people are in the world from the start. Equally deterministic: the world blocks
for each answer at a fixed step, whatever the crowd's speed.

``security`` (a :class:`bridge.security.Security`) makes the link CURVE-encrypted, for a crowd served with
``--keys``; a refused key surfaces as that same error, saying the key was refused.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hil.bridge.crowd_link import people_labels

from ..world.pedestrians import PedestrianIntent, Pedestrians

if TYPE_CHECKING:
    from hil.bridge.security import Security

ROBOT_RADIUS_M = 0.3


class CrowdBridge:
    """The world's end of the crowd link: owns the Pedestrians and the CrowdClient; :meth:`close` says bye."""

    def __init__(self, embodied, endpoint: str, period_s: float = 0.1, timeout_s: float = 10.0,
                 robot_radius_m: float = ROBOT_RADIUS_M, security: Security | None = None, pipelined: bool = False):
        world = embodied.world
        if not period_s > 0:
            raise ValueError(f"crowd period must be > 0 s, not {period_s!r}")
        self.embodied, self.world, self.endpoint = embodied, world, endpoint
        self.robot_radius_m = robot_radius_m
        self.pipelined = pipelined
        self.every_steps = max(1, round(period_s / world.time_step_s))
        self.period_s = self.every_steps * world.time_step_s
        self.pedestrians = Pedestrians(world)
        self._security = security
        self.client = self._connect(endpoint, timeout_s, security)
        self._closed = False
        self._forget()
        world.add_pre_step(self._pre_step)
        world.add_post_step(self._post_step)

    def _forget(self) -> None:
        """What a session told: nothing yet."""
        self.people: dict[int, object] = {}  # id -> bridge.crowd_link.Person of the last reply (type, gaze, radius)
        self.ticks = 0
        self.failure: str | None = None
        self.crowd_time_s = 0.0
        self.script_events: list[dict] = []  # lines of a served script that ran, until the caller takes them
        self.script_state: str | None = None
        self.script_end_s: float | None = None  # world time of the served script's ``end`` line, once it ran
        self.doing: dict[int, str] = {}  # id -> what the crowd says the person is doing (crowd/serve.activities)
        self.names: dict[int, str] = {}  # id -> the script's name for the person ('' for the generated)
        self._touched: set[int] = set()

    def restart(self, endpoint: str) -> None:
        """The world's side of a fresh crowd session at ``endpoint`` (the old one said bye: :meth:`say_bye`), for a
        world put back to a start saved before the first tick (hil.gym's reset): every person's body removed
        (and forgotten by the body history: the start state has none), what the last session told forgotten,
        the link to the new session."""
        self.pedestrians.clear()
        self.pedestrians.forget_history()
        self._forget()
        self.endpoint = endpoint
        self.client = self._connect(endpoint, self.client.timeout_s, self._security)

    def save_state(self) -> dict:
        """What the crowd told and what has not been taken yet, as plain data (msgpack-able), for a saved world
        (firmware_sim/embodied/state.py; the people's bodies are the physics', the crowd process's own state
        goes over the bridge)."""
        peds = self.pedestrians
        return {"intended": [[pid, vx, vy] for pid, (vx, vy) in sorted(peds.intended.items())],
                "people": [list(person) if person.surface else list(person)[:-1] for person in self.people.values()],
                "ticks": self.ticks,
                "crowd_time_s": self.crowd_time_s, "script_events": list(self.script_events),
                "script_state": self.script_state, "doing": [[k, v] for k, v in sorted(self.doing.items())],
                "names": [[k, v] for k, v in sorted(self.names.items())], "touched": sorted(self._touched)}

    def restore_state(self, saved: dict) -> None:
        """Put back what :meth:`save_state` gave (the bodies already restored with the physics)."""
        from hil.bridge.crowd_link import Person

        self.pedestrians.intended = {int(pid): (vx, vy) for pid, vx, vy in saved["intended"]}
        self.people = {int(row[0]): Person(*row) for row in saved["people"]}
        self.ticks, self.crowd_time_s = saved["ticks"], saved["crowd_time_s"]
        self.script_events = list(saved["script_events"])
        self.script_state = saved["script_state"]
        self.doing = {int(k): v for k, v in saved["doing"]}
        self.names = {int(k): v for k, v in saved["names"]}
        self._touched = set(saved["touched"])

    def say_bye(self) -> None:
        """End the session (the crowd process goes idle or serves the next); the world keeps its hooks."""
        try:
            self.client.close()
        except Exception:  # a dead crowd cannot be told goodbye
            pass

    def _connect(self, endpoint: str, timeout_s: float, security: Security | None):
        """The link to the crowd: a lockstep CrowdClient here (crowd_realtime.py streams instead)."""
        from hil.bridge.crowd_link import CrowdClient

        return CrowdClient(endpoint, timeout_s=timeout_s, security=security)

    def _pre_step(self, world) -> None:
        if world.steps % self.every_steps == 0:
            self.tick()

    def _post_step(self, world) -> None:
        if self.pedestrians.bodies:
            self._touched.update(self.pedestrians.touching(self.embodied.robot.all_contact_points()))

    def take_contacts(self) -> list[int]:
        """Ids of the people who touched the robot at any physics step since the last call (ground truth)."""
        touched, self._touched = sorted(self._touched), set()
        return touched

    def take_script_events(self) -> list[dict]:
        """The served script's lines that ran since the last call: [{t, line, text}] (crowd time); a line that
        failed: {t, line, text: "", error} (the crowd's message, naming the script's file and line)."""
        events, self.script_events = self.script_events, []
        return events

    def robot_state(self) -> dict:
        return {**self.embodied.robot_pose(), "radius": self.robot_radius_m}

    def tick(self) -> None:
        """One exchange with the crowd at the world's current time (lockstep), or, pipelined, the answer to the
        last tick taken and the next one sent (:meth:`_pipelined_tick`)."""
        from hil.bridge.crowd_link import CrowdLinkError

        try:
            if self.pipelined:
                self._pipelined_tick()
                return
            t, people, reply = self.client.tick(self.world.time_s, self.robot_state(), self._actual())
        except CrowdLinkError as exc:
            # the crowd is gone: the world stops asking (so shutting down does not wait for it again), the people
            # stay where they are, and the error goes to whoever advanced the world
            self.failure = str(exc)
            self.world.remove_hook(self._pre_step)
            self._stand()
            raise
        self._take_intents(t, people, reply)

    def _actual(self) -> list[tuple]:
        return [(s.id, s.x, s.y, s.vx, s.vy) for s in self.pedestrians.states()]

    def _pipelined_tick(self) -> None:
        """Take the answer to the tick sent one period ago (at t = 0: exchange the first tick as in lockstep),
        then send the state measured now, stamped with the next tick's time, so the crowd computes it while the
        world steps towards it."""
        client, now = self.client, self.world.time_s
        if not client.pending:  # the first tick (or after a reconnect): nothing in flight yet
            client.send_tick(now, self.robot_state(), self._actual())
        self._take_intents(*client.await_intents())
        client.send_tick((self.world.steps + self.every_steps) * self.world.time_step_s, self.robot_state(),
                         self._actual())  # exactly the next tick's world time (World.time_s)

    def _take_intents(self, crowd_time_s: float, people: list, reply: dict) -> None:
        """The crowd's answer (either mode): who is where and wants to go where, and the script lines it ran."""
        self.crowd_time_s = crowd_time_s
        self.script_events.extend(reply.get("script", ()))
        state = reply.get("script_state", self.script_state)
        if state == "failed" and self.script_state != "failed":  # once (the crowd says it in every reply after)
            self.script_events.append({"t": crowd_time_s, "line": int(reply.get("script_error_line") or 0),
                                       "text": "", "error": str(reply.get("script_error") or "the script failed")})
        self.script_state = state
        end = reply.get("script_end_t")
        if self.script_end_s is None and isinstance(end, (int, float)) and not isinstance(end, bool) \
                and math.isfinite(end):
            self.script_end_s = float(end)
        self.people = {person.id: person for person in people}
        self.doing = people_labels(reply, "doing", people)
        self.names = people_labels(reply, "names", people)
        self.pedestrians.sync(people, spawn_as=_intent_of)
        self.ticks += 1

    def _stand(self) -> None:
        """While no crowd decides where people go, they stop walking (physics still acts on them)."""
        self.pedestrians.stand()

    def states(self) -> list[dict]:
        """Every person's actual state with what the crowd says of them: [{id, type, x, y, vx, vy, radius, gaze,
        doing, name, surface (their clothing's, None: the default surface)}]."""
        out = []
        for s in self.pedestrians.states():
            person = self.people.get(s.id)
            out.append({"id": s.id, "x": s.x, "y": s.y, "vx": s.vx, "vy": s.vy,
                        "type": getattr(person, "type", "adult"),
                        "radius": getattr(person, "radius", 0.25), "height": getattr(person, "height", 1.7),
                        "gaze": [getattr(person, "gaze_x", 1.0), getattr(person, "gaze_y", 0.0)],
                        "doing": self.doing.get(s.id, "walking"), "name": self.names.get(s.id, ""),
                        "surface": getattr(person, "surface", "") or None})
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.world.remove_hook(self._pre_step)
        self.world.remove_hook(self._post_step)
        self.say_bye()


def _intent_of(person) -> PedestrianIntent:
    """A new person's body as the crowd describes them (a crowd Person: '' for the default surface)."""
    return PedestrianIntent(person.id, person.x, person.y, person.vx, person.vy, person.radius, person.height,
                            person.surface or None)


def attach_crowd(embodied, endpoint: str, period_s: float = 0.1, timeout_s: float = 10.0,
                 security: Security | None = None, pipelined: bool = False) -> CrowdBridge:
    """Make the crowd at ``endpoint`` part of ``embodied``'s world time; the bridge is also ``embodied.crowd``.
    ``security``: a :class:`bridge.security.Security` for a crowd served with ``--keys`` (None: plain);
    ``pipelined``: the crowd computes the next tick while the world steps (one-tick lag, see above)."""
    bridge = CrowdBridge(embodied, endpoint, period_s=period_s, timeout_s=timeout_s, security=security,
                         pipelined=pipelined)
    embodied.crowd = bridge
    return bridge

