"""``--write-parts``: store a calibration in the parts themselves, where their descriptor memory is writable.

A CAL.yaml beside the profile makes *that* profile's twin carry the numbers; a part that stores them carries
them to every host that scans it (the modular-robot reference's self-description): the twin built from a scan of the
real robot (a mixed trial's shadow ring, ``ring_meta`` of the next calibration run, ``hil urdf``) then measures with
the part's own numbers. Each entry's part is found on the bus by descriptor name and serial; its descriptor
gets the entry's params (devices.calibration.apply, the same as the twin's), is validated by encoding it, and
goes to the part through the CPC block's mailbox (runtime/scan/descriptor_store.py).

Warnings, not errors, and nothing applied for that entry: a calibration for a part that is not on the bus, a
part whose descriptor memory is read-only, an in-process sim:// bus (its parts are built anew at every open,
so there is nothing to store in: give the profile ``calibration:`` instead).
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class WriteReport:
    stored: list[str] = field(default_factory=list)  # one line per part that stores its calibration now
    warnings: list[str] = field(default_factory=list)


def write_parts(profile: str | Path, cal_path: str | Path, bus: str | None = None) -> WriteReport:
    """Store every entry of ``cal_path`` in the matching parts of the robot ``profile`` opens."""
    from hil.devices.calibration import apply, load_calibration
    from hil.devices.descriptor import encode_descriptor
    from hil.runtime.robot.multibus import scan_profile
    from hil.runtime.robot.profile import load_profile
    from hil.runtime.scan.descriptor_store import DescriptorNotWritable, DescriptorWriteError, store_descriptor
    from hil.runtime.scan.merge import MAIN_BUS

    calibration = load_calibration(cal_path)
    loaded = load_profile(profile, bus=bus)
    report = WriteReport()
    if loaded.bus and loaded.bus.startswith("sim://") and not loaded.buses:
        report.warnings.append(f"{loaded.bus}: an in-process virtual bus builds its parts anew at every open; "
                               f"nothing stored (give the profile `calibration: {cal_path}` instead)")
        return report
    used: set[int] = set()
    with ExitStack() as undo:
        scanned = scan_profile(loaded, undo)
        for part in sorted(scanned.virtual.parts.values(), key=lambda p: p.id):
            entries = calibration.for_part(part.descriptor, part.serial_number)
            if not entries:
                continue
            used.update(id(e) for e in entries)
            what = (f"part {part.id} ({part.descriptor.name}, serial {part.serial_number}) sensor "
                    f"{', '.join(sorted({e.sensor for e in entries}))}")
            if not part.self_describing:
                report.warnings.append(f"{what}: not a self-describing part (its descriptor is the catalog's); "
                                       "not stored")
                continue
            data = encode_descriptor(apply(part.descriptor, entries))
            host = scanned.hosts[part.bus or MAIN_BUS]
            try:
                store_descriptor(host, part.wire_id, data)
            except DescriptorNotWritable as exc:
                report.warnings.append(f"{what}: {exc}; not stored (the profile's `calibration:` still gives the "
                                       "twin the numbers)")
                continue
            except DescriptorWriteError as exc:
                report.warnings.append(f"{what}: {exc}; not stored")
                continue
            params = sorted({k for e in entries for k in e.params})
            surfaces = sorted({s for e in entries for s in e.surfaces})
            stored = params + ([f"the laws of {', '.join(surfaces)}"] if surfaces else [])
            report.stored.append(f"{what}: stored {', '.join(stored)} (descriptor now {len(data)} bytes)")
    report.warnings += [f"{calibration.source}:{e.line}: calibration for {e.part}"
                        f"{'' if e.serial is None else f' serial {e.serial}'} matches no part on the bus; not applied"
                        for e in calibration.entries if id(e) not in used]
    return report
