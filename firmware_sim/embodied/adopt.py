"""Turning a part's bus firmware into firmware backed by the world, keeping its control table as it is."""
from __future__ import annotations

from typing import TypeVar

from ..part import PartFirmware

P = TypeVar("P", bound=PartFirmware)


def adopt(cls: type[P], part: PartFirmware) -> P:
    """An instance of ``cls`` that owns ``part``'s control table (memory, serial, descriptor, pending RegWrite).

    The assembly builds every part's table once; embodying a part swaps its behaviour, never its bytes.
    """
    new = cls.__new__(cls)
    new.__dict__.update(part.__dict__)
    return new
