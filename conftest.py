"""The suite's own defaults (this file is not in the wheel: users' runs keep hil's defaults).

Trials that do not set ``camera_rate`` record no camera images in the suite: rendering the two head cameras at
the default 5 Hz on a machine without a GPU (Mesa's llvmpipe) adds ~40 % to a trial's loop (bench/README.md
"loop"), and the tests that look at recorded pictures set ``camera_rate`` themselves. Cameras still render
whenever a controller asks for a frame. ``$HIL_CAMERA_RATE`` is hil's own switch (trial/spec.py); a value set
outside wins.
"""
import os

os.environ.setdefault("HIL_CAMERA_RATE", "0")
