"""The crowd beside a world on the real clock (``sim://...?clock=real&crowd=EP&crowd_mode=realtime``).

In lockstep (crowd_bridge.py) the world waits for the crowd at every tick; a world paced to wall time must not
wait for anyone, so here the crowd runs at its own pace (``hil crowd --serve EP --realtime``) and the two
exchange state streams (bridge/realtime.py). At every crowd period of world time the pre-step hook publishes the
robot and the people's actual states, takes the newest intents the crowd published, if any, and syncs the
pedestrian capsules to them; it never blocks.

When the crowd falls silent for ``timeout_s`` the link is ``lost``: the world keeps stepping and the people stand
(intended velocity zero) where physics left them, until the crowd answers again. A crowd that comes back as a new
process (a new session) numbers its people afresh, so the old bodies are removed before its people appear; a
crowd that only stalled (same session) takes its people back as they were. Link state and counters are in
``link`` and :meth:`RealtimeCrowdBridge.counters`, and the link's events in :meth:`take_link_events`, for the
trial log.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .crowd_bridge import ROBOT_RADIUS_M, CrowdBridge

if TYPE_CHECKING:
    from hil.bridge.security import Security



class RealtimeCrowdBridge(CrowdBridge):
    """The world's end in real time: :attr:`link` is the :class:`bridge.realtime.RealtimeCrowdLink`."""

    def __init__(self, embodied, endpoint: str, period_s: float = 0.1, timeout_s: float = 2.0,
                 robot_radius_m: float = ROBOT_RADIUS_M, security: Security | None = None):
        self.link_events: list[dict] = []  # before the base connects: the first event comes while it does
        self.cleared = 0  # people removed because their crowd was replaced by a new process
        super().__init__(embodied, endpoint, period_s=period_s, timeout_s=timeout_s, robot_radius_m=robot_radius_m,
                         security=security)
        self.link = self.client
        self.session = self.link.session

    def _connect(self, endpoint: str, timeout_s: float, security: Security | None):
        """Say hello and wait (at most ``timeout_s``) for the first answer: a crowd that is not there at all is a
        setup mistake, reported at once; once running, the world never waits for it again."""
        from hil.bridge.crowd_link import CrowdLinkError
        from hil.bridge.realtime import LinkError, RealtimeCrowdLink

        link = RealtimeCrowdLink(endpoint, timeout_s=timeout_s, security=security, on_event=self._on_event)
        try:
            link.connect(timeout_s)
        except LinkError as exc:
            link.close()
            raise CrowdLinkError(str(exc)) from None
        return link

    def _on_event(self, kind: str, info: dict) -> None:
        self.link_events.append({"t": self.world.time_s if hasattr(self, "world") else 0.0, "event": kind, **info})

    def tick(self) -> None:
        """One exchange at the world's current time: publish, take the newest intents, never wait."""
        from hil.bridge.realtime import LOST

        actual = [(s.id, s.x, s.y, s.vx, s.vy) for s in self.pedestrians.states()]
        self.link.publish(self.world.time_s, self.robot_state(), actual)
        payload = self.link.poll()
        if self.link.session != self.session:
            self._forget_people()
            self.session = self.link.session
        if self.link.state == LOST:
            self._stand()
        elif payload is not None:
            self._take(payload)

    def _take(self, payload: dict) -> None:
        from hil.bridge.crowd_link import intents_time, parse_people
        from hil.bridge.envelope import EnvelopeError

        try:
            people = parse_people(payload)
            crowd_time = intents_time(payload)
        except (EnvelopeError, KeyError, TypeError, ValueError) as exc:
            self.link.drop(f"intents: malformed people ({type(exc).__name__}: {exc})")
            return
        self._take_intents(crowd_time, people, payload)

    def _forget_people(self) -> None:
        """A new crowd process: its ids mean other people, so the old bodies go before its people appear."""
        self.cleared += len(self.pedestrians.bodies)
        self.pedestrians.sync([])
        self.people = {}

    def take_link_events(self) -> list[dict]:
        """The link's events since the last call: [{t (world time), event, endpoint, ...}]."""
        events, self.link_events = self.link_events, []
        return events

    def counters(self) -> dict:
        """Link state and counters for the trial log: state, session, reconnects, losses, received, published,
        dropped, stale, plus the people cleared on a new session and the intents taken."""
        return {**self.link.counters_dict(), "cleared": self.cleared, "intents": self.ticks}


def attach_realtime_crowd(embodied, endpoint: str, period_s: float = 0.1, timeout_s: float = 2.0,
                          security: Security | None = None) -> RealtimeCrowdBridge:
    """Stream with the real-time crowd at ``endpoint`` every ``period_s`` of world time; also ``embodied.crowd``.
    ``timeout_s``: the silence (wall time) after which the link is lost, and the wait for the first hello."""
    bridge = RealtimeCrowdBridge(embodied, endpoint, period_s=period_s, timeout_s=timeout_s, security=security)
    embodied.crowd = bridge
    return bridge
