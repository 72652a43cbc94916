"""``hil crowd --serve ENDPOINT``: the crowd as the world's partner over the bridge (bridge/crowd_link.py).

A REP socket (loopback unless the endpoint says otherwise) answers each ``tick``: the robot's state is set,
the people the world reports take their measured positions and velocities (the physics engine had the last word
on where bodies went), the crowd steps up to the tick's time, and the reply carries everyone's intended velocity
and gaze, who appeared and who left. Bad messages are answered with an error and logged; the crowd goes on.
With ``--keys DIR`` (a :class:`bridge.security.Security`) the socket is a CURVE server: the link is encrypted and
only worlds whose key is in ``DIR/authorized/`` get an answer (ZeroMQ refuses the others' handshakes).
"""
from __future__ import annotations

import functools

import logging
from typing import TYPE_CHECKING, Any, Callable, Union

import zmq

from hil.bridge.crowd_link import Person, intents_payload
from hil.bridge.envelope import EnvelopeError, pack
from hil.bridge.process import ParentWatch  # the crowd ends when the process that started it is gone
from hil.bridge.realtime import Counters
from hil.bridge.schema import CrowdReplayPayload, CrowdStatePayload, TickPayload, TypedDecoder, WorldPayload, convert

from .population import type_of_model
from .sim import CrowdSim
from .stepper import Stepper

if TYPE_CHECKING:
    from hil.bridge.security import Security

log = logging.getLogger("hil.bridge")
HEIGHT_BY_TYPE = {"child": 1.2}
MAX_TICK_SPAN_S = 60.0  # how far one tick may move the crowd's time: 600 steps at 0.1 s; more is refused
TICK_DECODER = TypedDecoder({"tick": TickPayload, "bye": Any, "crowd_state": CrowdStatePayload,
                             "crowd_replay": CrowdReplayPayload})  # the last two: a saved state (crowd/restore.py)


def take_world_state(sim: CrowdSim, payload: Union[TickPayload, WorldPayload, dict]) -> None:
    """The robot's state and the people's measured positions and velocities, as the world reports them.

    The payload is checked whole (bridge/schema.py: types, finite values, bounds) before anything is written, so
    a malformed entry changes nothing (EnvelopeError says what). People the crowd does not know (yet, or any
    more) are ignored."""
    if isinstance(payload, dict):
        payload = convert(payload, TickPayload)
    robot = payload.robot
    if robot is not None:
        sim.set_robot(robot.x, robot.y, yaw=robot.yaw, vx=robot.vx, vy=robot.vy, radius=robot.radius)
    agents = sim.agents
    rows = {agent_id: row for row, agent_id in enumerate(agents.ids.tolist())}  # one pass, not one search each
    for agent_id, x, y, vx, vy in payload.rows():
        row = rows.get(agent_id)
        if row is not None:
            agents.pos[row] = (x, y)
            agents.vel[row] = (vx, vy)


def apply_tick(sim: CrowdSim, payload: Union[TickPayload, dict],
               step: Callable[[], None] | None = None) -> tuple[list[int], list[int]]:
    """Take the world's state, step the crowd to the tick's time; returns (spawned ids, removed ids).

    ``step`` does one crowd step (default ``sim.step``; a :class:`crowd.stepper.Stepper` lets a script run). A
    tick more than ``MAX_TICK_SPAN_S`` ahead of the crowd is refused (EnvelopeError) before anything changes: one
    message must not make the crowd step for hours."""
    if isinstance(payload, dict):
        payload = convert(payload, TickPayload)
    if payload.t - sim.time_s > MAX_TICK_SPAN_S:
        raise EnvelopeError(f"tick: t={payload.t:g} s is {payload.t - sim.time_s:g} s ahead of the crowd (at "
                            f"{sim.time_s:g} s); one tick may advance it at most MAX_TICK_SPAN_S={MAX_TICK_SPAN_S:g} s")
    take_world_state(sim, payload)
    step = step or sim.step
    before = set(sim.agents.ids.tolist())
    while sim.time_s + sim.dt / 2 <= payload.t:
        step()
    after = set(sim.agents.ids.tolist())
    return sorted(after - before), sorted(before - after)


def intents(sim: CrowdSim) -> list[Person]:
    a = sim.agents
    ids, pos, vel, gaze, radius = a.ids.tolist(), a.pos.tolist(), a.vel.tolist(), a.gaze.tolist(), a.radius.tolist()
    surfaces = sim.surface_of_type  # a person's own surface (a script line's) first, else their type's
    return [Person(ids[i], a.types[i], pos[i][0], pos[i][1], vel[i][0], vel[i][1], gaze[i][0], gaze[i][1], radius[i],
                   body_height(a.types[i]), a.surfaces[i] or surfaces.get(a.types[i], "")) for i in range(len(ids))]


@functools.lru_cache(maxsize=256)
def body_height(type_name: str) -> float:
    """A person's height by type; a script's model name (``boy02``) by the type it stands for (a child)."""
    try:
        type_name = type_of_model(type_name)
    except KeyError:
        pass  # a rates file's own type: the default height
    return HEIGHT_BY_TYPE.get(type_name, 1.7)


WALKING, SCRIPTED = "walking", "scripted"


def activities(sim: CrowdSim) -> tuple[list[str], list[str]]:
    """What each person (in :func:`intents` order) is doing, for the viewer and the log: the objective it
    follows (interact, observe, ...), else ``scripted`` for a person a script named, else ``walking``; and the
    script's names ('' for the generated). The crowd-simulation reference's display colours people by it."""
    from .objectives import ObjectiveManager

    a = sim.agents
    manager = next((h for h in sim.hooks if isinstance(h, ObjectiveManager)), None)
    active = manager.active if manager is not None else {}
    doing = []
    for agent_id, name in zip(a.ids.tolist(), a.names):
        objective = active.get(agent_id)
        doing.append(objective.name if objective is not None else SCRIPTED if name else WALKING)
    return doing, list(a.names)


def serve(sim: CrowdSim, endpoint: str, ready=print, stepper: Stepper | None = None,
          security: Security | None = None) -> int:
    """Answer ticks until ``bye`` (or the parent that started us is gone); returns the number of ticks served.
    ``stepper``: a script playing on the world's time (its lines that ran during a tick go back in the reply's
    ``script`` list). A bad request is answered with an error naming what is wrong, counted and logged (logger
    ``hil.bridge``); the crowd is unchanged by it and goes on answering."""
    stepper = stepper or Stepper(sim)
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
    counters = Counters()
    parent = ParentWatch()
    ticks = 0
    try:
        if security is not None:  # bad keys raise SecurityError here, before anything is bound
            security.apply_server(socket)
        socket.bind(endpoint)
        where = socket.getsockopt_string(zmq.LAST_ENDPOINT)
        ready(f"crowd {where}")
        while True:
            if not socket.poll(PARENT_CHECK_MS):
                if parent.gone():
                    log.warning("crowd %s: the process that started it is gone; stopping", where)
                    return ticks
                continue
            frames = socket.recv_multipart()
            reply = _answer(sim, stepper, frames, counters, where)
            if reply is None:
                socket.send(pack("intents", intents_payload(sim.time_s, [], [], [])))
                return ticks
            if reply[0] == "intents":
                ticks += 1
            socket.send(pack(*reply))
    finally:
        socket.close(0)


MAX_REQUEST_BYTES = 16 * 1024 * 1024  # bridge.envelope.MAX_MESSAGE_BYTES: libzmq drops the connection above it
PARENT_CHECK_MS = 500


def _answer(sim: CrowdSim, stepper: Stepper, frames: list[bytes], counters: Counters,
            where: str) -> tuple | None:
    """(type, payload, seq, t) of the reply to one request, or None for ``bye``; never raises."""
    try:
        if len(frames) != 1:
            raise EnvelopeError(f"a request is one frame, not {len(frames)}")
        msg = TICK_DECODER.decode(frames[0])
        if msg.type == "bye":
            return None
        if msg.type in ("crowd_state", "crowd_replay"):
            from .restore import answer

            return (*answer(sim, stepper, msg.type, msg.payload, apply_tick), msg.seq, sim.time_s)
        spawned, removed = apply_tick(sim, msg.payload, stepper.step)
    except EnvelopeError as exc:
        counters.drop(f"crowd {where}", str(exc))
        return ("error", {"reason": str(exc)})
    except Exception as exc:  # a crowd step failing on valid input is our bug: say so, keep serving
        counters.drop(f"crowd {where}", f"tick failed: {type(exc).__name__}: {exc}")
        return ("error", {"reason": f"the crowd failed this tick: {type(exc).__name__}: {exc}"})
    reply = intents_payload(sim.time_s, intents(sim), spawned, removed)
    reply["doing"], reply["names"] = activities(sim)  # extra keys: an older world ignores them
    reply.update(stepper.drain())
    return ("intents", reply, msg.seq, sim.time_s)
