"""One bus cycle: one write transaction for the targets that changed, one read transaction for everything.

The control loop's cost on a real bus is transactions, not bytes: every instruction pays the adapter's latency
and the parts' return delays. So the targets set since the last cycle go out as one SyncWrite when they all
use one register (all positions, or all wheel velocities), else one BulkWrite; and every joint's present
velocity + position and every sensor's registers come back in one Fast Bulk Read, one slot per part covering
what that part must report. Reads also feed the parts' bus watchdogs, so a loop that keeps running keeps its
actuators alive even when no target changes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..bus import BusHost


class Reader(Protocol):
    part_id: int

    def read_spans(self) -> list[tuple[int, int]]: ...

    def update(self, block: bytes, base: int) -> None: ...


class Writer(Protocol):
    part_id: int

    def pending_write(self) -> tuple[int, bytes] | None: ...

    def mark_written(self) -> None: ...


class BusCycle:
    def __init__(self, bus: BusHost, readers: Sequence[Reader], writers: Sequence[Writer]):
        self.bus = bus
        self.writers = tuple(writers)
        spans: dict[int, tuple[int, int]] = {}
        self._readers: dict[int, list[Reader]] = {}
        for reader in readers:
            for address, size in reader.read_spans():
                lo, hi = spans.get(reader.part_id, (address, address + size))
                spans[reader.part_id] = (min(lo, address), max(hi, address + size))
            self._readers.setdefault(reader.part_id, []).append(reader)
        # one slot per part: the smallest block covering every register that part reports
        self.read_items = tuple((part_id, lo, hi - lo) for part_id, (lo, hi) in spans.items())
        self._base = {part_id: lo for part_id, (lo, _) in spans.items()}
        self.lost: set[int] = set()  # IDs presence.py counts as lost: left out of the read, their targets held
        self.watch = None  # presence.BusWatch: reads counting missed replies (None: a silence raises BusTimeout)

    def write(self) -> int:
        """Send the targets that changed; returns the number of transactions (0 when nothing changed)."""
        pending = [(w, item) for w in self.writers if (item := w.pending_write()) is not None]
        if self.lost:
            pending = self._hold_lost(pending)
        transactions = 0
        while pending:
            batch, pending = _one_per_part(pending)  # a BulkWrite may list each ID once
            items = [(w.part_id, address, data) for w, (address, data) in batch]
            if len({(address, len(data)) for _, address, data in items}) == 1:
                address, length = items[0][1], len(items[0][2])
                self.bus.sync_write(address, length, {part_id: data for part_id, _, data in items})
            else:
                self.bus.bulk_write(items)
            for writer, _ in batch:
                writer.mark_written()
            transactions += 1
        return transactions

    def _hold_lost(self, pending: list) -> list:
        """Targets of lost parts stay pending (sent when the part is back); the watch notes them once."""
        held = [w for w, _ in pending if w.part_id in self.lost]
        if held and self.watch is not None:
            self.watch.held(self, held)
        return [(w, item) for w, item in pending if w.part_id not in self.lost]

    def read(self) -> None:
        """One Fast Bulk Read of every reader's registers; each reader takes its values from its part's block."""
        items = self.read_items if not self.lost else tuple(i for i in self.read_items if i[0] not in self.lost)
        if not items:
            return
        blocks = self.bus.bulk_read(items, fast=True) if self.watch is None else self.watch.read(self, items)
        for part_id, block in blocks.items():
            base = self._base[part_id]
            for reader in self._readers[part_id]:
                reader.update(block, base)

    def run(self) -> None:
        self.write()
        self.read()


@dataclass
class BusGroup:
    """The joints and the cycle of one bus of a robot on several buses."""

    name: str
    host: BusHost
    joints: list
    cycle: BusCycle


class MultiCycle:
    """One cycle on each bus, in the profile's order: each bus gets its own write and its own Fast Bulk Read,
    because IDs and group instructions are per wire. The buses are served one after the other (not in
    parallel), so a tick costs the sum of the buses' transaction times."""

    def __init__(self, groups: Sequence[BusGroup]):
        self.groups = tuple(groups)

    def write(self) -> int:
        return sum(group.cycle.write() for group in self.groups)

    def read(self) -> None:
        for group in self.groups:
            group.cycle.read()

    def run(self) -> None:
        self.write()
        self.read()


def _one_per_part(pending: list) -> tuple[list, list]:
    seen: set[int] = set()
    batch, rest = [], []
    for writer, item in pending:
        (rest if writer.part_id in seen else batch).append((writer, item))
        seen.add(writer.part_id)
    return batch, rest
