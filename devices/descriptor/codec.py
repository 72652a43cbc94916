"""Descriptor bytes: the msgpack a part stores, its SHA-256, and decoding that never trusts the bytes."""
from __future__ import annotations

import hashlib

import msgpack

from .schema import PartDescriptor
from .validate import DescriptorError, descriptor_from_dict, descriptor_to_dict

MAX_DESCRIPTOR_BYTES = 60 * 1024  # what fits in the CPC block of a 64 KiB control table


def encode_descriptor(desc: PartDescriptor) -> bytes:
    """Canonical msgpack: the same descriptor always gives the same bytes (and so the same hash)."""
    return msgpack.packb(descriptor_to_dict(desc), use_bin_type=True)


def descriptor_sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_DECODED: dict[bytes, PartDescriptor] = {}  # bytes -> descriptor, for the scans of repeated trials in a process
_DECODED_MAX = 512


def decode_descriptor(data: bytes, part: str = "?") -> PartDescriptor:
    """Bytes read from a part -> validated descriptor; DescriptorError if truncated, not msgpack, or invalid.

    A descriptor is immutable and a pure function of its bytes, so bytes decoded once in this process are not
    decoded again: a sweep's or a test session's trials scan the same 40 parts each (the label ``part`` only
    names errors, and bytes that failed are never kept)."""
    data = bytes(data)
    cached = _DECODED.get(data)
    if cached is not None:
        return cached
    desc = _decode(data, part)
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[data] = desc
    return desc


def _decode(data: bytes, part: str) -> PartDescriptor:
    if len(data) > MAX_DESCRIPTOR_BYTES:
        raise DescriptorError(part, "descriptor", f"{len(data)} bytes is more than {MAX_DESCRIPTOR_BYTES}")
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except msgpack.ExtraData:
        raise DescriptorError(part, "descriptor", "trailing bytes after the msgpack document") from None
    except (ValueError, msgpack.UnpackException, TypeError) as exc:
        kind = "truncated" if "incomplete" in str(exc).lower() or isinstance(exc, msgpack.OutOfData) else "not msgpack"
        raise DescriptorError(part, "descriptor", f"{kind} ({len(data)} bytes): {exc}") from None
    return descriptor_from_dict(doc, part)
