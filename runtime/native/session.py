"""``hil run --native``: a native program on the bus and the clock a profile describes.

The program opens its bus itself, as it would a real one: a bus the profile reaches by path or URL (a serial
adapter, the pty of ``hil sim --pty``, ``socket://``) is handed over as it is; an in-process virtual device
(``sim://...``) is served on a new pty. Where to connect is in the program's environment (``HIL_BUS``, and
``HIL_BUS_<NAME>`` per bus of a ``buses:`` profile; ``HIL_BUS_BAUD`` when the URL gives one) and replaces
``{bus}`` / ``{bus:NAME}`` in its arguments. On ``clock: real`` the program runs untouched; on ``clock: sim`` it
runs under the time shim, a participant of the profile's lockstep clock (the in-process world's, or
``clock_endpoint``'s).
"""
from __future__ import annotations

import os
import re
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence
from urllib.parse import parse_qs, urlsplit

from ..robot.buses import MAIN_BUS
from ..robot.profile import Profile, load_profile
from .launch import NativeRun, launch

PLACEHOLDER = re.compile(r"\{bus(?::([A-Za-z0-9_\-]+))?\}")


@dataclass
class ProgramBus:
    """One bus of the profile as the program sees it."""

    name: str
    url: str           # as the profile (or --bus) gives it
    address: str       # what the program opens: a device path, a pty path, socket://host:port
    baud: int | None = None
    served: object | None = None  # the pty server of an in-process device (QuietPty under the sim clock)
    transport: object | None = None

    def env_name(self) -> str:
        return "HIL_BUS" if self.name == MAIN_BUS else "HIL_BUS_" + re.sub(r"[^A-Za-z0-9]", "_", self.name).upper()


def run_native(argv: Sequence[str], profile: str | Path | Profile, *, bus: str | None = None,
               duration_s: float | None = None, stdout: IO | int | None = None, stderr: IO | int | None = None,
               epoch_ns: int | None = None) -> NativeRun:
    """Serve the profile's buses for the program, open its clock, run the program to its end, close everything."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile, bus=bus)
    if duration_s is not None and not duration_s >= 0:
        raise ValueError(f"--duration must be >= 0 s, not {duration_s}")
    name = Path(str(argv[0])).name if argv else "native"
    with ExitStack() as undo:
        buses = [_program_bus(spec_name, url, prof.clock, undo) for spec_name, url in _bus_urls(prof)]
        main = buses[0]
        clock = _open_clock(prof, main.transport, name)
        undo.callback(clock.close)
        quiet = [b.served for b in buses if hasattr(b.served, "wait_quiet")]
        every_bus_served = len(quiet) == len(buses)
        return launch(_substitute(argv, buses), clock, env=_env(buses), duration_s=duration_s,
                      quiet=(lambda: [q.wait_quiet() for q in quiet]) if quiet else None,
                      after_wake=(lambda: [q.flush_due() for q in quiet]) if quiet else None,
                      endpoint=_endpoint_name(prof, main), epoch_ns=epoch_ns,
                      io_grace_ms=0 if every_bus_served else None, stdout=stdout, stderr=stderr,
                      buses=[b.address if b.address == b.url else f"{b.address} ({b.url})" for b in buses])


def _bus_urls(prof: Profile) -> list[tuple[str, str]]:
    if prof.buses:
        return [(spec.name, url) for spec, url in prof.bus_urls()]
    return [(MAIN_BUS, prof.bus_url())]


def _program_bus(name: str, url: str, clock: str, undo: ExitStack) -> ProgramBus:
    if url.startswith("sim://"):
        from ..transports import open_transport

        transport = open_transport(url)
        undo.callback(transport.close)
        served = _serve(transport.device, clock)
        undo.callback(served.close)
        return ProgramBus(name, url, served.path, served=served, transport=transport)
    if url.startswith("serial://"):
        parts = urlsplit(url)
        baud = parse_qs(parts.query).get("baud")
        return ProgramBus(name, url, parts.netloc + parts.path, int(baud[-1]) if baud else None)
    return ProgramBus(name, url, url)


def _serve(device, clock: str):
    """The in-process device on a pty: settling before every sleep under the sim clock, paced to wall time (the
    world keeps moving while the program is silent) under the real one."""
    if clock == "sim":
        from hil.firmware_sim.quiet_pty import QuietPty

        return QuietPty(device)
    return _PacedPty(device)


class _PacedPty:
    """``hil sim --pty``'s serving loop (firmware_sim.serve.serve_fd) in a thread of this process."""

    def __init__(self, device):
        from hil.firmware_sim.serve import PtyEndpoint, serve_fd

        self.endpoint = PtyEndpoint()
        self.path = self.endpoint.path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=serve_fd, args=(device, self.endpoint.master_fd, self._stop),
                                        kwargs={"on_closed": lambda: True}, name=f"pty {self.path}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.endpoint.close()


def _open_clock(prof: Profile, transport, name: str):
    from ..clock import open_clock
    from ..robot.profile import profile_security

    kwargs = {"stall_timeout_s": prof.stall_timeout_s} if prof.stall_timeout_s else {}
    security = profile_security(prof) if prof.clock_endpoint else None
    return open_clock(prof.clock, transport=transport, endpoint=prof.clock_endpoint, name=name, security=security,
                      **kwargs)


def _endpoint_name(prof: Profile, main: ProgramBus) -> str:
    if prof.clock_endpoint:
        return prof.clock_endpoint
    return f"the in-process world of {main.url} in hil (pid {os.getpid()})"


def _env(buses: list[ProgramBus]) -> dict[str, str]:
    env = {"HIL_BUS_URL": buses[0].url}
    for b in buses:
        env[b.env_name()] = b.address
        if b.baud is not None:
            env[b.env_name() + "_BAUD"] = str(b.baud)
    return env


def _substitute(argv: Sequence[str], buses: list[ProgramBus]) -> list[str]:
    """``{bus}`` is the main bus's address, ``{bus:NAME}`` a named bus's; an unknown name is an error."""
    by_name = {b.name: b.address for b in buses}

    def replace(match: re.Match) -> str:
        key = match.group(1) or buses[0].name
        if key not in by_name:
            raise ValueError(f"hil run --native: {match.group(0)} in the program's arguments: no bus named {key!r} "
                             f"(buses: {', '.join(by_name)})")
        return by_name[key]

    return [PLACEHOLDER.sub(replace, str(arg)) for arg in argv]
