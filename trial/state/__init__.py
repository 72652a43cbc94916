"""A trial's whole state saved as it runs, and trials started again from it.

- :mod:`.files`: the ``states/`` folder of a trial (index, state files, the two journals), msgpack and pybullet's
  ``.bullet``, never pickle; the world's fingerprint a state refuses another world by;
- :mod:`.manifest`: ``states/manifest.json``, every file's size and SHA-256 and each state's time: what a resume
  trusts, checked before anything in the folder is parsed;
- :mod:`.host`: the robot runtime's part (joint commands as last set and written, odometry, bus counters);
- :mod:`.saver`: :class:`StateSaver`, hooked before every bus cycle of a recorded trial: a state every
  ``state_every`` seconds and at the first collision, intrusion and failure, and the journals of commands and
  crowd ticks that let any time between two states be reached;
- :mod:`.resume`: ``--from DIR@SECONDS``: the state at or before, checked against the manifest and this trial, put
  back, and the steps up to the time re-simulated from the journal.
"""
