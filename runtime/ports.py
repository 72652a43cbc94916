"""``hil ports``: the serial adapters on this machine, their USB identity, and latency-timer warnings.

An FTDI adapter holds received bytes for its latency timer (16 ms by default) before the host sees them,
which caps a request/reply bus at a few dozen transactions per second. Linux exposes the timer in sysfs;
anything above 1 ms gets a warning with the command that fixes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

FTDI_VID = 0x0403
MAX_GOOD_LATENCY_MS = 1


@dataclass(frozen=True)
class SerialAdapter:
    device: str
    description: str
    vid: int | None
    pid: int | None
    serial_number: str | None
    manufacturer: str | None
    product: str | None
    location: str | None
    latency_timer_ms: int | None

    @property
    def warnings(self) -> list[str]:
        if self.latency_timer_ms is not None and self.latency_timer_ms > MAX_GOOD_LATENCY_MS:
            name = Path(self.device).name
            return [f"latency timer is {self.latency_timer_ms} ms (> {MAX_GOOD_LATENCY_MS} ms): every reply waits "
                    f"for it. Fix: echo 1 | sudo tee /sys/bus/usb-serial/devices/{name}/latency_timer"]
        return []


def read_latency_timer(device: str, sysfs_root: Path = Path("/sys")) -> int | None:
    path = sysfs_root / "bus" / "usb-serial" / "devices" / Path(device).name / "latency_timer"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _default_lister() -> Iterable:
    from serial.tools import list_ports

    return list_ports.comports()


def list_adapters(lister: Callable[[], Iterable] = _default_lister,
                  sysfs_root: Path = Path("/sys")) -> list[SerialAdapter]:
    """Every serial port pyserial sees, with the latency timer where the kernel exposes it."""
    adapters = []
    for port in lister():
        adapters.append(SerialAdapter(
            device=port.device, description=port.description, vid=port.vid, pid=port.pid,
            serial_number=port.serial_number, manufacturer=port.manufacturer, product=port.product,
            location=port.location, latency_timer_ms=read_latency_timer(port.device, sysfs_root)))
    return sorted(adapters, key=lambda a: a.device)


def usb_identity(vid: int, pid: int) -> dict | None:
    """bcdDevice, bus and address of the matching USB device via pyusb; None without a libusb backend."""
    try:
        import usb.core

        found = usb.core.find(idVendor=vid, idProduct=pid)
    except Exception:  # pyusb raises NoBackendError (and others) when libusb is absent: degrade, do not fail
        return None
    if found is None:
        return None
    return {"bcd_device": f"{found.bcdDevice:04x}", "bus": found.bus, "address": found.address}


def format_adapters(adapters: list[SerialAdapter], identity: Callable[[int, int], dict | None] = usb_identity) -> str:
    if not adapters:
        return "no serial ports found (a virtual device: hil sim servo_chain --pty)"
    lines = []
    for a in adapters:
        ids = f"{a.vid:04x}:{a.pid:04x}" if a.vid is not None and a.pid is not None else "-"
        lines.append(f"{a.device}  {ids}  {a.manufacturer or '-'} / {a.product or a.description}"
                     f"  serial={a.serial_number or '-'}  location={a.location or '-'}"
                     + (f"  latency_timer={a.latency_timer_ms} ms" if a.latency_timer_ms is not None else ""))
        if a.vid is not None and a.pid is not None:
            usb = identity(a.vid, a.pid)
            if usb:
                lines.append(f"    usb bus {usb['bus']} address {usb['address']} bcdDevice {usb['bcd_device']}")
        lines += [f"    WARNING: {w}" for w in a.warnings]
    return "\n".join(lines)
