"""Byte stuffing: inside a packet body, FF FF FD is sent as FF FF FD FD so it never looks like a header.

Stuffing covers the instruction byte, the parameters and nothing else (not the header, ID, length or CRC).
The pattern cannot overlap itself, so a plain left-to-right replace is exactly ROBOTIS's byte loop, at C speed.
"""
from __future__ import annotations

PATTERN = b"\xff\xff\xfd"
STUFFED = b"\xff\xff\xfd\xfd"


def stuff(body: bytes) -> bytes:
    """Return ``body`` with an FD inserted after every FF FF FD."""
    return body.replace(PATTERN, STUFFED)


def unstuff(body: bytes) -> bytes:
    """Inverse of :func:`stuff`: drop the FD that follows every FF FF FD."""
    return body.replace(STUFFED, PATTERN)
