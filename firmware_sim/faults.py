"""Fault injection between the wire and the parts: bit flips, dropped replies, parts that vanish.

Seeded, so a failing run can be replayed. Bit flips hit both directions (a corrupted instruction makes the
addressed part answer with a CRC error, a corrupted reply makes the host's CRC check fail).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class FaultInjector:
    seed: int = 0
    bit_flip_rate: float = 0.0  # probability per bit, each direction
    drop_rate: float = 0.0  # probability per reply packet
    vanished: set[int] = field(default_factory=set)
    # what was injected, and out of how much (bits through corrupt(), replies through drop()), so a host's figures
    # (CRC errors, timeouts) can be checked against them: `hil sim` prints them at exit and in its clock's status
    counts: dict[str, int] = field(default_factory=lambda: {"bit_flips": 0, "dropped_replies": 0,
                                                            "corrupted_chunks": 0, "bits_seen": 0,
                                                            "replies_seen": 0})

    def __post_init__(self) -> None:
        for name, rate in (("bit_flip_rate", self.bit_flip_rate), ("drop_rate", self.drop_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name}={rate} is not a probability in [0, 1]")
        self._rng = random.Random(self.seed)

    def save_state(self) -> tuple:
        """The generator's state (a saved world: firmware_sim/embodied/state.py); the counts are not part of it."""
        return self._rng.getstate()

    def restore_state(self, state: tuple) -> None:
        """Put back what :meth:`save_state` gave."""
        self._rng.setstate(state)

    def corrupt(self, data: bytes) -> bytes:
        """Flip each bit of ``data`` with probability ``bit_flip_rate``."""
        if not self.bit_flip_rate or not data:
            return data
        n_bits = 8 * len(data)
        self.counts["bits_seen"] += n_bits
        flips = _binomial(self._rng, n_bits, self.bit_flip_rate)
        if not flips:
            return data
        out = bytearray(data)
        for bit in self._rng.sample(range(n_bits), flips):
            out[bit >> 3] ^= 1 << (bit & 7)
        self.counts["bit_flips"] += flips
        self.counts["corrupted_chunks"] += 1  # a read from the wire or one reply, with at least one flip
        return bytes(out)

    def drop(self) -> bool:
        if not self.drop_rate:
            return False
        self.counts["replies_seen"] += 1
        if self._rng.random() < self.drop_rate:
            self.counts["dropped_replies"] += 1
            return True
        return False

    def status(self) -> dict:
        """The rates, the seed and the counts, JSON-safe (the clock's ``status`` reply, a log)."""
        return {"seed": self.seed, "bit_flip_rate": self.bit_flip_rate, "drop_rate": self.drop_rate,
                "vanished": sorted(self.vanished), **self.counts}

    def summary(self) -> str:
        """One line of what was injected, for ``hil sim``'s exit."""
        c = self.counts
        return (f"faults injected (seed {self.seed}): {c['bit_flips']} bit flips in {c['corrupted_chunks']} "
                f"chunks of {c['bits_seen']} bits (rate {self.bit_flip_rate:g}), {c['dropped_replies']} of "
                f"{c['replies_seen']} replies dropped (rate {self.drop_rate:g})"
                + (f", parts vanished: {', '.join(map(str, sorted(self.vanished)))}" if self.vanished else ""))


def _binomial(rng: random.Random, n: int, p: float) -> int:
    if p * n < 20:  # few expected: count geometric gaps between successes
        count, position = 0, -1
        log_q = math.log1p(-p) if p < 1 else float("-inf")
        while True:
            if log_q == float("-inf"):
                return n
            position += 1 + int(math.log(1.0 - rng.random()) / log_q)
            if position >= n:
                return count
            count += 1
    return sum(rng.random() < p for _ in range(n))
