"""The contract between the host and the parts, pure (no I/O).

Data flows upward through these subpackages:
``protocol`` (bytes <-> frames) -> ``control_table`` (frames <-> registers).
Nothing here imports anything else of this project.
"""
