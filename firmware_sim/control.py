"""``hil sim``'s live fault control: unplug, plug, reboot, swap, overload a part or add noise while the device
serves.

A fault file (``--faults FILE``) says everything up front; a person at the bench, or a test, decides while the
robot runs. ``hil sim ... --control tcp://127.0.0.1:*`` binds a ZeroMQ ROUTER socket (loopback unless told
otherwise; CURVE with ``--keys``) and prints ``control ENDPOINT`` on stdout; ``hil sim fault unplug
right_arm.elbow --control ENDPOINT`` (:func:`send_fault`) sends one request and prints the answer.

The wire is the bridge's (bridge/envelope.py: a msgpack map ``{v, type, seq, t, payload}``, never pickle); each
request type has a msgspec schema (:data:`REQUESTS`), so a wrong type, a missing field, an unknown field, NaN or an
absurd number is refused with its path (``$.payload.part``) before anything happens, and a part the device lacks,
a plug of a part that is not unplugged or an unknown catalog name is refused naming the field. Every refusal is an
``error`` reply ``{reason, field}``; the server counts it and keeps serving (it never raises on peer input). An
accepted request is applied at once under the device's lock (between two world steps under the sim clock: the
world time it happened at is in the reply) through :mod:`firmware_sim.hotplug`, as a fault file's entries are.
"""
from __future__ import annotations

import logging
import math
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Union

import msgspec
import zmq
from msgspec import Meta, Struct

from hil.bridge.bind import bind_server
from hil.bridge.envelope import EnvelopeError, pack, unpack
from hil.bridge.schema import MAX_NAME_CHARS, TypedDecoder
from hil.bridge.security import check_loopback_unless_secured, request_once
from hil.devices.catalog import part_names

from . import hotplug
from .faults import FaultInjector

if TYPE_CHECKING:
    from hil.bridge.security import Security

    from .bus_device import VirtualBusDevice

log = logging.getLogger(__name__)

MAX_BUS_ID = 252  # Dynamixel IDs 0..252 (253 is reserved, 254 broadcast)
MAX_FAULT_S = 3600.0  # a noise burst or a boot longer than an hour is a typo
KEPT_DONE = 100  # the latest applied requests ``status`` lists; all of them are counted
BusId = Annotated[int, Meta(ge=0, le=MAX_BUS_ID)]
Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
PartName = Union[BusId, Name]  # a bus ID, a tree path (port names from the root) or a blueprint name
Seconds = Annotated[float, Meta(gt=0.0, le=MAX_FAULT_S)]


class PartRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """unplug / reboot: which part."""

    part: PartName


class RebootRequest(PartRequest, frozen=True, forbid_unknown_fields=True):
    boot_s: Seconds = hotplug.REBOOT_SILENCE_S


class PlugRequest(PartRequest, frozen=True, forbid_unknown_fields=True):
    """The part unplugged before, or (``new``: a catalog part) a new part at a free ID on ``parent``'s ``port``."""

    new: Union[Name, None] = None
    parent: Union[PartName, None] = None
    port: Union[Name, None] = None


class SwapRequest(PartRequest, frozen=True, forbid_unknown_fields=True):
    with_: Name = msgspec.field(name="with")


class NoiseRequest(Struct, frozen=True, forbid_unknown_fields=True):
    bitflip: Annotated[float, Meta(ge=0.0, le=1.0)]
    for_s: Union[Seconds, None] = None  # None: until the next noise request


class StatusRequest(Struct, frozen=True, forbid_unknown_fields=True):
    pass


REQUESTS = {"unplug": PartRequest, "plug": PlugRequest, "reboot": RebootRequest, "swap": SwapRequest,
            "noise": NoiseRequest, "overload": PartRequest, "status": StatusRequest}
REPLIES = ("done", "error")
DECODER = TypedDecoder(REQUESTS)
_PATH = re.compile(r"`\$\.payload\.?([^`]*)`")


class ControlError(ValueError):
    """A request refused: ``field`` names the payload field at fault (None: the message as a whole)."""

    def __init__(self, reason: str, field: str | None = None):
        super().__init__(reason)
        self.field = field


class FaultControl:
    """The control socket of one served device, answered by a thread until :meth:`close`.

    ``resolve(parts)`` gives the name -> bus ID function of the parts as they are now (fault_plan's
    ``assembly_resolver``: a swap or an added part changes the tree paths). ``world``: the device's physics world
    (noise bursts end on its time, in its pre-step hook, so under the sim clock they last ``for_s`` of simulated
    time); without one they end on the device's clock, looked at by the server thread."""

    def __init__(self, device: VirtualBusDevice, endpoint: str, resolve: Callable[[Any], Callable[[Any], int | None]],
                 world: Any = None, seed: int = 0, security: Security | None = None):
        self.device, self._resolve, self.world, self.seed = device, resolve, world, seed
        check_loopback_unless_secured(endpoint, security, "hil sim --control", "the control")
        self.done: deque[dict] = deque(maxlen=KEPT_DONE)  # {t, did} of the latest applied requests
        self.applied = 0  # all of them
        self.applied_by_kind: dict[str, int] = {}
        self.refused = 0
        self.rejected: list[str] = []  # the latest refusal reasons
        self._noise_end: float | None = None
        self._context = zmq.Context.instance()
        try:  # a fault request is tens of bytes: 1 MiB is a generous cap
            self._socket, self.endpoint = bind_server(zmq.ROUTER, endpoint, security, 1 << 20, self._context)
        except zmq.ZMQError as exc:
            raise ValueError(f"hil sim --control {endpoint!r}: cannot bind: {exc} (e.g. tcp://127.0.0.1:*)") from None
        if world is not None:
            world.add_pre_step(self._world_step)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hil-sim-control", daemon=True)
        self._thread.start()

    # --- the socket ---------------------------------------------------------------------------------------------
    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(50):
                self._receive()
            if self.world is None:
                self._end_noise(self.device.clock())

    def _receive(self) -> None:
        frames = self._socket.recv_multipart()
        if len(frames) != 3 or frames[1]:
            self._refuse(None, ControlError(f"a message of {len(frames)} frames; a request is [identity, empty, "
                                            "envelope] (a REQ socket)"))
            return
        identity = frames[0]
        try:
            reply = self.handle(frames[2])
        except ControlError as exc:
            self._refuse(identity, exc)
            return
        except Exception as exc:  # our bug, not the peer's: keep serving, say what happened
            log.exception("hil sim control: request failed")
            self._refuse(identity, ControlError(f"{type(exc).__name__}: {exc}"))
            return
        self._send(identity, "done", reply)

    def _refuse(self, identity: bytes | None, exc: ControlError) -> None:
        self.refused += 1
        self.rejected = (self.rejected + [str(exc)])[-100:]
        log.warning("hil sim control: refused: %s", exc)
        if identity is not None:
            self._send(identity, "error", {"reason": str(exc), "field": exc.field})

    def _send(self, identity: bytes, kind: str, payload: dict) -> None:
        try:
            self._socket.send_multipart([identity, b"", pack(kind, payload, t=self.device.clock())], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # a peer gone or not reading: its reply is dropped, the server goes on
            log.warning("hil sim control: reply not sent: %s", exc)

    # --- requests -----------------------------------------------------------------------------------------------
    def handle(self, data: bytes) -> dict:
        """Decode, check and apply one request; its reply payload, or ControlError naming the field."""
        try:
            msg = DECODER.decode(data)
        except EnvelopeError as exc:
            text = str(exc)
            found = _PATH.search(text)
            raise ControlError(text, (found.group(1) or None) if found else None) from None
        return self.apply(msg.type, msg.payload)

    def apply(self, kind: str, request: Any) -> dict:
        """Apply a decoded request (also the in-process entry point); nothing is changed when it is refused."""
        device = self.device
        with device.lock:
            if kind == "status":
                return self.status()
            if kind == "noise":
                self._noise(request)
                did = f"noise bitflip {request.bitflip:g}" + (f" for {request.for_s:g} s" if request.for_s else "")
                return self._did(did)
            resolve = self._resolve(device.parts)
            if kind == "plug" and request.new is not None:
                return self._add(request, resolve)
            if kind == "plug" and (request.parent is not None or request.port is not None):
                raise ControlError("parent and port belong to a new part (give new: CATALOG_NAME as well)",
                                   "parent" if request.parent is not None else "port")
            device_id = _bound(resolve, request.part, "part")
            new_part = _catalog(request.with_, "with") if kind == "swap" else None
            try:  # a swap's world follows: reembody.py
                hotplug.act(device, kind, device_id, new_part=new_part,
                            boot_s=getattr(request, "boot_s", hotplug.REBOOT_SILENCE_S))
            except hotplug.HotplugError as exc:
                raise ControlError(str(exc), "part") from None
            extra = f" with {request.with_}" if kind == "swap" else ""
            return self._did(f"{kind} {request.part!r} (id {device_id}){extra}")

    def _add(self, request: PlugRequest, resolve: Callable[[Any], int | None]) -> dict:
        if not isinstance(request.part, int):
            raise ControlError(f"a new part is plugged at a free bus ID (part: 60), not {request.part!r}", "part")
        if request.parent is None or request.port is None:
            raise ControlError("a new part needs parent (name or ID) and port", "parent" if request.parent is None
                               else "port")
        new = _catalog(request.new, "new")
        parent_id = _bound(resolve, request.parent, "parent")
        try:
            hotplug.add(self.device, request.part, new, parent_id, request.port)
        except hotplug.HotplugError as exc:
            field = "part" if "taken" in str(exc) else "port"
            raise ControlError(str(exc), field) from None
        return self._did(f"plug new {new} at id {request.part} on {request.parent!r} port {request.port}")

    def _noise(self, request: NoiseRequest) -> None:
        device = self.device
        if device.faults is None:
            device.faults = FaultInjector(seed=self.seed)
        device.faults.bit_flip_rate = request.bitflip
        now = self.world.time_s if self.world is not None else device.clock()
        self._noise_end = now + request.for_s if request.for_s else None

    def _world_step(self, world: Any) -> None:
        self._end_noise(world.time_s)

    def _end_noise(self, now: float) -> None:
        end = self._noise_end
        if end is not None and now >= end - 1e-9:
            with self.device.lock:
                self._noise_end = None
                self.device.faults.bit_flip_rate = 0.0
                self._record(now, "noise off")

    def _did(self, what: str) -> dict:
        t = self.world.time_s if self.world is not None else self.device.clock()
        self._record(t, what)
        return {"did": what, "t": t}

    def _record(self, t: float, what: str) -> None:
        self.done.append({"t": t, "did": what})
        self.applied += 1
        kind = what.split(" ", 1)[0]
        self.applied_by_kind[kind] = self.applied_by_kind.get(kind, 0) + 1

    def status(self) -> dict:
        """What the device is like now, the latest :data:`KEPT_DONE` applied requests (``done``, oldest first) and
        how many there were in all and of each kind (``applied``, ``applied_by_kind``): a bounded answer however
        long the device has served."""
        device = self.device
        silent = {pid: until for pid, until in device.silent_until.items()}
        return {"did": "status", "t": self.world.time_s if self.world is not None else device.clock(),
                "unplugged": sorted(pid for pid, until in silent.items() if math.isinf(until)),
                "parts": sorted(p.id for p in device.parts), "done": list(self.done), "applied": self.applied,
                "applied_by_kind": dict(self.applied_by_kind), "refused": self.refused,
                "faults": device.faults.status() if device.faults is not None else None}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close(0)


def _bound(resolve: Callable[[Any], int | None], name: Any, field: str) -> int:
    device_id = resolve(name)
    if device_id is None:
        raise ControlError(f"{field} {name!r}: the device has no such part (give a bus ID, a tree path such as "
                           "torso/shoulder_right, or a blueprint name with hil sim --semantics)", field)
    return device_id


def _catalog(name: str, field: str) -> str:
    known = part_names()
    if name not in known:
        raise ControlError(f"{field}: no catalog part {name!r}; known: {', '.join(known)}", field)
    return name


# --- the client: hil sim fault ... ----------------------------------------------------------------------------------
def send_fault(endpoint: str, kind: str, payload: dict | None = None, timeout_s: float = 5.0,
               security: Security | None = None) -> dict:
    """One request to a served device's control socket; the ``done`` payload, or ControlError with the server's
    reason and field (ConnectionError when nothing answers within ``timeout_s``)."""
    data, why = request_once(endpoint, pack(kind, payload or {}), timeout_s, security)
    if data is None:
        raise ConnectionError(f"hil sim fault: nothing answered at {endpoint} within {timeout_s:g} s "
                              f"({why or 'is hil sim running with --control?'})")
    try:
        reply = unpack(data, REPLIES)
    except EnvelopeError as exc:
        raise ConnectionError(f"hil sim fault: bad reply from {endpoint}: {exc}") from None
    if reply.type == "error":
        body = reply.payload if isinstance(reply.payload, dict) else {}
        raise ControlError(str(body.get("reason")), body.get("field"))
    return reply.payload
