"""A minimal PNG encoder (8-bit RGB, no filtering): zlib and struct are all a picture of lines and dots needs.

A plotting library would be a large dependency for a few lines of drawing, and its output changes between
versions; this writes the same bytes for the same pixels (with the same zlib), which keeps topdown.png
byte-identical for the same log.
"""
from __future__ import annotations

import os
import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an (height, width, 3) uint8 image: IHDR, one IDAT (filter 0 on every row), IEND."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"need an (h, w, 3) uint8 array, not {rgb.shape} {rgb.dtype}")
    height, width = rgb.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, deflate, no interlace
    return (SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
            + _chunk(b"IEND", b""))


def write_png(rgb: np.ndarray, path: str | os.PathLike[str]) -> None:
    with open(path, "wb") as f:
        f.write(encode_png(rgb))
