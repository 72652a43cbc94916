"""Fuzzing the streaming decoder with seeded random and mutated byte streams (plain ``random``: fast, replayable).

Properties: ``feed`` never raises and returns only Packet / FrameError; how the stream is chunked changes
nothing; every packet it returns carries a frame whose CRC checks; intact frames after garbage are recovered;
a flipped bit anywhere in a frame is never taken for a packet.
"""
from __future__ import annotations

import os
import random

import pytest

from hil.devices.protocol import (BROADCAST_ID, HEADER, CrcMismatch, FrameError, MalformedPacket, Packet, ProtocolError,
                              StreamDecoder, crc16, decode_frame, encode_fast_reply, encode_packet, encode_status,
                              unstuff)
from hil.devices.protocol.instructions import MAX_PACKET_BYTES, Instruction
from hil.devices.protocol.packets import HEADER_LEN

# streams per run: 20,000 in the suite; `make fuzz` sends 1,000,000 (FUZZ_DECODER_N)
N_STREAMS = int(os.environ.get("FUZZ_DECODER_N", "20000"))
# zeros never contain a header and complete any pending frame: after this much, the decoder holds nothing
FLUSH = bytes(MAX_PACKET_BYTES + HEADER_LEN)
INSTRUCTIONS = [int(i) for i in Instruction]


def random_payload(rng: random.Random, max_len: int = 24) -> bytes:
    n = rng.randint(0, max_len)
    if rng.random() < 0.4:  # header-like bytes: stuffing and false headers all the time
        return bytes(rng.choice((0xFF, 0xFD, 0x00)) for _ in range(n))
    return rng.randbytes(n)


def random_frame(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.5:
        return encode_packet(rng.randint(0, BROADCAST_ID), rng.choice(INSTRUCTIONS), random_payload(rng))
    if kind < 0.85:
        return encode_status(rng.randint(0, 252), rng.randint(0, 255), random_payload(rng))
    ids = rng.sample(range(253), rng.randint(1, 4))
    return encode_fast_reply([(rng.randint(0, 255), i, random_payload(rng, 6)) for i in ids])


def garbage(rng: random.Random, max_len: int = 40) -> bytes:
    n = rng.randint(0, max_len)
    roll = rng.random()
    if roll < 0.4:
        return rng.randbytes(n)
    if roll < 0.8:
        return bytes(rng.choice((0xFF, 0xFD, 0x00, 0x01, 0x55)) for _ in range(n))
    # a false header with a random (often plausible) length, then noise
    return HEADER + bytes((rng.randint(0, 255), rng.randint(0, 40), rng.choice((0, 0, 0, 1, 0x10, 0xFF)))) + \
        rng.randbytes(n)


def mutate(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        if op == 0 and out:  # flip bits
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(out))
                out[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert bytes
            i = rng.randint(0, len(out))
            out[i:i] = rng.randbytes(rng.randint(1, 4))
        elif op == 2 and out:  # delete bytes
            i = rng.randrange(len(out))
            del out[i:i + rng.randint(1, 4)]
        elif op == 3 and out:  # truncate
            del out[rng.randrange(len(out)):]
        elif op == 4 and out:  # overwrite with a header-ish byte
            out[rng.randrange(len(out))] = rng.choice((0xFF, 0xFD, 0x00))
    return bytes(out)


def random_stream(rng: random.Random) -> tuple[bytes, list[bytes], list[bytes]]:
    """A stream, the frames placed intact in it, and every frame it was made from (intact or mutated)."""
    parts: list[bytes] = []
    intact: list[bytes] = []
    sources: list[bytes] = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.25:
            parts.append(garbage(rng))
        elif roll < 0.7:
            frame = random_frame(rng)
            parts.append(mutate(rng, frame))
            sources.append(frame)
        else:
            frame = random_frame(rng)
            parts.append(frame)
            intact.append(frame)
            sources.append(frame)
    return b"".join(parts), intact, sources


def feed_in_chunks(rng: random.Random, decoder: StreamDecoder, stream: bytes) -> list:
    events = []
    i = 0
    while i < len(stream):
        n = rng.choice((1, 1, 2, 3, 5, 8, 13, 64))
        events += decoder.feed(stream[i:i + n])
        i += n
    return events


def signature(event) -> tuple:
    if isinstance(event, Packet):
        return ("packet", event.id, event.instruction, event.params, event.raw)
    return (type(event).__name__, str(event))


def check_packet(packet: Packet) -> None:
    raw = packet.raw
    assert raw[:4] == HEADER
    assert raw[4] == packet.id
    assert int.from_bytes(raw[5:7], "little") == len(raw) - HEADER_LEN
    assert crc16(raw[:-2]) == int.from_bytes(raw[-2:], "little")
    body = raw[HEADER_LEN:-2]
    if not (packet.id == BROADCAST_ID and packet.instruction == Instruction.STATUS):
        body = unstuff(body)
    assert body == bytes((packet.instruction,)) + packet.params


def test_random_and_mutated_streams_never_break_the_decoder():
    rng = random.Random(20240611)
    totals = {"packets": 0, "errors": 0, "intact": 0, "foreign": 0}
    sent: set[bytes] = set()  # every frame made so far: a long false frame can hold earlier ones back a while
    decoder_whole = StreamDecoder()
    decoder_chunked = StreamDecoder()
    for n in range(N_STREAMS):
        stream, intact, sources = random_stream(rng)
        sent.update(sources)
        # a long-lived pair of decoders sees every stream back to back, like a real port
        whole = decoder_whole.feed(stream)
        chunked = feed_in_chunks(rng, decoder_chunked, stream)
        assert [signature(e) for e in chunked] == [signature(e) for e in whole], f"stream {n}: {stream.hex()}"
        assert decoder_chunked.pending == decoder_whole.pending
        for event in whole:
            assert isinstance(event, (Packet, FrameError)), repr(event)
            if isinstance(event, Packet):
                check_packet(event)
                totals["packets"] += 1
                if event.raw in intact:
                    totals["intact"] += 1
                elif event.raw not in sent:  # neither sent intact nor surviving a mutation: a CRC collision
                    totals["foreign"] += 1
            else:
                totals["errors"] += 1
        if n % 1000 == 999:  # now and then, flush so the long-lived decoders cannot hide a pending frame forever
            for event in decoder_whole.feed(FLUSH) + feed_in_chunks(rng, decoder_chunked, FLUSH):
                assert isinstance(event, (Packet, FrameError))
                if isinstance(event, Packet):
                    check_packet(event)
            assert decoder_whole.pending == decoder_chunked.pending < 4
    assert decoder_whole.garbage_bytes == decoder_chunked.garbage_bytes
    # the fuzz really exercised both sides (measured: an intact packet per 3 streams, 4 errors per 5 streams)
    assert totals["intact"] > N_STREAMS // 10 and totals["errors"] > N_STREAMS // 10, totals
    # frames that passed a CRC without having been sent intact are CRC-16 collisions: about 1 in 65536 candidates
    assert totals["foreign"] <= totals["errors"] // 1000 + 5, totals


def test_decode_frame_raises_only_frame_errors():
    rng = random.Random(5)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(5000):
        frame = random_frame(rng)
        data = frame if rng.random() < 0.3 else mutate(rng, frame)
        try:
            packet = decode_frame(data)
        except FrameError:
            outcomes["error"] += 1
        else:
            check_packet(packet)
            outcomes["ok"] += 1
    assert outcomes["ok"] > 1000 and outcomes["error"] > 1000


def test_valid_frames_after_garbage_are_always_recovered():
    rng = random.Random(99)
    for case in range(3000):
        frames = [random_frame(rng) for _ in range(rng.randint(1, 3))]
        stream = bytearray()
        for frame in frames:
            stream += garbage(rng, 60)
            if rng.random() < 0.3:
                stream += mutate(rng, random_frame(rng))
            stream += frame
        decoder = StreamDecoder()
        events = feed_in_chunks(rng, decoder, bytes(stream))
        if decoder.pending:  # a false header may still wait for bytes that will never come; the line goes on
            events += decoder.feed(FLUSH)
        assert decoder.pending < 4
        got = [e.raw for e in events if isinstance(e, Packet)]
        # every intact frame comes out, in order (garbage may at most add CRC-colliding extras)
        it = iter(got)
        assert all(any(raw == frame for raw in it) for frame in frames), f"case {case}: {stream.hex()}"


def test_resync_after_an_impossible_length_and_a_bad_crc():
    good = encode_status(3, 0, b"\x01\x02")
    impossible = HEADER + b"\x01\x01\x00"  # length 1: shorter than instruction + CRC
    too_long = HEADER + b"\x01\xff\xff"
    bad_crc = bytearray(encode_status(4, 0, b"\x09"))
    bad_crc[-1] ^= 0x01
    events = StreamDecoder().feed(impossible + too_long + bytes(bad_crc) + good)
    kinds = [type(e) for e in events]
    assert kinds == [MalformedPacket, MalformedPacket, CrcMismatch, Packet]
    assert events[-1].raw == good
    assert events[2].packet_id == 4


def frames_for_bit_flips() -> list[bytes]:
    rng = random.Random(3)
    frames = [encode_packet(1, Instruction.PING), encode_packet(1, Instruction.READ, b"\x84\x00\x04\x00"),
              encode_packet(7, Instruction.WRITE, b"\x74\x00\xff\xff\xfd\x00"), encode_status(2, 0, b"\x00\x08\x00\x00"),
              encode_fast_reply([(0, 1, b"\x01\x02\x03\x04"), (0x80, 2, b"\xff\xff\xfd\x00")])]
    frames += [random_frame(rng) for _ in range(50)]
    return frames


def assert_caught(events: list) -> None:
    """The frame was rejected by its CRC; what follows (a fast reply's data may hold a header) is rejected too."""
    assert events and isinstance(events[0], CrcMismatch), events
    assert all(isinstance(e, FrameError) for e in events), events


@pytest.mark.parametrize("frame", frames_for_bit_flips(), ids=lambda f: f.hex()[:24])
def test_every_single_bit_flip_is_caught(frame):
    decoder = StreamDecoder()
    for bit in range(8 * len(frame)):
        corrupted = bytearray(frame)
        corrupted[bit >> 3] ^= 1 << (bit & 7)
        events = decoder.feed(bytes(corrupted))
        if decoder.pending:
            events += decoder.feed(FLUSH)
        assert not [e for e in events if isinstance(e, Packet)], f"bit {bit} of {frame.hex()} went undetected"
        if bit >= 8 * HEADER_LEN:  # past the length field the frame's boundaries are intact: the CRC says no
            assert_caught(events)
        # and the very next intact frame is decoded exactly
        recovered = decoder.feed(frame)
        assert [signature(e) for e in recovered] == [signature(decode_frame(frame))]


def test_bursts_and_double_bit_errors_in_the_body_are_caught():
    """CRC-16 (0x8005) detects every burst up to 16 bits and every 2-bit error in frames this short."""
    rng = random.Random(11)
    for frame in frames_for_bit_flips():
        first, n_bits = 8 * HEADER_LEN, 8 * len(frame)
        for _ in range(60):
            width = rng.randint(2, 16)
            start = rng.randint(first, n_bits - width)
            pattern = 1 | (1 << (width - 1)) | rng.getrandbits(width)  # first and last bit of the burst flipped
            corrupted = int.from_bytes(frame, "little") ^ ((pattern & ((1 << width) - 1)) << start)
            decoder = StreamDecoder()
            events = decoder.feed(corrupted.to_bytes(len(frame), "little")) + decoder.feed(FLUSH)
            assert_caught(events)
    frame = encode_packet(1, Instruction.READ, b"\x84\x00\x04\x00")
    value = int.from_bytes(frame, "little")
    for a in range(8 * HEADER_LEN, 8 * len(frame)):
        for b in range(a + 1, 8 * len(frame)):
            events = StreamDecoder().feed((value ^ (1 << a) ^ (1 << b)).to_bytes(len(frame), "little"))
            assert [type(e) for e in events] == [CrcMismatch]


def test_feed_never_raises_on_pathological_inputs():
    cases = [b"", HEADER, HEADER * 50, b"\xff" * 1000, HEADER + b"\x01\x03\x00", HEADER + b"\x01" + b"\x00\x10",
             HEADER + b"\x01\x01\x10" + bytes(4097), (HEADER + b"\xfe\x03\x00\x55") * 20]
    for data in cases:
        decoder = StreamDecoder()
        for event in decoder.feed(data) + decoder.feed(FLUSH):
            assert isinstance(event, (Packet, ProtocolError))
        assert decoder.pending < 4
