"""Storing a new descriptor in a part whose descriptor memory is writable (the CPC block's mailbox).

``hil calibrate --write-parts``: a part that stores its own calibration carries it to every host that
scans it (the modular-robot reference's self-description), so the twin built from a scan of the real robot measures with
the real part's numbers without a CAL.yaml beside it. The protocol (devices/control_table/cpc.py): the bytes in
128-byte chunks (offset and chunk in one Write), then length, SHA-256 and commit in one Write; the part swaps
them in only if they check, then the host reads the header back and compares. A part without the mailbox
answers the first write with Access error: :class:`DescriptorNotWritable`, and nothing was changed.
"""
from __future__ import annotations

import hashlib

from hil.devices.control_table.cpc import (CPC_BASE, CPC_HEADER_LEN, DESCRIPTOR_WRITE_CHUNK, DESCRIPTOR_WRITE_LENGTH,
                                       DESCRIPTOR_WRITE_OFFSET, DESCRIPTOR_WRITE_STATUS, MAX_DESCRIPTOR_LEN,
                                       WRITE_STATUS_TEXT, WRITE_STORED, parse_cpc_header)
from hil.devices.protocol import AccessError

from ..bus import BusHost


class DescriptorWriteError(RuntimeError):
    """The part refused the new descriptor (it kept the old one); the text names the part and why."""


class DescriptorNotWritable(DescriptorWriteError):
    """The part's descriptor memory is read-only (no mailbox in its CPC block)."""


def store_descriptor(bus: BusHost, device_id: int, data: bytes) -> None:
    """Stage ``data`` in part ``device_id``, commit it, and check that its header now names it."""
    if not 0 < len(data) <= MAX_DESCRIPTOR_LEN:
        raise DescriptorWriteError(f"part {device_id}: a descriptor of {len(data)} bytes does not fit the CPC block "
                                   f"(1..{MAX_DESCRIPTOR_LEN})")
    sha = hashlib.sha256(data).digest()
    for offset in range(0, len(data), DESCRIPTOR_WRITE_CHUNK):
        chunk = data[offset:offset + DESCRIPTOR_WRITE_CHUNK].ljust(DESCRIPTOR_WRITE_CHUNK, b"\0")
        try:
            bus.write(device_id, DESCRIPTOR_WRITE_OFFSET, offset.to_bytes(4, "little") + chunk)
        except AccessError as exc:
            if offset == 0:
                raise DescriptorNotWritable(f"part {device_id}: its descriptor memory is not writable (the CPC "
                                            f"block has no descriptor mailbox: {exc})") from None
            raise
    bus.write(device_id, DESCRIPTOR_WRITE_LENGTH, len(data).to_bytes(4, "little") + sha + b"\x01")
    status = bus.read(device_id, DESCRIPTOR_WRITE_STATUS, 1)[0]
    if status != WRITE_STORED:
        raise DescriptorWriteError(f"part {device_id} kept its descriptor: "
                                   f"{WRITE_STATUS_TEXT.get(status, f'status {status}')}")
    header = parse_cpc_header(bus.read(device_id, CPC_BASE, CPC_HEADER_LEN))
    if header.descriptor_sha256 != sha or header.descriptor_length != len(data):
        raise DescriptorWriteError(f"part {device_id} says it stored the descriptor but its header names "
                                   f"{header.descriptor_sha256.hex()[:16]}... ({header.descriptor_length} bytes), "
                                   f"not {sha.hex()[:16]}... ({len(data)} bytes)")
