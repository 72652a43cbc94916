"""The crowd's side of a trial's saved state (the world's side is bridge/crowd_state.py).

:func:`digest` fingerprints everything that decides how the crowd goes on: its clock and step count, its one
random generator (``CrowdSim.rng``), every agent array (positions, velocities, routes, waypoints, objectives'
targets...), the per-agent lists (types, names, routes) and each hook's plain attributes (numbers, strings: the
generation's next arrival times, counters). A Python object the digest does not reach (a script's paused
generator, an objective's reaction) is covered by the replay itself, which runs the same code on the same
inputs. :func:`answer`
handles ``crowd_state`` and ``crowd_replay``: a replay takes the world's ticks again exactly as :func:`apply_tick`
took them (lines that run are not reported twice), so the crowd ends where it was when the state was saved.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from hil.bridge.envelope import EnvelopeError
from hil.bridge.schema import CrowdReplayPayload

REQUESTS = ("crowd_state", "crowd_replay")
MAX_REPLAY_SPAN_S = 300.0  # crowd time one crowd_replay may cover (2000 ticks of 0.1 s is 200 s): a peer's one
# message must not make the crowd step for hours


def digest(sim) -> str:
    """A SHA-256 of the crowd's whole state, in a fixed order."""
    h = hashlib.sha256()
    h.update(repr((round(sim.time_s, 9), sim.steps, sim.rng.bit_generator.state)).encode())
    agents = sim.agents
    for name in sorted(vars(agents)):
        value = getattr(agents, name)
        if isinstance(value, np.ndarray):
            h.update(name.encode())
            h.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, (list, int)):
            h.update(name.encode())
            h.update(repr(value).encode())
    for array in ("override_velocity", "override_gaze", "speed_factor"):
        h.update(np.ascontiguousarray(getattr(sim, array)).tobytes())
    for hook in sim.hooks:
        owner = getattr(hook, "__self__", hook)
        plain = sorted((k, v) for k, v in vars(owner).items() if isinstance(v, (bool, int, float, str)))
        h.update(repr((type(owner).__name__, plain)).encode())
    return h.hexdigest()


def people(sim) -> dict[str, list]:
    a = sim.agents
    return {"id": a.ids.tolist(), "x": a.pos[:, 0].tolist(), "y": a.pos[:, 1].tolist(), "vx": a.vel[:, 0].tolist(),
            "vy": a.vel[:, 1].tolist()}


def answer(sim, stepper, kind: str, payload: Any, apply_tick) -> tuple[str, dict]:
    """The reply (type, payload) to a ``crowd_state`` or ``crowd_replay`` request; EnvelopeError for a bad one
    (nothing changed). ``apply_tick``: crowd/serve.py's, which takes a tick (passed in: serve imports this)."""
    if kind == "crowd_state":
        return "crowd_state", {"t": sim.time_s, "digest": digest(sim), "people": people(sim)}
    assert isinstance(payload, CrowdReplayPayload)
    if abs(payload.from_t - sim.time_s) > 1e-9:
        raise EnvelopeError(f"crowd_replay: from_t={payload.from_t:g} s but the crowd is at {sim.time_s:g} s (a "
                            "replay goes into a crowd that has taken nothing else since)")
    if payload.ticks and payload.ticks[-1].t - sim.time_s > MAX_REPLAY_SPAN_S:
        raise EnvelopeError(f"crowd_replay: its ticks reach t={payload.ticks[-1].t:g} s, "
                            f"{payload.ticks[-1].t - sim.time_s:g} s ahead of the crowd; one replay may cover at most "
                            f"MAX_REPLAY_SPAN_S={MAX_REPLAY_SPAN_S:g} s (send the rest in another)")
    if any(b.t < a.t for a, b in zip(payload.ticks, payload.ticks[1:])):
        raise EnvelopeError("crowd_replay: the ticks' times must not go back")
    for tick in payload.ticks:
        apply_tick(sim, tick, stepper.step)
        stepper.drain()  # the lines ran the first time; the log has them
    return "crowd_replayed", {"t": sim.time_s, "digest": digest(sim)}
