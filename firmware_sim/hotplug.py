"""Parts plugged, unplugged, rebooted and swapped on a running virtual bus device.

What the physical robot does most often: a connector works loose (the part loses power and stops answering),
is pushed back (the part powers up with RAM defaults, torque off), a servo browns out and reboots, someone swaps
a part for another model or plugs a new one into a free port. Each function acts on a
:class:`~firmware_sim.bus_device.VirtualBusDevice` under its lock, at the device's time:

- :func:`unplug`: the part stops answering anything, and its RAM goes to defaults (no power: torque off, so a
  world-backed joint is released and falls as its friction lets it);
- :func:`plug`: it answers again, freshly powered (RAM defaults once more);
- :func:`reboot`: RAM to defaults now and silent for ``boot_s`` (:data:`REBOOT_SILENCE_S`) while it boots;
- :func:`swap`: another catalog part at the same ID (same ports where their names match) and a new serial;
- :func:`add`: a new part at a free ID, hung on a free port of a self-describing part (its port table says so);
- :func:`overload`: a servo latches an overload error, as an X-series servo does after a stall: Hardware Error
  Status(70) bit 5, torque off, the Alert bit on its replies until a Reboot (ROBOTIS's ros2_control interface
  reboots such a servo at start-up).

A swap on an embodied device changes the world too (the device's ``swap_hooks``, embodied/reembody.py): the new
part's joint limits, torque, friction and mass, and world-backed firmware for a servo or a wheel; the old part's
shapes stay. Departure: an added part has no body in the world and its firmware is the plain one (not
world-backed): the host's model sees it, the simulated physics do not.
"""
from __future__ import annotations

import math

from hil.devices.catalog import load_part
from hil.devices.control_table.cpc import MAX_PORTS, NO_PART
from hil.devices.descriptor import PartDescriptor, descriptor_sha256, encode_descriptor

from .assembly import default_serial
from .bus_device import VirtualBusDevice
from .cpc_part import build_cpc_part
from .part import PartFirmware

REBOOT_SILENCE_S = 0.5  # how long a rebooting servo stays silent (an X-series servo blinks its LED, then answers)
OVERLOAD_ERROR = 0x20  # Hardware Error Status(70) bit 5: Overload Error (X-series e-Manual)


class HotplugError(ValueError):
    """An operation the device cannot do (no such part, the ID or port taken, not unplugged)."""


def _part(device: VirtualBusDevice, device_id: int) -> PartFirmware:
    parts = [p for p in device.parts if p.id == device_id]
    if not parts:
        raise HotplugError(f"no part has id {device_id} on this bus")
    return parts[0]


def is_unplugged(device: VirtualBusDevice, device_id: int) -> bool:
    return math.isinf(device.silent_until.get(device_id, 0.0))


def unplug(device: VirtualBusDevice, device_id: int) -> None:
    with device.lock:
        part = _part(device, device_id)
        part.reboot()  # power gone: RAM (torque, goal, gains, watchdog) lost
        device.silent_until[device_id] = math.inf


def plug(device: VirtualBusDevice, device_id: int) -> None:
    with device.lock:
        part = _part(device, device_id)
        if not is_unplugged(device, device_id):
            raise HotplugError(f"part id {device_id} is not unplugged")
        part.reboot()
        device.silent_until.pop(device_id, None)


def reboot(device: VirtualBusDevice, device_id: int, boot_s: float = REBOOT_SILENCE_S) -> None:
    with device.lock:
        part = _part(device, device_id)
        part.reboot()
        device.silent_until[device_id] = device.clock() + boot_s


def overload(device: VirtualBusDevice, device_id: int) -> None:
    with device.lock:
        part = _part(device, device_id)
        if "hardware_error_status" not in part.table or "torque_enable" not in part.table:
            raise HotplugError(f"part id {device_id} is not a servo: it has no Hardware Error Status and torque to "
                               "shut down")
        memory = part.memory
        memory.set("hardware_error_status", memory.get("hardware_error_status") | OVERLOAD_ERROR)
        memory.set("torque_enable", 0)  # the Shutdown(63) default (52) includes overload: the motor is released
        part.on_written(["torque_enable"])


def swap(device: VirtualBusDevice, device_id: int, new_part: str | PartDescriptor) -> PartFirmware:
    """Put ``new_part`` (a catalog name or a descriptor) at ``device_id`` in place of the part there."""
    with device.lock:
        old = _part(device, device_id)
        desc = load_part(new_part) if isinstance(new_part, str) else new_part
        children = _children(old)
        names = {p.name for p in desc.ports}
        kept = {port: child for port, child in children.items() if port in names}
        serial = default_serial(f"swap:{desc.name}", device_id)
        part = _build(desc, device_id, serial, kept)
        for hook in device.swap_hooks:  # a world gives the new part its physics (embodied/reembody.py)
            part = hook(old, part)
        device.replace_part(old, part)
        device.silent_until.pop(device_id, None)
        return part


def add(device: VirtualBusDevice, device_id: int, new_part: str | PartDescriptor, parent_id: int,
        port: str) -> PartFirmware:
    """Plug a new part at the free ID ``device_id`` into the free ``port`` of the part at ``parent_id``."""
    with device.lock:
        if any(p.id == device_id for p in device.parts):
            raise HotplugError(f"id {device_id} is already taken")
        parent = _part(device, parent_id)
        parent_desc = getattr(parent, "descriptor", None)
        if parent_desc is None or "port_table" not in parent.table:
            raise HotplugError(f"part id {parent_id} has no port table (a plain servo): mount the new part on a "
                               "self-describing part")
        ports = [p.name for p in parent_desc.ports]
        if port not in ports or next(p for p in parent_desc.ports if p.name == port).parent:
            raise HotplugError(f"part id {parent_id} ({parent_desc.name}) has no child port {port!r}; ports: "
                               f"{', '.join(p.name for p in parent_desc.child_ports)}")
        children = _children(parent)
        if port in children:
            raise HotplugError(f"port {port!r} of id {parent_id} already holds id {children[port]}")
        desc = load_part(new_part) if isinstance(new_part, str) else new_part
        part = _build(desc, device_id, default_serial(f"add:{desc.name}", device_id), {})
        table = bytearray(parent.memory.get("port_table").to_bytes(MAX_PORTS, "little"))
        table[ports.index(port)] = device_id
        parent.memory.set("port_table", int.from_bytes(table, "little"))
        device.add_part(part)
        return part


ACTIONS = ("unplug", "plug", "reboot", "swap", "overload")  # what act() does to a part already on the bus


def act(device: VirtualBusDevice, kind: str, device_id: int, *, new_part: str | PartDescriptor | None = None,
        boot_s: float = REBOOT_SILENCE_S) -> None:
    """One of :data:`ACTIONS` on the part at ``device_id`` (``new_part`` for a swap, ``boot_s`` for a reboot): the
    one dispatch of a trial's ``faults:`` (fault_plan.py) and the live control (control.py)."""
    if kind == "unplug":
        unplug(device, device_id)
    elif kind == "plug":
        plug(device, device_id)
    elif kind == "reboot":
        reboot(device, device_id, boot_s)
    elif kind == "overload":
        overload(device, device_id)
    elif kind == "swap":
        if new_part is None:
            raise HotplugError(f"a swap of id {device_id} needs the part to put there")
        swap(device, device_id, new_part)
    else:
        raise HotplugError(f"no hot-plug action {kind!r}; known: {', '.join(ACTIONS)}")


def _children(part: PartFirmware) -> dict[str, int]:
    desc = getattr(part, "descriptor", None)
    if desc is None or "port_table" not in part.table:
        return {}
    entries = part.memory.get("port_table").to_bytes(MAX_PORTS, "little")
    return {p.name: entries[i] for i, p in enumerate(desc.ports) if entries[i] != NO_PART}


def _build(desc: PartDescriptor, device_id: int, serial: int, children: dict[str, int]) -> PartFirmware:
    data = encode_descriptor(desc)
    return build_cpc_part(desc, data, descriptor_sha256(data), device_id, serial, children)
