"""The bus host controller: transactions with timeouts and bounded retries, group operations, statistics.

Every method sends one instruction and waits for exactly the replies the protocol promises (none for
broadcasts and group writes, one per ID for reads, one combined frame for the fast reads). A reply that fails
the CRC, has the wrong ID or the wrong length, or does not come in time is retried up to ``retries`` times;
then the call raises :class:`BusTimeout` or :class:`CorruptReply` naming the IDs. A device error code is
raised at once as the protocol's typed :class:`StatusError` (except a device-side CRC error, which is retried).
A value is returned only from a reply that passed every check.
"""
from __future__ import annotations

from time import perf_counter as wall_clock  # wall time even under runtime.clock.patch
from typing import Iterable, Mapping

from hil.devices.control_table import Register
from hil.devices.protocol import (
    BROADCAST_ID,
    CLEAR_KEY,
    CLEAR_MULTI_TURN,
    CrcMismatch,
    DeviceCrcError,
    FrameError,
    MalformedPacket,
    StatusError,
    StreamDecoder,
    encode_request,
    encode_sync_write,
    fast_reply_prefix,
    parse_fast_reply,
    status_error,
)
from hil.devices.protocol import requests as rq

from hil.devices.protocol.packets import HEADER_LEN

from ..transports.base import Transport
from .errors import BusError, BusTimeout, CorruptReply
from .stats import BusStats

PING_DATA_LEN = 3  # model number (2) + firmware version (1)
STATUS_OVERHEAD = 11  # header 4, id, length 2, instruction, error, CRC 2
ALERT = 0x80


class _Silence(Exception):
    """``missing``: the IDs without a slot; ``cut_short``: a fast reply that never completed (a real bus's chain
    stops at the first silent part, so the IDs after it are unknown, not known silent)."""

    def __init__(self, missing: tuple[int, ...], cut_short: bool = False):
        self.missing, self.cut_short = missing, cut_short


class _Corrupt(Exception):
    pass


class BusHost:
    """Host side of one bus. Not thread-safe: one controller loop owns it."""

    def __init__(self, transport: Transport, *, timeout_s: float = 0.025, retries: int = 3,
                 stats: BusStats | None = None):
        self.transport = transport
        self.timeout_s = timeout_s
        self.retries = retries
        self.stats = stats or BusStats()
        self.return_levels: dict[int, int] = {}  # status return level per ID, 2 unless told otherwise
        self._decoder = StreamDecoder()
        self._dirty = False
        self._frames: dict[rq.Request, bytes] = {}  # encoded read requests, reused every cycle
        self._bulk_reads: dict[tuple, rq.BulkRead] = {}  # validated bulk read requests by (items, fast)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "BusHost":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # single-device instructions
    def ping(self, device_id: int) -> tuple[int, int]:
        """(model number, firmware version) of one device."""
        data = self._one(rq.Ping(device_id), PING_DATA_LEN, level=0)
        return int.from_bytes(data[:2], "little"), data[2]

    def read(self, device_id: int, address: int, length: int) -> bytes:
        return self._one(rq.Read(device_id, address, length), length, level=1, cache=True)

    def write(self, device_id: int, address: int, data: bytes) -> None:
        self._one(rq.Write(device_id, address, bytes(data)), 0)

    def reg_write(self, device_id: int, address: int, data: bytes) -> None:
        self._one(rq.RegWrite(device_id, address, bytes(data)), 0)

    def action(self, device_id: int = BROADCAST_ID) -> None:
        self._one(rq.Action(device_id), 0)

    def reboot(self, device_id: int) -> None:
        self._one(rq.Reboot(device_id), 0)

    def factory_reset(self, device_id: int, option: int) -> None:
        self._one(rq.FactoryReset(device_id, option), 0)

    def clear(self, device_id: int, option: int = CLEAR_MULTI_TURN) -> None:
        self._one(rq.Clear(device_id, option, CLEAR_KEY), 0)

    # typed register access
    def read_register(self, device_id: int, register: Register) -> int:
        return register.decode(self.read(device_id, register.address, register.size))

    def write_register(self, device_id: int, register: Register, value: int) -> None:
        self.write(device_id, register.address, register.encode(value))

    # group instructions
    def sync_write(self, address: int, length: int, data_by_id: Mapping[int, bytes]) -> None:
        # the control loop's write every cycle: encoded by one compiled struct, no request object (no reply to
        # describe: a SyncWrite is never answered)
        self._send_only(encode_sync_write(address, length, tuple(data_by_id.items())))

    def sync_read(self, address: int, length: int, ids: Iterable[int], fast: bool = False) -> dict[int, bytes]:
        ids = tuple(ids)
        request = rq.SyncRead(address, length, ids, fast=fast)
        slots = tuple((i, length) for i in ids if self._answers(i, 1))
        return self._transact(request, slots, fast=fast, cache=True)

    def bulk_write(self, items: Iterable[tuple[int, int, bytes]]) -> None:
        self._transact(rq.BulkWrite(tuple((i, a, bytes(d)) for i, a, d in items)), ())

    def bulk_read(self, items: Iterable[tuple[int, int, int]], fast: bool = False) -> dict[int, bytes]:
        items = tuple(items)
        request = self._bulk_reads.get((items, fast))
        if request is None:  # checked and built once per item list: the control loop reads the same one each cycle
            ids = [i for i, _, _ in items]
            if len(set(ids)) != len(ids):
                raise ValueError(f"bulk read lists an ID twice: {ids}")
            if len(self._bulk_reads) > 64:
                self._bulk_reads.clear()
            request = self._bulk_reads[(items, fast)] = rq.BulkRead(items, fast=fast)
        slots = tuple((i, n) for i, _, n in items if self._answers(i, 1))
        return self._transact(request, slots, fast=fast, cache=True)

    def sync_write_register(self, register: Register, values: Mapping[int, int]) -> None:
        self.sync_write(register.address, register.size, {i: register.encode(v) for i, v in values.items()})

    def sync_read_register(self, register: Register, ids: Iterable[int], fast: bool = True) -> dict[int, int]:
        raw = self.sync_read(register.address, register.size, ids, fast=fast)
        return {i: register.decode(d) for i, d in raw.items()}

    def ping_all(self, expected_ids: Iterable[int] | None = None, quiet_s: float = 0.02,
                 max_wait_s: float = 1.0) -> dict[int, tuple[int, int]]:
        """Broadcast ping: {id: (model number, firmware version)} of every device that answers."""
        return {i: (model, fw) for i, model, fw in sorted(self.ping_replies(expected_ids, quiet_s, max_wait_s))}

    def ping_replies(self, expected_ids: Iterable[int] | None = None, quiet_s: float = 0.02,
                     max_wait_s: float = 1.0) -> list[tuple[int, int, int]]:
        """Broadcast ping: every (id, model number, firmware version) answer in arrival order, duplicates kept.

        Ends as soon as it can know it is done: every expected ID answered, the transport knows nothing more
        can come (in-process), or the line stayed quiet for ``quiet_s`` after the last answer.
        """
        expected = set(expected_ids) if expected_ids is not None else None
        quiet_s += self.transport.peer_latency_s  # a process peer may pause between two answers, too
        self._prepare()
        frame = encode_request(rq.Ping(BROADCAST_ID))
        start = wall_clock()
        self._send(frame)
        replies: list[tuple[int, int, int]] = []
        deadline = start + max(max_wait_s, quiet_s)
        quiet_until = start + max(quiet_s, self.timeout_s + self.transport.peer_latency_s)
        while not (expected is not None and expected <= {r[0] for r in replies}):
            # as in _collect: what has arrived is read before the time is called up (a host held up between its
            # write and its first read must not miss answers that came in time); the deadline only bounds a flood
            now = wall_clock()
            end = min(deadline, quiet_until)
            data = self.transport.read(4096, max(end - now, 0.0)) if now < deadline + quiet_s else b""
            if not data:
                if now >= end or self.transport.idle:
                    break
                continue
            self.stats.bytes_rx += len(data)
            quiet_until = wall_clock() + quiet_s
            for event in self._decoder.feed(data):
                if isinstance(event, FrameError) or not event.is_status or len(event.data) != PING_DATA_LEN:
                    self._count_bad(event)
                    continue
                replies.append((event.id, int.from_bytes(event.data[:2], "little"), event.data[2]))
        self.stats.transactions += 1
        self.stats.latencies_s.append(wall_clock() - start)
        self._dirty = self._decoder.pending > 0
        return replies

    def read_status(self, device_id: int, address: int, length: int) -> tuple[int, bytes]:
        """(error byte, data) of a read, without raising on a device error code (for probing)."""
        reply = self._transact(rq.Read(device_id, address, length), ((device_id, length),), check=False)
        return reply[device_id]

    def bulk_read_status(self, items: Iterable[tuple[int, int, int]], fast: bool = True) -> dict[int, tuple[int, bytes]]:
        """{id: (error byte, data)} of a bulk read, without raising on device error codes (for probing)."""
        items = tuple(items)
        slots = tuple((i, n) for i, _, n in items if self._answers(i, 1))
        return self._transact(rq.BulkRead(items, fast=fast), slots, fast=fast, check=False)

    # machinery
    def _answers(self, device_id: int, level: int) -> bool:
        return device_id != BROADCAST_ID and self.return_levels.get(device_id, 2) >= level

    def _one(self, request: rq.Request, data_len: int, level: int = 2, cache: bool = False) -> bytes:
        if not self._answers(request.id, level):
            self._transact(request, ())
            return b""
        return self._transact(request, ((request.id, data_len),), cache=cache)[request.id]

    def _frame(self, request: rq.Request, cache: bool) -> bytes:
        if not cache:
            return encode_request(request)
        frame = self._frames.get(request)
        if frame is None:
            if len(self._frames) > 256:
                self._frames.clear()
            frame = self._frames[request] = encode_request(request)
        return frame

    def _prepare(self) -> None:
        if self._dirty:
            self.transport.discard_input()
            self._decoder.reset()
            self._dirty = False

    def _send(self, frame: bytes) -> None:
        self.transport.write(frame)
        self.stats.bytes_tx += len(frame)

    def _send_only(self, frame: bytes) -> None:
        """A transaction nobody answers (what _transact does without reply slots)."""
        self._prepare()
        self._send(frame)
        self.stats.transactions += 1

    def _timeout(self, frame_len: int, slots: tuple[tuple[int, int], ...]) -> float:
        timeout = self.timeout_s + self.transport.peer_latency_s
        baud = self.transport.baud
        if not baud:
            return timeout
        reply_bytes = sum(n + STATUS_OVERHEAD for _, n in slots)
        return timeout + 10.0 * (frame_len + reply_bytes) / baud

    def _transact(self, request: rq.Request, slots: tuple[tuple[int, int], ...], fast: bool = False,
                  cache: bool = False, check: bool = True) -> dict:
        frame = self._frame(request, cache)
        timeout = self._timeout(len(frame), slots)
        stats = self.stats
        failure: Exception | None = None
        silence: _Silence | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                stats.retries += 1
            self._prepare()
            start = wall_clock()
            self._send(frame)
            if not slots:
                stats.transactions += 1
                return {}
            try:
                replies = self._collect(slots, fast, start + timeout)
                result = self._check_errors(request, replies) if check else self._check_crc_only(replies)
            except _Silence as exc:
                stats.timeouts += 1
                silence = exc
                failure = BusTimeout(self._describe(request, f"no answer from id {_ids(exc.missing)} "
                                                             f"within {1000 * timeout:.1f} ms"), exc.missing)
            except _Corrupt as exc:
                silence = None
                failure = CorruptReply(self._describe(request, str(exc)))
            else:
                stats.transactions += 1
                stats.latencies_s.append(wall_clock() - start)
                if self._decoder.pending:
                    self._dirty = True
                return result
            self._dirty = True
        stats.transactions += 1
        stats.failures += 1
        assert failure is not None
        if silence is not None and silence.cut_short and len(silence.missing) > 1:
            silent = self._chain_fallback(request, silence.missing, check)
            failure = BusTimeout(self._describe(request, f"no answer from id {_ids(silent)} (the reply stopped at "
                                                         f"id {silent[0]}; the parts after it read one by one)"),
                                 silent)
        failure.args = (f"{failure.args[0]} (after {self.retries} retries)",)
        raise failure

    def _chain_fallback(self, request: rq.Request, missing: tuple[int, ...], check: bool) -> tuple[int, ...]:
        """The IDs of a cut-short fast read that are really silent. On a real bus the chained reply stops at the
        first silent part (``missing[0]``, in the order asked): the parts after it never got their turn, so each
        is read on its own (a Read with the host's retries); those that answer are not silent, so one part
        unplugged does not make every part after it in the read miss a cycle."""
        stats = self.stats
        stats.chain_fallbacks += 1
        transactions, failures = stats.transactions, stats.failures  # the part reads are attempts of this call
        where = ({i: (request.address, request.length) for i in request.ids} if isinstance(request, rq.SyncRead)
                 else {i: (a, n) for i, a, n in request.items})
        silent = [missing[0]]
        for device_id in missing[1:]:
            address, length = where[device_id]
            try:
                self._transact(rq.Read(device_id, address, length), ((device_id, length),), check=check, cache=True)
            except (BusTimeout, CorruptReply):
                silent.append(device_id)
            except StatusError:
                pass  # a device error code: it answered
        stats.retries += stats.failures - failures  # a part read that failed: one more failed attempt of this call
        stats.transactions, stats.failures = transactions, failures
        return tuple(silent)

    def _collect(self, slots: tuple[tuple[int, int], ...], fast: bool, deadline: float) -> dict[int, tuple[int, bytes]]:
        lengths = dict(slots)
        got: dict[int, tuple[int, bytes]] = {}
        transport, decoder, stats = self.transport, self._decoder, self.stats
        rx_before = stats.bytes_rx
        while True:
            # what has arrived is always read, even past the deadline: a host that was itself held up (a loaded
            # machine, a GUI frame) must not call a reply that came in time a silence; an in-process device on
            # the sim clock answers at once or never, so it can never time out on the wall clock
            remaining = deadline - wall_clock()
            data = transport.read(4096, max(remaining, 0.0))
            if not data:
                if remaining <= 0 or transport.idle:
                    if fast:
                        raise self._fast_silence(lengths, stats.bytes_rx > rx_before)
                    raise _Silence(tuple(i for i in lengths if i not in got))
                continue
            stats.bytes_rx += len(data)
            for event in decoder.feed(data):
                if isinstance(event, FrameError) or not event.is_status:
                    self._count_bad(event)
                    if isinstance(event, FrameError):
                        raise _Corrupt(f"corrupted reply: {event}")
                    continue
                if fast:
                    return self._fast_slots(event, lengths)
                expected_len = lengths.get(event.id)
                if expected_len is None or event.id in got or not event.params:
                    stats.malformed += 1  # a stray or repeated answer: not ours, ignore it
                    continue
                error, payload = event.params[0], event.params[1:]
                if not error & 0x7F and len(payload) != expected_len:
                    stats.malformed += 1
                    raise _Corrupt(f"id {event.id} answered {len(payload)} bytes, {expected_len} were asked")
                got[event.id] = (error, payload)
                if len(got) == len(lengths):
                    return got

    def _fast_silence(self, lengths: dict[int, int], heard: bool) -> _Silence:
        """No whole fast reply by the deadline. A chain cut short at a silent part looks like this: nothing at all
        (the first part asked is silent), or a frame announcing every asked slot whose bytes end right after the
        last intact slot (running CRCs). Anything else (a garbled length field, stray bytes) is noise: every ID
        stays missing, as before."""
        all_ids = tuple(lengths)
        partial = self._decoder.partial_frame()
        if not partial:
            return _Silence(all_ids, cut_short=not heard)
        came = fast_reply_prefix(partial, lengths)
        announced = 1 + sum(4 + n for n in lengths.values())
        filled = HEADER_LEN + 1 + sum(4 + len(data) for _, _, data in came)
        if not came or partial[5] | (partial[6] << 8) != announced or len(partial) != filled:
            return _Silence(all_ids)
        ids = {i for _, i, _ in came}
        return _Silence(tuple(i for i in lengths if i not in ids), cut_short=True)

    def _fast_slots(self, packet, lengths: dict[int, int]) -> dict[int, tuple[int, bytes]]:
        try:
            slots = parse_fast_reply(packet, lengths)
        except MalformedPacket as exc:
            self.stats.malformed += 1
            raise _Corrupt(f"fast reply: {exc}") from None
        got = {device_id: (error, data) for error, device_id, data in slots}
        missing = tuple(i for i in lengths if i not in got)
        if missing:
            raise _Silence(missing)
        return got

    def _check_errors(self, request: rq.Request, replies: dict[int, tuple[int, bytes]]) -> dict[int, bytes]:
        out = {}
        for device_id, (error, data) in replies.items():
            if error:
                code = error & 0x7F
                if code == DeviceCrcError.code:
                    self.stats.device_crc_errors += 1
                    raise _Corrupt(f"id {device_id} received a corrupted instruction")
                if code:
                    self.stats.status_errors += 1
                    self.stats.transactions += 1
                    raise status_error(device_id, error, self._describe(request, "", bare=True))
                self.stats.alerts += 1
            out[device_id] = data
        return out

    def _check_crc_only(self, replies: dict[int, tuple[int, bytes]]) -> dict[int, tuple[int, bytes]]:
        for device_id, (error, _) in replies.items():
            if error & 0x7F == DeviceCrcError.code:
                self.stats.device_crc_errors += 1
                raise _Corrupt(f"id {device_id} received a corrupted instruction")
        return replies

    def _count_bad(self, event) -> None:
        if isinstance(event, CrcMismatch):
            self.stats.crc_errors += 1
        else:
            self.stats.malformed += 1

    def _describe(self, request: rq.Request, what: str, bare: bool = False) -> str:
        name = type(request).__name__
        if isinstance(request, rq.SyncRead) and request.fast:
            name = "FastSyncRead"
        elif isinstance(request, rq.BulkRead) and request.fast:
            name = "FastBulkRead"
        address = getattr(request, "address", None)
        detail = f"{name} id {request.id if request.id != BROADCAST_ID else 'broadcast'}"
        if address is not None:
            detail += f" address {address}"
        if bare:
            return f"{detail} on {self.transport.url}"
        return f"{self.transport.url}: {detail}: {what}"


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(str(i) for i in ids) if ids else "?"


__all__ = ["BusHost", "BusError", "BusTimeout", "CorruptReply"]
