"""``hil crowd --serve ENDPOINT``: the crowd as the world's partner over the bridge (bridge/crowd_link.py).

A REP socket (loopback unless the endpoint says otherwise) answers each ``tick``: the robot's state is set,
the people the world reports take their measured positions and velocities (the physics engine had the last word
on where bodies went), the crowd steps up to the tick's time, and the reply carries everyone's intended velocity
and gaze, who appeared and who left. Bad messages are answered with an error and logged; the crowd goes on.
"""
from __future__ import annotations

import sys

import numpy as np
import zmq

from bridge.crowd_link import REQUESTS, Person, intents_payload
from bridge.envelope import EnvelopeError, pack, unpack

from .sim import CrowdSim

HEIGHT_BY_TYPE = {"child": 1.2}


def apply_tick(sim: CrowdSim, payload: dict) -> tuple[list[int], list[int]]:
    """Take the world's state, step the crowd to the tick's time; returns (spawned ids, removed ids)."""
    robot = payload.get("robot")
    if robot is not None:
        sim.set_robot(float(robot["x"]), float(robot["y"]), yaw=float(robot.get("yaw", 0.0)),
                      vx=float(robot.get("vx", 0.0)), vy=float(robot.get("vy", 0.0)),
                      radius=float(robot.get("radius", 0.3)))
    agents = sim.agents
    for person in payload.get("people", []):
        rows = np.flatnonzero(agents.ids == int(person["id"]))
        if len(rows):
            agents.pos[rows[0]] = (float(person["x"]), float(person["y"]))
            agents.vel[rows[0]] = (float(person["vx"]), float(person["vy"]))
    before = set(agents.ids.tolist())
    target = float(payload["t"])
    while sim.time_s + sim.dt / 2 <= target:
        sim.step()
    after = set(sim.agents.ids.tolist())
    return sorted(after - before), sorted(before - after)


def intents(sim: CrowdSim) -> list[Person]:
    a = sim.agents
    return [Person(int(a.ids[i]), a.types[i], float(a.pos[i, 0]), float(a.pos[i, 1]), float(a.vel[i, 0]),
                   float(a.vel[i, 1]), float(a.gaze[i, 0]), float(a.gaze[i, 1]), float(a.radius[i]),
                   HEIGHT_BY_TYPE.get(a.types[i], 1.7)) for i in range(len(a))]


def serve(sim: CrowdSim, endpoint: str, ready=print) -> int:
    """Answer ticks until ``bye``; returns the number of ticks served."""
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(endpoint)
    ready(f"crowd {socket.getsockopt_string(zmq.LAST_ENDPOINT)}")
    ticks = 0
    try:
        while True:
            data = socket.recv()
            try:
                msg = unpack(data, REQUESTS)
                if msg.type == "bye":
                    socket.send(pack("intents", intents_payload(sim.time_s, [], [], [])))
                    return ticks
                spawned, removed = apply_tick(sim, msg.payload)
            except (EnvelopeError, KeyError, TypeError, ValueError) as exc:
                print(f"crowd: dropped a message: {exc}", file=sys.stderr, flush=True)
                socket.send(pack("error", {"reason": str(exc)}))
                continue
            ticks += 1
            socket.send(pack("intents", intents_payload(sim.time_s, intents(sim), spawned, removed),
                             seq=msg.seq, t=sim.time_s))
    finally:
        socket.close(0)
