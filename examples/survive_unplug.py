"""Keep the right elbow at a target while its part is unplugged, plugged back and swapped.

    hil trial examples/survive_unplug.yaml            # the faults from the trial file, on the simulator's clock
    hil sim commbot --pty --clock sim --clock-endpoint 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' \\
        --semantics config/semantics/commbot.yaml     # or served: prints the pty, the clock and the control
    hil run examples/survive_unplug.py --profile PROFILE_ON_THAT_PTY --duration 30
    hil sim fault unplug right_arm.elbow --control tcp://127.0.0.1:PORT   # from another terminal, any time

The controller never stops for a lost part: it says what changed (``robot.on_change``), keeps setting the target
(held while the part is lost, sent when it is back and re-armed), and reads the joint again by name after a
swap (the blueprint re-binds it to the part now there).
"""
from __future__ import annotations

HZ = 50.0
TARGET_RAD = 0.5


def main(robot) -> None:
    robot.on_change.append(lambda event: print(f"t={event.time_s:6.2f} s  {event.kind:<11} id {event.part_id} "
                                               f"{', '.join(event.names)}: {event.detail}", flush=True))
    robot.summary = {"events": []}
    robot.on_change.append(lambda event: robot.summary["events"].append(event.kind))
    for tick in robot.loop(hz=HZ):
        elbow = robot.joints.get("right_arm.elbow")
        if elbow is not None and elbow.mode == "position":
            elbow.target = TARGET_RAD
        if elbow is not None:
            robot.summary["elbow"] = (tick.time, elbow.available, elbow.position)
