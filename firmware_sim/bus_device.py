"""The device side of the bus: many parts behind one Dynamixel 2.0 endpoint.

Bytes in (``receive``), replies out (``take_output``). Each reply carries the time it would reach the host
under the wire-timing model (or "now" without one); transports hand it over when that time has come. The
device never raises on bad input: garbage is skipped by the decoder, malformed instructions are answered with
the protocol's error codes, and the counters say what happened.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Iterable

from hil.devices.protocol import (BROADCAST_ID, CrcMismatch, DataLengthError, DeviceCrcError, FrameError,
                              InstructionError, MalformedPacket, Packet, StatusError, StreamDecoder, decode_request,
                              encode_fast_reply, encode_ping_reply, encode_status)
from hil.devices.protocol import requests as rq
from hil.devices.protocol.instructions import KNOWN_INSTRUCTIONS, MAX_PACKET_BYTES

from .faults import FaultInjector
from .part import PartFirmware
from .timing import WireTiming

READ_LEVEL, ALL_LEVEL = 1, 2  # status return level needed for read replies / for every reply
STATUS_FRAME_OVERHEAD = 4  # instruction, error, CRC: what a status frame's length field counts besides the data
FAST_FRAME_OVERHEAD, FAST_SLOT_OVERHEAD = 1, 4  # instruction; error, id, CRC per slot
log = logging.getLogger(__name__)


class VirtualBusDevice:
    def __init__(self, parts: Iterable[PartFirmware], *, timing: WireTiming | None = None,
                 faults: FaultInjector | None = None, clock: Callable[[], float] = time.perf_counter,
                 ticker: Callable[[float, int | None], bool] | None = None, tick_period_s: float | None = None,
                 chain_stops: bool = False):
        """``chain_stops``: a fast read's reply stops at the first asked part that is silent, as a real bus's
        chained reply does (the parts after it wait for its slot); False answers every present part's slot."""
        self.parts: list[PartFirmware] = list(parts)
        self.chain_stops = chain_stops
        self.timing = timing
        self.faults = faults
        self.clock = clock
        self.ticker = ticker  # brings a world up to the device's time before each instruction (real clock)
        self.tick_period_s = tick_period_s  # how often a serve loop should call tick() while the line is quiet
        self.lock = threading.RLock()  # a clock master advancing the world takes it too
        self._decoder = StreamDecoder()
        self._outbox: deque[tuple[float, bytes]] = deque()
        self._line_free_at = 0.0
        self.counters = {"packets": 0, "crc_errors": 0, "malformed": 0, "replies": 0, "incomplete": 0,
                         "oversized": 0, "internal_errors": 0}
        self._by_id: dict[int, list[PartFirmware]] = {}
        self.silent_until: dict[int, float] = {}  # unplugged or booting parts (hotplug.py): ID -> device time
        # hotplug.swap calls each hook(old, new) -> the firmware to serve (an embodied world's: embodied/reembody.py)
        self.swap_hooks: list[Callable[[PartFirmware, PartFirmware], PartFirmware]] = []
        self._index()

    # topology
    def _index(self) -> None:
        by_id: dict[int, list[PartFirmware]] = {}
        for part in self.parts:
            by_id.setdefault(part.id, []).append(part)
        self._by_id = by_id

    def part(self, device_id: int) -> PartFirmware:
        return self._by_id[device_id][0]

    def replace_part(self, old: PartFirmware, new: PartFirmware) -> None:
        """Put ``new`` where ``old`` was on the bus (a swap); the ID index follows. The caller holds :attr:`lock`."""
        self.parts[self.parts.index(old)] = new
        self._index()

    def add_part(self, part: PartFirmware) -> None:
        """Plug ``part`` into the bus; the ID index follows. The caller holds :attr:`lock`."""
        self.parts.append(part)
        self._index()

    def _present(self, device_id: int) -> list[PartFirmware]:
        if self.faults is not None and device_id in self.faults.vanished:
            return []
        if self.silent_until and self._silent(device_id):
            return []
        return self._by_id.get(device_id, [])

    def _silent(self, device_id: int) -> bool:
        until = self.silent_until.get(device_id)
        if until is None:
            return False
        if self.clock() < until:
            return True
        del self.silent_until[device_id]  # booted
        return False

    def _all_present(self) -> list[PartFirmware]:
        vanished = self.faults.vanished if self.faults is not None else ()
        return sorted((p for p in self.parts if p.id not in vanished and not self._silent(p.id)), key=lambda p: p.id)

    # byte interface
    def tick(self, now: float | None = None, max_steps: int | None = None) -> bool:
        """Let time pass for whatever the parts live in (a world paced to the clock), at most ``max_steps``
        physics steps of it; True while it is still behind (no-op, False, without a ticker)."""
        if self.ticker is None:
            return False
        with self.lock:
            return bool(self.ticker(self.clock() if now is None else now, max_steps))

    def receive(self, data: bytes, max_steps: int | None = None) -> None:
        """Take bytes from the wire; every complete instruction is executed and its replies queued. The world is
        brought up to now first, by at most ``max_steps`` steps (a serve loop that keeps it moving between
        instructions passes a small number, so that a world behind the clock never delays the answer)."""
        with self.lock:
            self._receive(data, max_steps)

    def _receive(self, data: bytes, max_steps: int | None) -> None:
        now = self.clock()
        self.tick(now, max_steps)
        if self.faults is not None:
            data = self.faults.corrupt(data)
        arrival = self._arrival_time(now, len(data))
        for event in self._decoder.feed(data):
            if isinstance(event, FrameError):
                self._on_bad_frame(event, arrival)
            else:
                self._execute(event, now, arrival)

    def line_idle(self) -> None:
        """The line stayed silent (the host waited out a timeout): give up on a partial instruction.

        A real receiver does the same; without it a corrupted length field would make the device swallow the
        instructions that follow and answer them late, where the host takes them for answers to newer requests.
        """
        if self._decoder.pending:
            self.counters["incomplete"] += 1
            self._decoder.reset()

    @property
    def partial_bytes(self) -> int:
        """Bytes of an instruction still being received (0 between instructions)."""
        return self._decoder.pending

    def next_release_s(self) -> float | None:
        """When the earliest queued reply reaches the host, or None if nothing is queued."""
        return self._outbox[0][0] if self._outbox else None

    def take_output(self, now: float | None = None) -> bytes:
        """The reply bytes that have reached the host by ``now`` (all of them when ``now`` is None)."""
        out = bytearray()
        while self._outbox and (now is None or self._outbox[0][0] <= now):
            out += self._outbox.popleft()[1]
        return bytes(out)

    # helpers
    def _arrival_time(self, now: float, n_bytes: int) -> float:
        """When the last byte of an instruction is on the device's side of the wire."""
        if self.timing is None:
            return now
        start = max(now, self._line_free_at)
        self._line_free_at = start + self.timing.wire_time_s(n_bytes)
        return self._line_free_at

    def _queue(self, reply: bytes, part: PartFirmware | None, after: float) -> float:
        """Queue one reply sent by ``part`` no earlier than ``after``; returns when the line is free again."""
        self.counters["replies"] += 1
        if self.faults is not None:
            if self.faults.drop():
                return after
            reply = self.faults.corrupt(reply)
        timing = self.timing
        if timing is None:
            self._outbox.append((after, reply))
            return after
        start = max(after, self._line_free_at)
        if timing.return_delay and part is not None:
            start += part.return_delay_s
        end = start + timing.wire_time_s(len(reply))
        self._line_free_at = end
        self._outbox.append((end + timing.adapter_latency_s, reply))
        return end

    def _on_bad_frame(self, error: FrameError, arrival: float) -> None:
        if isinstance(error, CrcMismatch):
            self.counters["crc_errors"] += 1
            if error.packet_id is not None and error.packet_id != BROADCAST_ID:
                for part in self._present(error.packet_id):
                    if part.return_level >= ALL_LEVEL:
                        self._queue(encode_status(part.id, DeviceCrcError.code), part, arrival)
        else:
            self.counters["malformed"] += 1

    def _execute(self, packet: Packet, now: float, arrival: float) -> None:
        if packet.is_status:
            return  # another device's answer (or our own echo): not for us
        self.counters["packets"] += 1
        try:
            request = decode_request(packet)
        except MalformedPacket:
            self.counters["malformed"] += 1
            code = InstructionError.code if packet.instruction not in KNOWN_INSTRUCTIONS else DataLengthError.code
            for part in self._present(packet.id):
                if part.return_level >= ALL_LEVEL:
                    self._queue(encode_status(part.id, code), part, arrival)
            return
        handler = _HANDLERS[type(request)]
        try:
            handler(self, request, now, arrival)
        except Exception as exc:  # a peer's bytes must never end the device: count, log, go on answering
            self.counters["internal_errors"] += 1
            n = self.counters["internal_errors"]
            if n <= 10 or n % 1000 == 0:
                log.warning("virtual bus device: %s from id %d failed (%s: %s); request dropped (%d so far)",
                            type(request).__name__, packet.id, type(exc).__name__, exc, n)

    def _refuse_oversized(self, request, parts: list[PartFirmware], reply_length: int, fast: bool,
                          arrival: float) -> None:
        """A read whose reply cannot fit in one frame: every addressed part answers Data Length with no data
        (a fast read: one fast reply of data-less error slots), counted as ``oversized``."""
        self.counters["oversized"] += 1
        n = self.counters["oversized"]
        if n <= 10 or n % 1000 == 0:
            log.warning("virtual bus device: %s asks for a %d-byte reply, over the %d-byte frame limit; answered "
                        "with Data Length errors (%d so far)", type(request).__name__, reply_length,
                        MAX_PACKET_BYTES, n)
        if fast:
            self._queue(encode_fast_reply([(DataLengthError.code, p.id, b"") for p in parts]), parts[0], arrival)
            return
        after = arrival
        for part in parts:
            after = self._queue(encode_status(part.id, DataLengthError.code), part, after)

    def _unicast(self, request, now: float, arrival: float, action: Callable[[PartFirmware], bytes],
                 level: int = ALL_LEVEL, level_before: bool = False) -> None:
        """Run ``action`` on the addressed part(s); reply with its data or its status error.

        ``level_before``: the status return level in force before the action decides (Reboot and Factory Reset
        answer before they reset the part, so a part at level 0 or 1 stays silent).
        """
        targets = self._all_present() if request.id == BROADCAST_ID else self._present(request.id)
        changed_ids = False
        for part in targets:
            old_id = part.id
            old_level = part.return_level
            part.advance(now)
            error, data = 0, b""
            try:
                data = action(part)
            except StatusError as exc:
                error = exc.code
            changed_ids |= part.id != old_id
            if request.id != BROADCAST_ID and (old_level if level_before else part.return_level) >= level:
                self._queue(encode_status(old_id, error | part.alert, data), part, arrival)
        if changed_ids:
            self._index()

    # instruction handlers
    def _ping(self, request: rq.Ping, now: float, arrival: float) -> None:
        targets = self._all_present() if request.id == BROADCAST_ID else self._present(request.id)
        after = arrival
        for part in targets:  # a broadcast ping is answered in ID order, one after the other
            after = self._queue(encode_ping_reply(part.id, part.model_number, part.firmware_version, part.alert),
                                part, after)

    def _read(self, request: rq.Read, now: float, arrival: float) -> None:
        if request.length + STATUS_FRAME_OVERHEAD > MAX_PACKET_BYTES:
            parts = [p for p in self._present(request.id) if p.return_level >= READ_LEVEL]
            if parts:
                self._refuse_oversized(request, parts, request.length + STATUS_FRAME_OVERHEAD, False, arrival)
            return
        self._unicast(request, now, arrival, lambda p: p.read(request.address, request.length), READ_LEVEL)

    def _write(self, request: rq.Write, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.write(request.address, request.data) or b"")

    def _reg_write(self, request: rq.RegWrite, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.reg_write(request.address, request.data) or b"")

    def _action(self, request: rq.Action, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.action() or b"")

    def _reboot(self, request: rq.Reboot, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.reboot() or b"", level_before=True)

    def _factory_reset(self, request: rq.FactoryReset, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.factory_reset(request.option) or b"", level_before=True)

    def _clear(self, request: rq.Clear, now: float, arrival: float) -> None:
        self._unicast(request, now, arrival, lambda p: p.clear(request.option, request.key) or b"")

    def _read_slots(self, items: list[tuple[int, int, int]], now: float) -> list[tuple[PartFirmware, int, bytes]]:
        """(part, error, data) for each present part asked, in the order asked."""
        slots = []
        for device_id, address, length in items:
            for part in self._present(device_id):
                if part.return_level < READ_LEVEL:
                    continue
                part.advance(now)
                try:
                    slots.append((part, part.alert, part.read(address, length)))
                except StatusError as exc:
                    slots.append((part, exc.code | part.alert, bytes(length)))
        return slots

    def _group_read(self, request, items: list[tuple[int, int, int]], fast: bool, now: float,
                    arrival: float) -> None:
        length = _reply_length(self, items, fast)
        if length > MAX_PACKET_BYTES:
            parts = [p for i, _, _ in items for p in self._present(i) if p.return_level >= READ_LEVEL]
            if parts:
                self._refuse_oversized(request, parts, length, fast, arrival)
            return
        if fast and self.chain_stops:
            self._chained_fast_reply(items, now, arrival)
            return
        slots = self._read_slots(items, now)
        if not slots:
            return
        if fast:
            # one frame from a chain of devices; timing uses the first device's return delay
            self._queue(encode_fast_reply([(err, part.id, data) for part, err, data in slots]), slots[0][0], arrival)
            return
        after = arrival
        for part, err, data in slots:
            after = self._queue(encode_status(part.id, err, data), part, after)

    def _chained_fast_reply(self, items: list[tuple[int, int, int]], now: float, arrival: float) -> None:
        """A real chain: the first device announces every asked slot in the length field, each device appends its
        slot after the one before it, and a silent device stops the chain there (nothing at all if it is the
        first): the host gets a frame cut short, its intact slots told by their running CRCs."""
        slots = []
        for device_id, address, length in items:
            present = [p for p in self._present(device_id) if p.return_level >= READ_LEVEL]
            if not present:
                break
            slots.extend((part, err, data) for part, err, data in self._read_slots([(device_id, address, length)], now))
        if not slots:
            return
        announced = FAST_FRAME_OVERHEAD + sum(FAST_SLOT_OVERHEAD + n for _, _, n in items)
        frame = encode_fast_reply([(err, part.id, data) for part, err, data in slots], length=announced)
        self._queue(frame, slots[0][0], arrival)

    def _sync_read(self, request: rq.SyncRead, now: float, arrival: float) -> None:
        items = [(i, request.address, request.length) for i in request.ids]
        self._group_read(request, items, request.fast, now, arrival)

    def _bulk_read(self, request: rq.BulkRead, now: float, arrival: float) -> None:
        self._group_read(request, list(request.items), request.fast, now, arrival)

    def _group_write(self, items: Iterable[tuple[int, int, bytes]], now: float) -> None:
        changed_ids = False
        for device_id, address, data in items:
            for part in self._present(device_id):
                old_id = part.id
                part.advance(now)
                try:
                    part.write(address, data)
                except StatusError:
                    pass  # no status packet for group writes: the part silently refuses
                changed_ids |= part.id != old_id
        if changed_ids:
            self._index()

    def _sync_write(self, request: rq.SyncWrite, now: float, arrival: float) -> None:
        self._group_write(((i, request.address, d) for i, d in request.items), now)

    def _bulk_write(self, request: rq.BulkWrite, now: float, arrival: float) -> None:
        self._group_write(request.items, now)


def _reply_length(device: VirtualBusDevice, items: list[tuple[int, int, int]], fast: bool) -> int:
    """The length field of the largest frame a group read would be answered with (before stuffing)."""
    if fast:
        return FAST_FRAME_OVERHEAD + sum(FAST_SLOT_OVERHEAD + n for i, _, n in items for _ in device._present(i))
    return max((STATUS_FRAME_OVERHEAD + n for _, _, n in items), default=0)


_HANDLERS = {
    rq.Ping: VirtualBusDevice._ping,
    rq.Read: VirtualBusDevice._read,
    rq.Write: VirtualBusDevice._write,
    rq.RegWrite: VirtualBusDevice._reg_write,
    rq.Action: VirtualBusDevice._action,
    rq.Reboot: VirtualBusDevice._reboot,
    rq.FactoryReset: VirtualBusDevice._factory_reset,
    rq.Clear: VirtualBusDevice._clear,
    rq.SyncRead: VirtualBusDevice._sync_read,
    rq.BulkRead: VirtualBusDevice._bulk_read,
    rq.SyncWrite: VirtualBusDevice._sync_write,
    rq.BulkWrite: VirtualBusDevice._bulk_write,
}
