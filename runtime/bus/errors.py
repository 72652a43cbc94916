"""Errors of the host controller: a transaction that could not complete after its retries."""
from __future__ import annotations


class BusError(Exception):
    """A bus transaction failed; the message names the transport, the instruction and the IDs."""


class BusTimeout(BusError):
    """No (valid) answer within the timeout after every retry: ``missing_ids`` never answered."""

    def __init__(self, message: str, missing_ids: tuple[int, ...] = ()):
        super().__init__(message)
        self.missing_ids = missing_ids


class CorruptReply(BusError):
    """Every attempt got a reply, but none passed CRC and shape checks."""
