"""Calibration of the virtual twin from real scans (the sensor-simulation reference): ``hil calibrate ring|fit|check``.

rig.py (what stands where), run.py (the recording run), log.py (calibration.mcap), geometry.py (each ray's
expected range and incidence), fit.py (dropout and noise by maximum likelihood), report.py (CAL.yaml, the
picture, the agreement check), cli.py (the subcommand).
"""
