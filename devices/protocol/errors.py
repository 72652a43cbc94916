"""The protocol's own error types.

Two families: framing errors seen by whoever decodes bytes (bad CRC, bad length, malformed parameters), and
status errors that a device reports in the error byte of its status packet (ROBOTIS numbering). The streaming
decoder and the codecs raise nothing but :class:`ProtocolError` subclasses.
"""
from __future__ import annotations

ALERT_BIT = 0x80


class ProtocolError(Exception):
    """Base of every error this package raises."""


class FrameError(ProtocolError):
    """Bytes that do not form a valid frame (reported by the decoder, never fatal to the stream)."""


class CrcMismatch(FrameError):
    def __init__(self, expected: int, received: int, packet_id: int | None = None):
        self.expected, self.received, self.packet_id = expected, received, packet_id
        super().__init__(f"CRC mismatch (id {packet_id}): computed 0x{expected:04X}, received 0x{received:04X}")


class MalformedPacket(FrameError):
    """A frame with a valid CRC whose contents make no sense (length or parameters wrong for its instruction)."""


class StatusError(ProtocolError):
    """A device answered with a non-zero error code in its status packet."""

    code = 0
    meaning = "unknown error"

    def __init__(self, packet_id: int, error_byte: int, context: str = ""):
        self.packet_id, self.error_byte, self.alert = packet_id, error_byte, bool(error_byte & ALERT_BIT)
        where = f" ({context})" if context else ""
        alert = " [hardware alert bit set]" if self.alert else ""
        super().__init__(f"id {packet_id}: {self.meaning}{where}{alert}")


class ResultFail(StatusError):
    code, meaning = 1, "result fail: the device failed to process the instruction"


class InstructionError(StatusError):
    code, meaning = 2, "instruction error: undefined instruction, or Action without a pending RegWrite"


class DeviceCrcError(StatusError):
    code, meaning = 3, "CRC error: the device received a corrupted instruction packet"


class DataRangeError(StatusError):
    code, meaning = 4, "data range error: the value is out of the register's range"


class DataLengthError(StatusError):
    code, meaning = 5, "data length error: the data is shorter or longer than the register"


class DataLimitError(StatusError):
    code, meaning = 6, "data limit error: the value exceeds a configured limit"


class AccessError(StatusError):
    code, meaning = 7, "access error: read-only register, locked EEPROM (torque on), or undefined address"


class HardwareAlert(StatusError):
    """Error code 0 with only the alert bit: the instruction succeeded but Hardware Error Status is non-zero."""

    code, meaning = 0, "hardware alert: check the Hardware Error Status register"


STATUS_ERRORS: dict[int, type[StatusError]] = {
    cls.code: cls
    for cls in (ResultFail, InstructionError, DeviceCrcError, DataRangeError, DataLengthError, DataLimitError,
                AccessError)
}


def status_error(packet_id: int, error_byte: int, context: str = "") -> StatusError:
    """The typed exception for a status error byte (which must be non-zero)."""
    code = error_byte & 0x7F
    if code == 0:
        return HardwareAlert(packet_id, error_byte, context)
    cls = STATUS_ERRORS.get(code)
    if cls is None:
        err = StatusError(packet_id, error_byte, context)
        err.code = code
        return err
    return cls(packet_id, error_byte, context)
