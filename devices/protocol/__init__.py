"""Dynamixel Protocol 2.0, exactly: frames, CRC, stuffing, typed requests and status replies (bytes <-> frames)."""
from .crc import crc16
from .errors import (AccessError, CrcMismatch, DataLengthError, DataLimitError, DataRangeError, DeviceCrcError,
                     FrameError, HardwareAlert, InstructionError, MalformedPacket, ProtocolError, ResultFail,
                     StatusError, status_error)
from .instructions import (BROADCAST_ID, CLEAR_ERROR, CLEAR_KEY, CLEAR_MULTI_TURN, HEADER, MAX_ID, RESET_ALL, RESET_ALL_BUT_ID,
                           RESET_ALL_BUT_ID_AND_BAUD, Instruction)
from .packets import Packet, StreamDecoder, decode_frame, encode_packet
from .requests import (Action, BulkRead, BulkWrite, Clear, FactoryReset, InvalidRequest, Ping, Read, Reboot,
                       RegWrite, Request, SyncRead, SyncWrite, Write, decode_request, encode_request,
                       encode_sync_write)
from .status import encode_fast_reply, encode_ping_reply, encode_status, fast_reply_prefix, parse_fast_reply
from .stuffing import stuff, unstuff

__all__ = [name for name in dir() if not name.startswith("_")]
