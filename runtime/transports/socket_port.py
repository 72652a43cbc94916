"""TCP through pyserial's ``socket://host:port`` handler: a virtual device or a serial-to-network server.

pyserial's handler leaves Nagle's algorithm on, which stalls a write that follows a write (SyncWrite then
FastSyncRead) by the peer's delayed ACK; the socket gets TCP_NODELAY here.
"""
from __future__ import annotations

import socket

import serial

from .base import PEER_PROCESS_LATENCY_S, FdTransport, TransportError


class SocketTransport(FdTransport):
    baud = None
    peer_latency_s = PEER_PROCESS_LATENCY_S  # a process (hil sim --tcp, a serial server) answers, over a network

    def __init__(self, url: str):
        try:
            self._serial = serial.serial_for_url(url, timeout=0)
        except (serial.SerialException, ValueError) as exc:
            raise TransportError(0, f"{url}: cannot connect: {exc}") from None
        sock: socket.socket = self._serial._socket  # pyserial exposes no accessor for the socket
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock.fileno(), url)

    def close(self) -> None:
        self._serial.close()


def open_transport(url: str, **options) -> SocketTransport:
    return SocketTransport(url)
