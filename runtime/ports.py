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


def latency_timer_path(device: str, sysfs_root: Path = Path("/sys")) -> Path:
    return sysfs_root / "bus" / "usb-serial" / "devices" / Path(device).name / "latency_timer"


def read_latency_timer(device: str, sysfs_root: Path = Path("/sys")) -> int | None:
    path = latency_timer_path(device, sysfs_root)
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


def _usb_devices(vid: int, pid: int) -> list:
    import usb.core

    return list(usb.core.find(find_all=True, idVendor=vid, idProduct=pid) or ())


def usb_identity(vid: int, pid: int, location: str | None = None, serial: str | None = None,
                 finder: Callable[[int, int], list] = _usb_devices) -> dict | None:
    """bcdDevice, bus and address of *this* adapter's USB device via pyusb (two adapters of one VID:PID are told
    apart by their USB location, pyserial's ``BUS-PORT.PORT:CONFIG.IFACE``, else by serial number); None without
    a libusb backend or a match."""
    try:
        found = finder(vid, pid)
    except Exception:  # pyusb raises NoBackendError (and others) when libusb is absent: degrade, do not fail
        return None
    where = location.split(":")[0] if location else None
    match = None
    for dev in found:
        ports = getattr(dev, "port_numbers", None) or ()
        if where is not None and f"{dev.bus}-{'.'.join(map(str, ports))}" == where:
            match = dev
            break
        if serial is not None and _serial_of(dev) == serial:
            match = dev
            break
    if match is None and len(found) == 1 and where is None:
        match = found[0]
    if match is None:
        return None
    return {"bcd_device": f"{match.bcdDevice:04x}", "bus": match.bus, "address": match.address}


def _serial_of(dev) -> str | None:
    try:
        return dev.serial_number
    except Exception:  # noqa: BLE001 - reading strings needs permission on the device node
        return None


def format_adapters(adapters: list[SerialAdapter], identity: Callable[..., dict | None] = usb_identity) -> str:
    if not adapters:
        return "no serial ports found (a virtual device: hil sim servo_chain --pty)"
    lines = []
    for a in adapters:
        ids = f"{a.vid:04x}:{a.pid:04x}" if a.vid is not None and a.pid is not None else "-"
        lines.append(f"{a.device}  {ids}  {a.manufacturer or '-'} / {a.product or a.description}"
                     f"  serial={a.serial_number or '-'}  location={a.location or '-'}"
                     + (f"  latency_timer={a.latency_timer_ms} ms" if a.latency_timer_ms is not None else ""))
        if a.vid is not None and a.pid is not None:
            usb = identity(a.vid, a.pid, a.location, a.serial_number)
            if usb:
                lines.append(f"    usb bus {usb['bus']} address {usb['address']} bcdDevice {usb['bcd_device']}")
        lines += [f"    WARNING: {w}" for w in a.warnings]
    return "\n".join(lines)
