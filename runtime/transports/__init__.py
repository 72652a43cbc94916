"""Bus transports chosen by URL, pyserial style: one module per scheme behind :func:`open_transport`.

    sim://servo_chain               the virtual device in this process   (transports.sim)
    /dev/ttyUSB0, /dev/pts/3        a serial port or pty, via pyserial    (transports.serial_port)
    serial:///dev/ttyUSB0?baud=N    the same, with options                (transports.serial_port)
    socket://127.0.0.1:7000         TCP, via pyserial's socket handler    (transports.socket_port)
    usb://0403:6014?serial=FT12AB34 a USB adapter by VID:PID and serial   (transports.usb_port)
"""
from __future__ import annotations

import importlib

from .base import Transport, TransportError

SCHEMES = {"sim": "sim", "serial": "serial_port", "socket": "socket_port", "usb": "usb_port"}


def open_transport(url: str, **options) -> Transport:
    """Open the transport for ``url``; a plain path is a serial device."""
    scheme = url.split("://", 1)[0] if "://" in url else "serial"
    module_name = SCHEMES.get(scheme)
    if module_name is None:
        raise TransportError(0, f"{url}: unknown scheme {scheme!r}; known: {', '.join(sorted(SCHEMES))} or a path")
    module = importlib.import_module(f"{__name__}.{module_name}")
    return module.open_transport(url, **options)


__all__ = ["open_transport", "Transport", "TransportError", "SCHEMES"]
