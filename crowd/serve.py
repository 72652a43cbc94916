"""``hil crowd --serve ENDPOINT``: the crowd as the world's partner over the bridge (bridge/crowd_link.py).

A REP socket (loopback unless the endpoint says otherwise) answers each ``tick``: the robot's state is set,
the people the world reports take their measured positions and velocities (the physics engine had the last word
on where bodies went), the crowd steps up to the tick's time, and the reply carries everyone's intended velocity
and gaze, who appeared and who left. Bad messages are answered with an error and logged; the crowd goes on.
With ``--keys DIR`` (a :class:`bridge.security.Security`) the socket is a CURVE server: the link is encrypted and
only worlds whose key is in ``DIR/authorized/`` get an answer (ZeroMQ refuses the others' handshakes).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable

import zmq

from bridge.crowd_link import REQUESTS, Person, intents_payload, parse_states
from bridge.envelope import EnvelopeError, pack, unpack

from .sim import CrowdSim
from .stepper import Stepper

if TYPE_CHECKING:
    from bridge.security import Security

HEIGHT_BY_TYPE = {"child": 1.2}


def take_world_state(sim: CrowdSim, payload: dict) -> None:
    """The robot's state and the people's measured positions and velocities, as the world reports them.

    Everything is parsed before anything is written, so a malformed entry changes nothing. People the crowd does
    not know (yet, or any more) are ignored."""
    robot = payload.get("robot")
    pose = None
    if robot is not None:
        pose = (float(robot["x"]), float(robot["y"]), float(robot.get("yaw", 0.0)), float(robot.get("vx", 0.0)),
                float(robot.get("vy", 0.0)), float(robot.get("radius", 0.3)))
    measured = parse_states(payload)
    if pose is not None:
        x, y, yaw, vx, vy, radius = pose
        sim.set_robot(x, y, yaw=yaw, vx=vx, vy=vy, radius=radius)
    agents = sim.agents
    rows = {agent_id: row for row, agent_id in enumerate(agents.ids.tolist())}  # one pass, not one search each
    for agent_id, x, y, vx, vy in measured:
        row = rows.get(agent_id)
        if row is not None:
            agents.pos[row] = (x, y)
            agents.vel[row] = (vx, vy)


def apply_tick(sim: CrowdSim, payload: dict, step: Callable[[], None] | None = None) -> tuple[list[int], list[int]]:
    """Take the world's state, step the crowd to the tick's time; returns (spawned ids, removed ids).

    ``step`` does one crowd step (default ``sim.step``; a :class:`crowd.stepper.Stepper` lets a script run)."""
    target = float(payload["t"])
    take_world_state(sim, payload)
    step = step or sim.step
    before = set(sim.agents.ids.tolist())
    while sim.time_s + sim.dt / 2 <= target:
        step()
    after = set(sim.agents.ids.tolist())
    return sorted(after - before), sorted(before - after)


def intents(sim: CrowdSim) -> list[Person]:
    a = sim.agents
    ids, pos, vel, gaze, radius = a.ids.tolist(), a.pos.tolist(), a.vel.tolist(), a.gaze.tolist(), a.radius.tolist()
    return [Person(ids[i], a.types[i], pos[i][0], pos[i][1], vel[i][0], vel[i][1], gaze[i][0], gaze[i][1], radius[i],
                   HEIGHT_BY_TYPE.get(a.types[i], 1.7)) for i in range(len(ids))]


def serve(sim: CrowdSim, endpoint: str, ready=print, stepper: Stepper | None = None,
          security: Security | None = None) -> int:
    """Answer ticks until ``bye``; returns the number of ticks served. ``stepper``: a script playing on the
    world's time (its lines that ran during a tick go back in the reply's ``script`` list)."""
    stepper = stepper or Stepper(sim)
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    ticks = 0
    try:
        if security is not None:  # bad keys raise SecurityError here, before anything is bound
            security.apply_server(socket)
        socket.bind(endpoint)
        ready(f"crowd {socket.getsockopt_string(zmq.LAST_ENDPOINT)}")
        while True:
            data = socket.recv()
            try:
                msg = unpack(data, REQUESTS)
                if msg.type == "bye":
                    socket.send(pack("intents", intents_payload(sim.time_s, [], [], [])))
                    return ticks
                spawned, removed = apply_tick(sim, msg.payload, stepper.step)
            except (EnvelopeError, KeyError, TypeError, ValueError) as exc:
                print(f"crowd: dropped a message: {exc}", file=sys.stderr, flush=True)
                socket.send(pack("error", {"reason": str(exc)}))
                continue
            ticks += 1
            reply = intents_payload(sim.time_s, intents(sim), spawned, removed)
            reply.update(stepper.drain())
            socket.send(pack("intents", reply, seq=msg.seq, t=sim.time_s))
    finally:
        socket.close(0)
