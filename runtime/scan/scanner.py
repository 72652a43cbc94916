"""Scan: broadcast ping -> CPC headers -> descriptors (cached) -> port tables -> the virtual robot.

The bus cost is what matters: one broadcast ping, one Fast Bulk Read of the 66-byte CPC headers per batch of
parts, then only the descriptors not in the cache, in chunks. Every problem is reported with the part's ID; a
part that cannot be trusted (duplicate ID, hash mismatch, invalid descriptor, unknown plain model) is
quarantined and the rest of the robot still comes up.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

from hil.devices.catalog import plain_servo
from hil.devices.control_table.cpc import (CPC_BASE, CPC_HEADER_LEN, DESCRIPTOR_ADDRESS, CpcHeader, CpcHeaderError,
                                       parse_cpc_header)
from hil.devices.descriptor import DescriptorError, decode_descriptor
from hil.devices.protocol import AccessError, ProtocolError

from ..bus import BusError, BusHost
from .cache import DescriptorCache
from .robot import ScannedPart, VirtualRobot

HEADER_BATCH = 32  # parts per Fast Bulk Read of headers: 32 * (66 + 4) bytes stays under the 4 KiB frame bound
CHUNK = 2048  # descriptor bytes per Read (a reply of 2 KiB + 11 stays well under the 4 KiB frame bound)

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class _Found:
    id: int
    model_number: int
    firmware_version: int
    header: CpcHeader | None = None
    data: bytes | None = None
    children: dict[str, int] = field(default_factory=dict)


@dataclass
class ScanReport:
    """What a scan cost on the bus (for benchmarks and `hil scan --stats`)."""

    descriptor_bytes_read: int = 0
    descriptors_from_cache: int = 0
    descriptors_read: int = 0


def scan_bus(bus: BusHost, cache: DescriptorCache | None = None, progress: Progress | None = None,
             report: ScanReport | None = None) -> VirtualRobot:
    """Build the virtual robot from what the parts on ``bus`` say about themselves."""
    cache = cache if cache is not None else DescriptorCache()
    report = report if report is not None else ScanReport()
    quarantined: dict[int, str] = {}
    problems: list[str] = []
    found = _ping(bus, quarantined)
    _read_headers(bus, found, quarantined)
    _read_descriptors(bus, found, cache, quarantined, progress, report)
    parts = _describe(found, quarantined)
    parts, root_id = _build_tree(parts, found, quarantined, problems)
    return VirtualRobot(bus_url=bus.transport.url, parts=parts, root_id=root_id, quarantined=quarantined,
                        problems=tuple(problems))


def _ping(bus: BusHost, quarantined: dict[int, str]) -> dict[int, _Found]:
    found: dict[int, _Found] = {}
    for device_id, model, firmware in bus.ping_replies():
        if device_id in found:
            quarantined[device_id] = (f"id {device_id}: duplicate ID, answered the ping more than once "
                                      f"(models {found[device_id].model_number} and {model}); give each part its own ID")
            continue
        found[device_id] = _Found(device_id, model, firmware)
    for device_id in quarantined:
        found.pop(device_id, None)
    return found


def _read_headers(bus: BusHost, found: dict[int, _Found], quarantined: dict[int, str]) -> None:
    ids = sorted(found)
    for start in range(0, len(ids), HEADER_BATCH):
        batch = ids[start:start + HEADER_BATCH]
        try:
            replies = bus.bulk_read_status([(i, CPC_BASE, CPC_HEADER_LEN) for i in batch], fast=True)
        except BusError:
            replies = {}
            for i in batch:  # one silent or garbled part must not hide the others: ask one by one
                try:
                    replies[i] = bus.read_status(i, CPC_BASE, CPC_HEADER_LEN)
                except BusError as exc:
                    quarantined[i] = f"id {i}: CPC header unreadable: {exc}"
        for device_id, (error, data) in replies.items():
            if device_id in quarantined:
                continue
            if error & 0x7F == AccessError.code:
                continue  # no CPC block: a plain servo, described by the catalog
            if error & 0x7F:
                quarantined[device_id] = f"id {device_id}: reading the CPC header answered error code {error & 0x7F}"
                continue
            try:
                found[device_id].header = parse_cpc_header(data)
            except CpcHeaderError as exc:
                quarantined[device_id] = f"id {device_id}: {exc}"
    for device_id in quarantined:
        found.pop(device_id, None)


def _read_descriptors(bus: BusHost, found: dict[int, _Found], cache: DescriptorCache,
                      quarantined: dict[int, str], progress: Progress | None, report: ScanReport) -> None:
    cold = []
    for f in found.values():
        if f.header is None:
            continue
        f.data = cache.get(f.header.descriptor_sha256)
        if f.data is None:
            cold.append(f)
        else:
            report.descriptors_from_cache += 1
    total = sum(f.header.descriptor_length for f in cold)
    done = 0
    for f in cold:
        length = f.header.descriptor_length
        chunks = []
        try:
            for offset in range(0, length, CHUNK):
                n = min(CHUNK, length - offset)
                chunks.append(bus.read(f.id, DESCRIPTOR_ADDRESS + offset, n))
                done += n
                if progress is not None:
                    progress("descriptors", done, total)
        except (BusError, ProtocolError) as exc:
            quarantined[f.id] = f"id {f.id}: descriptor unreadable at byte {offset} of {length}: {exc}"
            continue
        data = b"".join(chunks)
        report.descriptor_bytes_read += len(data)
        report.descriptors_read += 1
        digest = hashlib.sha256(data).digest()
        if digest != f.header.descriptor_sha256:
            quarantined[f.id] = (f"id {f.id}: descriptor hash mismatch: the {len(data)} bytes read hash to "
                                 f"{digest.hex()[:16]}..., the CPC header says {f.header.descriptor_sha256.hex()[:16]}...")
            continue
        f.data = data
        cache.put(digest, data)
    for device_id in quarantined:
        found.pop(device_id, None)


def _describe(found: dict[int, _Found], quarantined: dict[int, str]) -> dict[int, ScannedPart]:
    parts = {}
    for f in found.values():
        label = f"id {f.id}"
        try:
            if f.header is None:
                desc = plain_servo(f.model_number)
                if desc is None:
                    raise DescriptorError(label, "model_number", f"model {f.model_number} has no CPC block and is not "
                                          "in the catalog (devices/catalog/dynamixel/)")
                sha, serial = "", None
            else:
                desc = decode_descriptor(f.data, label)
                if len(desc.ports) != f.header.port_count:
                    raise DescriptorError(label, "ports", f"{len(desc.ports)} ports, the CPC header says {f.header.port_count}")
                sha, serial = f.header.descriptor_sha256.hex(), f.header.serial_number
        except DescriptorError as exc:
            quarantined[f.id] = f"id {f.id}: {exc}"
            continue
        if f.header is not None:
            f.children = {desc.ports[i].name: child for i, child in enumerate(f.header.port_table) if child is not None}
        parts[f.id] = ScannedPart(id=f.id, model_number=f.model_number, firmware_version=f.firmware_version,
                                  descriptor=desc, sha256=sha, serial_number=serial, self_describing=f.header is not None)
    return parts


def _build_tree(parts: dict[int, ScannedPart], found: dict[int, _Found], quarantined: dict[int, str],
                problems: list[str]) -> tuple[dict[int, ScannedPart], int | None]:
    parent_of: dict[int, tuple[int, str]] = {}
    children: dict[int, dict[str, int]] = {i: {} for i in parts}
    for pid in sorted(parts):
        desc = parts[pid].descriptor
        for port, child in found[pid].children.items():
            if next(p for p in desc.ports if p.name == port).parent:
                problems.append(f"id {pid}: its parent connector {port!r} lists id {child} as a child; ignored")
            elif child in quarantined:
                problems.append(f"id {pid} port {port!r}: holds id {child}, which is quarantined")
            elif child not in parts:
                problems.append(f"id {pid} port {port!r}: dangling, names id {child}, which did not answer the scan")
            elif child in parent_of:
                other, other_port = parent_of[child]
                problems.append(f"id {child}: claimed by id {other} port {other_port!r} and id {pid} port {port!r}; "
                                f"keeping id {other}")
            elif child == pid:
                problems.append(f"id {pid} port {port!r}: names the part itself")
            else:
                parent_of[child] = (pid, port)
                children[pid][port] = child
    _break_cycles(parts, parent_of, children, quarantined, problems)
    roots = sorted(i for i in parts if i not in parent_of)
    root_id = max(roots, key=lambda r: (_subtree_size(r, children), -r)) if roots else None
    for r in roots:
        if r == root_id:
            continue
        if parts[r].self_describing:
            problems.append(f"id {r}: detached, no part lists it in a port table (not reachable from the root "
                            f"id {root_id})")
        else:
            problems.append(f"id {r}: plain Dynamixel that no part lists in a port table: its place in the tree "
                            "is unknown (mount it on a self-describing part's port)")
    out = {}
    for i, p in parts.items():
        parent = parent_of.get(i)
        out[i] = ScannedPart(**{**p.__dict__, "parent_id": parent[0] if parent else None,
                                "parent_port": parent[1] if parent else None, "children": children[i]})
    return out, root_id


def _break_cycles(parts, parent_of, children, quarantined, problems) -> None:
    for start in sorted(parts):
        path, cur = [], start
        while cur in parent_of and cur not in path:
            path.append(cur)
            cur = parent_of[cur][0]
        if cur in path:
            cycle = path[path.index(cur):]
            loop = " -> ".join(str(i) for i in cycle + [cycle[0]])
            for i in cycle:
                quarantined[i] = f"id {i}: in a cycle of port tables ({loop}): a tree cannot contain a loop"
                parent_of.pop(i, None)
            for i in cycle:
                parts.pop(i, None)
                children.pop(i, None)
            for kids in children.values():
                for port in [p for p, c in kids.items() if c in cycle]:
                    del kids[port]
            for child in [c for c, (p, _) in parent_of.items() if p in cycle]:
                del parent_of[child]
            problems.append(f"cycle in port tables: {loop}; those parts are quarantined")


def _subtree_size(root: int, children: dict[int, dict[str, int]]) -> int:
    size, stack = 0, [root]
    while stack:
        node = stack.pop()
        size += 1
        stack.extend(children.get(node, {}).values())
    return size
