"""CPU time of a live process from /proc, for benchmarks that account for processes they did not start."""
from __future__ import annotations


def process_jiffies(pid: int) -> int:
    """User + system CPU time of process ``pid`` so far, in clock ticks (``os.sysconf("SC_CLK_TCK")`` a second).
    Raises OSError when the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces and ")"
    return int(fields[11]) + int(fields[12])
