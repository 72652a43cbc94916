"""What the runtime says when a part is lost, back, new, changed or quarantined while running."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

LOST, BACK, NEW, CHANGED, QUARANTINED = "lost", "back", "new", "changed", "quarantined"
EVENT_KINDS = (LOST, BACK, NEW, CHANGED, QUARANTINED)


@dataclass(frozen=True)
class PartEvent:
    """A part lost, back, new, changed (another part at a known ID) or quarantined, at clock time ``time_s``."""

    kind: str
    part_id: int  # robot-wide ID (the bus ID on a one-bus robot)
    bus: str
    time_s: float
    names: tuple[str, ...]  # blueprint names of its joints and sensors
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "names": list(self.names)}
