"""``hil crowd --serve ENDPOINT --realtime``: the crowd paced to wall time, for a world on the real clock.

Lockstep (crowd/serve.py) lets the world own time; under the real clock the world must not wait for anyone, so
here the crowd keeps its own pace: every ``sim.dt`` of wall time it takes the newest world state (the robot and
the people's actual positions, applied as in lockstep), steps once, and publishes everyone's intents, who
appeared and who left (bridge/realtime.py: that message is also its heartbeat). Between steps it answers the
control channel (hello, status, bye). A crowd that falls behind (a slow step, a stalled machine) does not catch
up in a burst, which would make people jump: the missed steps are skipped and counted, so crowd time then lags
wall time by that much.

Each intents message also carries ``world_t``: the ``t`` of the newest world message the crowd had applied before
that step (None until one came). A world that sends its own clock's time there can tell how old the robot state
behind the people it receives is (bench/mixed.py: pose -> crowd -> shadow -> merged range).
"""
from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter as wall_clock  # wall time, even under runtime.clock.patch
from typing import TYPE_CHECKING

from hil.bridge.crowd_link import intents_payload
from hil.bridge.realtime import RealtimeCrowdServer

from hil.bridge.envelope import EnvelopeError
from hil.bridge.process import ParentWatch
from hil.bridge.schema import WorldPayload, convert

from .serve import activities, intents, take_world_state
from .sim import CrowdSim

if TYPE_CHECKING:
    from hil.bridge.security import Security

    from .stepper import Stepper


PARENT_CHECK_S = 0.5


@dataclass
class RealtimeStats:
    steps: int = 0
    skipped: int = 0  # steps not taken because the crowd fell behind wall time
    worlds: int = 0  # world messages applied
    world_t: float | None = None  # the world's own time in the newest world message applied


def apply_world(sim: CrowdSim, payload: WorldPayload | dict) -> None:
    """The world's robot and actual people, without stepping (checked whole before anything is written: a
    malformed state raises EnvelopeError and changes nothing)."""
    take_world_state(sim, convert(payload, WorldPayload) if isinstance(payload, dict) else payload)


def _step(sim: CrowdSim, stepper: Stepper | None) -> tuple[list[int], list[int]]:
    before = set(sim.agents.ids.tolist())
    (stepper.step if stepper is not None else sim.step)()
    after = set(sim.agents.ids.tolist())
    return sorted(after - before), sorted(before - after)


def _status(sim: CrowdSim, stats: RealtimeStats, server: RealtimeCrowdServer) -> dict:
    robot = sim.robot
    c = server.counters
    return {"t": sim.time_s, "steps": stats.steps, "skipped": stats.skipped, "worlds": stats.worlds,
            "dropped": c.dropped, "stale": c.stale, "world": server.world_state, "people": len(sim.agents),
            "robot": None if robot is None else {"x": robot.x, "y": robot.y, "yaw": robot.yaw}}


def serve_realtime(sim: CrowdSim, endpoint: str, ready=print, security: Security | None = None, stop=None,
                   stepper: Stepper | None = None) -> RealtimeStats:
    """Step ``sim`` every ``sim.dt`` of wall time and stream it until ``bye`` (or ``stop.is_set()``, for a
    thread); the first line given to ``ready`` is ``crowd CONTROL_ENDPOINT``. ``stepper`` plays a script on the
    crowd's own (wall-paced) time; its events ride along with the intents."""
    server = RealtimeCrowdServer(endpoint, sim.dt, security=security)
    stats = RealtimeStats()
    ready(f"crowd {server.control_endpoint}")
    try:
        due = wall_clock() + sim.dt
        parent, parent_checked = ParentWatch(), wall_clock()
        while stop is None or not stop.is_set():
            wait = due - wall_clock()
            if wall_clock() - parent_checked > PARENT_CHECK_S:
                parent_checked = wall_clock()
                if parent.gone():
                    return stats
            if wait > 0:
                if not server.serve_control(min(wait, 0.05), sim.time_s, lambda: _status(sim, stats, server)):
                    return stats
                continue
            world = server.latest_world()
            if world is not None:
                _apply(sim, world, server, stats)
            spawned, removed = _step(sim, stepper)
            stats.steps += 1
            extra = stepper.drain() if stepper is not None else {}
            doing, names = activities(sim)  # as in lockstep: what each does and the script's names, for the record
            server.publish(sim.time_s, {**intents_payload(sim.time_s, intents(sim), spawned, removed), **extra,
                                        "world_t": stats.world_t, "doing": doing, "names": names})
            due = _next_due(due, sim.dt, stats)
        return stats
    finally:
        server.close()


def _apply(sim: CrowdSim, world: WorldPayload, server: RealtimeCrowdServer, stats: RealtimeStats) -> None:
    try:
        apply_world(sim, world)
    except EnvelopeError as exc:
        server.counters.drop(f"crowd world stream {server.world_endpoint}", str(exc))
        return
    except Exception as exc:  # our bug on valid input: the crowd must go on serving
        server.counters.drop(f"crowd world stream {server.world_endpoint}", f"{type(exc).__name__}: {exc}")
        return
    stats.worlds += 1
    stats.world_t = world.t


def _next_due(due: float, dt: float, stats: RealtimeStats) -> float:
    """The next step's wall time; whole periods already missed are skipped (counted), not run back to back."""
    due += dt
    late = wall_clock() - due
    if late > dt:
        missed = int(late // dt)
        stats.skipped += missed
        due += missed * dt
    return due
