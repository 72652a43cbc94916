"""ZeroMQ messaging between processes: versioned msgpack envelopes (never pickle) and the lockstep clock.

``envelope``: {v, type, seq, t, payload}, validated on receipt; ``lockstep``: the clock master's bookkeeping
(transport-agnostic), its ZeroMQ server and the participant's client. Imports nothing of ours but itself.
"""
