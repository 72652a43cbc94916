"""hil: a hardware-in-the-loop bridge and robot runtime.

This package is the product's top: its version, the ``hil`` command (:mod:`hil.cli`) and the data that ships
in the wheel (``hil/config``: robots, maps, crowd rates, scenarios, profiles, semantics; ``hil/examples``: the
example controllers). The layers live in their own top-level packages, lowest first: ``devices`` (the bus
contract), ``bridge`` (ZeroMQ messaging), ``firmware_sim`` (the virtual bus device and its world), ``crowd`` (the
crowd simulator), ``runtime`` (the host and the controller's API) and ``trial`` (a trial: world + task +
controller, recorded and measured). Importing ``hil`` imports none of them.
"""
__version__ = "0.2.0"

__all__ = ["__version__"]
