"""The bus host controller (frames <-> transactions) and its statistics."""
from .errors import BusError, BusTimeout, CorruptReply
from .host import BusHost
from .stats import BusStats

__all__ = ["BusHost", "BusStats", "BusError", "BusTimeout", "CorruptReply"]
