"""The wander-and-avoid controller in the lab: it may wander where it likes but must never press its bumper."""
from pathlib import Path

WANDER = Path(__file__).resolve().parent.parent / "wander_avoid.py"


def test_wandering_in_the_lab_never_bumps_into_a_wall(hil_trial):
    r = hil_trial(WANDER, map="lab", start=(0, 0, 0), seed=1, duration=30)
    assert r.metrics.path_length_m > 3.0, "it moved"
    from hil.trial.record import read_log

    contacts = [m.data["contacts"] for m in read_log(r.folder / "trial.mcap").messages["/robot/sensors"]]
    assert not any(contacts), "no contact sensor was ever pressed"
