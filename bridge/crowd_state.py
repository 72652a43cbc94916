"""The crowd's part of a trial's saved state, over the lockstep link: two requests beside ``tick``.

- ``crowd_state`` -> ``crowd_state`` {t, digest, people: {id, x, y, vx, vy}}: what the crowd is now, asked when a
  state is saved (its digest covers the whole crowd: every agent array, route and name, its clock and its one
  random generator, crowd/restore.py);
- ``crowd_replay`` {from_t, ticks} -> ``crowd_replayed`` {t, digest}: the world's ticks since the start, taken again
  without answering them, in chunks of at most ``MAX_REPLAY_TICKS``.

Why replay and not a snapshot: a served script is a Python generator paused inside its current line (a ``wait``,
a ``run 5s``), and no generator's frame can be saved without pickle; the crowd is deterministic for its inputs and
cheap to step (compiled), so its inputs are what is saved (the world's ticks, states/crowd_ticks.msgpack) and the
digest proves it came back to exactly where it was. Both payloads are schema-checked (bridge/schema.py) like ticks.
"""
from __future__ import annotations

from typing import Any

from .crowd_link import CrowdClient, CrowdLinkError, tick_payload
from .envelope import EnvelopeError, unpack
from .schema import MAX_REPLAY_TICKS

STATE_REPLIES = ("crowd_state", "crowd_replayed", "error")


def _ask(client: CrowdClient, kind: str, payload: dict, timeout_s: float) -> dict:
    # a crowd process that dies meanwhile is named at once (its signal, its last words), as during a tick
    at_t = float(payload.get("from_t", 0.0)) if kind == "crowd_replay" else client.last_t
    data = client.request(kind, payload, at_t, timeout_s)
    try:
        reply = unpack(data, STATE_REPLIES)
    except EnvelopeError as exc:
        raise CrowdLinkError(f"the crowd at {client.endpoint} sent a bad reply to {kind}: {exc}") from None
    if reply.type == "error":
        raise CrowdLinkError(f"the crowd at {client.endpoint} refused {kind}: {reply.payload}")
    if not isinstance(reply.payload, dict) or not isinstance(reply.payload.get("digest"), str):
        raise CrowdLinkError(f"the crowd at {client.endpoint} answered {kind} without a digest")
    return reply.payload


def crowd_state(client: CrowdClient) -> dict[str, Any]:
    """The crowd's {t, digest, people} now (between ticks)."""
    return _ask(client, "crowd_state", {}, client.timeout_s)


def replay(client: CrowdClient, ticks: list[list]) -> dict[str, Any]:
    """Send the journal's ticks ([t, robot, people rows]) again, in chunks; returns the last {t, digest}."""
    done: dict[str, Any] = {"t": 0.0, "digest": ""}
    from_t = 0.0
    for start in range(0, len(ticks), MAX_REPLAY_TICKS):
        chunk = [tick_payload(t, robot, [tuple(row) for row in rows]) for t, robot, rows in
                 ticks[start:start + MAX_REPLAY_TICKS]]
        done = _ask(client, "crowd_replay", {"from_t": from_t, "ticks": chunk}, max(client.timeout_s, 60.0))
        from_t = float(done["t"])
    return done
