"""ROBOTIS's ros2_control ``dynamixel_hardware_interface`` replayed with the official ``dynamixel_sdk``.

The interface is C++ for ROS 2; what reaches the bus is DynamixelSDK calls, and this class makes the same calls in
the same order (its on_init, start, read and write), looking items up by name in the same model files (the ones
DynamixelSDK 4.x ships in ``dynamixel_easy_sdk``, where the interface keeps its own copies):

on_init  open the port; Reboot every GPIO with ``Reboot`` set; per GPIO: ping (model number; a reply with an
         error byte: read Hardware Error Status, Reboot, try again), model lookup, read Firmware Version, read
         Torque Enable and turn it off (``disable_torque_at_init``), write Operating Mode, then the ``*Limit*``
         parameters, then the others; then the read map: torque off, every byte of every state item written to
         Indirect Address Read (578..) two bytes at a time, one Fast Sync Read of Indirect Data Read (634); the
         write map likewise at Indirect Address Write (168..), one Sync Write of Indirect Data Write (224).
start    read until a read succeeds, command what was read (goal = present), torque on.
read     the Fast Sync Read; write: the Sync Write.

Raw values throughout (the interface converts radians with the model file's type info; that is arithmetic on
the host, not bus traffic). Every call asserts COMM_SUCCESS and no error byte unless the interface itself would
go on; the ``log`` lists what was done, for assertions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dynamixel_easy_sdk.control_table import ControlTable
from dynamixel_sdk import COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PacketHandler, PortHandler

TORQUE_ON, TORQUE_OFF = 1, 0
PING_ATTEMPTS = 10  # InitDxlComm is tried this often (the interface sleeps 1 s between tries; no need here)


@dataclass
class Gpio:
    """One ``<gpio>`` of the URDF's ``<ros2_control>`` block: a servo with ``type`` dxl."""

    id: int
    state: tuple[str, ...] = ("Present Position", "Present Velocity", "Present Current")
    command: tuple[str, ...] = ("Goal Position",)
    params: dict[str, int] = field(default_factory=lambda: {"Operating Mode": 3})
    reboot: bool = False


class HardwareInterfaceReplay:
    def __init__(self, port_name: str, baud: int, gpios: list[Gpio]):
        self.port_name, self.baud, self.gpios = port_name, baud, gpios
        self.ph = PacketHandler(2.0)
        self.port: PortHandler | None = None
        self.tables: dict[int, dict] = {}
        self.model_names: dict[int, str] = {}
        self.log: list[tuple] = []
        self.read_layout: dict[int, list[tuple[str, int]]] = {}  # id -> [(item, size)] in map order
        self.write_layout: dict[int, list[tuple[str, int]]] = {}

    # the SDK calls, each checked ------------------------------------------------------------------------------
    def _ok(self, what: str, result: int, error: int = 0) -> None:
        assert result == COMM_SUCCESS, f"{what}: {self.ph.getTxRxResult(result)}"
        assert error == 0, f"{what}: {self.ph.getRxPacketError(error)} (error byte 0x{error:02x})"

    def item(self, dxl_id: int, name: str):
        return self.tables[dxl_id][name]

    def read_item(self, dxl_id: int, name: str) -> int:
        it = self.item(dxl_id, name)
        fn = {1: self.ph.read1ByteTxRx, 2: self.ph.read2ByteTxRx, 4: self.ph.read4ByteTxRx}[it.size]
        value, result, error = fn(self.port, dxl_id, it.address)
        self._ok(f"ReadItem id {dxl_id} {name}", result, error & 0x7F)  # ReadItem takes an alert-only reply
        return value

    def write_raw(self, dxl_id: int, address: int, size: int, value: int, what: str) -> None:
        fn = {1: self.ph.write1ByteTxRx, 2: self.ph.write2ByteTxRx, 4: self.ph.write4ByteTxRx}[size]
        result, error = fn(self.port, dxl_id, address, value)
        self._ok(f"WriteItem id {dxl_id} {what}", result, error)

    def write_item(self, dxl_id: int, name: str, value: int) -> None:
        it = self.item(dxl_id, name)
        self.write_raw(dxl_id, it.address, it.size, value, f"{name}={value}")
        self.log.append(("write", dxl_id, name, value))

    def reboot(self, dxl_id: int) -> None:
        result, error = self.ph.reboot(self.port, dxl_id)
        self._ok(f"Reboot id {dxl_id}", result, error & 0x7F)
        self.log.append(("reboot", dxl_id))

    # on_init ----------------------------------------------------------------------------------------------------
    def on_init(self) -> None:
        self.port = PortHandler(self.port_name)
        assert self.port.openPort(), f"cannot open {self.port_name}"
        assert self.port.setBaudRate(self.baud)
        for gpio in self.gpios:
            if gpio.reboot:
                self.reboot(gpio.id)
        for gpio in self.gpios:
            for _ in range(PING_ATTEMPTS):
                if self.init_dxl_comm(gpio.id):
                    break
            else:
                raise AssertionError(f"id {gpio.id}: no clean ping in {PING_ATTEMPTS} tries")
            self.init_torque_state(gpio.id)
            self.init_items(gpio)
        self.set_read_map()
        self.set_write_map()

    def init_dxl_comm(self, dxl_id: int) -> bool:
        model, result, error = self.ph.ping(self.port, dxl_id)
        assert result == COMM_SUCCESS, f"ping id {dxl_id}: {self.ph.getTxRxResult(result)}"
        self.tables[dxl_id] = ControlTable.getControlTable(model)  # ReadDxlModelFile
        if error:
            status = self.read_item(dxl_id, "Hardware Error Status") if error & 0x80 else None
            self.log.append(("error", dxl_id, error, status))
            self.reboot(dxl_id)
            return False
        self.model_names[dxl_id] = ControlTable.getModelName(model)
        self.log.append(("ping", dxl_id, model))
        self.read_item(dxl_id, "Firmware Version")  # picks a firmware-specific model file where there is one
        return True

    def init_torque_state(self, dxl_id: int) -> None:
        if self.read_item(dxl_id, "Torque Enable") == TORQUE_ON:
            self.write_item(dxl_id, "Torque Enable", TORQUE_OFF)

    def init_items(self, gpio: Gpio) -> None:
        params = gpio.params
        if "Operating Mode" in params:
            self.write_item(gpio.id, "Operating Mode", params["Operating Mode"])
        for name in [n for n in params if "Limit" in n]:
            self.write_item(gpio.id, name, params[name])
        for name in [n for n in params if n != "Operating Mode" and "Limit" not in n]:
            self.write_item(gpio.id, name, params[name])

    def _map(self, pointer_item: str, items: tuple[str, ...], dxl_id: int) -> list[tuple[str, int]]:
        """AddIndirectRead/AddIndirectWrite: one 2-byte write per byte of every item, from the first pointer."""
        first = self.item(dxl_id, pointer_item).address
        used, layout = 0, []
        for name in items:
            it = self.item(dxl_id, name)
            for i in range(it.size):
                self.write_raw(dxl_id, first + 2 * used, 2, it.address + i, f"{pointer_item} +{used}")
                used += 1
            layout.append((name, it.size))
        self.log.append(("map", dxl_id, pointer_item, used))
        return layout

    def set_read_map(self) -> None:
        ids = [g.id for g in self.gpios]
        for gpio in self.gpios:
            self.read_layout[gpio.id] = self._map("Indirect Address Read", gpio.state, gpio.id)
        data = self.item(ids[0], "Indirect Data Read").address
        size = sum(n for _, n in self.read_layout[ids[0]])
        self.fast_read = GroupSyncRead(self.port, self.ph, data, size)  # C++'s GroupFastSyncRead: the same bytes
        for dxl_id in ids:
            assert self.fast_read.addParam(dxl_id)
        self.read_data_address = data

    def set_write_map(self) -> None:
        ids = [g.id for g in self.gpios]
        for gpio in self.gpios:
            self.write_layout[gpio.id] = self._map("Indirect Address Write", gpio.command, gpio.id)
        self.write_data_address = self.item(ids[0], "Indirect Data Write").address
        self.write_size = sum(n for _, n in self.write_layout[ids[0]])
        self.sync_write = GroupSyncWrite(self.port, self.ph, self.write_data_address, self.write_size)

    # start, read, write -----------------------------------------------------------------------------------------
    def start(self) -> dict[int, dict[str, int]]:
        state = self.read()
        self.write({dxl_id: {"Goal Position": s["Present Position"]} for dxl_id, s in state.items()})
        for gpio in self.gpios:
            self.write_item(gpio.id, "Torque Enable", TORQUE_ON)
        return state

    def read_raw(self) -> dict[int, bytes]:
        """The Fast Sync Read of Indirect Data Read: each servo's bytes, as they came."""
        result = self.fast_read.fastSyncRead()
        assert result == COMM_SUCCESS, f"Fast Sync Read: {self.ph.getTxRxResult(result)}"
        out = {}
        for dxl_id, layout in self.read_layout.items():
            size = sum(n for _, n in layout)
            assert self.fast_read.isAvailable(dxl_id, self.read_data_address, size)
            out[dxl_id] = bytes(self.fast_read.data_dict[dxl_id][:size])
        return out

    def read(self) -> dict[int, dict[str, int]]:
        """read(): every state item of every servo, signed raw values."""
        out = {}
        for dxl_id, raw in self.read_raw().items():
            values, at = {}, 0
            for name, size in self.read_layout[dxl_id]:
                values[name] = int.from_bytes(raw[at:at + size], "little", signed=True)
                at += size
            out[dxl_id] = values
        return out

    def write(self, commands: dict[int, dict[str, int]]) -> None:
        """write(): one Sync Write of Indirect Data Write carrying every servo's command items."""
        for dxl_id, items in commands.items():
            data = b"".join(int(items[name]).to_bytes(size, "little", signed=True)
                            for name, size in self.write_layout[dxl_id])
            assert self.sync_write.addParam(dxl_id, list(data))
        result = self.sync_write.txPacket()
        self.sync_write.clearParam()
        assert result == COMM_SUCCESS, f"Sync Write: {self.ph.getTxRxResult(result)}"

    def close(self) -> None:
        if self.port is not None:
            self.port.closePort()
