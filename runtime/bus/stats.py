"""Per-bus statistics: what the host controller did, what failed, and how long transactions took."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

LATENCY_WINDOW = 4096  # most recent transactions kept for percentiles


@dataclass
class BusStats:
    transactions: int = 0
    retries: int = 0
    crc_errors: int = 0  # replies that failed our CRC check
    device_crc_errors: int = 0  # instructions the device reported as corrupted
    timeouts: int = 0  # attempts that ended in silence (or an incomplete reply)
    malformed: int = 0  # replies with a valid CRC but the wrong shape or ID
    status_errors: int = 0  # device error codes other than CRC, raised to the caller
    alerts: int = 0  # replies with the hardware alert bit
    failures: int = 0  # transactions that raised after all retries
    chain_fallbacks: int = 0  # fast reads cut short at a silent part whose rest was read part by part (those
    # reads are attempts of the fast read's one transaction: their failures count as its retries)
    bytes_tx: int = 0
    bytes_rx: int = 0
    latencies_s: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW), repr=False)

    def latency_percentile_s(self, q: float) -> float:
        """The q-th percentile (0..100) of the kept latencies, interpolated linearly between the two nearest
        ranks (numpy's default): p50 of [1, 3] is 2, p99 of 1..100 is 99.01; NaN with none kept."""
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        rank = min(max(q, 0.0), 100.0) / 100.0 * (len(ordered) - 1)
        low = int(rank)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)

    def counters(self) -> dict[str, int]:
        """The counters alone (no latencies), e.g. for a saved state."""
        return {k: v for k, v in self.__dict__.items() if k != "latencies_s"}

    def restore_counters(self, counters: dict[str, int]) -> None:
        """Go on counting from ``counters`` (a saved state's); the latencies start afresh."""
        for key, value in counters.items():
            if key in self.__dataclass_fields__ and key != "latencies_s":  # a counter this version no longer has:
                setattr(self, key, value)  # nothing to go on from
        self.latencies_s.clear()

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "latencies_s"}
        for q in (50, 99):
            out[f"latency_p{q}_ms"] = round(1000 * self.latency_percentile_s(q), 4)
        out["latency_max_ms"] = round(1000 * max(self.latencies_s, default=float("nan")), 4)
        return out

    def summary(self) -> str:
        d = self.as_dict()
        return (f"{d['transactions']} transactions, {d['retries']} retries, {d['crc_errors']} CRC errors, "
                f"{d['timeouts']} timeouts, {d['malformed']} malformed, {d['status_errors']} device errors, "
                f"{d['failures']} failed; latency p50 {d['latency_p50_ms']:.3f} ms, p99 {d['latency_p99_ms']:.3f} ms, "
                f"max {d['latency_max_ms']:.3f} ms; {d['bytes_tx']} B out, {d['bytes_rx']} B in")
