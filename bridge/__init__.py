"""Between processes: ZeroMQ messaging with versioned msgpack envelopes (never pickle), the lockstep clock, and
the one way a process of hil starts another.

``envelope``: {v, type, seq, t, payload}, validated on receipt; ``lockstep``: the clock master's bookkeeping
(transport-agnostic), its ZeroMQ server and the participant's client; ``process``: ``spawn``, a child that dies
with its parent (every layer above starts its children with it: the crowd, served devices, native programs,
sweeps' trial processes, retries, the viewer's page). Imports nothing of ours but itself.
"""
