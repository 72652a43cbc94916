"""Wire-timing emulation: what a real half-duplex bus and USB adapter add to every transaction.

Three effects, each switchable: the time the bytes take on the wire at the baud rate (10 bits per byte: start,
8 data, stop), the part's return delay time (its control table, 2 us units), and the adapter's latency (an FTDI
latency timer holds received bytes up to 1..16 ms before the host sees them). The device computes when each
reply would reach the host; transports release it then.
"""
from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter, sleep  # the originals: a patched time module must not reach the device

BITS_PER_BYTE = 10
MIN_BAUD, MAX_BAUD = 9600, 10_500_000  # the Dynamixel X series' range (9600 bps .. 10.5 Mbps)
MAX_LATENCY_MS = 1000.0  # an FTDI latency timer goes to 255 ms; a second is already no adapter


@dataclass
class WireTiming:
    baud: int = 1_000_000
    wire: bool = True
    return_delay: bool = True
    adapter_latency_s: float = 0.0

    def byte_time_s(self) -> float:
        return BITS_PER_BYTE / self.baud if self.wire else 0.0

    def wire_time_s(self, n_bytes: int) -> float:
        return n_bytes * BITS_PER_BYTE / self.baud if self.wire else 0.0

    @classmethod
    def parse(cls, baud: int | None, latency_ms: float | None = None, wire: bool = True,
              return_delay: bool = True) -> "WireTiming | None":
        """The timing asked for on a command line or URL; None when nothing is emulated. Out-of-range values are
        a ValueError naming the bound (a latency of 1e9 ms would queue every reply for ever)."""
        if baud is not None and not MIN_BAUD <= baud <= MAX_BAUD:
            raise ValueError(f"baud {baud} is outside MIN_BAUD..MAX_BAUD = {MIN_BAUD}..{MAX_BAUD}")
        if latency_ms is not None and not 0.0 <= latency_ms <= MAX_LATENCY_MS:  # also NaN
            raise ValueError(f"latency {latency_ms} ms is outside 0..MAX_LATENCY_MS={MAX_LATENCY_MS:g} ms")
        if baud is None and not latency_ms:
            return None
        return cls(baud=baud or 1_000_000, wire=wire and baud is not None, return_delay=return_delay,
                   adapter_latency_s=(latency_ms or 0.0) / 1000.0)


def wire_time_s(n_bytes: int, baud: int) -> float:
    """Physical limit: how long ``n_bytes`` take on a UART at ``baud`` (8N1)."""
    return n_bytes * BITS_PER_BYTE / baud


def sleep_until(deadline: float, clock=perf_counter) -> None:
    """Sleep to ``deadline`` with sub-100 us accuracy: coarse sleep, then a short spin."""
    remaining = deadline - clock()
    if remaining > 0.0012:
        sleep(remaining - 0.001)
    while clock() < deadline:
        pass
