"""``usb://VID:PID?serial=FT12AB34&baud=N`` (or ``usb://?serial=...``): a USB serial adapter found by its identity.

Two adapters of one VID:PID get their /dev/ttyUSBn names in the order they were plugged, so a profile that says
/dev/ttyUSB0 may open the wrong robot's bus. This names the adapter by USB serial number (and/or VID:PID) and
resolves it through pyserial's port list (runtime.ports.list_adapters), then opens the port as serial_port does.
No match, or several, is an error that lists the ports there are.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import parse_qs, urlsplit

from .base import TransportError


def parse_usb_url(url: str) -> tuple[int | None, int | None, str | None, int | None]:
    """(vid, pid, serial, baud) of a usb:// URL; TransportError naming what is wrong."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"serial", "baud"})
    if unknown:
        raise TransportError(0, f"{url}: unknown option {unknown[0]!r}; known: serial, baud")
    vid = pid = None
    if parts.netloc:
        try:
            vid_text, pid_text = parts.netloc.split(":")
            vid, pid = int(vid_text, 16), int(pid_text, 16)
        except ValueError:
            raise TransportError(0, f"{url}: expected usb://VID:PID (hex, e.g. 0403:6014) or usb://?serial=...") from None
    serial = query["serial"][0] if "serial" in query else None
    if vid is None and serial is None:
        raise TransportError(0, f"{url}: name the adapter by VID:PID, ?serial=..., or both")
    try:
        baud = int(query["baud"][0]) if "baud" in query else None
    except ValueError:
        raise TransportError(0, f"{url}: baud must be an integer") from None
    return vid, pid, serial, baud


def resolve_usb_url(url: str, lister: Callable[[], Iterable] | None = None) -> tuple[str, int | None]:
    """(device path, baud) of the one adapter the URL names."""
    from ..ports import list_adapters

    vid, pid, serial, baud = parse_usb_url(url)
    adapters = list_adapters(lister) if lister is not None else list_adapters()
    matches = [a for a in adapters if (vid is None or (a.vid, a.pid) == (vid, pid))
               and (serial is None or a.serial_number == serial)]
    if len(matches) == 1:
        return matches[0].device, baud
    there = "; ".join(f"{a.device} {a.vid or 0:04x}:{a.pid or 0:04x} serial={a.serial_number or '-'}"
                      for a in adapters) or "none"
    if not matches:
        raise TransportError(0, f"{url}: no serial adapter matches; ports here: {there}")
    raise TransportError(0, f"{url}: {len(matches)} adapters match ({', '.join(a.device for a in matches)}); "
                            f"add ?serial=... to pick one; ports here: {there}")


def open_transport(url: str, **options):
    from .serial_port import SerialTransport

    path, baud = resolve_usb_url(url, options.get("lister"))
    transport = SerialTransport(path, baud=options.get("baud") or baud)
    transport.url = url
    return transport
