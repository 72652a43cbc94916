"""Registers -> SI values: each part's conversions from its descriptor, and trusted driver code."""
from .conversions import ConversionError, RegisterDriver
from .part_driver import DriverCodeError, PartDriver, load_part_driver
from .trust import TrustDecision, TrustStore, default_trust_file

__all__ = [name for name in dir() if not name.startswith("_")]
