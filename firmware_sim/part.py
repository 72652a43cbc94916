"""The firmware of one part: its control table and the instructions that act on it.

A part is told the time on every access (``advance``) so that its physics can be evaluated lazily and exactly,
whatever clock drives the device (wall time now, the simulator's clock later).
"""
from __future__ import annotations

from hil.devices.control_table import Area, ControlTable, RegisterMemory
from hil.devices.control_table.cpc import CPC_BASE
from hil.devices.control_table.memory import WriteRule
from hil.devices.protocol.errors import ALERT_BIT
from hil.devices.protocol import (CLEAR_ERROR, CLEAR_KEY, CLEAR_MULTI_TURN, RESET_ALL, RESET_ALL_BUT_ID,
                              RESET_ALL_BUT_ID_AND_BAUD, AccessError, InstructionError, ResultFail)


def _ALWAYS_ALL() -> int:
    """The return level of a part without the register: it answers everything."""
    return 2


def _NO_ERROR() -> int:
    """The hardware error status of a part without the register."""
    return 0


class PartFirmware:
    """A part with a control table and nothing moving: hubs, brackets, anything passive."""

    def __init__(self, table: ControlTable, device_id: int, serial_number: int = 0,
                 rules: dict[str, WriteRule] | None = None):
        self.table = table
        self.memory = RegisterMemory(table, rules)
        self.memory.set("id", device_id)
        # asked by the bus device for every slot of every group read: compiled once (memory.getter)
        self._id_now = self.memory.getter("id")
        self._level_now = (self.memory.getter("status_return_level") if "status_return_level" in table
                           else _ALWAYS_ALL)
        self._hardware_error_now = (self.memory.getter("hardware_error_status") if "hardware_error_status" in table
                                    else _NO_ERROR)
        self.factory_id = device_id
        self.serial_number = serial_number
        self.pending: tuple[int, bytes] | None = None  # RegWrite waiting for Action
        self.descriptor_store = None  # a DescriptorStore (descriptor_store.py) when its descriptor is writable
        self.time_s = 0.0

    @property
    def id(self) -> int:
        return self._id_now()

    @property
    def model_number(self) -> int:
        return self.memory.get("model_number")

    @property
    def firmware_version(self) -> int:
        return self.memory.get("firmware_version")

    @property
    def return_level(self) -> int:
        return self._level_now()

    @property
    def alert(self) -> int:
        """The Alert bit (0x80) of every status this part sends while its Hardware Error Status(70) is not 0, as
        an X-series servo sets it until a Reboot clears the error (ROBOTIS's hardware interface reboots on it)."""
        return ALERT_BIT if self._hardware_error_now() else 0

    @property
    def return_delay_s(self) -> float:
        return 2e-6 * self.memory.get("return_delay_time") if "return_delay_time" in self.table else 0.0

    # time
    def advance(self, now_s: float) -> None:
        """Bring the part's state up to ``now_s``; subclasses integrate their dynamics here."""
        self.time_s = max(self.time_s, now_s)

    # instructions
    def read(self, address: int, length: int) -> bytes:
        return self.memory.read(address, length)

    def write(self, address: int, data: bytes) -> None:
        changes = self.memory.check_write(address, data)
        self.memory.commit(address, data)
        names = [reg.name for reg, _ in changes]
        if self.descriptor_store is not None and address >= CPC_BASE:
            self.descriptor_store.written(self, names)
        self.on_written(names)

    def reg_write(self, address: int, data: bytes) -> None:
        self.memory.check_write(address, data)  # refuse now what Action could not apply later
        self.pending = (address, bytes(data))
        self._set_if_present("registered_instruction", 1)

    def action(self) -> None:
        if self.pending is None:
            raise InstructionError(self.id, InstructionError.code, "Action without a registered instruction")
        address, data = self.pending
        self.pending = None
        self._set_if_present("registered_instruction", 0)
        self.write(address, data)

    def reboot(self) -> None:
        """RAM back to defaults, EEPROM kept, pending instruction dropped."""
        device_id = self.id
        self.memory.reset(area=Area.RAM)
        self.memory.set("id", device_id)
        self.pending = None
        self.on_reboot()

    def factory_reset(self, option: int) -> None:
        keep = {RESET_ALL: (), RESET_ALL_BUT_ID: ("id",), RESET_ALL_BUT_ID_AND_BAUD: ("id", "baud_rate")}.get(option)
        if keep is None:
            raise ResultFail(self.id, ResultFail.code, f"factory reset option 0x{option:02X} is not 0xFF, 0x01 or 0x02")
        if self._torque_on():
            raise AccessError(self.id, AccessError.code, "factory reset refused while torque is enabled")
        self.memory.reset(keep=keep)
        if "id" not in keep:
            self.memory.set("id", 1)  # a factory-fresh Dynamixel answers on ID 1
        self.pending = None
        self.on_reboot()

    def clear(self, option: int, key: bytes) -> None:
        if key != CLEAR_KEY:
            raise ResultFail(self.id, ResultFail.code, f"clear key {key.hex()} is wrong")
        if option == CLEAR_MULTI_TURN:
            self.clear_multi_turn()
        elif option == CLEAR_ERROR:
            self._set_if_present("hardware_error_status", 0)
        else:
            raise ResultFail(self.id, ResultFail.code, f"clear option 0x{option:02X} is unknown")

    # hooks for subclasses
    def on_written(self, names: list[str]) -> None:
        """Called after a host write has been applied, with the names of the registers it set."""

    def on_reboot(self) -> None:
        """Called after reboot and factory reset."""

    def clear_multi_turn(self) -> None:
        raise ResultFail(self.id, ResultFail.code, "this part has no multi-turn position to clear")

    def _torque_on(self) -> bool:
        return "torque_enable" in self.table and bool(self.memory.get("torque_enable"))

    def _set_if_present(self, name: str, value: int) -> None:
        if name in self.table:
            self.memory.set(name, value)
